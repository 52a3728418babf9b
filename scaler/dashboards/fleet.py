"""The "vLLM fleet" dashboard (``vllm-fleet.json``), from vLLM's own metrics with the older
names as fallbacks.

Per model, what vLLM's own example dashboard shows: P50/P90/P95/P99 and mean of TTFT,
inter-token and end-to-end latency (the TTFT and ITL targets of vllm-scaler's policy drawn as
thresholds), queue time, prefill and decode time, scheduler state, token throughput, KV-cache
usage, finished requests by reason, request errors, and heatmaps of prompt and generation
length; beside them what it lacks: the prefix-cache hit rate, and per pod queue depth, running
requests, KV-cache usage, the p95 latencies, generated tokens and preemptions.
"""

from __future__ import annotations

from typing import Any, Final

from grafana_foundation_sdk.builders import dashboard as gd
from grafana_foundation_sdk.builders import timeseries as gts
from grafana_foundation_sdk.models import dashboard as gm

from scaler.config.signal_specs import histogram_specs
from scaler.dashboards.panels import (
    RATE_INTERVAL,
    WORKLOAD_REGEX,
    base_dashboard,
    finish,
    heatmap,
    model_variable,
    query_variable,
    target_variable,
    timeseries,
    with_threshold_from,
)

FLEET_UID: Final = "vllm-scaler-vllm-fleet"

# vLLM series: the namespace and pod labels come from Kubernetes service discovery. On the fleet
# dashboard $target's value is the workload name (see _fleet_variables). "<name>-.*" would also
# match the pods of another workload whose name starts with it (target vllm, pods of
# vllm-llama-8b), so the pod name must have one of the shapes Kubernetes gives a workload's
# pods: a Deployment's <name>-<pod-template-hash>-<suffix> (both in the alphabet of Kubernetes'
# rand.SafeEncodeString: no vowels, no 0, 1 or 3, so no word of another workload's name), a
# StatefulSet's <name>-<ordinal>, a LeaderWorkerSet's <name>-<group>[-<worker>].
_SAFE: Final = "[bcdfghjklmnpqrstvwxz2456789]"
POD_OF_TARGET: Final = f"$target-{_SAFE}+-{_SAFE}{{5}}|$target-[0-9]+(-[0-9]+)?"
_V: Final = f'namespace=~"$namespace", model_name=~"$model", pod=~"{POD_OF_TARGET}"'


def _target_of(signal: str) -> str:
    """The target vllm-scaler's policy sets for the selected workloads (its signal target)."""
    return f'max(vllm_scaler_signal_target{{signal="{signal}", target=~"$namespace/.+/$target"}})'


# Each latency signal's histogram (its current name), whose panel draws the signal's target.
_LATENCY_SPECS: Final = {
    s.histogram.metrics[0]: s for s in histogram_specs() if s.histogram is not None
}
QUANTILES: Final = (0.5, 0.9, 0.95, 0.99)


def _fleet_variables(b: gd.Dashboard) -> gd.Dashboard:
    # $target shows "ns/Kind/name" with its VLLMAutoscaler, but its value is the workload
    # name (named capture groups), which is what the pod names start with.
    return (
        b.with_variable(
            query_variable(
                "namespace",
                "Namespace",
                "label_values(vllm:num_requests_running, namespace)",
                multi=False,
            ).current(gm.VariableOption(selected=True, text="", value=""))
        )
        .with_variable(target_variable(regex=WORKLOAD_REGEX))
        .with_variable(model_variable())
    )


def _rate(name: str, old: str | None, suffix: str, sel: str = _V) -> str:
    """``rate`` of ``name + suffix``, falling back to vLLM's older metric name."""
    new = f"rate({name}{suffix}{{{sel}}}[{RATE_INTERVAL}])"
    # "or" keeps the new name's series where a vLLM exports both during a deprecation.
    return f"({new} or rate({old}{suffix}{{{sel}}}[{RATE_INTERVAL}]))" if old else new


def _quantile(q: float, name: str, old: str | None, by: str) -> str:
    return f"histogram_quantile({q}, sum by ({by}, le) ({_rate(name, old, '_bucket')}))"


def _mean(name: str, old: str | None, by: str) -> str:
    return (
        f"sum by ({by}) ({_rate(name, old, '_sum')}) / sum by ({by}) ({_rate(name, old, '_count')})"
    )


_TTFT: Final = "vllm:time_to_first_token_seconds"
_ITL_OLD: Final = "vllm:time_per_output_token_seconds"
_LAT: Final = (
    ("Time to first token", _TTFT, None),
    ("Inter-token latency", "vllm:inter_token_latency_seconds", _ITL_OLD),
    ("End-to-end request latency", "vllm:e2e_request_latency_seconds", None),
    ("Queue time", "vllm:request_queue_time_seconds", None),
)
_KV: Final = f"(vllm:kv_cache_usage_perc{{{_V}}} or vllm:gpu_cache_usage_perc{{{_V}}})"


def _with_signal_target(p: gts.Panel, name: str) -> gts.Panel:
    """A latency panel of a signal vllm-scaler scales on (TTFT, ITL) gets the policy's target
    as its threshold; others stay as they are."""
    spec = _LATENCY_SPECS.get(name)
    if spec is None:
        return p
    return with_threshold_from(p, _target_of(str(spec.name)), f"{spec.short} target")


def _target_note(name: str) -> str:
    spec = _LATENCY_SPECS.get(name)
    if spec is None:
        return ""
    return f" Dashed red: vllm-scaler's {spec.short} target for these workloads."


def _latency_by_model(title: str, name: str, old: str | None) -> gts.Panel:
    p = timeseries(
        f"{title} by model",
        f"P50, P90, P95 and P99 of {name} (histogram_quantile over the bucket rate) and its "
        "mean (rate of _sum over rate of _count)"
        + (f"; {old} on older vLLM." if old else ".")
        + _target_note(name),
        [
            *(
                (_quantile(q, name, old, "model_name"), f"P{round(q * 100)} {{{{model_name}}}}")
                for q in QUANTILES
            ),
            (_mean(name, old, "model_name"), "mean {{model_name}}"),
        ],
        unit="s",
        width=8,
    )
    return _with_signal_target(p, name)


def _per_model(b: gd.Dashboard) -> gd.Dashboard:
    b = b.with_row(gd.Row("Per model"))
    for title, name, old in _LAT:
        b = b.with_panel(_latency_by_model(title, name, old))
    phases = ("vllm:request_prefill_time_seconds", "vllm:request_decode_time_seconds")
    b = b.with_panel(
        timeseries(
            "Prefill and decode time by model",
            "Per finished request: time from its first scheduling to its first token (prefill) "
            "and from its first to its last token (decode); mean and P95 "
            "(vllm:request_prefill_time_seconds, vllm:request_decode_time_seconds).",
            [
                (expr, f"{stat} {phase} {{{{model_name}}}}")
                for name, phase in zip(phases, ("prefill", "decode"), strict=True)
                for stat, expr in (
                    ("mean", _mean(name, None, "model_name")),
                    ("P95", _quantile(0.95, name, None, "model_name")),
                )
            ],
            unit="s",
            width=8,
        )
    )
    b = b.with_panel(
        timeseries(
            "Requests by model",
            "Scheduler state: waiting (queued) and running requests summed over the model's pods.",
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
                    f"sum by (model_name) ({_rate('vllm:prompt_tokens_total', None, '')})",
                    "prompt {{model_name}}",
                ),
                (
                    f"sum by (model_name) ({_rate('vllm:generation_tokens_total', None, '')})",
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
    b = b.with_panel(
        timeseries(
            "Prefix-cache hit rate by model",
            "Prompt tokens found in the prefix cache over tokens looked up "
            "(vllm:prefix_cache_hits_total / _queries_total, or the gpu_prefix_cache_ names on "
            "older vLLM). Gaps: nothing was looked up.",
            [
                (
                    "sum by (model_name) "
                    f"({_rate('vllm:prefix_cache_hits', 'vllm:gpu_prefix_cache_hits', '_total')})"
                    " / sum by (model_name) ("
                    + _rate("vllm:prefix_cache_queries", "vllm:gpu_prefix_cache_queries", "_total")
                    + ")",
                    "{{model_name}}",
                ),
            ],
            unit="percentunit",
            width=8,
        )
    )
    success = "vllm:request_success_total"
    b = b.with_panel(
        timeseries(
            "Finished requests by reason",
            "Requests per second by finished_reason: stop (end of sequence or a stop string), "
            "length (max_tokens or the context filled), abort, error, repetition.",
            [
                (
                    f"sum by (model_name, finished_reason) ({_rate(success, None, '')})",
                    "{{finished_reason}} {{model_name}}",
                )
            ],
            unit="reqps",
            width=8,
        )
    )
    errors = f'{_V}, finished_reason=~"abort|error"'
    b = b.with_panel(
        timeseries(
            "Request errors by model",
            "Requests per second that ended without a result: aborted (the client went away, or "
            "a pod removed before they finished) or failed in the engine. Requests vLLM's API "
            "server refuses before the engine (a prompt longer than the context) are not "
            "counted here.",
            [
                (
                    f"sum by (model_name, finished_reason) ({_rate(success, None, '', errors)})",
                    "{{finished_reason}} {{model_name}}",
                ),
            ],
            unit="reqps",
            width=8,
        )
    )
    b = b.with_row(gd.Row("Request lengths"))
    for kind, name in (("Prompt", "prompt"), ("Generation", "generation")):
        metric = f"vllm:request_{name}_tokens"
        b = b.with_panel(
            heatmap(
                f"{kind} length",
                f"Finished requests per second by {name} length in tokens ({metric}): one row "
                "per bucket, darker is fewer.",
                f"sum by (le) ({_rate(metric, None, '_bucket')})",
                y_label=f"{name} tokens",
            )
        )
    return b


def _per_pod(b: gd.Dashboard) -> gd.Dashboard:
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
    for title, name, old in _LAT[:3]:
        p = timeseries(
            f"{title} p95 per pod",
            f"95th percentile of {name}" + (f" (or {old})." if old else ".") + _target_note(name),
            [(_quantile(0.95, name, old, "pod"), "{{pod}}")],
            unit="s",
            width=8,
        )
        b = b.with_panel(_with_signal_target(p, name))
    b = b.with_panel(
        timeseries(
            "Generated tokens per second per pod",
            "rate of vllm:generation_tokens_total.",
            [(f"sum by (pod) ({_rate('vllm:generation_tokens_total', None, '')})", "{{pod}}")],
            width=12,
        )
    )
    return b.with_panel(
        timeseries(
            "Preemptions per pod",
            "Requests preempted for lack of KV blocks, per second (vllm:num_preemptions_total).",
            [(f"sum by (pod) ({_rate('vllm:num_preemptions_total', None, '')})", "{{pod}}")],
            unit="ops",
            width=12,
        )
    )


def fleet_dashboard() -> dict[str, Any]:
    """The "vLLM fleet" dashboard as Grafana JSON (a dict)."""
    b = _fleet_variables(
        base_dashboard(
            "vLLM fleet",
            FLEET_UID,
            "vLLM's own metrics per model and per pod; works with the new and the old metric "
            "names (kv_cache_usage_perc / gpu_cache_usage_perc, inter_token_latency_seconds / "
            "time_per_output_token_seconds, prefix_cache_* / gpu_prefix_cache_*).",
        )
    )
    return finish(_per_pod(_per_model(b)))
