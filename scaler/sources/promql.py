"""The PromQL vllm-scaler sends: a fixed set of instant queries covering every target at once.

One control cycle sends at most six instant queries (:class:`QueryKind`), whatever the number
of targets, two more while a target enables inter-token latency: the per-pod queries and, per
latency histogram of the registry (TTFT, ITL), one query built from their answers (the source
sends it, and the throughput query that the running answer shapes, with the others as the
previous cycle planned them, and again when planned otherwise:
:mod:`scaler.sources.prometheus.source`). The pieces they are built of are
:mod:`scaler.sources.promql_parts`; the recording rules they read,
:mod:`scaler.sources.recording_rules`.
Each query is the ``or`` of sub-expressions tagged with :func:`label_replace` so the
answer can be split back per selector group or per target, and the ``or`` is a balanced tree
(Prometheus' ``or`` hashes its whole left side, so a left-deep chain of n parts costs n^2).

- Per-pod queries (waiting, running, KV cache, TTFT request rate, throughput) are grouped by
  label selector: every target with the default selector is in one group selected by
  namespace alone, and targets with explicit ``prometheus_matchers`` group by distinct
  selector (:func:`target_selector`). Each series is tagged ``scaler_selector="s<i>"`` and
  keeps ``namespace`` and ``pod``: the source counts a series for a target only when its pod
  is one the Kubernetes API lists for that target (by exact name), never by a name pattern.
  Tagging (rather than merging with a plain ``or``) keeps a series of a pod picked by two
  selectors in both groups, so each target sees exactly what its own selector picks.
- The TTFT query (``ttft_buckets``) asks, per target that has requests, for the per-``le``
  rates of the TTFT histogram over exactly its pods (an alternation of their names, which
  Prometheus matches as a set), and the source computes the quantile itself
  (:mod:`scaler.sources.quantile`): the same number as ``histogram_quantile``, plus whether it
  is only a lower bound (the rank in the ``+Inf`` bucket). Where the recording rules of
  ``deploy/rules`` run, it reads their per-pod-group bucket rates instead, for the targets
  whose groups hold only their own pods (:func:`pod_group`).
- The throughput query is planned from the ``running`` answer: that answer also carries,
  per namespace of the default group and per counter, the age of the recording rules'
  per-pod throughput rates (``scaler_recorded``), read from the rules' own record of it
  (:func:`recorded_freshness_metric`: 150 series for 50 namespaces, rather than the 24,000
  recorded rates themselves), and the namespaces where all three are fresh are read from the
  recording (:func:`build_throughput_query`), the others raw.

Why these expressions:

- ``sum by (namespace, pod)`` of ``vllm:num_requests_waiting`` / ``vllm:num_requests_running``:
  vLLM V1 exports one series per engine (label ``engine``); data-parallel pods run several.
  The pod's queue is the sum over its engines.
- ``vllm:num_requests_running`` is not a scaling signal: it exists on every scraped vLLM pod,
  so it proves a pod is scraped. A signal with no series while running series exist is
  ``absent`` (configuration problem, e.g. a renamed metric) rather than ``empty`` (outage).
  The same query carries each pod's sample age, ``time() - timestamp(...)``: an instant
  query answers the newest sample within the lookback (5 minutes) as current, so values a
  remote-write backlog, a stalled agent or federation delays look fresh without it.
- KV cache: ``max by (namespace, pod, __name__)`` over ``{__name__=~"new|old"}``: one query
  reads both the new name (``vllm:kv_cache_usage_perc``, vLLM >= 0.9.2) and the old one
  (``vllm:gpu_cache_usage_perc``, removed in 0.12), keeping the name so the source prefers the
  new one per pod and reports which it found. Max over engines: each engine has its own cache
  and the fullest one is the one that preempts.
- TTFT request rate per pod, ``rate(..._count[W])`` of the classic histogram or
  ``histogram_count(rate(...[W]))`` of a native one (Prometheus stores a histogram one way or
  the other; the series are tagged ``scaler_histogram="classic|native"``): it tells which
  pods have a TTFT histogram and in which representation, and exactly 0 means idle (the
  quantile of an idle window is NaN, 0/0). The same query carries the ages of the
  recorded per-group buckets (``scaler_histogram="recorded"``), so the TTFT query knows which
  recorded groups are there and fresh. Bucket bounds are never hard-coded.
- Native histograms: Prometheus 2.42 drops the histogram of a ``label_replace``d sample, so a
  native target's TTFT query returns floats only: ``histogram_quantile``, ``histogram_count``
  and ``histogram_fraction(0, quantile)``, which is below the quantile exactly when the rank
  fell in a ``+Inf`` bucket (native histograms with custom buckets).
- Throughput: per pod, ``sum by (namespace, pod) (rate(C{SEL}[W]))`` of each of vLLM's
  counters ``vllm:request_success_total`` (finished requests, every ``finished_reason``),
  ``vllm:prompt_tokens_total`` and ``vllm:generation_tokens_total``, summed over engines, one
  series per counter: ``rate()`` drops the metric name, so each is tagged
  ``scaler_metric="<counter>"`` (not ``__name__`` again: ``or`` matches label sets without
  the name, and would keep only the first counter of each pod). Zero token throughput tells
  a frozen gauge from a busy pod (:mod:`scaler.sources.prometheus.stalls`); the same per-pod
  rates are a target's demand.

- Behind an HA Prometheus pair without deduplication each series comes once per replica,
  differing only in a replica label (``Policy.replica_labels``): every per-pod sum reads one
  copy first, ``max without (prometheus_replica, ...)`` (:func:`one_copy`); a per-pod max is
  one copy already, and the buckets' per-``le`` sums give the same quantile (and the same
  bounds every series has) whatever the number of equal copies.

All expressions were checked against Prometheus 2.42 (``tests/sources/test_prometheus_real.py``).
Queries get long with many targets: send them as POST form bodies.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

from scaler.config.policy import DEFAULT_REPLICA_LABELS, TargetPolicy
from scaler.config.signal_specs import (
    SPECS,
    GaugeQuery,
    HistogramQuery,
    SignalName,
    SignalSpec,
    histogram_specs,
)

# The pieces and the recording rules the queries are built of, re-exported (``__all__``):
# every PromQL name of vllm-scaler can be imported from here.
from scaler.sources.promql_parts import (
    ASLEEP_SUFFIX,
    COST_METRICS,
    DECODE_TIME_METRIC,
    GENERATION_TOKENS_METRIC,
    HISTOGRAM_LABEL,
    LAYOUT_LABEL,
    LAYOUT_SERIES,
    METRIC_LABEL,
    NAME_LABEL,
    NATIVE_PART_LABEL,
    OPTIONAL_THROUGHPUT_METRICS,
    POD_GROUP_LABEL,
    POD_GROUP_REGEX,
    PREFILL_TIME_METRIC,
    PREFIX_CACHE_HITS_METRICS,
    PROMPT_TOKENS_METRIC,
    RECORDED_LABEL,
    REQUESTS_METRIC,
    RUNNING_METRIC,
    SAMPLE_AGE_SUFFIX,
    SELECTOR_LABEL,
    SLEEP_STATE_METRIC,
    TARGET_LABEL,
    THROUGHPUT_METRICS,
    HistogramKind,
    NativePart,
    asleep_group,
    balanced_or,
    histogram_name_rates,
    histogram_query,
    histogram_rates,
    histogram_tag,
    label_value,
    one_copy,
    parse_histogram_tag,
    per_pod_expr,
    pod_group,
    preferred,
    promql_duration,
    promql_string,
    replacement,
    rule_duration,
    sample_age_group,
    tag,
)
from scaler.sources.promql_parts import balanced_or as _or
from scaler.sources.promql_parts import per_pod_expr as _per_pod_expr
from scaler.sources.promql_parts import preferred as _preferred
from scaler.sources.promql_parts import tag as _tag
from scaler.sources.recording_rules import (
    MAIN_RULES,
    histogram_recording_rules,
    histogram_rule_expr,
    recorded_freshness_metric,
    recorded_histogram_metric,
    recorded_mixed_bounds_metric,
    recorded_rate_metric,
    recorded_series_count_metric,
    recorded_ttft_metric,
    recording_rule_expr,
    recording_rules,
)

__all__ = [
    "ASLEEP_SUFFIX",
    "COST_METRICS",
    "DECODE_TIME_METRIC",
    "GENERATION_TOKENS_METRIC",
    "HISTOGRAM_LABEL",
    "KV_METRICS",
    "LAYOUT_LABEL",
    "LAYOUT_SERIES",
    "MAIN_RULES",
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
    "SIGNAL_QUERY",
    "SLEEP_STATE_METRIC",
    "TARGET_LABEL",
    "THROUGHPUT_METRICS",
    "TTFT_BUCKET_METRIC",
    "TTFT_COUNT_METRIC",
    "TTFT_HISTOGRAM",
    "WAITING_METRIC",
    "HistogramKind",
    "HistogramPart",
    "NativePart",
    "QueryKind",
    "QueryPlan",
    "TtftPart",
    "asleep_group",
    "balanced_or",
    "build_histogram_query",
    "build_query_plan",
    "build_throughput_query",
    "build_ttft_query",
    "gauge_metrics",
    "histogram_name_rates",
    "histogram_query",
    "histogram_rates",
    "histogram_recording_rules",
    "histogram_rule_expr",
    "histogram_tag",
    "label_value",
    "one_copy",
    "parse_histogram_tag",
    "per_pod_expr",
    "pod_group",
    "pods_selector",
    "preferred",
    "promql_duration",
    "promql_string",
    "query_selector",
    "recorded_freshness_metric",
    "recorded_histogram_metric",
    "recorded_mixed_bounds_metric",
    "recorded_rate_metric",
    "recorded_series_count_metric",
    "recorded_ttft_metric",
    "recording_rule_expr",
    "recording_rules",
    "replacement",
    "rule_duration",
    "sample_age_group",
    "tag",
    "target_selector",
]


def gauge_metrics(name: SignalName) -> tuple[str, ...]:
    """The vLLM names of a gauge signal's metric, preferred first (its spec's).

    Raises:
        ValueError: the signal is no per-pod gauge.
    """
    gauge = name.spec.gauge
    if gauge is None:
        raise ValueError(f"{name} is no gauge signal")
    return gauge.metrics


WAITING_METRIC = gauge_metrics(SignalName.QUEUE_DEPTH)[0]

#: KV-cache usage gauges, preferred first (0.9.2 renamed the second to the first).
KV_METRICS: tuple[str, ...] = gauge_metrics(SignalName.KV_CACHE_USAGE)

#: The TTFT histogram: a native histogram under this name, a classic one as the three below.
TTFT_HISTOGRAM = histogram_query(SignalName.TTFT_P95).metrics[0]

TTFT_BUCKET_METRIC = f"{TTFT_HISTOGRAM}_bucket"

TTFT_COUNT_METRIC = f"{TTFT_HISTOGRAM}_count"


class QueryKind(StrEnum):
    """The instant queries of one control cycle (at most one of each per cycle)."""

    WAITING = "waiting"
    RUNNING = "running"
    KV_CACHE = "kv_cache"
    TTFT_RATE = "ttft_rate"
    TTFT_BUCKETS = "ttft_buckets"
    ITL_RATE = "itl_rate"
    ITL_BUCKETS = "itl_buckets"
    THROUGHPUT = "throughput"

    @property
    def per_pod(self) -> bool:
        """True for queries whose series are per (namespace, pod) and tagged by selector
        (waiting, running, KV cache, the histograms' observation rates, throughput); they are
        sent first, together. A histogram's buckets query (``ttft_buckets``) is built from
        their answers."""
        return self.value not in _BUCKET_QUERIES

    @property
    def histogram(self) -> SignalName | None:
        """The latency signal whose histogram the query reads (either round), if any."""
        return _HISTOGRAM_OF.get(self.value)


#: The second rounds' query kinds (the latency histograms' buckets), by name.
_BUCKET_QUERIES = frozenset(s.histogram.buckets_query for s in SPECS if s.histogram is not None)

#: Query kind name -> the latency signal whose histogram it reads.
_HISTOGRAM_OF = {
    q: s.name
    for s in SPECS
    if s.histogram is not None
    for q in (s.histogram.rate_query, s.histogram.buckets_query)
}


def _carrier(s: SignalSpec) -> QueryKind | None:
    """The query that carries a signal's value: its gauge's query, its histogram's buckets."""
    if s.gauge is not None:
        return QueryKind(s.gauge.query)
    if s.histogram is not None:
        return QueryKind(s.histogram.buckets_query)
    return None


#: Which query carries each queried signal's value (from the registry, :data:`SPECS`).
SIGNAL_QUERY: dict[SignalName, QueryKind] = {
    s.name: kind for s in SPECS if (kind := _carrier(s)) is not None
}


def target_selector(target: TargetPolicy) -> str:
    """The label selector body of one target's vLLM series in history, e.g.
    ``namespace="llm",pod=~"vllm-[a-z0-9]+-[a-z0-9]+"``: its exact-match
    :meth:`~scaler.config.policy.TargetPolicy.matchers`, and with the default matchers a regex
    on the pod names of the workload. Only the backtest reads series by it (history has no
    pod lists); the live source sends :func:`query_selector` and keeps the series of the pods
    the Kubernetes API lists (:func:`pods_selector` for TTFT).
    """
    parts = [f'{k}="{label_value(v)}"' for k, v in sorted(target.matchers().items())]
    if target.prometheus_matchers is None:
        parts.append(f'pod=~"{label_value(target.pod_name_regex())}"')
    return ",".join(parts)


def query_selector(target: TargetPolicy) -> str:
    """The label selector body the live per-pod queries send for ``target``: its
    ``prometheus_matchers``, or with the default matchers its namespace alone
    (``namespace="llm"``; :func:`build_query_plan` joins the default targets' namespaces).
    Either way the source keeps only the series of the pods the Kubernetes API lists for the
    target, by exact name, never by a pod-name pattern."""
    if target.prometheus_matchers is not None:
        return target_selector(target)
    return f'namespace="{label_value(target.workload.namespace)}"'


def pods_selector(namespace: str, pods: Sequence[str]) -> str:
    """The selector body of exactly these pods of ``namespace`` (a set match for Prometheus)."""
    names = "|".join(re.escape(p) for p in sorted(set(pods)))
    return f'namespace="{label_value(namespace)}",pod=~"{label_value(names)}"'


@dataclass(frozen=True, slots=True)
class QueryPlan:
    """The per-pod queries of one cycle and how to split their answers back per target.

    Attributes:
        queries: PromQL per query kind; a kind is left out when no target needs it
            (for example no target enables TTFT).
        selector_group: target key -> selector group id (the ``scaler_selector`` value).
        selectors: group id -> label selector body.
        rate_window_seconds: the ``rate()`` window W of the TTFT and throughput queries,
            seconds.
        default_group: the group of the targets with the default selector (their
            namespaces), None when every target has explicit matchers; only this group can
            read the recording rules.
        default_namespaces: the namespaces of :attr:`default_group`.
        replica_labels: the labels the copies of one series differ in behind an HA pair
            (read once: :func:`one_copy`).
    """

    queries: dict[QueryKind, str]
    selector_group: dict[str, str]
    selectors: dict[str, str]
    rate_window_seconds: float = 60.0
    default_group: str | None = None
    default_namespaces: tuple[str, ...] = ()
    replica_labels: tuple[str, ...] = DEFAULT_REPLICA_LABELS


def _gauge_expr(gauge: GaugeQuery, sel: str, replica_labels: Sequence[str]) -> str:
    """A gauge per pod over its engines, ``sum by (namespace, pod) (max without
    (prometheus_replica, ...) (vllm:num_requests_waiting{SEL}))``: a sum reads one copy of
    each series behind an HA pair first (:func:`one_copy`), a max is one copy already. A gauge
    with several names keeps each series' name to tell them apart per pod: ``max by
    (namespace, pod, __name__) ({__name__=~"new|old",SEL})`` (``max without`` would drop the
    name)."""
    if len(gauge.metrics) == 1:
        series = f"{gauge.metrics[0]}{{{sel}}}"
        if gauge.aggregation == "sum":
            series = one_copy(series, replica_labels)
        return _per_pod_expr(series, gauge.aggregation, "namespace, pod")
    names = "|".join(gauge.metrics)
    matchers = ",".join(m for m in (f'__name__=~"{names}"', sel) if m)
    return _per_pod_expr(f"{{{matchers}}}", gauge.aggregation, "namespace, pod, __name__")


def _named_rate(metric: str, sel: str, window: str, replica_labels: Sequence[str]) -> str:
    """The per-pod rate of counter ``metric``, tagged with its name (rate() drops the name)."""
    rate = _per_pod_expr(
        one_copy(f"rate({metric}{{{sel}}}[{window}])", replica_labels), "sum", "namespace, pod"
    )
    return _tag(rate, METRIC_LABEL, metric)


def _raw_throughput(sel: str, window: str, replica_labels: Sequence[str]) -> str:
    """The per-pod rates of every throughput counter under ``sel`` and of the optional ones
    (:data:`OPTIONAL_THROUGHPUT_METRICS`: the prefix-cache hits, the prefill and decode phase
    sums), each tagged with its counter (:func:`_named_rate`), or'ed."""
    counters = (*THROUGHPUT_METRICS, *OPTIONAL_THROUGHPUT_METRICS)
    rates = [_named_rate(m, sel, window, replica_labels) for m in counters]
    return "(" + _or(rates) + ")"


def _namespaces_selector(namespaces: Sequence[str]) -> str:
    if len(namespaces) == 1:
        return f'namespace="{label_value(namespaces[0])}"'
    union = "|".join(re.escape(ns) for ns in namespaces)
    return f'namespace=~"{label_value(union)}"'


def _throughput_ages(gid: str, sel: str, rate_window_seconds: float) -> str:
    """Per namespace and counter, the age of the recorded per-pod rates (``running`` query),
    from the rules' record of their timestamps (its series carry ``scaler_recorded``)."""
    ages = f"time() - {recorded_freshness_metric(rate_window_seconds)}{{{sel}}}"
    return _tag(ages, SELECTOR_LABEL, gid)


def _asleep(gid: str, sel: str) -> str:
    """Per pod with vLLM's sleep-state gauge, 1 when an engine of it is asleep (``running``
    query): Ready over HTTP, serving nothing until woken."""
    asleep = f'max by (namespace, pod) (1 - {SLEEP_STATE_METRIC}{{{sel},sleep_state="awake"}})'
    return _tag(asleep, SELECTOR_LABEL, asleep_group(gid))


def _sample_ages(gid: str, sel: str) -> str:
    """Per pod, the age of its newest ``vllm:num_requests_running`` sample (``running``
    query): how old the readings are that an instant query returns as current."""
    ages = f"time() - max by (namespace, pod) (timestamp({RUNNING_METRIC}{{{sel}}}))"
    return _tag(ages, SELECTOR_LABEL, sample_age_group(gid))


def _per_name_rates(
    histogram: HistogramQuery,
    kind: HistogramKind,
    sel: str,
    window: str,
    replica_labels: Sequence[str],
) -> str:
    """Per pod, the observation rate of the histogram in representation ``kind``, each pod
    read under the first of the histogram's names it has, tagged :func:`histogram_tag` (the
    kind, and which name): ``label_replace(sum by (namespace, pod) (max without
    (prometheus_replica, ...) (rate(<name>_count{SEL}[W]))), "scaler_histogram", "classic",
    "", "")``, or with ``histogram_count`` over the native histogram; each series read once
    behind an HA pair (:func:`one_copy`)."""
    parts = []
    for i, m in enumerate(histogram.metrics):
        if kind is HistogramKind.CLASSIC:
            inner = f"rate({m}_count{{{sel}}}[{window}])"
        else:
            inner = f"histogram_count(rate({m}{{{sel}}}[{window}]))"
        rate = _per_pod_expr(one_copy(inner, replica_labels), "sum", "namespace, pod")
        parts.append(_tag(rate, HISTOGRAM_LABEL, histogram_tag(kind, i)))
    joined = _preferred(parts, "namespace, pod")
    return joined if len(parts) == 1 else f"({joined})"


def _histogram_rate_parts(
    histogram: HistogramQuery,
    gid: str,
    sel: str,
    window: str,
    recorded: tuple[str, str] | None,
    native: bool,
    replica_labels: Sequence[str],
) -> list[str]:
    """The observation-rate sub-expressions of one selector group (the first round), and for
    the default group the ages of the recorded per-group buckets (``recorded``: the sum and
    the mixed-bounds records, :func:`histogram_recording_rules`), given only for the
    namespaces whose histograms share one bucket layout."""
    kinds = [HistogramKind.CLASSIC, *([HistogramKind.NATIVE] if native else [])]
    parts = [
        _tag(_per_name_rates(histogram, kind, sel, window, replica_labels), SELECTOR_LABEL, gid)
        for kind in kinds
    ]
    if recorded is not None:
        sums, mixed = recorded
        # a namespace whose histograms have different bounds (a rollout across a bucket
        # change) has no age: its targets read their raw buckets, which count them
        stamps = (
            f'time() - timestamp({sums}{{{sel},le="+Inf"}}) '
            f"and on (namespace) ({mixed}{{{sel}}} == 0)"
        )
        parts.append(
            _tag(_tag(stamps, HISTOGRAM_LABEL, HistogramKind.RECORDED), SELECTOR_LABEL, gid)
        )
    return parts


def build_query_plan(
    targets: Sequence[TargetPolicy],
    *,
    rate_window_seconds: float,
    native_histograms: bool = True,
    replica_labels: Sequence[str] = DEFAULT_REPLICA_LABELS,
) -> QueryPlan:
    """Build the cycle's per-pod queries for all ``targets`` (the first round).

    Args:
        targets: the targets to read (any number; the query count does not grow with it).
        rate_window_seconds: the ``rate()`` window W of the TTFT and throughput queries
            (``Policy.rate_window_seconds``, at least 4 scrape intervals).
        native_histograms: the backend has Prometheus' native-histogram functions
            (``histogram_count``: Prometheus 2.40 on; not VictoriaMetrics, whose MetricsQL
            rejects the unknown function and with it the whole query).
        replica_labels: labels in which the copies of one series kept by each replica of an
            HA Prometheus pair differ (``Policy.replica_labels``): every per-pod value reads
            one copy (:func:`one_copy`) before summing over engines.

    Returns:
        A :class:`QueryPlan`. Per kind, the query is the ``or`` of tagged sub-expressions:

        - ``waiting``: ``label_replace(sum by (namespace, pod) (vllm:num_requests_waiting{SEL}),
          "scaler_selector", "s<i>", "", "") or ...`` per selector of a queue-enabled target;
        - ``running``: the same on ``vllm:num_requests_running`` for every target's selector,
          per selector ``time() - max by (namespace, pod) (timestamp(
          vllm:num_requests_running{SEL}))`` tagged ``s<i>@age`` (each pod's newest sample's
          age: a remote-write or federation lag shows there, :func:`sample_age_group`), per
          selector ``max by (namespace, pod) (1 - vllm:engine_sleep_state{SEL,
          sleep_state="awake"})`` tagged ``s<i>@asleep`` (1: an engine in sleep mode), and
          for the default group ``time() - <recorded_freshness_metric>{SEL}`` tagged with the
          group: the age of the recorded throughput rates per namespace and counter;
        - ``kv_cache``: ``label_replace(max by (namespace, pod, __name__) ({__name__=~
          "vllm:kv_cache_usage_perc|vllm:gpu_cache_usage_perc",SEL}), ...) or ...``;
        - ``ttft_rate`` per selector of a TTFT-enabled target: ``sum by (namespace, pod)
          (rate(vllm:time_to_first_token_seconds_count{SEL}[W]))`` tagged ``classic``, the
          same with ``histogram_count`` over the native histogram tagged ``native``, and for
          the default group the age, ``time() - timestamp(...)``, of the recorded ``+Inf``
          buckets tagged ``recorded``;
        - ``throughput``: ``label_replace((label_replace(sum by (namespace, pod) (rate(
          vllm:request_success_total{SEL}[W])), "scaler_metric", "vllm:request_success_total",
          "", "") or <the same for vllm:prompt_tokens_total and vllm:generation_tokens_total>),
          "scaler_selector", "s<i>", "", "") or ...`` for every target's selector.

        The TTFT query of the second round is :func:`build_ttft_query`.
    """
    window = promql_duration(rate_window_seconds)
    selectors: dict[str, str] = {}
    group_of_selector: dict[str, str] = {}
    selector_group: dict[str, str] = {}
    # Targets with the default selector all share one group whose selector is only their
    # namespaces: with 1,000 targets in 50 namespaces the per-pod queries are one selector
    # instead of an ``or`` of 1,000 (3-4x cheaper for Prometheus, see ``vllm-scaler bench-scale``).
    # The source keeps each target's own pods by their exact names and ignores the other
    # vLLM pods of those namespaces. Targets with explicit matchers group by selector.
    default_namespaces: list[str] = []
    for t in targets:
        if t.prometheus_matchers is None and t.workload.namespace not in default_namespaces:
            default_namespaces.append(t.workload.namespace)
    default_selector = _namespaces_selector(default_namespaces)
    for t in targets:
        sel = default_selector if t.prometheus_matchers is None else target_selector(t)
        if sel not in group_of_selector:
            gid = f"s{len(group_of_selector)}"
            group_of_selector[sel] = gid
            selectors[gid] = sel
        selector_group[t.key] = group_of_selector[sel]

    def groups_for(signal: SignalName | None) -> list[str]:
        out: list[str] = []
        for t in targets:
            gid = selector_group[t.key]
            if (signal is None or signal in t.signals.enabled()) and gid not in out:
                out.append(gid)
        return out

    queries: dict[QueryKind, str] = {}

    def per_pod(
        kind: QueryKind,
        gids: list[str],
        gauge: GaugeQuery | None = None,
        histogram: HistogramQuery | None = None,
    ) -> None:
        if not gids:
            return
        parts = []
        for gid in gids:
            sel = selectors[gid]
            if histogram is not None:
                recorded = None
                if sel == default_selector:
                    recorded = (
                        recorded_histogram_metric(histogram, rate_window_seconds),
                        recorded_mixed_bounds_metric(histogram, rate_window_seconds),
                    )
                parts += _histogram_rate_parts(
                    histogram, gid, sel, window, recorded, native_histograms, replica_labels
                )
                continue
            if gauge is not None:
                inner = _gauge_expr(gauge, sel, replica_labels)
            elif kind is QueryKind.THROUGHPUT:
                inner = _raw_throughput(sel, window, replica_labels)
            else:
                inner = _per_pod_expr(
                    one_copy(f"{RUNNING_METRIC}{{{sel}}}", replica_labels), "sum", "namespace, pod"
                )
            parts.append(_tag(inner, SELECTOR_LABEL, gid))
            if kind is QueryKind.RUNNING:
                parts.append(_sample_ages(gid, sel))
                parts.append(_asleep(gid, sel))
                if sel == default_selector:
                    parts.append(_throughput_ages(gid, sel, rate_window_seconds))
        queries[kind] = _or(parts)

    # In the registry's order, the running query after the first gauge's (every cycle so far)
    gauges = [s for s in SPECS if s.gauge is not None]
    for i, s in enumerate(gauges):
        if s.gauge is not None:
            per_pod(QueryKind(s.gauge.query), groups_for(s.name), s.gauge)
        if i == 0:
            per_pod(QueryKind.RUNNING, groups_for(None))
    for s in histogram_specs():
        if s.histogram is not None:
            h = s.histogram
            per_pod(QueryKind(h.rate_query), groups_for(s.name), histogram=h)
    per_pod(QueryKind.THROUGHPUT, groups_for(None))
    return QueryPlan(
        queries=queries,
        selector_group=selector_group,
        selectors=selectors,
        rate_window_seconds=rate_window_seconds,
        default_group=group_of_selector.get(default_selector) if default_namespaces else None,
        default_namespaces=tuple(default_namespaces),
        replica_labels=tuple(replica_labels),
    )


def build_throughput_query(plan: QueryPlan, recorded_namespaces: Sequence[str]) -> str:
    """The throughput query with the default group's pods in ``recorded_namespaces`` read from
    the recording rules' per-pod rates (:func:`recorded_rate_metric`) instead of ``rate()``
    over the raw counters; every other group and namespace as in the plan's raw query.

    The recorded part is, per counter, ``label_replace(max by (namespace, pod) (
    namespace_pod:vllm_generation_tokens:rate1m{namespace=~"..."}), "scaler_metric",
    "vllm:generation_tokens_total", "", "")``, the three joined by ``or`` and tagged with the
    group: the same series and labels as the raw part's, so the answer splits the same way
    (``max by`` drops the recorded name and keeps one of two copies a second rule evaluator
    wrote). A fixed tag rather than one regular expression over the recorded names: that
    cost Prometheus ten times more than reading the 24,000 recorded series.
    Returns the plan's raw query when nothing is recorded or no default group exists.
    """
    wanted = set(recorded_namespaces)
    recorded = [ns for ns in plan.default_namespaces if ns in wanted]
    gid = plan.default_group
    if not recorded or gid is None:
        return plan.queries[QueryKind.THROUGHPUT]
    window = promql_duration(plan.rate_window_seconds)
    sel = _namespaces_selector(recorded)
    per_counter = [
        _tag(
            f"max by (namespace, pod) ({recorded_rate_metric(c, plan.rate_window_seconds)}"
            f"{{{sel}}})",
            METRIC_LABEL,
            c,
        )
        for c in (*THROUGHPUT_METRICS, *OPTIONAL_THROUGHPUT_METRICS)
    ]
    parts = [_tag("(" + _or(per_counter) + ")", SELECTOR_LABEL, gid)]
    raw = [ns for ns in plan.default_namespaces if ns not in recorded]
    for g, group_sel in plan.selectors.items():
        if g == gid:
            if not raw:
                continue
            group_sel = _namespaces_selector(raw)
        parts.append(
            _tag(_raw_throughput(group_sel, window, plan.replica_labels), SELECTOR_LABEL, g)
        )
    return _or(parts)


@dataclass(frozen=True, slots=True)
class HistogramPart:
    """What a histogram's second-round query asks for one target.

    Attributes:
        key: the target key (the ``scaler_target`` tag).
        selector: the label selector body of the target's series (its pods, or its
            explicit matchers).
        quantile: the target's quantile (0-1), for a native histogram's server-side estimate.
        classic: ask for the classic buckets' per-``le`` rates.
        native: ask for the native histogram's quantile, count and fraction.
        names: for the classic buckets, which of the histogram's names the selector's pods
            are read under (indexes, current first), each asked on its own over exactly
            those pods; None: every name, each series under the first name it has (history,
            which does not know the pods).
    """

    key: str
    selector: str
    quantile: float
    classic: bool = True
    native: bool = False
    names: tuple[int, ...] | None = None


#: TTFT's :class:`HistogramPart` (its first name).
TtftPart = HistogramPart


def build_histogram_query(
    histogram: HistogramQuery,
    parts: Sequence[HistogramPart],
    recorded_groups: Mapping[str, Sequence[str]],
    *,
    rate_window_seconds: float,
) -> str | None:
    """A latency histogram's second-round query, or None when nothing is to be asked.

    Args:
        histogram: which histogram (its spec's :class:`~scaler.config.signal_specs.
            HistogramQuery`: its names, newest first).
        parts: per target read from the raw histogram: its selector and representation.
        recorded_groups: namespace -> pod groups read from the recording rule.
        rate_window_seconds: the ``rate()`` window W, seconds.

    Returns:
        The balanced ``or`` of:

        - per classic part ``label_replace(sum by (le) (rate(
          vllm:time_to_first_token_seconds_bucket{SEL}[W])), "scaler_target", "<key>", "", "")``
          and the same with ``count by (le)`` tagged ``scaler_layout="series"``: how many
          histogram series have each bound (fewer than the ``+Inf`` bucket's: the pods' layouts
          differ); a histogram of several names asks both once per name (an older one tagged
          ``scaler_name``), over the pods read under it, or for history, which does not know
          the pods, ``rate(old_bucket{SEL}[W]) unless on (namespace, pod, le) rate(new_bucket
          {SEL}[W])``;
        - per native part, with ``H = sum(rate(vllm:time_to_first_token_seconds{SEL}[W]))``:
          ``histogram_quantile(q, H)``, ``histogram_count(H)`` and ``histogram_fraction(0,
          scalar(histogram_quantile(q, H)), H)``, each tagged with the target and
          ``scaler_native``;
        - one selector of the recorded groups, ``max by (namespace, scaler_pod_group, le)
          (<recorded>{namespace=~"ns|...", scaler_pod_group=~"g|..."})`` (the source keeps the
          (namespace, group) pairs it asked for).
    """
    window = promql_duration(rate_window_seconds)
    exprs: list[str] = []
    for p in parts:
        if p.classic:
            # one part per name, each tagged with its index (the current name's untagged):
            # the source adds them up per le. The copies of an HA pair are summed as they
            # come, as the native histogram below: a quantile is the same whatever the number
            # of equal copies, so are the layouts the counts tell apart (every count doubles),
            # and a sum over the pods taken straight from the selector adds in one order every
            # time (the copies read once first came in any order, so the same window read
            # twice differed in its last bits).
            names = range(len(histogram.metrics)) if p.names is None else p.names
            for i in names:
                rates = histogram_name_rates(
                    histogram, i, "_bucket", p.selector, window, exclusive=p.names is not None
                )
                tagged = [_tag(f"{agg} by (le) ({rates})", TARGET_LABEL, p.key) for agg in
                          ("sum", "count")]  # fmt: skip
                # how many histogram series have each bound: pods of one target with different
                # bucket layouts (a rollout across a bucket change) are not summed per le
                tagged[1] = _tag(tagged[1], LAYOUT_LABEL, LAYOUT_SERIES)
                if i > 0:
                    tagged = [_tag(t, NAME_LABEL, str(i)) for t in tagged]
                exprs += tagged
        if p.native:
            # Summed over the copies of an HA pair as they come: Prometheus 2.42 aggregates
            # native histograms with sum only, and the quantile and fraction of a histogram
            # are the same whatever the number of equal copies (its count is not read as a
            # rate, only as zero or not).
            rates = histogram_rates(histogram, "", p.selector, window, on="namespace, pod")
            h = f"sum({rates})"
            q = repr(float(p.quantile))
            floats = {
                NativePart.QUANTILE: f"histogram_quantile({q}, {h})",
                NativePart.COUNT: f"histogram_count({h})",
                NativePart.FRACTION: (
                    f"histogram_fraction(0, scalar(histogram_quantile({q}, {h})), {h})"
                ),
            }
            for part, expr in floats.items():
                exprs.append(_tag(_tag(expr, TARGET_LABEL, p.key), NATIVE_PART_LABEL, part))
    wanted = {ns: sorted(set(g)) for ns, g in recorded_groups.items() if g}
    if wanted:
        namespaces = "|".join(re.escape(ns) for ns in sorted(wanted))
        groups = "|".join(sorted({re.escape(g) for gs in wanted.values() for g in gs}))
        # max by: drops the long metric name from the answer (a third of its bytes) and any
        # duplicate of a group that a second rule evaluator wrote with other external labels
        recorded = recorded_histogram_metric(histogram, rate_window_seconds)
        exprs.append(
            f"max by (namespace, {POD_GROUP_LABEL}, le) ("
            f'{recorded}{{namespace=~"{label_value(namespaces)}",'
            f'{POD_GROUP_LABEL}=~"{label_value(groups)}"}})'
        )
    return _or(exprs) if exprs else None


def build_ttft_query(
    parts: Sequence[HistogramPart],
    recorded_groups: Mapping[str, Sequence[str]],
    *,
    rate_window_seconds: float,
) -> str | None:
    """:func:`build_histogram_query` of TTFT."""
    return build_histogram_query(
        histogram_query(SignalName.TTFT_P95),
        parts,
        recorded_groups,
        rate_window_seconds=rate_window_seconds,
    )
