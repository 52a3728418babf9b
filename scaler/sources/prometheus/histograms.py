"""The latency quantiles of each target (TTFT, ITL: every histogram spec of the registry): what
the second round asks, and the reading (pure).

A histogram signal (:attr:`~scaler.config.signal_specs.SignalSpec.histogram`) is read in two
rounds. The first round's rate answer (``ttft_rate``) holds, per pod, the observations per
second of its histogram, tagged classic or native and with the name it was read under (the
current one, or an older one a pod still exports: :func:`~scaler.sources.promql.
histogram_tag`), and the recording rules' per-group ages. From it and each target's own pods
(:mod:`.attribution`), :func:`plan_histogram` decides per target:

- no own pod has the histogram: no question; the reading is ``warming_up`` while every ready
  pod is younger than the rate window, ``empty`` naming the rate window when it is shorter
  than four scrape intervals (``rate()`` then finds fewer than two samples), and ``absent``
  otherwise (naming both representations and every name);
- the own pods' observation rate is exactly 0: no question; ``idle``;
- classic histogram, and every pod group of its pods (:func:`~scaler.sources.promql.
  pod_group`) holds only its own pods and has fresh recorded buckets: read the recording
  rule's per-group bucket rates and add them up;
- otherwise the raw bucket rates over exactly its pods (or its explicit matchers), or the
  native histogram's quantile, count and fraction.

A fault in one target's series touches that target only: a duplicated or malformed rate of one
of its pods in the first round (no question is asked for it), a duplicated or malformed bucket
of its own in the second, or of a recorded pod group it reads, makes its reading
``duplicate_series`` or ``bad_response``; every other target reads the same answers as usual.

:func:`read_histogram` turns the answer into the reading: the quantile is computed here from the
bucket rates (:func:`~scaler.sources.quantile.bucket_quantile`, Prometheus' own
interpolation), ``saturated`` when it is only a lower bound (the rank in the ``+Inf``
bucket), ``idle`` when the window holds no observation, ``nan`` when observations flow but no
quantile comes out. :mod:`.ttft` is TTFT's instance of these functions.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from scaler.config.policy import TargetPolicy
from scaler.config.signal_specs import HistogramQuery, SignalSpec
from scaler.core.observation import WorkloadSnapshot
from scaler.core.signals import SignalReading, SignalStatus
from scaler.sources.prometheus.answers import QueryOutcome
from scaler.sources.prometheus.split import PodSeries, SeriesFault, SplitAnswers, TtftSeries
from scaler.sources.promql import (
    HistogramKind,
    HistogramPart,
    NativePart,
    QueryKind,
    QueryPlan,
    build_histogram_query,
    parse_histogram_tag,
    pod_group,
    pods_selector,
    promql_duration,
    target_selector,
)
from scaler.sources.quantile import BucketLayouts, bucket_quantile, common_buckets

__all__ = [
    "MIN_SCRAPES_PER_WINDOW",
    "HistogramPlan",
    "HistogramRoute",
    "histogram_metric_name",
    "history_histogram_plan",
    "plan_histogram",
    "read_histogram",
]

#: ``rate()`` needs two samples in its window; four scrape intervals make that hold even
#: when a scrape is late or missed (vLLM's and Prometheus' own advice).
MIN_SCRAPES_PER_WINDOW = 4
# histogram_fraction below the quantile by more than float noise: the rank was in +Inf.
_FRACTION_SLACK = 1e-6


def _histogram(spec: SignalSpec) -> HistogramQuery:
    if spec.histogram is None:
        raise ValueError(f"{spec.name} is not read from a histogram")
    return spec.histogram


def histogram_metric_name(
    spec: SignalSpec, representation: HistogramKind | None, names: Sequence[int] = (0,)
) -> str:
    """The histogram as reported (like the KV-cache metric name): the classic bucket series,
    or the native histogram's own name, under each name its pods were read by (``names``:
    indexes into the spec's names, current first), comma-separated when pods differ
    (mid-upgrade)."""
    metrics = _histogram(spec).metrics
    shown = [metrics[i] for i in sorted(set(names))] or [metrics[0]]
    if representation is HistogramKind.NATIVE:
        return ",".join(f"{m} (native histogram)" for m in shown)
    return ",".join(f"{m}_bucket" for m in shown)


@dataclass(frozen=True, slots=True)
class HistogramRoute:
    """How one target's histogram is read this cycle.

    Attributes:
        key: the target key.
        representation: classic or native; None when no own pod has the histogram.
        pods: own pods with the histogram (every series, for explicit matchers).
        request_rate: observations per second over those pods in the window (first round);
            None when unknown (series without a pod label).
        groups: the (namespace, pod group) pairs read from the recording rule; empty when
            the raw histogram is read.
        asked: the target is in the second round's query.
        raw_because: why the recording rule was not used ('' when it was, or none exists).
        fault: a fault of one of its pods' rate series in the first round (then nothing is
            asked, and the reading takes the fault's status).
        names: which of the histogram's names its pods were read under (indexes into the
            spec's names, current first).
    """

    key: str
    representation: HistogramKind | None = None
    pods: tuple[str, ...] = ()
    request_rate: float | None = None
    groups: tuple[tuple[str, str], ...] = ()
    asked: bool = False
    raw_because: str = ""
    fault: SeriesFault | None = None
    names: tuple[int, ...] = (0,)

    @property
    def query(self) -> str:
        """``recorded`` or ``raw``: where the bucket rates come from."""
        return "recorded" if self.groups else "raw"


@dataclass(frozen=True, slots=True)
class HistogramPlan:
    """A histogram's second round: its query and each enabled target's route.

    Attributes:
        query: the buckets query's PromQL (``ttft_buckets``); None when no target needs it.
        routes: target key -> how its histogram is read.
        parts: what the query asks per target read from the raw histogram.
        recorded: the (namespace, pod group) pairs it reads from the recording rule.
    """

    query: str | None
    routes: dict[str, HistogramRoute] = field(default_factory=dict)
    parts: frozenset[HistogramPart] = frozenset()
    recorded: frozenset[tuple[str, str]] = frozenset()

    def covers(self, needed: HistogramPlan) -> bool:
        """Whether this plan's answer holds every series ``needed``'s query asks for, as
        that query would return them: each raw part asked the same way (same target,
        selector, quantile and representations) and each recorded group. Extra series
        are harmless: each is tagged with its own target or group, which the readings of
        ``needed``'s routes never look up. False when either plan has no query."""
        return (
            self.query is not None
            and needed.query is not None
            and needed.parts <= self.parts
            and needed.recorded <= self.recorded
        )


def _own_entries(
    target: TargetPolicy,
    series: PodSeries,
    snapshot: WorkloadSnapshot | None,
    former: frozenset[str],
) -> dict[str, dict[str, float]]:
    """Own pod -> {histogram tag: observation rate} from the first round's answer."""
    if target.prometheus_matchers is not None:
        return {pod: m for (_ns, pod), m in series.by_pod.items()}
    if snapshot is None:
        return {}
    ns = snapshot.namespace
    out: dict[str, dict[str, float]] = {}
    for name in sorted({p.name for p in snapshot.pods} | former):
        # A series without a namespace label is matched on the target's namespace.
        metrics = series.by_pod.get((ns, name)) or series.by_pod.get(("", name))
        if metrics:
            out[name] = metrics
    return out


def _own_fault(
    target: TargetPolicy,
    series: PodSeries,
    snapshot: WorkloadSnapshot | None,
    former: frozenset[str],
    query: str,
) -> SeriesFault | None:
    """The first fault among the target's own pods' first-round series (every series of
    its group for explicit matchers), with the pod named; None when there is none."""
    if not series.faults:
        return None
    if target.prometheus_matchers is not None:
        faulty = sorted(series.faults.items())
    elif snapshot is None:
        return None
    else:
        ns = snapshot.namespace
        names = sorted({p.name for p in snapshot.pods} | former)
        faulty = [((ns, n), f) for n in names if (f := series.fault(ns, n)) is not None]
    if not faulty:
        return None
    (_ns, pod), fault = faulty[0]
    more = f" (and {len(faulty) - 1} more pods)" if len(faulty) > 1 else ""
    return SeriesFault(fault.status, f"{query} query: pod {pod}: {fault.detail}{more}")


def _of_kind(metrics: Mapping[str, float], kind: HistogramKind) -> tuple[float, int] | None:
    """A pod's observation rate in representation ``kind`` and the index of the name it was
    read under (the current one first), or None when it has none of that kind."""
    found: tuple[float, int] | None = None
    for tag, value in metrics.items():
        parsed = parse_histogram_tag(tag)
        if parsed is not None and parsed[0] is kind and (found is None or parsed[1] < found[1]):
            found = (value, parsed[1])
    return found


def _rates(
    own: Mapping[str, Mapping[str, float]], kind: HistogramKind
) -> tuple[dict[str, float], dict[str, int]]:
    """The own pods' observation rates in representation ``kind``, and the index of the name
    each pod is read under."""
    rates: dict[str, float] = {}
    names: dict[str, int] = {}
    for pod, metrics in own.items():
        found = _of_kind(metrics, kind)
        if found is not None:
            rates[pod], names[pod] = found
    return rates, names


def _parts(
    target: TargetPolicy,
    pods: Sequence[str],
    names: Mapping[str, int],
    quantile: float,
    *,
    native: bool,
    unlabelled: bool,
) -> list[HistogramPart]:
    """What the second round asks for one target read raw: its classic buckets once per name
    its pods are read under, each over exactly those pods (so no binary operator is applied
    to any rate, and a pod exporting both names is read under the current one); a native
    histogram, or series without a pod label, with every name at once."""
    if native or unlabelled:
        selector = target_selector(target)
        if target.prometheus_matchers is None:
            selector = pods_selector(target.workload.namespace, pods)
        return [HistogramPart(target.key, selector, quantile, not native, True)]
    used = sorted(set(names.values())) or [0]
    if target.prometheus_matchers is not None:
        # the matchers pick the target's series: one name alone is read over them exactly
        chosen = tuple(used) if len(used) == 1 else None
        return [HistogramPart(target.key, target_selector(target), quantile, names=chosen)]
    ns = target.workload.namespace
    return [
        HistogramPart(
            target.key,
            pods_selector(ns, [p for p in pods if names.get(p, 0) == i]),
            quantile,
            names=(i,),
        )
        for i in used
    ]


def _group_members(series: PodSeries) -> dict[tuple[str, str], set[str]]:
    """(namespace, pod group) -> the pods with a classic histogram in it (indexed once per
    selector group: 1,000 targets would otherwise scan 8,000 pods each)."""
    out: dict[tuple[str, str], set[str]] = {}
    for (ns, pod), metrics in series.by_pod.items():
        if _of_kind(metrics, HistogramKind.CLASSIC) is not None:
            out.setdefault((ns, pod_group(pod)), set()).add(pod)
    return out


def _recorded_groups(
    target: TargetPolicy,
    series: PodSeries,
    members: Mapping[tuple[str, str], set[str]],
    classic_pods: Sequence[str],
    own_names: set[str],
    rate_window_seconds: float,
) -> tuple[tuple[tuple[str, str], ...], str]:
    """The recorded groups that hold exactly this target's classic pods, or () and why not."""
    if target.prometheus_matchers is not None or not series.recorded:
        return (), ""
    ns = target.workload.namespace
    groups = sorted({pod_group(p) for p in classic_pods})
    for g in groups:
        # series without a namespace label are matched on the target's namespace
        strangers = sorted((members.get((ns, g), set()) | members.get(("", g), set())) - own_names)
        if strangers:
            return (), f"pod group {g!r} also holds {strangers[0]}, not a pod of the target"
        age = series.recorded.get((ns, g))
        if age is None:
            return (), f"no recorded buckets for pod group {g!r} yet"
        if not age <= rate_window_seconds:
            return (), f"the recorded buckets of pod group {g!r} are {age:.0f} s old"
    return tuple((ns, g) for g in groups), ""


def plan_histogram(
    spec: SignalSpec,
    targets: Sequence[TargetPolicy],
    snapshots: Mapping[str, WorkloadSnapshot],
    former: Mapping[str, frozenset[str]],
    plan: QueryPlan,
    split: SplitAnswers,
    *,
    recorded: bool = True,
) -> HistogramPlan:
    """Decide a histogram signal's second round from the first one's answers (see the
    module docstring).

    Args:
        spec: the signal (its spec's :attr:`~scaler.config.signal_specs.SignalSpec.histogram`).
        targets: every target of the cycle (those without the signal are skipped).
        snapshots: target key -> its Kubernetes snapshot.
        former: target key -> pods it listed recently and no longer lists.
        plan: the first round's plan (selector groups, rate window).
        split: the first round's answers, split.
        recorded: read the recording rules' groups where they fit (False: raw only, as the
            backtest's history query is).

    Returns:
        The :class:`HistogramPlan`; its query is None when no target needs a second round.
    """
    histogram = _histogram(spec)
    rate_query = QueryKind(histogram.rate_query)
    groups = split.pod_groups.get(rate_query)
    window = plan.rate_window_seconds
    routes: dict[str, HistogramRoute] = {}
    members: dict[str, dict[tuple[str, str], set[str]]] = {}  # per selector group
    parts: list[HistogramPart] = []
    read_recorded: dict[str, list[str]] = {}
    for t in targets:
        if spec.name not in t.signals.enabled():
            continue
        if groups is None:  # the first round's query failed or was not sent
            routes[t.key] = HistogramRoute(t.key)
            continue
        series = groups.get(plan.selector_group[t.key], PodSeries())
        snap = snapshots.get(t.key)
        gone = former.get(t.key, frozenset())
        fault = _own_fault(t, series, snap, gone, rate_query)
        if fault is not None:
            routes[t.key] = HistogramRoute(t.key, fault=fault)
            continue
        own = _own_entries(t, series, snap, gone)
        classic, classic_names = _rates(own, HistogramKind.CLASSIC)
        native, native_names = _rates(own, HistogramKind.NATIVE)
        unlabelled = t.prometheus_matchers is not None and series.no_pod_label > 0
        if not classic and not native and not unlabelled:
            routes[t.key] = HistogramRoute(t.key)
            continue
        kind = HistogramKind.CLASSIC if classic or unlabelled else HistogramKind.NATIVE
        classic_kind = kind is HistogramKind.CLASSIC
        rates, read = (classic, classic_names) if classic_kind else (native, native_names)
        names = tuple(sorted(set(read.values()))) or (0,)
        total = math.fsum(rates.values())
        rate: float | None = None if unlabelled or not math.isfinite(total) else total
        pods = tuple(sorted(rates))
        if rate == 0.0:
            routes[t.key] = HistogramRoute(t.key, kind, pods, rate, names=names)
            continue
        own_names = ({p.name for p in snap.pods} if snap else set()) | set(gone)
        chosen: tuple[tuple[str, str], ...] = ()
        why = ""
        if kind is HistogramKind.CLASSIC and recorded and series.recorded:
            gid = plan.selector_group[t.key]
            if gid not in members:
                members[gid] = _group_members(series)
            chosen, why = _recorded_groups(t, series, members[gid], pods, own_names, window)
        routes[t.key] = HistogramRoute(t.key, kind, pods, rate, chosen, True, why, names=names)
        if chosen:
            for ns, g in chosen:
                read_recorded.setdefault(ns, []).append(g)
            continue
        q = float(t.signals.latency_block(spec.name).quantile)
        parts += _parts(t, pods, read, q, native=not classic_kind, unlabelled=unlabelled)
    query = build_histogram_query(histogram, parts, read_recorded, rate_window_seconds=window)
    recorded_pairs = frozenset((ns, g) for ns, gs in read_recorded.items() for g in gs)
    return HistogramPlan(query, routes, frozenset(parts), recorded_pairs)


def history_histogram_plan(
    spec: SignalSpec,
    targets: Sequence[TargetPolicy],
    *,
    rate_window_seconds: float,
    native_histograms: bool = True,
) -> HistogramPlan:
    """A histogram signal's question for history, which has no pod lists: each target's
    series by its :func:`~scaler.sources.promql.target_selector` (its explicit matchers, or
    its workload's pod-name pattern), both representations asked (the classic one alone when
    the backend has no native-histogram functions, ``native_histograms`` False:
    :mod:`.backend`). Only the backtest uses it."""
    parts = [
        HistogramPart(
            t.key,
            target_selector(t),
            float(t.signals.latency_block(spec.name).quantile),
            True,
            native_histograms,
        )
        for t in targets
        if spec.name in t.signals.enabled()
    ]
    routes = {
        p.key: HistogramRoute(p.key, HistogramKind.CLASSIC, asked=True, request_rate=None)
        for p in parts
    }
    query = build_histogram_query(
        _histogram(spec), parts, {}, rate_window_seconds=rate_window_seconds
    )
    return HistogramPlan(query, routes)


def _both(spec: SignalSpec) -> str:
    """Every classic and native name of the histogram, for a reading that found none."""
    metrics = _histogram(spec).metrics
    classic = " or ".join(f"{m}_bucket / {m}_count" for m in metrics)
    native = " or ".join(metrics)
    return f"neither {classic} (classic histogram) nor {native} (native histogram)"


def _no_histogram(
    spec: SignalSpec,
    scraped: bool,
    ready: int,
    rate_window_seconds: float,
    scrape_interval: float | None,
    ready_seconds: float | None,
) -> SignalReading:
    window = promql_duration(rate_window_seconds)
    metric = histogram_metric_name(spec, HistogramKind.CLASSIC)
    if scraped and ready_seconds is not None:
        return SignalReading(
            spec.name,
            SignalStatus.WARMING_UP,
            source_metric=metric,
            detail=f"no {spec.short} rate yet: the pods have been ready for "
            f"{ready_seconds:.0f}s, less than the {window} rate() window",
        )
    if scrape_interval is not None and (
        rate_window_seconds < MIN_SCRAPES_PER_WINDOW * scrape_interval
    ):
        return SignalReading(
            spec.name,
            SignalStatus.EMPTY,
            source_metric=metric,
            detail=f"no {spec.short} rate over the {window} rate window: it is shorter than "
            f"{MIN_SCRAPES_PER_WINDOW} scrape intervals (the pods are scraped every "
            f"{scrape_interval:g}s), so rate() finds fewer than two samples; set "
            f"rate_window_seconds to at least {MIN_SCRAPES_PER_WINDOW * scrape_interval:g}",
        )
    if scraped:
        return SignalReading(
            spec.name,
            SignalStatus.ABSENT,
            source_metric=metric,
            detail=f"{_both(spec)} has series over the {window} rate window for the {ready} "
            "ready pods, although their vllm:num_requests_running series exist",
        )
    return SignalReading(
        spec.name,
        SignalStatus.EMPTY,
        source_metric=metric,
        detail=f"{_both(spec)} has series over the {window} rate window",
    )


def _idle(spec: SignalSpec, metric: str, rate_window_seconds: float) -> SignalReading:
    # 0/0 in histogram_quantile: no observations in the window. Valid, no pressure.
    return SignalReading(
        spec.name,
        SignalStatus.IDLE,
        value=0.0,
        source_metric=metric,
        detail=f"no requests in the last {promql_duration(rate_window_seconds)} (request rate 0)",
    )


def _value_reading(
    spec: SignalSpec,
    value: float,
    total: float,
    lower_bound: bool,
    above_top: float,
    metric: str,
    window: float,
) -> SignalReading:
    h = _histogram(spec)
    if math.isnan(value):
        if total == 0.0:
            return _idle(spec, metric, window)
        return SignalReading(
            spec.name,
            SignalStatus.NAN,
            source_metric=metric,
            detail=f"{spec.short} quantile NaN while requests flow at {total:g}/s",
        )
    if math.isinf(value) or value < 0:
        shown = "+Inf" if value == math.inf else repr(value)
        status = SignalStatus.INF if math.isinf(value) else SignalStatus.NEGATIVE
        return SignalReading(
            spec.name, status, source_metric=metric, detail=f"{spec.short} quantile: value {shown}"
        )
    if lower_bound:
        share = f"{above_top:.0%} of {h.observations}" if above_top > 0 else h.observations
        return SignalReading(
            spec.name,
            SignalStatus.SATURATED,
            value=value,
            source_metric=metric,
            detail=f"at least {value:g} s, true size unknown: {share} in the window took "
            f"longer than the histogram's top finite bucket ({value:g} s); the {spec.short} "
            "histogram's top bucket is too low",
        )
    return SignalReading(spec.name, SignalStatus.OK, value=value, source_metric=metric)


def read_histogram(
    spec: SignalSpec,
    target: TargetPolicy,
    route: HistogramRoute | None,
    split: SplitAnswers,
    *,
    scraped: bool,
    ready: int,
    rate_window_seconds: float,
    scrape_interval: float | None = None,
    ready_seconds: float | None = None,
) -> SignalReading:
    """A histogram signal's reading of one target from both rounds (see the module
    docstring).

    Args:
        spec: the signal.
        target: the target.
        route: its route from :func:`plan_histogram` (None: the first round was not read).
        split: both rounds' answers, split.
        scraped: some ready pod of the target exports ``vllm:num_requests_running``.
        ready: its ready pods (for messages).
        rate_window_seconds: the ``rate()`` window, seconds.
        scrape_interval: the pods' scrape interval found at start, seconds (None: unknown).
        ready_seconds: how long the longest-ready pod has been ready, when every ready pod
            has been ready for less than the rate window (a fresh fleet: no rate can exist
            yet, ``warming_up``); None otherwise.
    """
    h = _histogram(spec)
    rate_query, buckets_query = QueryKind(h.rate_query), QueryKind(h.buckets_query)
    classic_metric = histogram_metric_name(spec, HistogramKind.CLASSIC)
    first = split.answers.get(rate_query)
    if first is None or not first.outcome.ok or route is None:
        return _failed(spec, first.outcome if first else None, rate_query, classic_metric)
    if route.fault is not None:
        return _faulty(spec, route.fault, classic_metric)
    metric = histogram_metric_name(spec, route.representation, route.names)
    if route.representation is None:
        return _no_histogram(
            spec, scraped, ready, rate_window_seconds, scrape_interval, ready_seconds
        )
    if not route.asked:
        return _idle(spec, metric, rate_window_seconds)
    second = split.answers.get(buckets_query)
    series = split.buckets.get(buckets_query)
    if second is None or not second.outcome.ok or series is None:
        return _failed(spec, second.outcome if second else None, buckets_query, metric)
    fault = series.faults.get(target.key) or next(
        (f for g in route.groups if (f := series.group_faults.get(g)) is not None), None
    )
    if fault is not None:
        return _faulty(spec, fault, metric, f"{buckets_query} query: ")
    q = float(target.signals.latency_block(spec.name).quantile)
    native = series.native.get(target.key)
    if native is not None and NativePart.QUANTILE in native:
        return _native_reading(spec, native, q, rate_window_seconds, route.names)
    buckets = _buckets(route, series, target.key)
    if buckets is None:
        return SignalReading(
            spec.name,
            SignalStatus.EMPTY,
            source_metric=metric,
            detail=f"no {spec.short} bucket rates ({route.query}) for the {len(route.pods)} "
            "pods with requests in the first round",
        )
    for le, rate in sorted(buckets.items()):
        if not math.isfinite(rate) or rate < 0:
            return _bad_rate(spec, le, rate, metric)
    counts = None if route.groups else series.counts.get(target.key)
    common, layouts = common_buckets(buckets, counts)
    est = bucket_quantile(q, common.items())
    reading = _value_reading(
        spec, est.value, est.total, est.lower_bound, est.above_top, metric, rate_window_seconds
    )
    if layouts is None or not layouts.mixed:
        return reading
    return _on_common_bounds(spec, reading, layouts, len(common))


def _on_common_bounds(
    spec: SignalSpec, reading: SignalReading, layouts: BucketLayouts, common: int
) -> SignalReading:
    """A reading read on the bounds every histogram has (the target's pods have different
    bucket layouts), saying so: never the top bucket of the layout that reaches highest, and
    a lower bound at the top bound all share is no histogram whose top bucket is too low but
    pods that cannot tell (a rollout across a bucket change, two vLLM versions)."""
    mixed = layouts.describe()
    on = f"read on the {common} bounds every histogram has"
    if reading.status is SignalStatus.SATURATED and reading.value is not None:
        detail = (
            f"at least {reading.value:g} s, true size unknown: the quantile lies beyond the top "
            f"finite bound every histogram has ({reading.value:g} s); {mixed}, so the pods with "
            "the lower top bucket cannot tell how much longer (finish the rollout, or give "
            f"every pod the same {spec.short} buckets)"
        )
    elif reading.status is SignalStatus.NAN and common < 2:
        detail = f"{mixed}: they share no finite bound, so no quantile can be read"
    elif reading.detail:
        detail = f"{reading.detail}; {mixed}; {on}"
    else:
        detail = f"{mixed}; {on}"
    return replace(reading, detail=detail, mixed_layouts=mixed)


def _bad_rate(spec: SignalSpec, le: float, rate: float, metric: str) -> SignalReading:
    """A bucket rate that no counter can have: NaN, infinite or negative."""
    if math.isnan(rate):
        status, shown = SignalStatus.NAN, "NaN"
    elif math.isinf(rate):
        status, shown = SignalStatus.INF, "+Inf" if rate > 0 else "-Inf"
    else:
        status, shown = SignalStatus.NEGATIVE, repr(rate)
    bound = "+Inf" if math.isinf(le) else f"{le:g}"
    return SignalReading(
        spec.name,
        status,
        source_metric=metric,
        detail=f"{spec.short} bucket le={bound}: rate {shown}",
    )


def _buckets(route: HistogramRoute, series: TtftSeries, key: str) -> dict[float, float] | None:
    """The target's bucket rates: its own series, or its recorded groups added up."""
    if not route.groups:
        return series.buckets.get(key)
    total: dict[float, float] = {}
    for group in route.groups:
        rates = series.groups.get(group)
        if rates is None:
            return None
        for le, v in rates.items():
            total[le] = total.get(le, 0.0) + v
    return total


def _native_reading(
    spec: SignalSpec,
    native: Mapping[NativePart, float],
    q: float,
    rate_window_seconds: float,
    names: Sequence[int],
) -> SignalReading:
    metric = histogram_metric_name(spec, HistogramKind.NATIVE, names)
    value = native[NativePart.QUANTILE]
    count = native.get(NativePart.COUNT, math.nan)
    fraction = native.get(NativePart.FRACTION)
    clamped = fraction is not None and math.isfinite(value) and fraction < q - _FRACTION_SLACK
    above = max(0.0, 1.0 - fraction) if clamped and fraction is not None else 0.0
    return _value_reading(spec, value, count, clamped, above, metric, rate_window_seconds)


def _faulty(spec: SignalSpec, fault: SeriesFault, metric: str, prefix: str = "") -> SignalReading:
    """The reading of a target whose own series are faulty (duplicated or malformed)."""
    return SignalReading(
        spec.name, fault.status, source_metric=metric, detail=prefix + fault.detail
    )


def _failed(
    spec: SignalSpec, outcome: QueryOutcome | None, query: QueryKind, metric: str
) -> SignalReading:
    status = outcome.status if outcome else SignalStatus.EMPTY
    detail = outcome.detail if outcome else "query not sent"
    return SignalReading(spec.name, status, source_metric=metric, detail=f"{query} query: {detail}")
