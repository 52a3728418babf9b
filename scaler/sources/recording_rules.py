"""The recording rules of ``deploy/rules`` (pure): their names and expressions, as the files
list them (tests pin the shipped files to these).

Per latency histogram of the registry (:func:`histogram_recording_rules`): its bucket rates per
pod group, its histogram series per namespace and bound, and per namespace the bounds not every
histogram has (the controller reads a namespace's recorded buckets only while it is 0). For the
throughput: each pod's rates of vLLM's three counters and, last, their timestamp per namespace
and counter (:func:`recording_rules`). A histogram's rules go in the file its spec names
(:attr:`~scaler.config.signal_specs.HistogramQuery.rules`): TTFT's in the main file every
install loads (:data:`MAIN_RULES`), ITL's, off by default, in a file of their own.
"""

from __future__ import annotations

from scaler.config.signal_specs import HistogramQuery, SignalName, histogram_specs
from scaler.sources.promql_parts import (
    OPTIONAL_THROUGHPUT_METRICS,
    POD_GROUP_LABEL,
    POD_GROUP_REGEX,
    RECORDED_LABEL,
    THROUGHPUT_METRICS,
    balanced_or,
    histogram_query,
    histogram_rates,
    rule_duration,
    tag,
)

__all__ = [
    "MAIN_RULES",
    "histogram_recording_rules",
    "histogram_rule_expr",
    "recorded_freshness_metric",
    "recorded_histogram_metric",
    "recorded_mixed_bounds_metric",
    "recorded_rate_metric",
    "recorded_series_count_metric",
    "recorded_ttft_metric",
    "recording_rule_expr",
    "recording_rules",
]


#: The rules file every install loads (``deploy/rules``), and the chart embeds.
MAIN_RULES = "vllm-scaler.rules.yaml"


def _rule_name(metric: str) -> str:
    """A vLLM metric's name as a recording rule's middle part (``vllm_..._seconds``)."""
    return metric.replace(":", "_")


def recorded_histogram_metric(histogram: HistogramQuery, rate_window_seconds: float) -> str:
    """Name of the recording rule that holds a latency histogram's per-group bucket rates over
    the window: ``namespace_scaler_pod_group_le:vllm_time_to_first_token_seconds_bucket:rate1m``
    for TTFT and 60 s (named after the histogram's current name, whichever name each series
    was read under; ``deploy/rules`` ships the 1m ones)."""
    return (
        f"namespace_{POD_GROUP_LABEL}_le:{_rule_name(histogram.metrics[0])}_bucket:"
        f"rate{rule_duration(rate_window_seconds)}"
    )


def recorded_ttft_metric(rate_window_seconds: float) -> str:
    """:func:`recorded_histogram_metric` of TTFT."""
    return recorded_histogram_metric(histogram_query(SignalName.TTFT_P95), rate_window_seconds)


def histogram_rule_expr(histogram: HistogramQuery, rate_window_seconds: float) -> str:
    """The expression of :func:`recorded_histogram_metric`'s rule (a test pins the shipped
    file): the bucket rates summed per namespace, pod group and ``le``."""
    window = rule_duration(rate_window_seconds)
    rates = histogram_rates(
        histogram, "_bucket", 'namespace!="",pod!=""', window, on="namespace, pod, le"
    )
    return (
        f"sum by (namespace, {POD_GROUP_LABEL}, le) (label_replace({rates}, "
        f'"{POD_GROUP_LABEL}", "$1", "pod", "{POD_GROUP_REGEX}"))'
    )


def recording_rule_expr(rate_window_seconds: float) -> str:
    """:func:`histogram_rule_expr` of TTFT."""
    return histogram_rule_expr(histogram_query(SignalName.TTFT_P95), rate_window_seconds)


def recorded_series_count_metric(histogram: HistogramQuery, rate_window_seconds: float) -> str:
    """Name of the recording rule that counts, per namespace and ``le``, the histogram series
    with a rate over the window that have that bound:
    ``namespace_le:vllm_time_to_first_token_seconds_bucket:count_rate1m`` for TTFT and 60 s.
    Every histogram has ``+Inf``; a bound counted fewer times is one some pods lack."""
    window = rule_duration(rate_window_seconds)
    return f"namespace_le:{_rule_name(histogram.metrics[0])}_bucket:count_rate{window}"


def recorded_mixed_bounds_metric(histogram: HistogramQuery, rate_window_seconds: float) -> str:
    """Name of the recording rule that holds, per namespace, how many bucket bounds not every
    histogram series has (:func:`recorded_series_count_metric`): 0 while the namespace's pods
    share one bucket layout, more during a rollout across a bucket change or with two vLLM
    versions: ``namespace:vllm_time_to_first_token_seconds_bucket:mixed_bounds_rate1m``. The
    controller reads a namespace's recorded buckets only while it is 0."""
    window = rule_duration(rate_window_seconds)
    return f"namespace:{_rule_name(histogram.metrics[0])}_bucket:mixed_bounds_rate{window}"


def histogram_recording_rules(
    histogram: HistogramQuery, rate_window_seconds: float
) -> list[dict[str, str]]:
    """The recording rules of one latency histogram, as the rules file lists them (a test
    pins the shipped files): its bucket rates per pod group
    (:func:`recorded_histogram_metric`), the histogram series per namespace and bound
    (:func:`recorded_series_count_metric`) and, from them, the bounds per namespace that not
    every histogram has (:func:`recorded_mixed_bounds_metric`). The count selects the bucket
    series again, but aggregates only per namespace (no ``label_replace``)."""
    window = rule_duration(rate_window_seconds)
    rates = histogram_rates(
        histogram, "_bucket", 'namespace!="",pod!=""', window, on="namespace, pod, le"
    )
    counted = recorded_series_count_metric(histogram, rate_window_seconds)
    uneven = (
        f"count by (namespace) ({counted} != on (namespace) group_left () "
        f'{counted}{{le="+Inf"}}) or 0 * count by (namespace) ({counted}{{le="+Inf"}})'
    )
    return [
        {
            "record": recorded_histogram_metric(histogram, rate_window_seconds),
            "expr": histogram_rule_expr(histogram, rate_window_seconds),
        },
        {"record": counted, "expr": f"count by (namespace, le) ({rates})"},
        {"record": recorded_mixed_bounds_metric(histogram, rate_window_seconds), "expr": uneven},
    ]


def recorded_rate_metric(counter: str, rate_window_seconds: float) -> str:
    """Name of the recording rule that holds each pod's rate of vLLM counter ``counter``
    over the window, summed over engines: ``namespace_pod:vllm_generation_tokens:rate1m`` for
    ``vllm:generation_tokens_total`` and 60 s (Prometheus' naming: level:metric:operations,
    ``_total`` dropped once the rate is taken)."""
    name = counter.replace(":", "_").removesuffix("_total")
    return f"namespace_pod:{name}:rate{rule_duration(rate_window_seconds)}"


def _recorded_rate_expr(counter: str, rate_window_seconds: float) -> str:
    return (
        f'sum by (namespace, pod) (rate({counter}{{namespace!="",pod!=""}}'
        f"[{rule_duration(rate_window_seconds)}]))"
    )


def recorded_freshness_metric(rate_window_seconds: float) -> str:
    """Name of the recording rule that keeps, per namespace and throughput counter (label
    ``scaler_recorded``), the timestamp of the oldest of that namespace's recorded per-pod
    rates (:func:`recorded_rate_metric`), seconds since the epoch:
    ``namespace_scaler_recorded:vllm_rate1m_timestamp_seconds:min`` for 60 s.

    The controller reads ``time() - <it>`` as the recording's age: one series per namespace
    and counter instead of every recorded rate. The value is the recorded rates' own
    timestamp, so a stalled or failing rule group shows as a growing age; a namespace or
    counter without recorded rates has no series (the controller then reads raw rates)."""
    window = rule_duration(rate_window_seconds)
    return f"namespace_{RECORDED_LABEL}:vllm_rate{window}_timestamp_seconds:min"


def _recorded_freshness_expr(rate_window_seconds: float) -> str:
    # min per namespace first, then tagged: the tags and the ``or`` handle 150 series instead
    # of 24,000 (half the rule's cost at 8,000 pods)
    stamps = [
        tag(
            f"min by (namespace) (timestamp({recorded_rate_metric(c, rate_window_seconds)}))",
            RECORDED_LABEL,
            c,
        )
        for c in THROUGHPUT_METRICS
    ]
    return balanced_or(stamps)


def recording_rules(rate_window_seconds: float) -> list[dict[str, str]]:
    """The recording rules of ``deploy/rules/vllm-scaler.rules.yaml`` for the window, as the
    rules file lists them (``record`` and ``expr``; a test pins the shipped file): the
    buckets per pod group of every latency histogram whose spec names that file
    (:func:`histogram_recording_rules`: TTFT), each pod's rates of the throughput counters
    (:func:`recorded_rate_metric`, :data:`THROUGHPUT_METRICS` and the optional
    :data:`OPTIONAL_THROUGHPUT_METRICS`: the prefix-cache hits the demand leaves out, the
    phase sums the price fit reads) and, last (rules of a group
    run in order and see what the earlier ones wrote), their timestamp per namespace and
    counter (:func:`recorded_freshness_metric`). A histogram whose spec names another file
    has its rules there (:func:`histogram_recording_rules`)."""
    rules = [
        rule
        for s in histogram_specs()
        if s.histogram is not None and s.histogram.rules == MAIN_RULES
        for rule in histogram_recording_rules(s.histogram, rate_window_seconds)
    ]
    for counter in (*THROUGHPUT_METRICS, *OPTIONAL_THROUGHPUT_METRICS):
        rules.append(
            {
                "record": recorded_rate_metric(counter, rate_window_seconds),
                "expr": _recorded_rate_expr(counter, rate_window_seconds),
            }
        )
    rules.append(
        {
            "record": recorded_freshness_metric(rate_window_seconds),
            "expr": _recorded_freshness_expr(rate_window_seconds),
        }
    )
    return rules
