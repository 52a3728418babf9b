"""The "vllm-scaler: decisions" dashboard (``vllm-scaler-decisions.json``): replicas, each
signal against its target and tolerance band, decisions by reason, the latest reason per
target, scale events as annotations and the controller's health. Reads the metric names of
:mod:`scaler.telemetry.metrics`."""

from __future__ import annotations

from typing import Any, Final

from grafana_foundation_sdk.builders import dashboard as gd
from grafana_foundation_sdk.builders import table as gtable
from grafana_foundation_sdk.builders import timeseries as gts
from grafana_foundation_sdk.models import dashboard as gm

from scaler.config.signal_specs import SPECS
from scaler.dashboards.panels import (
    DS,
    RATE_INTERVAL,
    base_dashboard,
    dashed_lines,
    finish,
    model_variable,
    prometheus_query,
    query_variable,
    resource_named,
    target_variable,
    timeseries,
    with_overrides,
)

DECISIONS_UID: Final = "vllm-scaler-decisions"

# Selectors. Our own per-target series carry target="ns/Kind/name"; the controller-wide ones
# (cycle, queries, leader) have no target and are shown for every vllm-scaler process.
_T: Final = 'target=~"$target"'
# vLLM series of the selected model, all its pods.
_VM: Final = 'namespace=~"$namespace", model_name=~"$model"'

# The VLLMAutoscaler that defines each target (``resource``: "VLLMAutoscaler ns/name", or
# "policy file"), one series per target whichever controller replica exports it
# (vllm_scaler_target_info, 1 per target), to join on ``target``.
_RESOURCE: Final = resource_named("max by (target, resource) (vllm_scaler_target_info{" + _T + "})")

#: One panel per signal of the registry: its name, the panel's title and Grafana unit.
SIGNALS: Final = tuple((str(s.name), s.panel.title, s.panel.unit) for s in SPECS)


def _decisions_variables(b: gd.Dashboard) -> gd.Dashboard:
    # The namespace is the first segment of our target label: it is the namespace of the
    # scaled workload, not of the controller's pod (which Prometheus would put in "namespace").
    # The resource (a VLLMAutoscaler, namespace/name) narrows the targets to the ones it
    # defines; "All" (.*) keeps the policy file's too (their resource label is empty). Each
    # target is shown with its resource (its text), which the repeated row's title names.
    info = 'target=~"$namespace/.*", resource=~"$resource"'
    return (
        b.with_variable(
            query_variable(
                "namespace",
                "Namespace",
                "label_values(vllm_scaler_current_replicas, target)",
                regex="/^([^/]+)\\//",
                multi=False,
            ).current(gm.VariableOption(selected=True, text="", value=""))
        )
        .with_variable(
            query_variable(
                "resource",
                "VLLMAutoscaler",
                'label_values(vllm_scaler_target_info{target=~"$namespace/.*"}, resource)',
            )
        )
        .with_variable(target_variable(selector=info))
        .with_variable(model_variable())
    )


def _named(expr: str) -> str:
    """``expr`` (series with a ``target`` label) with the ``resource`` label of the target:
    the VLLMAutoscaler that defines it, or "policy file"."""
    return f"({expr}) * on(target) group_left(resource) {_RESOURCE}"


def _increase_with_new(metric: str, selector: str, window: str) -> str:
    # increase() cannot see a counter's first step: prometheus-client creates a labelled series
    # at its first inc(), so a reason seen for the first time would never show. Subtracting the
    # value a window ago (0 for a series that did not exist then) counts that step too.
    m = f"{metric}{{{selector}}}"
    return f"clamp_min({m} - ({m} offset {window} or {m} * 0), 0)"


def _per_target(expr: str) -> str:
    """One series per target: both controller replicas (leader and follower) decide and
    export the same per-target values, so a raw selector draws each line twice."""
    return f"max by (target) ({expr})"


def _new_in_window(metric: str) -> str:
    """The counter's increase over ``$__rate_interval`` for the selected targets."""
    return _increase_with_new(metric, _T, RATE_INTERVAL)


def _signal_panel(name: str, title: str, unit: str) -> gts.Panel:
    sel = f'{_T}, signal="{name}"'
    on = "on(job, instance, target) group_left()"
    tol = "vllm_scaler_tolerance_ratio"
    up = _per_target(
        f'vllm_scaler_signal_target{{{sel}}} * {on} (1 + {tol}{{{_T}, direction="up"}})'
    )
    down = _per_target(
        f'vllm_scaler_signal_target{{{sel}}} * {on} (1 - {tol}{{{_T}, direction="down"}})'
    )
    p = timeseries(
        f"{title} ($target)",
        f"vllm_scaler_signal_value of {name} against its configured target; the shaded band is "
        "target x (1 - scale-down tolerance) .. target x (1 + scale-up tolerance), inside which "
        "this signal asks for no change. Gaps: the signal was invalid (NaN).",
        [
            (_per_target(f"vllm_scaler_signal_value{{{sel}}}"), "value"),
            (_per_target(f"vllm_scaler_signal_target{{{sel}}}"), "target"),
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
    dashed = dict(dashed_lines(["scale-up above", "scale-down below"]))
    return with_overrides(p, [(name, props + dashed.get(name, [])) for name, props in band])


def _reason_table(rename: dict[str, str]) -> gm.DataTransformerConfig:
    """Columns of a per-target table merged from instant queries: target, its resource,
    reason (query A, whose value is only the reason's 1), then the other queries' values
    renamed."""
    return gm.DataTransformerConfig(
        id_val="organize",
        options={
            "excludeByName": {"Time": True, "Value #A": True},
            "renameByName": rename,
            "indexByName": {"target": 0, "resource": 1, "reason": 2},
        },
    )


def _shadow_table() -> gtable.Panel:
    """The shadow policy beside the active one: each target's latest shadow reason and
    recommendation, and what the active policy asked for."""
    return (
        gtable.Panel()
        .title("Shadow policy: latest recommendation per target")
        .datasource(DS)
        .description(
            "Targets with a shadow policy (a second policy evaluated on the same readings, "
            "never written): its latest reason and desired replicas "
            "(vllm_scaler_shadow_desired_replicas) next to the active policy's. Empty when no "
            "target has a shadow."
        )
        .span(12)
        .height(8)
        .with_target(
            prometheus_query(
                "A",
                _named(
                    "max by (target, reason) "
                    f"(vllm_scaler_shadow_last_decision_reason{{{_T}}} == 1)"
                ),
                instant=True,
            )
        )
        .with_target(
            prometheus_query(
                "B", _named(f"max by (target) (vllm_scaler_desired_replicas{{{_T}}})"), instant=True
            )
        )
        .with_target(
            prometheus_query(
                "C",
                _named(f"max by (target) (vllm_scaler_shadow_desired_replicas{{{_T}}})"),
                instant=True,
            )
        )
        .with_transformation(gm.DataTransformerConfig(id_val="merge", options={}))
        .with_transformation(
            _reason_table(
                {
                    "reason": "shadow reason",
                    "Value #B": "active desired",
                    "Value #C": "shadow desired",
                }
            )
        )
    )


def _capacity_panel() -> gts.Panel:
    """Demand against what the ready replicas serve at the learned capacity."""
    fleet = _per_target(
        f"vllm_scaler_capacity_tokens_per_second{{{_T}}} * on(job, instance, target) "
        f"vllm_scaler_ready_replicas{{{_T}}}"
    )
    return timeseries(
        "Demand and capacity ($target)",
        "Weighted tokens/s (prompt + generation_token_weight x generated): what the ready "
        "replicas served (demand), what the fleet is sized for (forecast: the demand over the "
        "model-load horizon with burstiness headroom and the waiting work), and what the ready "
        "replicas serve at the learned capacity per replica. Empty while the capacity signal "
        "is off or still learning.",
        [
            (_per_target(f"vllm_scaler_demand_tokens_per_second{{{_T}}}"), "demand"),
            (_per_target(f"vllm_scaler_forecast_demand_tokens_per_second{{{_T}}}"), "forecast"),
            (fleet, "ready x capacity"),
            (
                _per_target(f"vllm_scaler_capacity_tokens_per_second{{{_T}}}"),
                "capacity per replica",
            ),
        ],
    )


def _seasonal_panel() -> gts.Panel:
    """The seasonal forecast against the actual demand, with its errors and whether it is in
    use."""
    return timeseries(
        "Seasonal forecast ($target)",
        "The demand the ready replicas served (actual) and the seasonal forecast's peak demand "
        "over its horizon (one model load plus one control interval ahead: the forecast line "
        "leads the actual one by that much when the season repeats), both in the capacity "
        "signal's demand unit; the model's out-of-sample MAPE and the same-hour-yesterday "
        "forecast's (ratios), and 1 while the forecast is in use (it beats both baselines). "
        "Empty before the first fit; the forecast line is empty while it is off.",
        [
            (_per_target(f"vllm_scaler_demand_tokens_per_second{{{_T}}}"), "actual demand"),
            (_per_target(f"vllm_scaler_seasonal_forecast_demand{{{_T}}}"), "seasonal forecast"),
            (_per_target(f"vllm_scaler_seasonal_forecast_mape_ratio{{{_T}}}"), "MAPE"),
            (_per_target(f"vllm_scaler_seasonal_naive_mape_ratio{{{_T}}}"), "naive MAPE"),
            (_per_target(f"vllm_scaler_seasonal_forecast_in_use{{{_T}}}"), "in use"),
        ],
    )


def decisions_dashboard() -> dict[str, Any]:
    """The "vllm-scaler: decisions" dashboard as Grafana JSON (a dict)."""
    b = _decisions_variables(
        base_dashboard(
            "vllm-scaler: decisions",
            DECISIONS_UID,
            "What vllm-scaler decided per target and why, from its own /metrics.",
        )
    )
    actions = _increase_with_new("vllm_scaler_scale_actions_total", _T, "1m")
    b = b.annotation(
        gd.AnnotationQuery()
        .name("Scale events")
        .datasource(DS)
        .enable(True)
        .icon_color("orange")
        .expr(_named(f"sum by (target, direction) ({actions}) > 0"))
    )
    why = gtable.Panel().title("Why not scaled: latest decision per target").datasource(DS)
    why = (
        why.description(
            "The reason of each target's latest decision (vllm_scaler_last_decision_reason == 1) "
            "with its current, desired and recommended replicas. See the reason table in "
            "docs/decisions.md."
        )
        .span(12)
        .height(8)
        .with_target(
            prometheus_query(
                "A",
                _named(f"max by (target, reason) (vllm_scaler_last_decision_reason{{{_T}}} == 1)"),
                instant=True,
            )
        )
        .with_target(
            prometheus_query(
                "B", _named(f"max by (target) (vllm_scaler_current_replicas{{{_T}}})"), instant=True
            )
        )
        .with_target(
            prometheus_query(
                "C", _named(f"max by (target) (vllm_scaler_desired_replicas{{{_T}}})"), instant=True
            )
        )
        .with_target(
            prometheus_query(
                "D",
                _named(f"max by (target) (vllm_scaler_recommended_replicas{{{_T}}})"),
                instant=True,
            )
        )
        .with_transformation(gm.DataTransformerConfig(id_val="merge", options={}))
        .with_transformation(
            _reason_table({"Value #B": "current", "Value #C": "desired", "Value #D": "recommended"})
        )
    )
    b = b.with_row(gd.Row("Decisions")).with_panel(why)
    b = b.with_panel(_shadow_table())
    b = b.with_panel(
        timeseries(
            "Decisions by reason",
            "Decisions per reason over time, all selected targets (one per target and cycle; "
            "both controller replicas decide each target, so each target counts once: the "
            "replica with the most).",
            [
                (
                    "sum by (reason) (max by (target, reason) ("
                    + _increase_with_new("vllm_scaler_decisions_total", _T, RATE_INTERVAL)
                    + "))",
                    "{{reason}}",
                )
            ],
            bars=True,
        )
    )
    # One row per selected target: its replicas and each signal against its band.
    b = b.with_row(gd.Row("Target ${target:text}").repeat("target"))
    replicas = timeseries(
        "Replicas ($target)",
        "spec.replicas (current), what the last decision asked for (desired), Ready pods, "
        "pods still loading their model (pending), pods past the model load timeout (stuck); "
        "dashed: the policy's min and max.",
        [
            (_per_target(f"vllm_scaler_current_replicas{{{_T}}}"), "current"),
            (_per_target(f"vllm_scaler_desired_replicas{{{_T}}}"), "desired"),
            (_per_target(f"vllm_scaler_ready_replicas{{{_T}}}"), "ready"),
            (_per_target(f"vllm_scaler_pending_replicas{{{_T}}}"), "pending"),
            (_per_target(f"vllm_scaler_stuck_replicas{{{_T}}}"), "stuck"),
            (_per_target(f"vllm_scaler_max_replicas{{{_T}}}"), "max"),
            (_per_target(f"vllm_scaler_min_replicas{{{_T}}}"), "min"),
            (_per_target(f"vllm_scaler_shadow_desired_replicas{{{_T}}}"), "shadow desired"),
        ],
    )
    b = b.with_panel(with_overrides(replicas, dashed_lines(["max", "min", "shadow desired"])))
    for name, title, unit in SIGNALS:
        b = b.with_panel(_signal_panel(name, title, unit))
    b = b.with_panel(_capacity_panel())
    b = b.with_panel(_seasonal_panel())
    b = b.with_panel(
        timeseries(
            "Learned model load time ($target)",
            "Seconds from pod creation to Ready, the median of the target's recent starts "
            "(vllm_scaler_model_load_seconds): the capacity signal's forecast horizon and the "
            "startup guard. Empty until a start was observed.",
            [(_per_target(f"vllm_scaler_model_load_seconds{{{_T}}}"), "model load")],
            unit="s",
        )
    )
    b = b.with_row(gd.Row("Load of $model"))
    b = b.with_panel(
        timeseries(
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
        timeseries(
            "Finished requests per second ($model)",
            "vllm:request_success_total rate, by finished reason.",
            [
                (
                    f"sum by (model_name, finished_reason) "
                    f"(rate(vllm:request_success_total{{{_VM}}}[{RATE_INTERVAL}]))",
                    "{{model_name}} {{finished_reason}}",
                )
            ],
            unit="reqps",
        )
    )
    b = b.with_row(gd.Row("Controller health"))
    b = b.with_panel(
        timeseries(
            "Cycle duration",
            "Duration of one control cycle (all targets), per vllm-scaler process.",
            [
                (
                    f"histogram_quantile({q}, sum by (instance, le) "
                    f"(rate(vllm_scaler_cycle_duration_seconds_bucket[{RATE_INTERVAL}])))",
                    f"p{round(q * 100)} {{{{instance}}}}",
                )
                for q in (0.5, 0.99)
            ],
            unit="s",
            width=8,
        )
    )
    b = b.with_panel(
        timeseries(
            "Signals unusable, by signal and reason",
            "Per second, signals that could not be used for a scale-down (empty, absent, nan, "
            "partial, timeout, ...). The flat 0 lines per signal mean: no errors.",
            [
                (
                    "sum by (signal, reason) "
                    f"(rate(vllm_scaler_query_errors_total[{RATE_INTERVAL}])) "
                    f"or sum by (signal) (0 * vllm_scaler_signal_valid{{{_T}}})",
                    "{{signal}} {{reason}}",
                ),
                (
                    "sum by (query, reason) "
                    f"(rate(vllm_scaler_query_failures_total[{RATE_INTERVAL}])) "
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
        timeseries(
            "Seconds since the last successful query",
            "Per query kind (the signal label holds the query's name), on the controller "
            "replica that has gone longest, as the VllmScalerPrometheusQueriesFailing alert "
            "reads it. A query not sent because nothing needs it (ttft_buckets while no target "
            "has requests) is not due and counts as current. An empty answer counts as "
            "success: see the signal panels and the VllmScalerSignalInvalid alert for that.",
            [
                (
                    "time() - min by (signal) "
                    "(vllm_scaler_last_successful_query_timestamp_seconds)",
                    "{{signal}}",
                )
            ],
            unit="s",
            width=8,
        )
    )
    b = b.with_panel(
        timeseries(
            "Leader",
            "vllm_scaler_leader per process: 1 on the replica holding the leader Lease (always 1 "
            "without leader election, 0 in dry run). Exactly one line at 1 is healthy.",
            [("max by (instance) (vllm_scaler_leader)", "{{instance}}")],
            width=8,
        )
    )
    b = b.with_panel(
        timeseries(
            "Conflicts and outside writes",
            "vllm_scaler_conflict: 1 while another autoscaler (HPA or KEDA ScaledObject, the "
            "owner) targets the workload, and vllm-scaler only recommends. Outside writes: "
            "spec.replicas changed by someone else. Flat 0 lines per target: none.",
            [
                (
                    _named(
                        f"max by (target, owner) (vllm_scaler_conflict{{{_T}}})"
                        f" or max by (target) (0 * vllm_scaler_current_replicas{{{_T}}})"
                    ),
                    "conflict {{target}} ({{resource}}) {{owner}}",
                ),
                (
                    _named(
                        f"max by (target) ({_new_in_window('vllm_scaler_outside_writes_total')})"
                        f" or sum by (target) (0 * vllm_scaler_current_replicas{{{_T}}})"
                    ),
                    "outside writes {{target}} ({{resource}})",
                ),
            ],
            width=8,
        )
    )
    b = b.with_panel(
        timeseries(
            "Paused, pinned and refused writes",
            "paused: 1 while the workload carries vllm-scaler.io/paused=true (or an invalid "
            "pin). pinned: 1 while a vllm-scaler.io/pinned-replicas annotation holds the "
            "replicas (the Events and the replicas panel show the count). refused: changes the "
            "decision asked for but that were not written (conflict, paused, not_leader). Flat "
            "0 lines per target: none.",
            [
                (
                    _named(f"max by (target) (vllm_scaler_paused{{{_T}}})"),
                    "paused {{target}} ({{resource}})",
                ),
                (
                    _named(
                        f"count by (target) (vllm_scaler_pinned_replicas{{{_T}}})"
                        f" or max by (target) (0 * vllm_scaler_paused{{{_T}}})"
                    ),
                    "pinned {{target}} ({{resource}})",
                ),
                (
                    _named(
                        f"sum by (target, reason) "
                        f"({_new_in_window('vllm_scaler_refused_writes_total')})"
                        f" or sum by (target) (0 * vllm_scaler_current_replicas{{{_T}}})"
                    ),
                    "refused {{target}} ({{resource}}) {{reason}}",
                ),
            ],
            width=8,
        )
    )
    b = b.with_panel(
        timeseries(
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
    return finish(b)
