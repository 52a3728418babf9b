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
"""

from __future__ import annotations

import argparse
import json
import math
import re
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import httpx
from grafana_foundation_sdk.builders import dashboard as gd
from grafana_foundation_sdk.builders import prometheus as gp
from grafana_foundation_sdk.builders import table as gtable
from grafana_foundation_sdk.builders import timeseries as gts
from grafana_foundation_sdk.builders.common import StackingConfig, VizLegendOptions
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models import common as gc
from grafana_foundation_sdk.models import dashboard as gm
from grafana_foundation_sdk.models.prometheus import PromQueryFormat

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
    "write_dashboards",
]

DECISIONS_UID: Final = "vllm-scaler-decisions"
FLEET_UID: Final = "vllm-scaler-vllm-fleet"
FILES: Final = {DECISIONS_UID: "vllm-scaler-decisions.json", FLEET_UID: "vllm-fleet.json"}

_DS: Final = gm.DataSourceRef(type_val="prometheus", uid="${DS_PROMETHEUS}")
_INPUTS: Final = [
    {
        "name": "DS_PROMETHEUS",
        "label": "Prometheus",
        "description": "The Prometheus that scrapes vLLM and vllm-scaler",
        "type": "datasource",
        "pluginId": "prometheus",
        "pluginName": "Prometheus",
    }
]
_REQUIRES: Final = [
    {"type": "grafana", "id": "grafana", "name": "Grafana", "version": "10.4.0"},
    {"type": "datasource", "id": "prometheus", "name": "Prometheus", "version": "1.0.0"},
    {"type": "panel", "id": "timeseries", "name": "Time series", "version": ""},
    {"type": "panel", "id": "table", "name": "Table", "version": ""},
]

# Selectors. Our own per-target series carry target="ns/Kind/name"; the controller-wide ones
# (cycle, queries, leader) have no target and are shown for every vllm-scaler process.
_T: Final = 'target=~"$target"'
# vLLM series: the namespace and pod labels come from Kubernetes service discovery. On the fleet
# dashboard $target's value is the workload name (see _fleet_variables), and the pods of a
# Deployment (<name>-<hash>-<suffix>), StatefulSet (<name>-<n>) or LWS all start "<name>-".
_V: Final = 'namespace=~"$namespace", model_name=~"$model", pod=~"$target-.*"'
_VM: Final = 'namespace=~"$namespace", model_name=~"$model"'
_RI: Final = "$__rate_interval"

SIGNALS: Final = (
    ("queue_depth", "Queue depth: waiting requests per replica", "short"),
    ("kv_cache_usage", "KV-cache usage (0-1)", "percentunit"),
    ("ttft_p95", "TTFT p95", "s"),
)


@dataclass(frozen=True, slots=True)
class PanelQuery:
    """One PromQL query of a dashboard (``panel`` is the panel title or ``annotation: name``)."""

    dashboard: str
    panel: str
    ref_id: str
    expr: str
    instant: bool


# --- helpers over the SDK builders ---------------------------------------------------------


def _q(ref: str, expr: str, legend: str = "__auto", *, instant: bool = False) -> gp.Dataquery:
    q = gp.Dataquery().ref_id(ref).expr(expr).legend_format(legend).datasource(_DS)
    return q.instant().format(PromQueryFormat.TABLE) if instant else q.range()


def _ts(
    title: str,
    description: str,
    queries: Sequence[tuple[str, str]],
    *,
    unit: str = "short",
    width: int = 12,
    height: int = 8,
    bars: bool = False,
) -> gts.Panel:
    """A time-series panel; ``queries`` are ``(expr, legend)`` pairs, refIds A, B, ..."""
    p = (
        gts.Panel()
        .title(title)
        .description(description)
        .datasource(_DS)
        .unit(unit)
        .span(width)
        .height(height)
        .line_width(1)
        .fill_opacity(10 if not bars else 80)
        .legend(
            VizLegendOptions()
            .display_mode(gc.LegendDisplayMode.LIST)
            .placement(gc.LegendPlacement.BOTTOM)
            .show_legend(True)
        )
    )
    for i, (expr, legend) in enumerate(queries):
        p = p.with_target(_q(chr(ord("A") + i), expr, legend))
    if bars:
        p = (
            p.draw_style(gc.GraphDrawStyle.BARS)
            .stacking(StackingConfig().mode(gc.StackingMode.NORMAL))
            .fill_opacity(80)
        )
    return p


def _dashed(names: Sequence[str]) -> list[tuple[str, list[gm.DynamicConfigValue]]]:
    style = {"fill": "dash", "dash": [10, 10]}
    return [(n, [gm.DynamicConfigValue("custom.lineStyle", style)]) for n in names]


def _with_overrides(
    p: gts.Panel, overrides: Sequence[tuple[str, list[gm.DynamicConfigValue]]]
) -> gts.Panel:
    for name, props in overrides:
        p = p.override_by_name(name, props)
    return p


def _query_var(
    name: str, label: str, query: str, *, regex: str = "", multi: bool = True
) -> gd.QueryVariable:
    v = (
        gd.QueryVariable(name)
        .label(label)
        .datasource(_DS)
        .query({"query": query, "refId": f"{name}-var", "qryType": 1})
        .refresh(gm.VariableRefresh.ON_TIME_RANGE_CHANGED)
        .sort(gm.VariableSort.ALPHABETICAL_ASC)
        .multi(multi)
        .include_all(multi)
        .current(gm.VariableOption(selected=True, text="All", value="$__all"))
    )
    if multi:
        v = v.all_value(".*")
    if regex:
        v = v.regex(regex)
    return v


def _finish(b: gd.Dashboard) -> dict[str, Any]:
    """Encode, number the panels and add the import-time datasource input."""
    doc: dict[str, Any] = json.loads(json.dumps(b.build(), cls=JSONEncoder))
    for i, panel in enumerate(_walk_panels(doc), start=1):
        panel["id"] = i
    doc["id"] = None
    doc["__inputs"] = _INPUTS
    doc["__requires"] = _REQUIRES
    return doc


def _walk_panels(doc: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    for panel in doc.get("panels", []):
        yield panel
        yield from panel.get("panels", [])  # panels of collapsed rows


def _base(title: str, uid: str, description: str) -> gd.Dashboard:
    return (
        gd.Dashboard(title)
        .uid(uid)
        .description(description)
        .tags(["vllm", "vllm-scaler"])
        .editable()
        .time("now-1h", "now")
        .refresh("30s")
        .timezone("browser")
        .tooltip(gm.DashboardCursorSync.CROSSHAIR)
    )


# --- "vllm-scaler: decisions" --------------------------------------------------------------


def _decisions_variables(b: gd.Dashboard) -> gd.Dashboard:
    # The namespace is the first segment of our target label: it is the namespace of the
    # scaled workload, not of the controller's pod (which Prometheus would put in "namespace").
    return (
        b.with_variable(
            _query_var(
                "namespace",
                "Namespace",
                "label_values(vllm_scaler_current_replicas, target)",
                regex="/^([^/]+)\\//",
                multi=False,
            ).current(gm.VariableOption(selected=True, text="", value=""))
        )
        .with_variable(
            _query_var(
                "target",
                "Target",
                'label_values(vllm_scaler_current_replicas{target=~"$namespace/.*"}, target)',
            )
        )
        .with_variable(
            _query_var(
                "model",
                "Model",
                'label_values(vllm:num_requests_running{namespace=~"$namespace"}, model_name)',
            )
        )
    )


def _increase_with_new(metric: str, selector: str, window: str) -> str:
    # increase() cannot see a counter's first step: prometheus-client creates a labelled series
    # at its first inc(), so a reason seen for the first time would never show. Subtracting the
    # value a window ago (0 for a series that did not exist then) counts that step too.
    m = f"{metric}{{{selector}}}"
    return f"clamp_min({m} - ({m} offset {window} or {m} * 0), 0)"


def _new_in_window(metric: str) -> str:
    """The counter's increase over ``$__rate_interval`` for the selected targets."""
    return _increase_with_new(metric, _T, _RI)


def _signal_panel(name: str, title: str, unit: str) -> gts.Panel:
    sel = f'{_T}, signal="{name}"'
    on = "on(job, instance, target) group_left()"
    tol = "vllm_scaler_tolerance_ratio"
    up = f'vllm_scaler_signal_target{{{sel}}} * {on} (1 + {tol}{{{_T}, direction="up"}})'
    down = f'vllm_scaler_signal_target{{{sel}}} * {on} (1 - {tol}{{{_T}, direction="down"}})'
    p = _ts(
        f"{title} ($target)",
        f"vllm_scaler_signal_value of {name} against its configured target; the shaded band is "
        "target x (1 - scale-down tolerance) .. target x (1 + scale-up tolerance), inside which "
        "this signal asks for no change. Gaps: the signal was invalid (NaN).",
        [
            (f"vllm_scaler_signal_value{{{sel}}}", "value"),
            (f"vllm_scaler_signal_target{{{sel}}}", "target"),
            (up, "scale-up above"),
            (down, "scale-down below"),
        ],
        unit=unit,
    )
    band = [
        (
            "scale-up above",
            [
                gm.DynamicConfigValue("custom.fillBelowTo", "scale-down below"),
                gm.DynamicConfigValue("custom.fillOpacity", 15),
                gm.DynamicConfigValue("color", {"mode": "fixed", "fixedColor": "green"}),
            ],
        ),
        (
            "scale-down below",
            [gm.DynamicConfigValue("color", {"mode": "fixed", "fixedColor": "green"})],
        ),
        ("target", [gm.DynamicConfigValue("color", {"mode": "fixed", "fixedColor": "dark-green"})]),
        ("value", [gm.DynamicConfigValue("custom.lineWidth", 2)]),
    ]
    # One override per series name: Grafana merges duplicates, but readers of the JSON may not.
    dashed = dict(_dashed(["scale-up above", "scale-down below"]))
    return _with_overrides(p, [(name, props + dashed.get(name, [])) for name, props in band])


def decisions_dashboard() -> dict[str, Any]:
    """The "vllm-scaler: decisions" dashboard as Grafana JSON (a dict)."""
    b = _decisions_variables(
        _base(
            "vllm-scaler: decisions",
            DECISIONS_UID,
            "What vllm-scaler decided per target and why, from its own /metrics.",
        )
    )
    actions = _increase_with_new("vllm_scaler_scale_actions_total", _T, "1m")
    b = b.annotation(
        gd.AnnotationQuery()
        .name("Scale events")
        .datasource(_DS)
        .enable(True)
        .icon_color("orange")
        .expr(f"sum by (target, direction) ({actions}) > 0")
    )
    why = gtable.Panel().title("Why not scaled: latest decision per target").datasource(_DS)
    why = (
        why.description(
            "The reason of each target's latest decision (vllm_scaler_last_decision_reason == 1) "
            "with its current, desired and recommended replicas. See the README's reason table."
        )
        .span(12)
        .height(8)
        .with_target(
            _q(
                "A",
                f"max by (target, reason) (vllm_scaler_last_decision_reason{{{_T}}} == 1)",
                instant=True,
            )
        )
        .with_target(
            _q("B", f"max by (target) (vllm_scaler_current_replicas{{{_T}}})", instant=True)
        )
        .with_target(
            _q("C", f"max by (target) (vllm_scaler_desired_replicas{{{_T}}})", instant=True)
        )
        .with_target(
            _q("D", f"max by (target) (vllm_scaler_recommended_replicas{{{_T}}})", instant=True)
        )
        .with_transformation(gm.DataTransformerConfig(id_val="merge", options={}))
        .with_transformation(
            gm.DataTransformerConfig(
                id_val="organize",
                options={
                    "excludeByName": {"Time": True, "Value #A": True},
                    "renameByName": {
                        "Value #B": "current",
                        "Value #C": "desired",
                        "Value #D": "recommended",
                    },
                    "indexByName": {"target": 0, "reason": 1},
                },
            )
        )
    )
    b = b.with_row(gd.Row("Decisions")).with_panel(why)
    b = b.with_panel(
        _ts(
            "Decisions by reason",
            "Decisions per reason over time, all selected targets (one per target and cycle).",
            [
                (
                    "sum by (reason) ("
                    + _increase_with_new("vllm_scaler_decisions_total", _T, _RI)
                    + ")",
                    "{{reason}}",
                )
            ],
            bars=True,
        )
    )
    # One row per selected target: its replicas and each signal against its band.
    b = b.with_row(gd.Row("Target $target").repeat("target"))
    replicas = _ts(
        "Replicas ($target)",
        "spec.replicas (current), what the last decision asked for (desired), Ready pods, "
        "pods still loading their model (pending), pods past the model load timeout (stuck); "
        "dashed: the policy's min and max.",
        [
            (f"vllm_scaler_current_replicas{{{_T}}}", "current"),
            (f"vllm_scaler_desired_replicas{{{_T}}}", "desired"),
            (f"vllm_scaler_ready_replicas{{{_T}}}", "ready"),
            (f"vllm_scaler_pending_replicas{{{_T}}}", "pending"),
            (f"vllm_scaler_stuck_replicas{{{_T}}}", "stuck"),
            (f"vllm_scaler_max_replicas{{{_T}}}", "max"),
            (f"vllm_scaler_min_replicas{{{_T}}}", "min"),
        ],
    )
    b = b.with_panel(_with_overrides(replicas, _dashed(["max", "min"])))
    for name, title, unit in SIGNALS:
        b = b.with_panel(_signal_panel(name, title, unit))
    b = b.with_row(gd.Row("Load of $model"))
    b = b.with_panel(
        _ts(
            "Waiting and running requests ($model)",
            "vLLM's scheduler state summed over the model's pods, for context.",
            [
                (
                    f"sum by (model_name) (vllm:num_requests_waiting{{{_VM}}})",
                    "waiting {{model_name}}",
                ),
                (
                    f"sum by (model_name) (vllm:num_requests_running{{{_VM}}})",
                    "running {{model_name}}",
                ),
            ],
        )
    )
    b = b.with_panel(
        _ts(
            "Finished requests per second ($model)",
            "vllm:request_success_total rate, by finished reason.",
            [
                (
                    f"sum by (model_name, finished_reason) "
                    f"(rate(vllm:request_success_total{{{_VM}}}[{_RI}]))",
                    "{{model_name}} {{finished_reason}}",
                )
            ],
            unit="reqps",
        )
    )
    b = b.with_row(gd.Row("Controller health"))
    b = b.with_panel(
        _ts(
            "Cycle duration",
            "Duration of one control cycle (all targets), per vllm-scaler process.",
            [
                (
                    f"histogram_quantile({q}, sum by (instance, le) "
                    f"(rate(vllm_scaler_cycle_duration_seconds_bucket[{_RI}])))",
                    f"p{round(q * 100)} {{{{instance}}}}",
                )
                for q in (0.5, 0.99)
            ],
            unit="s",
            width=8,
        )
    )
    b = b.with_panel(
        _ts(
            "Signals unusable, by signal and reason",
            "Per second, signals that could not be used for a scale-down (empty, absent, nan, "
            "partial, timeout, ...). The flat 0 lines per signal mean: no errors.",
            [
                (
                    f"sum by (signal, reason) (rate(vllm_scaler_query_errors_total[{_RI}])) "
                    f"or sum by (signal) (0 * vllm_scaler_signal_valid{{{_T}}})",
                    "{{signal}} {{reason}}",
                ),
                (
                    f"sum by (query, reason) (rate(vllm_scaler_query_failures_total[{_RI}])) "
                    "or sum by (query) (label_replace(0 * "
                    'vllm_scaler_last_successful_query_timestamp_seconds, "query", "$1", '
                    '"signal", "(.*)"))',
                    "query {{query}} failed: {{reason}}",
                ),
            ],
            unit="ops",
            width=8,
        )
    )
    b = b.with_panel(
        _ts(
            "Seconds since the last successful query",
            "Per query kind. An empty answer counts as success: see the signal panels and the "
            "VllmScalerSignalInvalid alert for that.",
            [
                (
                    "time() - max by (signal) "
                    "(vllm_scaler_last_successful_query_timestamp_seconds)",
                    "{{signal}}",
                )
            ],
            unit="s",
            width=8,
        )
    )
    b = b.with_panel(
        _ts(
            "Leader",
            "vllm_scaler_leader per process: 1 on the replica holding the leader Lease (always 1 "
            "without leader election, 0 in dry run). Exactly one line at 1 is healthy.",
            [("max by (instance) (vllm_scaler_leader)", "{{instance}}")],
            width=8,
        )
    )
    b = b.with_panel(
        _ts(
            "Conflicts and outside writes",
            "vllm_scaler_conflict: 1 while another autoscaler (HPA or KEDA ScaledObject, the "
            "owner) targets the workload, and vllm-scaler only recommends. Outside writes: "
            "spec.replicas changed by someone else. Flat 0 lines per target: none.",
            [
                (
                    f"max by (target, owner) (vllm_scaler_conflict{{{_T}}})"
                    f" or max by (target) (0 * vllm_scaler_current_replicas{{{_T}}})",
                    "conflict {{target}} {{owner}}",
                ),
                (
                    f"sum by (target) ({_new_in_window('vllm_scaler_outside_writes_total')})"
                    f" or sum by (target) (0 * vllm_scaler_current_replicas{{{_T}}})",
                    "outside writes {{target}}",
                ),
            ],
            width=8,
        )
    )
    b = b.with_panel(
        _ts(
            "Paused, pinned and refused writes",
            "paused: 1 while the workload carries vllm-scaler.io/paused=true (or an invalid "
            "pin). pinned: 1 while a vllm-scaler.io/pinned-replicas annotation holds the "
            "replicas (the Events and the replicas panel show the count). refused: changes the "
            "decision asked for but that were not written (conflict, paused, not_leader). Flat "
            "0 lines per target: none.",
            [
                (f"max by (target) (vllm_scaler_paused{{{_T}}})", "paused {{target}}"),
                (
                    f"count by (target) (vllm_scaler_pinned_replicas{{{_T}}})"
                    f" or max by (target) (0 * vllm_scaler_paused{{{_T}}})",
                    "pinned {{target}}",
                ),
                (
                    f"sum by (target, reason) "
                    f"({_new_in_window('vllm_scaler_refused_writes_total')})"
                    f" or sum by (target) (0 * vllm_scaler_current_replicas{{{_T}}})",
                    "refused {{target}} {{reason}}",
                ),
            ],
            width=8,
        )
    )
    b = b.with_panel(
        _ts(
            "Scale writes and failures",
            "Successful writes of spec.replicas by direction, failed ones by outcome.",
            [
                (
                    f"sum by (direction) ({_new_in_window('vllm_scaler_scale_actions_total')})"
                    f" or sum by (direction) (0 * vllm_scaler_tolerance_ratio{{{_T}}})",
                    "{{direction}}",
                ),
                (
                    f"sum by (outcome) ({_new_in_window('vllm_scaler_scale_failures_total')})"
                    f' or label_replace(sum(0 * vllm_scaler_current_replicas{{{_T}}}), "outcome",'
                    ' "none", "", "")',
                    "failed: {{outcome}}",
                ),
            ],
            bars=True,
            width=8,
        )
    )
    return _finish(b)


# --- "vLLM fleet" --------------------------------------------------------------------------


def _fleet_variables(b: gd.Dashboard) -> gd.Dashboard:
    # $target shows "ns/Kind/name" but its value is the workload name (named capture groups),
    # which is what the pod names start with.
    return (
        b.with_variable(
            _query_var(
                "namespace",
                "Namespace",
                "label_values(vllm:num_requests_running, namespace)",
                multi=False,
            ).current(gm.VariableOption(selected=True, text="", value=""))
        )
        .with_variable(
            _query_var(
                "target",
                "Target",
                'label_values(vllm_scaler_current_replicas{target=~"$namespace/.*"}, target)',
                regex="/^(?<text>[^/]+/[^/]+/(?<value>[^/]+))$/",
            )
        )
        .with_variable(
            _query_var(
                "model",
                "Model",
                'label_values(vllm:num_requests_running{namespace=~"$namespace"}, model_name)',
            )
        )
    )


def _hist(name: str, old: str | None, sel: str) -> str:
    """``rate`` of a histogram's buckets, falling back to vLLM's older metric name."""
    new = f"rate({name}_bucket{{{sel}}}[{_RI}])"
    # "or" keeps the new name's series where a vLLM exports both during a deprecation.
    return f"({new} or rate({old}_bucket{{{sel}}}[{_RI}]))" if old else new


_LAT: Final = (
    ("Time to first token", "vllm:time_to_first_token_seconds", None),
    (
        "Inter-token latency",
        "vllm:inter_token_latency_seconds",
        "vllm:time_per_output_token_seconds",
    ),
    ("End-to-end request latency", "vllm:e2e_request_latency_seconds", None),
)
_KV: Final = f"(vllm:kv_cache_usage_perc{{{_V}}} or vllm:gpu_cache_usage_perc{{{_V}}})"


def fleet_dashboard() -> dict[str, Any]:
    """The "vLLM fleet" dashboard as Grafana JSON (a dict)."""
    b = _fleet_variables(
        _base(
            "vLLM fleet",
            FLEET_UID,
            "vLLM's own metrics per model and per pod; works with the new and the old metric "
            "names (kv_cache_usage_perc / gpu_cache_usage_perc, inter_token_latency_seconds / "
            "time_per_output_token_seconds).",
        )
    )
    b = b.with_row(gd.Row("Per model"))
    for title, name, old in _LAT:
        b = b.with_panel(
            _ts(
                f"{title} by model",
                f"Quantiles of {name} (histogram_quantile over the bucket rate)"
                + (f", or {old} on older vLLM." if old else "."),
                [
                    (
                        f"histogram_quantile({q}, "
                        f"sum by (model_name, le) ({_hist(name, old, _V)}))",
                        f"p{round(q * 100)} {{{{model_name}}}}",
                    )
                    for q in (0.5, 0.95, 0.99)
                ],
                unit="s",
                width=8,
            )
        )
    b = b.with_panel(
        _ts(
            "Requests by model",
            "Waiting (queued) and running requests summed over the model's pods.",
            [
                (
                    f"sum by (model_name) (vllm:num_requests_waiting{{{_V}}})",
                    "waiting {{model_name}}",
                ),
                (
                    f"sum by (model_name) (vllm:num_requests_running{{{_V}}})",
                    "running {{model_name}}",
                ),
            ],
            width=8,
        )
    )
    b = b.with_panel(
        _ts(
            "Token throughput by model",
            "Prompt (prefill) and generated tokens per second.",
            [
                (
                    f"sum by (model_name) (rate(vllm:prompt_tokens_total{{{_V}}}[{_RI}]))",
                    "prompt {{model_name}}",
                ),
                (
                    f"sum by (model_name) (rate(vllm:generation_tokens_total{{{_V}}}[{_RI}]))",
                    "generation {{model_name}}",
                ),
            ],
            unit="short",
            width=8,
        )
    )
    b = b.with_panel(
        _ts(
            "KV-cache usage by model",
            "Mean and max over the model's pods (a 0-1 ratio).",
            [
                (f"avg by (model_name) ({_KV})", "mean {{model_name}}"),
                (f"max by (model_name) ({_KV})", "max {{model_name}}"),
            ],
            unit="percentunit",
            width=8,
        )
    )
    b = b.with_row(gd.Row("Per pod"))
    b = b.with_panel(
        _ts(
            "Queue depth per pod",
            "vllm:num_requests_waiting summed over the pod's engines.",
            [(f"sum by (pod) (vllm:num_requests_waiting{{{_V}}})", "{{pod}}")],
            width=8,
        )
    )
    b = b.with_panel(
        _ts(
            "Running requests per pod",
            "vllm:num_requests_running summed over the pod's engines.",
            [(f"sum by (pod) (vllm:num_requests_running{{{_V}}})", "{{pod}}")],
            width=8,
        )
    )
    b = b.with_panel(
        _ts(
            "KV-cache usage per pod",
            "vllm:kv_cache_usage_perc (or gpu_cache_usage_perc), max over the pod's engines.",
            [(f"max by (pod) ({_KV})", "{{pod}}")],
            unit="percentunit",
            width=8,
        )
    )
    for title, name, old in _LAT:
        b = b.with_panel(
            _ts(
                f"{title} p95 per pod",
                f"95th percentile of {name}" + (f" (or {old})." if old else "."),
                [
                    (
                        f"histogram_quantile(0.95, sum by (pod, le) ({_hist(name, old, _V)}))",
                        "{{pod}}",
                    )
                ],
                unit="s",
                width=8,
            )
        )
    b = b.with_panel(
        _ts(
            "Generated tokens per second per pod",
            "rate of vllm:generation_tokens_total.",
            [(f"sum by (pod) (rate(vllm:generation_tokens_total{{{_V}}}[{_RI}]))", "{{pod}}")],
            width=12,
        )
    )
    b = b.with_panel(
        _ts(
            "Preemptions per pod",
            "Requests preempted for lack of KV blocks, per second (vllm:num_preemptions_total).",
            [(f"sum by (pod) (rate(vllm:num_preemptions_total{{{_V}}}[{_RI}]))", "{{pod}}")],
            unit="ops",
            width=12,
        )
    )
    return _finish(b)


# --- generation ------------------------------------------------------------------------------


def build_dashboards() -> dict[str, dict[str, Any]]:
    """Every dashboard, keyed by the file name it is committed under in ``dashboards/``."""
    return {
        FILES[DECISIONS_UID]: decisions_dashboard(),
        FILES[FLEET_UID]: fleet_dashboard(),
    }


def to_json(doc: Mapping[str, Any]) -> str:
    """The committed form: sorted keys, two-space indent, trailing newline (stable diffs)."""
    return json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def write_dashboards(out_dir: Path) -> list[Path]:
    """Write every dashboard's JSON into ``out_dir``; returns the paths written."""
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for name, doc in build_dashboards().items():
        path = out_dir / name
        path.write_text(to_json(doc), encoding="utf-8")
        written.append(path)
    return written


# --- reading the queries back (tests, previews) ----------------------------------------------


def panel_queries(doc: Mapping[str, Any]) -> list[PanelQuery]:
    """Every panel target's PromQL in ``doc`` (rows and collapsed rows included)."""
    out = []
    for panel in _walk_panels(doc):
        for t in panel.get("targets", []):
            out.append(
                PanelQuery(
                    dashboard=str(doc["uid"]),
                    panel=str(panel.get("title", "")),
                    ref_id=str(t.get("refId", "")),
                    expr=str(t["expr"]),
                    instant=bool(t.get("instant", False)),
                )
            )
    return out


def annotation_queries(doc: Mapping[str, Any]) -> list[PanelQuery]:
    """The PromQL of ``doc``'s annotations (evaluated as range queries by Grafana)."""
    return [
        PanelQuery(str(doc["uid"]), f"annotation: {a['name']}", "", str(a["expr"]), False)
        for a in (doc.get("annotations") or {}).get("list", [])
        if a.get("expr")
    ]


_VAR_RE: Final = re.compile(r"\$\{(\w+)(?::\w+)?\}|\$(\w+)|\[\[(\w+)\]\]")
_REGEX_SPECIAL: Final = re.compile(r"([\\^$*+?.()|{}\[\]])")
DEFAULT_BUILTINS: Final[Mapping[str, str]] = {
    "__rate_interval": "1m",
    "__interval": "15s",
    "__range": "1h",
}


def substitute(
    expr: str,
    values: Mapping[str, str],
    *,
    builtins: Mapping[str, str] = DEFAULT_BUILTINS,
    regex_escaped: Sequence[str] = ("target", "model"),
) -> str:
    """Replace Grafana variables in ``expr`` as Grafana's Prometheus datasource would.

    Args:
        expr: a panel or variable query.
        values: one value per dashboard variable (``namespace``, ``target``, ``model``).
        builtins: ``$__rate_interval`` and friends.
        regex_escaped: multi-value variables; Grafana escapes regex characters in their
            values (``.`` becomes ``\\\\.`` inside a PromQL string).
    """

    def repl(m: re.Match[str]) -> str:
        name = m.group(1) or m.group(2) or m.group(3)
        if name in builtins:
            return builtins[name]
        if name not in values:
            return m.group(0)
        value = values[name]
        return _REGEX_SPECIAL.sub(r"\\\\\1", value) if name in regex_escaped else value

    return _VAR_RE.sub(repl, expr)


_LABEL_VALUES: Final = re.compile(r"^label_values\((?:(?P<sel>.+),\s*)?(?P<label>\w+)\)$")


def _js_regex(regex: str) -> re.Pattern[str] | None:
    # Grafana variable regexes are JavaScript literals (/.../flags) with (?<name>) groups.
    if not regex:
        return None
    body = regex[1 : regex.rindex("/")] if regex.startswith("/") else regex
    return re.compile(body.replace("(?<", "(?P<").replace("\\/", "/"))


def _apply_regex(pattern: re.Pattern[str] | None, values: Sequence[str]) -> list[str]:
    if pattern is None:
        return sorted(set(values))
    out = set()
    for v in values:
        m = pattern.search(v)
        if m is None:
            continue
        groups = m.groupdict()
        if groups.get("value") is not None:
            out.add(groups["value"])
        elif m.groups():
            out.add(m.group(1))
        else:
            out.add(m.group(0))
    return sorted(out)


def resolve_variables(
    prometheus_url: str,
    doc: Mapping[str, Any],
    *,
    start: float,
    end: float,
    client: httpx.Client | None = None,
) -> dict[str, list[str]]:
    """Run ``doc``'s variable queries as Grafana would; every variable's options, in order.

    Each query sees the first option of the variables before it. ``label_values(sel, label)``
    becomes ``/api/v1/label/<label>/values?match[]=sel``; the variable's regex (with its
    ``text``/``value`` capture groups) is applied to the answer.
    """
    own = client or httpx.Client(timeout=10.0)
    chosen: dict[str, str] = {}
    options: dict[str, list[str]] = {}
    try:
        for var in doc.get("templating", {}).get("list", []):
            raw = var.get("query")
            query = str(raw.get("query") if isinstance(raw, dict) else raw)
            m = _LABEL_VALUES.match(substitute(query, chosen).strip())
            if m is None:
                raise ValueError(f"unsupported variable query {query!r}")
            params: dict[str, str | float] = {"start": start, "end": end}
            if m.group("sel"):
                params["match[]"] = m.group("sel")
            resp = own.get(
                f"{prometheus_url}/api/v1/label/{m.group('label')}/values", params=params
            )
            resp.raise_for_status()
            found = _apply_regex(_js_regex(str(var.get("regex", ""))), resp.json()["data"])
            options[str(var["name"])] = found
            if found:
                chosen[str(var["name"])] = found[0]
    finally:
        if client is None:
            own.close()
    return options


# --- previews --------------------------------------------------------------------------------


def _query_range(
    client: httpx.Client, url: str, expr: str, start: float, end: float, step: float
) -> list[dict[str, Any]]:
    resp = client.post(
        f"{url}/api/v1/query_range",
        data={"query": expr, "start": start, "end": end, "step": step},
    )
    body = resp.json()
    if body.get("status") != "success":
        raise RuntimeError(f"query failed: {expr!r}: {body.get('error', resp.text[:300])}")
    return list(body["data"]["result"])


def _query_instant(client: httpx.Client, url: str, expr: str, at: float) -> list[dict[str, Any]]:
    resp = client.post(f"{url}/api/v1/query", data={"query": expr, "time": at})
    body = resp.json()
    if body.get("status") != "success":
        raise RuntimeError(f"query failed: {expr!r}: {body.get('error', resp.text[:300])}")
    return list(body["data"]["result"])


def _legend_text(fmt: str, labels: Mapping[str, str]) -> str:
    if fmt in ("", "__auto"):
        return ", ".join(f"{k}={v}" for k, v in sorted(labels.items()) if k != "__name__")
    return re.sub(r"\{\{\s*(\w+)\s*\}\}", lambda m: labels.get(m.group(1), ""), fmt).strip()


def render_previews(
    prometheus_url: str,
    out_dir: Path,
    *,
    start: float | None = None,
    end: float | None = None,
    step: float = 2.0,
    builtins: Mapping[str, str] = DEFAULT_BUILTINS,
) -> list[Path]:
    """Draw each dashboard with matplotlib from the same queries, one PNG per dashboard.

    Variables take the first value their own queries find (as Grafana's default would be
    with a single target); time series are range queries over ``start``..``end`` (default:
    the last 10 minutes), tables instant queries at ``end``.

    Returns:
        The PNG paths written into ``out_dir`` (``<dashboard file name>.png``).
    """
    import matplotlib

    matplotlib.use("Agg")  # headless: tests and CI have no display
    import matplotlib.pyplot as plt

    end = end if end is not None else time.time()
    start = start if start is not None else end - 600
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    with httpx.Client(timeout=30.0) as client:
        for name, doc in build_dashboards().items():
            options = resolve_variables(prometheus_url, doc, start=start, end=end, client=client)
            values = {k: v[0] for k, v in options.items() if v}
            with plt.style.context("dark_background"):
                fig = _draw_dashboard(
                    doc, client, prometheus_url, values, builtins, start, end, step
                )
                path = out_dir / (Path(name).stem + ".png")
                fig.savefig(path, dpi=80, facecolor=fig.get_facecolor())
                plt.close(fig)
            written.append(path)
    return written


def _draw_dashboard(
    doc: Mapping[str, Any],
    client: httpx.Client,
    url: str,
    values: Mapping[str, str],
    builtins: Mapping[str, str],
    start: float,
    end: float,
    step: float,
) -> Any:
    import matplotlib.pyplot as plt

    panels = list(doc["panels"])
    rows = max(p["gridPos"]["y"] + p["gridPos"]["h"] for p in panels) + 2
    fig = plt.figure(figsize=(20, rows * 0.38), facecolor="#111217")
    title = f"{doc['title']}   " + "   ".join(f"{k}={v}" for k, v in values.items())
    fig.text(0.01, 1 - 0.9 / rows, title, fontsize=14, weight="bold", color="white")
    events = _annotation_times(doc, client, url, values, builtins, start, end, step)
    for panel in panels:
        g = panel["gridPos"]
        left, width = g["x"] / 24, g["w"] / 24
        bottom, height = 1 - (g["y"] + 2 + g["h"]) / rows, g["h"] / rows
        if panel["type"] == "row":
            label = _display(panel["title"], values)
            fig.text(left + 0.005, bottom + height / 2, label, fontsize=12, color="#ccccdc")
            continue
        # Room on the left for the tick labels, as Grafana keeps inside the panel.
        ax = fig.add_axes((left + 0.035, bottom + 0.16 * height, width - 0.045, height * 0.72))
        ax.set_facecolor("#181b1f")
        ax.set_title(_display(panel["title"], values), fontsize=10, loc="left")
        if panel["type"] == "table":
            _draw_table(ax, panel, client, url, values, builtins, end)
        else:
            _draw_timeseries(ax, panel, client, url, values, builtins, start, end, step)
            for t in events:
                ax.axvline(t - start, color="orange", linestyle=":", linewidth=1)
    return fig


def _display(text: str, values: Mapping[str, str]) -> str:
    """A title with its variables replaced as text (no regex escaping)."""
    return substitute(text, values, regex_escaped=())


def _annotation_times(
    doc: Mapping[str, Any],
    client: httpx.Client,
    url: str,
    values: Mapping[str, str],
    builtins: Mapping[str, str],
    start: float,
    end: float,
    step: float,
) -> list[float]:
    # Grafana draws a region per run of points; the preview marks where each run begins.
    times: list[float] = []
    for q in annotation_queries(doc):
        for series in _query_range(
            client, url, substitute(q.expr, values, builtins=builtins), start, end, step
        ):
            prev = -math.inf
            for ts, _ in series["values"]:
                if float(ts) - prev > 1.5 * step:
                    times.append(float(ts))
                prev = float(ts)
    return times


_COLORS: Final = {"green": "#73bf69", "dark-green": "#37872d"}


def _format_axis(ax: Any, unit: str) -> None:
    from matplotlib.ticker import FuncFormatter, PercentFormatter

    if unit == "percentunit":
        ax.yaxis.set_major_formatter(PercentFormatter(1.0))
    elif unit == "s":
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g} s"))
    elif unit in ("reqps", "ops"):
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}/s"))
    ax.tick_params(labelsize=8)
    ax.set_xlabel("seconds", fontsize=8)
    ax.grid(color="#2c3235", linewidth=0.5)


def _draw_timeseries(
    ax: Any,
    panel: Mapping[str, Any],
    client: httpx.Client,
    url: str,
    values: Mapping[str, str],
    builtins: Mapping[str, str],
    start: float,
    end: float,
    step: float,
) -> None:
    defaults = panel.get("fieldConfig", {}).get("defaults", {})
    custom = defaults.get("custom", {})
    overrides: dict[str, dict[str, Any]] = {}
    for o in panel.get("fieldConfig", {}).get("overrides", []):
        if o["matcher"]["id"] == "byName":
            props = overrides.setdefault(o["matcher"]["options"], {})
            props.update({p["id"]: p.get("value") for p in o["properties"]})
    lines: dict[str, tuple[list[float], list[float]]] = {}
    for t in panel.get("targets", []):
        expr = substitute(t["expr"], values, builtins=builtins)
        for series in _query_range(client, url, expr, start, end, step):
            label = _legend_text(t.get("legendFormat", ""), series["metric"])
            xs = [float(ts) - start for ts, _ in series["values"]]
            ys = [float(v) for _, v in series["values"]]
            lines[label] = (xs, ys)
    if custom.get("drawStyle") == "bars":
        grid = sorted({x for xs, _ in lines.values() for x in xs})
        stacks = [
            [dict(zip(xs, ys, strict=True)).get(x, 0.0) for x in grid] for xs, ys in lines.values()
        ]
        if grid:
            ax.stackplot(grid, stacks, labels=list(lines), step="post", alpha=0.85)
    else:
        for label, (xs, ys) in lines.items():
            props = overrides.get(label, {})
            dashed = (props.get("custom.lineStyle") or {}).get("fill") == "dash"
            color = (props.get("color") or {}).get("fixedColor")
            ax.plot(
                xs,
                ys,
                label=label,
                linestyle="--" if dashed else "-",
                linewidth=props.get("custom.lineWidth") or 1.2,
                color=_COLORS.get(color or ""),
            )
            below = props.get("custom.fillBelowTo")
            if below in lines:
                lx, ly = lines[str(below)]
                if lx == xs:
                    ax.fill_between(xs, ly, ys, color="#73bf69", alpha=0.15)
    _format_axis(ax, str(defaults.get("unit", "")))
    if lines:
        ax.legend(fontsize=7, loc="upper left", ncol=2, framealpha=0.3)
    else:
        ax.text(0.5, 0.5, "No data", ha="center", va="center", transform=ax.transAxes)


def _draw_table(
    ax: Any,
    panel: Mapping[str, Any],
    client: httpx.Client,
    url: str,
    values: Mapping[str, str],
    builtins: Mapping[str, str],
    at: float,
) -> None:
    # Mirrors the panel's merge + organize transformations: one row per target.
    organize: dict[str, Any] = next(
        (t["options"] for t in panel.get("transformations", []) if t["id"] == "organize"), {}
    )
    rename = organize.get("renameByName", {})
    rows: dict[str, dict[str, str]] = {}
    columns = ["target"]
    for t in panel.get("targets", []):
        expr = substitute(t["expr"], values, builtins=builtins)
        column = rename.get(f"Value #{t['refId']}")
        for s in _query_instant(client, url, expr, at):
            row = rows.setdefault(s["metric"].get("target", ""), {})
            for k, v in s["metric"].items():
                row[k] = v
                if k not in columns:
                    columns.append(k)
            if column:
                row[column] = f"{float(s['value'][1]):g}"
        if column and column not in columns:
            columns.append(column)
    ax.axis("off")
    if not rows:
        ax.text(0.5, 0.5, "No data", ha="center", va="center", transform=ax.transAxes)
        return
    cells = [[r.get(c, "") for c in columns] for _, r in sorted(rows.items())]
    tbl = ax.table(cellText=cells, colLabels=columns, loc="upper center", cellLoc="left")
    tbl.auto_set_font_size(False)
    tbl.set_fontsize(10)
    tbl.scale(1, 1.6)
    for cell in tbl.get_celld().values():
        cell.set_facecolor("#181b1f")
        cell.set_edgecolor("#2c3235")
        cell.get_text().set_color("white")


# --- command line ----------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    """``vllm-scaler dashboards``: write the dashboards' JSON (and, optionally, previews).

    Options: ``--out DIR`` (default ``dashboards``); ``--check`` exits 1 if the files in DIR
    differ from the code; ``--previews DIR --prometheus-url URL [--minutes N]`` draws PNGs.
    """
    parser = argparse.ArgumentParser(
        prog="vllm-scaler dashboards", description="Generate the Grafana dashboards."
    )
    parser.add_argument("--out", type=Path, default=Path("dashboards"), help="output folder")
    parser.add_argument(
        "--check", action="store_true", help="exit 1 if the committed JSON is out of date"
    )
    parser.add_argument("--previews", type=Path, help="also draw PNG previews into this folder")
    parser.add_argument("--prometheus-url", default="http://localhost:9090")
    parser.add_argument("--minutes", type=float, default=10.0, help="preview time range")
    args = parser.parse_args(argv)
    if args.check:
        stale = [
            n
            for n, doc in build_dashboards().items()
            if not (args.out / n).is_file()
            or (args.out / n).read_text(encoding="utf-8") != to_json(doc)
        ]
        for n in stale:
            print(f"out of date: {args.out / n} (run: vllm-scaler dashboards --out {args.out})")
        return 1 if stale else 0
    for path in write_dashboards(args.out):
        print(path)
    if args.previews is not None:
        end = time.time()
        for path in render_previews(
            args.prometheus_url, args.previews, start=end - args.minutes * 60, end=end
        ):
            print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
