"""The pieces every query and recording rule of vllm-scaler is built of (pure): quoting and
durations, the labels vllm-scaler tags series with, the balanced ``or``, the pod group, the
histogram tags and vLLM's counter names, and the rates of a latency histogram under its names.

:mod:`scaler.sources.promql` (the queries) and :mod:`scaler.sources.recording_rules` (the rules
of ``deploy/rules``) build on it; :mod:`scaler.sources.promql` re-exports every name.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum

from scaler.config.signal_specs import HistogramQuery, SignalName

__all__ = [
    "ASLEEP_SUFFIX",
    "COST_METRICS",
    "DECODE_TIME_METRIC",
    "GENERATION_TOKENS_METRIC",
    "HISTOGRAM_LABEL",
    "LAYOUT_LABEL",
    "LAYOUT_SERIES",
    "METRIC_LABEL",
    "NAME_LABEL",
    "NATIVE_PART_LABEL",
    "OPTIONAL_THROUGHPUT_METRICS",
    "POD_GROUP_LABEL",
    "POD_GROUP_REGEX",
    "PREFILL_TIME_METRIC",
    "PREFIX_CACHE_HITS_METRICS",
    "PROMPT_TOKENS_METRIC",
    "RECORDED_LABEL",
    "REQUESTS_METRIC",
    "RUNNING_METRIC",
    "SAMPLE_AGE_SUFFIX",
    "SELECTOR_LABEL",
    "SLEEP_STATE_METRIC",
    "TARGET_LABEL",
    "THROUGHPUT_METRICS",
    "HistogramKind",
    "NativePart",
    "asleep_group",
    "balanced_or",
    "histogram_name_rates",
    "histogram_query",
    "histogram_rates",
    "histogram_tag",
    "label_value",
    "one_copy",
    "parse_histogram_tag",
    "per_pod_expr",
    "pod_group",
    "preferred",
    "promql_duration",
    "promql_string",
    "replacement",
    "rule_duration",
    "sample_age_group",
    "tag",
]


#: Label that tags per-pod series with their selector group ("s0", "s1", ...).
SELECTOR_LABEL = "scaler_selector"

#: Label that tags target-level (TTFT) series with the target key.
TARGET_LABEL = "scaler_target"

#: Label of the TTFT request-rate series: which representation the pod's histogram has.
HISTOGRAM_LABEL = "scaler_histogram"

#: Label of a native target's TTFT series: which float it carries (:class:`NativePart`).
NATIVE_PART_LABEL = "scaler_native"

#: Label of a histogram's second-round series that count the histogram series with each bound
#: (value :data:`LAYOUT_SERIES`), beside the summed rates.
LAYOUT_LABEL = "scaler_layout"

LAYOUT_SERIES = "series"

#: Label of a histogram's second-round series read under an older name of the histogram: the
#: name's index (the current name's series have none).
NAME_LABEL = "scaler_name"

#: Label of the recording rules' per-group bucket rates: the pod name up to its last dash.
POD_GROUP_LABEL = "scaler_pod_group"

#: Label that tags each throughput series with the counter it is the rate of.
METRIC_LABEL = "scaler_metric"

#: Label of the ages of the recorded per-pod throughput rates in the ``running`` answer: the
#: counter the age is of (one series per namespace and counter, no ``pod`` label).
RECORDED_LABEL = "scaler_recorded"

RUNNING_METRIC = "vllm:num_requests_running"

#: Suffix of a selector group's tag on its pods' sample ages in the ``running`` answer.
SAMPLE_AGE_SUFFIX = "@age"

#: Suffix of a selector group's tag on its sleeping pods in the ``running`` answer.
ASLEEP_SUFFIX = "@asleep"

#: vLLM's sleep-mode gauge: ``sleep_state="awake"`` is 1 while the engine serves, 0 asleep.
SLEEP_STATE_METRIC = "vllm:engine_sleep_state"

#: RE2 of :func:`pod_group`, for ``label_replace`` (anchored by Prometheus).
POD_GROUP_REGEX = "(.+)-[^-]*"

#: vLLM's counters of finished requests, prefill tokens and generated tokens (all versions).
REQUESTS_METRIC = "vllm:request_success_total"

PROMPT_TOKENS_METRIC = "vllm:prompt_tokens_total"

GENERATION_TOKENS_METRIC = "vllm:generation_tokens_total"

#: vLLM's prefix-cache hit counters, prompt tokens found in the cache (not computed): the
#: current name first, then the older ``gpu_`` one (vLLM before 0.10). Optional: a pod without
#: them has every prompt token counted as computed.
PREFIX_CACHE_HITS_METRICS: tuple[str, ...] = (
    "vllm:prefix_cache_hits_total",
    "vllm:gpu_prefix_cache_hits_total",
)

#: vLLM's per-request phase histograms' sums, seconds: the prefill phase (first scheduling to
#: first token) and the decode phase (first to last token). Optional: the capacity signal's
#: online price fit (:mod:`scaler.core.cost_fit`) reads their rates; a pod without them
#: leaves the profile's prices as they are.
PREFILL_TIME_METRIC = "vllm:request_prefill_time_seconds_sum"
DECODE_TIME_METRIC = "vllm:request_decode_time_seconds_sum"
COST_METRICS: tuple[str, ...] = (PREFILL_TIME_METRIC, DECODE_TIME_METRIC)

#: The counters whose per-pod rates the throughput query reads (each series' ``scaler_metric``).
THROUGHPUT_METRICS: tuple[str, ...] = (
    REQUESTS_METRIC,
    PROMPT_TOKENS_METRIC,
    GENERATION_TOKENS_METRIC,
)


#: The optional counters the throughput query reads beside :data:`THROUGHPUT_METRICS`.
OPTIONAL_THROUGHPUT_METRICS: tuple[str, ...] = (*PREFIX_CACHE_HITS_METRICS, *COST_METRICS)


def histogram_query(name: SignalName) -> HistogramQuery:
    """How a latency signal's histogram is read (its spec's).

    Raises:
        ValueError: the signal is not read from a histogram.
    """
    histogram = name.spec.histogram
    if histogram is None:
        raise ValueError(f"{name} is not read from a histogram")
    return histogram


class HistogramKind(StrEnum):
    """How Prometheus stores a pod's latency histogram (the ``scaler_histogram`` tag)."""

    CLASSIC = "classic"  # ..._bucket{le}, ..._count, ..._sum series
    NATIVE = "native"  # one native histogram series under the metric's own name
    RECORDED = "recorded"  # the recording rules' per-group bucket rates (their ages)


def histogram_tag(kind: HistogramKind, index: int = 0) -> str:
    """The ``scaler_histogram`` tag of a pod's observation rate read under the histogram's
    ``index``-th name (:attr:`~scaler.config.signal_specs.HistogramQuery.metrics`): the kind
    for the current name (``classic``), ``classic:1`` for the first older one."""
    return str(kind) if index == 0 else f"{kind}:{index}"


def parse_histogram_tag(tag: str) -> tuple[HistogramKind, int] | None:
    """The kind and name index of a ``scaler_histogram`` tag (:func:`histogram_tag`), or
    None for a tag that is neither."""
    kind, _, index = tag.partition(":")
    try:
        return HistogramKind(kind), int(index) if index else 0
    except ValueError:
        return None


class NativePart(StrEnum):
    """The floats a native target's TTFT query returns (the ``scaler_native`` tag)."""

    QUANTILE = "quantile"  # histogram_quantile(q, H)
    COUNT = "count"  # histogram_count(H): first tokens per second
    FRACTION = "fraction"  # histogram_fraction(0, quantile, H): below q when clamped


def label_value(value: str) -> str:
    """Escape ``value`` for the inside of a PromQL double-quoted string (a label matcher's
    value): backslash, double quote and newline."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def promql_string(value: str) -> str:
    """Quote ``value`` as a PromQL double-quoted string literal."""
    return f'"{label_value(value)}"'


def pod_group(pod: str) -> str:
    """The pod's name up to its last dash: the ReplicaSet of a Deployment's pod
    (``vllm-5d8f7c9b4-x2k9p`` -> ``vllm-5d8f7c9b4``), the StatefulSet of an ordinal pod
    (``vllm-70b-0`` -> ``vllm-70b``); '' without a dash.

    Only a pre-aggregation key of the recording rules (:data:`POD_GROUP_REGEX` computes the
    same in PromQL): a group is read for a target only when every pod in it is one of the
    target's own, so a name that Kubernetes shortened or another workload sharing a prefix
    never attributes a series to the wrong target.
    """
    return pod.rpartition("-")[0]


def sample_age_group(gid: str) -> str:
    """The ``scaler_selector`` tag of selector group ``gid``'s per-pod sample ages in the
    ``running`` answer (a group of its own, so no signal reads them as values)."""
    return f"{gid}{SAMPLE_AGE_SUFFIX}"


def asleep_group(gid: str) -> str:
    """The ``scaler_selector`` tag of selector group ``gid``'s pods whose vLLM engine sleeps
    (sleep mode) in the ``running`` answer."""
    return f"{gid}{ASLEEP_SUFFIX}"


def rule_duration(seconds: float) -> str:
    """A window as the recording rules' names spell it: ``1m``, ``90s``, ``4500ms``."""
    ms = max(1, round(seconds * 1000))
    if ms % 60_000 == 0:
        return f"{ms // 60_000}m"
    return f"{ms // 1000}s" if ms % 1000 == 0 else f"{ms}ms"


def promql_duration(seconds: float) -> str:
    """Format seconds as a PromQL duration (integers only: ``60s``, ``4500ms``).

    Raises:
        ValueError: ``seconds`` is not positive.
    """
    if not seconds > 0:
        raise ValueError(f"duration must be positive, got {seconds!r}")
    ms = max(1, round(seconds * 1000))
    return f"{ms // 1000}s" if ms % 1000 == 0 else f"{ms}ms"


def replacement(value: str) -> str:
    # label_replace expands $1-style references in the replacement: escape literal '$'.
    return promql_string(value.replace("$", "$$"))


def tag(expr: str, label: str, value: str) -> str:
    return f'label_replace({expr}, "{label}", {replacement(value)}, "", "")'


def balanced_or(parts: Sequence[str]) -> str:
    """``a or b or ...`` as a balanced tree: Prometheus' ``or`` hashes its whole left side, so
    a left-deep chain of n sub-expressions costs n^2 and a balanced one n log n."""
    if len(parts) <= 2:
        return " or ".join(parts)
    mid = len(parts) // 2
    halves = [parts[:mid], parts[mid:]]
    return " or ".join(balanced_or(h) if len(h) == 1 else f"({balanced_or(h)})" for h in halves)


def per_pod_expr(metric_selector: str, agg: str, by: str) -> str:
    return f"{agg} by ({by}) ({metric_selector})"


def one_copy(expr: str, replica_labels: Sequence[str]) -> str:
    """``expr`` (floats) with the copies of each series that differ only in
    ``replica_labels`` read once: ``max without (prometheus_replica, ...) (expr)``. Behind an
    HA Prometheus pair without deduplication every series comes once per replica, and a
    ``sum by (namespace, pod)`` over engines would count each twice; series that differ in
    any other label (``engine``, ``instance``) stay apart. Without such labels every series
    is its own group: the value is unchanged."""
    if not replica_labels:
        return expr
    return f"max without ({', '.join(replica_labels)}) ({expr})"


def preferred(series: Sequence[str], on: str) -> str:
    """The series of each label set under the first expression that has it: ``a or on (on)
    b`` keeps ``b``'s series only where ``a`` has none with the same ``on`` labels (a pod that
    exports a histogram under both its names during a deprecation is read once)."""
    return f" or on ({on}) ".join(series)


def histogram_rates(
    histogram: HistogramQuery, suffix: str, sel: str, window: str, *, on: str
) -> str:
    """``rate(<name><suffix>{SEL}[W])`` of the histogram, each series under its current name
    if it has one, else under the first older name it has (:func:`_preferred` on ``on``):
    ``rate(vllm:time_to_first_token_seconds_bucket{SEL}[W])`` for a histogram of one name."""
    rates = [f"rate({m}{suffix}{{{sel}}}[{window}])" for m in histogram.metrics]
    joined = preferred(rates, on)
    return joined if len(rates) == 1 else f"({joined})"


def histogram_name_rates(
    histogram: HistogramQuery, index: int, suffix: str, sel: str, window: str, *, exclusive: bool
) -> str:
    """``rate(<name><suffix>{SEL}[W])`` of the histogram under its ``index``-th name only; for
    an older name not ``exclusive`` (the selector may pick pods that export a newer name too)
    ``unless on (namespace, pod, le)`` the newer names' series. No binary operator is applied
    to an exclusive part: Prometheus gives a binary operation's series in an arbitrary order,
    and a sum over them then differs in its last bits from one evaluation to the next."""
    rate = f"rate({histogram.metrics[index]}{suffix}{{{sel}}}[{window}])"
    if exclusive or index == 0:
        return rate
    newer = [f"rate({m}{suffix}{{{sel}}}[{window}])" for m in histogram.metrics[:index]]
    return f"({rate} unless on (namespace, pod, le) {preferred(newer, 'namespace, pod, le')})"
