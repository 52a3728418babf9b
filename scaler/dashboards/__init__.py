"""Grafana dashboards for vllm-scaler and the vLLM fleet, built with grafana-foundation-sdk.

Two dashboards are generated from code and committed as importable JSON in ``dashboards/``:

- ``vllm-scaler-decisions.json`` ("vllm-scaler: decisions"): replicas, each signal against its
  target and tolerance band, decisions by reason, the latest reason per target, scale events as
  annotations and the controller's health. Reads the names of :mod:`scaler.telemetry.metrics`.
- ``vllm-fleet.json`` ("vLLM fleet"): at parity with vLLM's own example dashboard (P50/P90/
  P95/P99 and mean latencies with the TTFT target as a threshold, queue, prefill and decode
  time, scheduler state, throughput, KV cache, finished reasons, request errors, prompt and
  generation length heatmaps) plus the prefix-cache hit rate and per-pod panels, from vLLM's
  own metrics with the older names as fallbacks.

Both carry a ``datasource`` variable (any Prometheus-type datasource) that every panel,
variable and annotation reads, defaulting to the ``__inputs`` datasource Grafana's import
dialog asks for; ``__requires`` names the Grafana whose schema they are written in and the
panel types they use; a stable uid and the variables ``namespace``, ``target`` and ``model``.
:func:`render_previews` draws the same queries with matplotlib, as Grafana shows them (the
pictures in ``docs/dashboards/``). ``main`` writes the JSON (``vllm-scaler dashboards``).

Where each part lives::

    decisions.py  the "vllm-scaler: decisions" dashboard
    fleet.py      the "vLLM fleet" dashboard
    panels.py     the SDK helpers both use: queries, panels, variables, the frame
    build.py      every dashboard by file name, and the committed JSON form
    queries.py    reading the PromQL back: panel queries, variables (no SDK needed)
    previews.py   PNG previews with matplotlib
    cli.py        ``vllm-scaler dashboards``

Build-time only: needs the ``dashboards`` extra (grafana-foundation-sdk), which the
controller image does without.
"""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from scaler.dashboards.build import build_dashboards, to_json, write_dashboards
    from scaler.dashboards.cli import main
    from scaler.dashboards.decisions import DECISIONS_UID, decisions_dashboard
    from scaler.dashboards.fleet import FLEET_UID, fleet_dashboard
    from scaler.dashboards.previews import render_previews
    from scaler.dashboards.queries import (
        ALL,
        PanelQuery,
        all_values,
        annotation_queries,
        panel_queries,
        resolve_variable_texts,
        resolve_variables,
        selected_values,
        substitute,
        walk_panels,
    )

__all__ = [
    "ALL",
    "DECISIONS_UID",
    "FLEET_UID",
    "PanelQuery",
    "all_values",
    "annotation_queries",
    "build_dashboards",
    "decisions_dashboard",
    "fleet_dashboard",
    "main",
    "panel_queries",
    "render_previews",
    "resolve_variable_texts",
    "resolve_variables",
    "selected_values",
    "substitute",
    "to_json",
    "walk_panels",
    "write_dashboards",
]


#: Each public name's module, imported on first use (:func:`__getattr__`).
_HOME = {
    **dict.fromkeys(("build_dashboards", "to_json", "write_dashboards"), "build"),
    "main": "cli",
    **dict.fromkeys(("DECISIONS_UID", "decisions_dashboard"), "decisions"),
    **dict.fromkeys(("FLEET_UID", "fleet_dashboard"), "fleet"),
    "render_previews": "previews",
}


def __getattr__(name: str) -> Any:
    """A public name, imported on first use: the command line imports ``.cli`` without the
    ``dashboards`` extra (grafana-foundation-sdk), and the command then names the extra."""
    import importlib

    if name not in __all__:
        raise AttributeError(f"module 'scaler.dashboards' has no attribute {name!r}")
    module = importlib.import_module(f"scaler.dashboards.{_HOME.get(name, 'queries')}")
    return getattr(module, name)
