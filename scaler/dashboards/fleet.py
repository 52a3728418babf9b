"""The "vLLM fleet" dashboard (``vllm-fleet.json``): latency quantiles, queue, running
requests, KV cache, token throughput and preemptions, per model and per pod, from vLLM's own
metrics with the pre-0.9.2 / pre-0.11 names as fallbacks."""

from __future__ import annotations

from typing import Any, Final

from grafana_foundation_sdk.builders import dashboard as gd
from grafana_foundation_sdk.models import dashboard as gm

from scaler.dashboards.panels import (
    RATE_INTERVAL,
    base_dashboard,
    finish,
    model_variable,
    query_variable,
    target_variable,
    timeseries,
)

FLEET_UID: Final = "vllm-scaler-vllm-fleet"

# vLLM series: the namespace and pod labels come from Kubernetes service discovery. On the fleet
# dashboard $target's value is the workload name (see _fleet_variables), and the pods of a
# Deployment (<name>-<hash>-<suffix>), StatefulSet (<name>-<n>) or LWS all start "<name>-".
_V: Final = 'namespace=~"$namespace", model_name=~"$model", pod=~"$target-.*"'


def _fleet_variables(b: gd.Dashboard) -> gd.Dashboard:
    # $target shows "ns/Kind/name" but its value is the workload name (named capture groups),
    # which is what the pod names start with.
    return (
        b.with_variable(
            query_variable(
                "namespace",
                "Namespace",
                "label_values(vllm:num_requests_running, namespace)",
                multi=False,
            ).current(gm.VariableOption(selected=True, text="", value=""))
        )
        .with_variable(target_variable(regex="/^(?<text>[^/]+/[^/]+/(?<value>[^/]+))$/"))
        .with_variable(model_variable())
    )


def _hist(name: str, old: str | None, sel: str) -> str:
    """``rate`` of a histogram's buckets, falling back to vLLM's older metric name."""
    new = f"rate({name}_bucket{{{sel}}}[{RATE_INTERVAL}])"
    # "or" keeps the new name's series where a vLLM exports both during a deprecation.
    return f"({new} or rate({old}_bucket{{{sel}}}[{RATE_INTERVAL}]))" if old else new


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
        base_dashboard(
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
            timeseries(
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
        timeseries(
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
        timeseries(
            "Token throughput by model",
            "Prompt (prefill) and generated tokens per second.",
            [
                (
                    "sum by (model_name) "
                    f"(rate(vllm:prompt_tokens_total{{{_V}}}[{RATE_INTERVAL}]))",
                    "prompt {{model_name}}",
                ),
                (
                    "sum by (model_name) "
                    f"(rate(vllm:generation_tokens_total{{{_V}}}[{RATE_INTERVAL}]))",
                    "generation {{model_name}}",
                ),
            ],
            unit="short",
            width=8,
        )
    )
    b = b.with_panel(
        timeseries(
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
        timeseries(
            "Queue depth per pod",
            "vllm:num_requests_waiting summed over the pod's engines.",
            [(f"sum by (pod) (vllm:num_requests_waiting{{{_V}}})", "{{pod}}")],
            width=8,
        )
    )
    b = b.with_panel(
        timeseries(
            "Running requests per pod",
            "vllm:num_requests_running summed over the pod's engines.",
            [(f"sum by (pod) (vllm:num_requests_running{{{_V}}})", "{{pod}}")],
            width=8,
        )
    )
    b = b.with_panel(
        timeseries(
            "KV-cache usage per pod",
            "vllm:kv_cache_usage_perc (or gpu_cache_usage_perc), max over the pod's engines.",
            [(f"max by (pod) ({_KV})", "{{pod}}")],
            unit="percentunit",
            width=8,
        )
    )
    for title, name, old in _LAT:
        b = b.with_panel(
            timeseries(
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
        timeseries(
            "Generated tokens per second per pod",
            "rate of vllm:generation_tokens_total.",
            [
                (
                    f"sum by (pod) (rate(vllm:generation_tokens_total{{{_V}}}[{RATE_INTERVAL}]))",
                    "{{pod}}",
                )
            ],
            width=12,
        )
    )
    b = b.with_panel(
        timeseries(
            "Preemptions per pod",
            "Requests preempted for lack of KV blocks, per second (vllm:num_preemptions_total).",
            [
                (
                    f"sum by (pod) (rate(vllm:num_preemptions_total{{{_V}}}[{RATE_INTERVAL}]))",
                    "{{pod}}",
                )
            ],
            unit="ops",
            width=12,
        )
    )
    return finish(b)
