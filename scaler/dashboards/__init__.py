"""Grafana dashboards for vllm-scaler and the vLLM fleet, built with grafana-foundation-sdk.

Two dashboards are generated from code and committed as importable JSON in ``dashboards/``:

- ``vllm-scaler-decisions.json`` ("vllm-scaler: decisions"): replicas, each signal against its
  target and tolerance band, decisions by reason, the latest reason per target, scale events as
  annotations and the controller's health. Reads the names of :mod:`scaler.telemetry.metrics`.
- ``vllm-fleet.json`` ("vLLM fleet"): latency quantiles, queue, running requests, KV cache,
  token throughput and preemptions, per model and per pod, from vLLM's own metrics with the
  pre-0.9.2 / pre-0.11 names as fallbacks.

Both carry an ``__inputs`` Prometheus datasource (Grafana's import dialog asks for it; panels
read ``${DS_PROMETHEUS}``), a stable uid and the variables ``namespace``, ``target`` and
``model``. :func:`render_previews` draws the same queries with matplotlib (the pictures in
``docs/dashboards/``). ``main`` writes the JSON (``vllm-scaler dashboards``).

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

from scaler.dashboards.build import build_dashboards, to_json, write_dashboards
from scaler.dashboards.cli import main
from scaler.dashboards.decisions import DECISIONS_UID, decisions_dashboard
from scaler.dashboards.fleet import FLEET_UID, fleet_dashboard
from scaler.dashboards.previews import render_previews
from scaler.dashboards.queries import (
    PanelQuery,
    annotation_queries,
    panel_queries,
    resolve_variables,
    substitute,
    walk_panels,
)

__all__ = [
    "DECISIONS_UID",
    "FLEET_UID",
    "PanelQuery",
    "annotation_queries",
    "build_dashboards",
    "decisions_dashboard",
    "fleet_dashboard",
    "main",
    "panel_queries",
    "render_previews",
    "resolve_variables",
    "substitute",
    "to_json",
    "walk_panels",
    "write_dashboards",
]
