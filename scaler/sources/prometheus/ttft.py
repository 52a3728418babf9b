"""The TTFT quantile of each target: what the second round asks, and the reading (pure).

The first round's ``ttft_rate`` answer holds, per pod, the first tokens per second of its TTFT
histogram, tagged classic or native (and the recording rules' per-group ages). From it
and each target's own pods (:mod:`.attribution`), :func:`plan_ttft` decides per target:

- no own pod has a TTFT histogram: no question; the reading is ``warming_up`` while every
  ready pod is younger than the rate window, ``empty`` naming the rate window when it is
  shorter than four scrape intervals (``rate()`` then finds fewer than two samples), and
  ``absent`` otherwise (naming both representations);
- the own pods' request rate is exactly 0: no question; ``idle``;
- classic histogram, and every pod group of its pods (:func:`~scaler.sources.promql.
  pod_group`) holds only its own pods and has fresh recorded buckets: read the recording
  rule's per-group bucket rates and add them up;
- otherwise the raw bucket rates over exactly its pods (or its explicit matchers), or the
  native histogram's quantile, count and fraction.

A fault in one target's series touches that target only: a duplicated or malformed request
rate of one of its pods in the first round (no question is asked for it), a duplicated or
malformed bucket of its own in the second, or of a recorded pod group it reads, makes its
reading ``duplicate_series`` or ``bad_response``; every other target reads the same answers
as usual.

:func:`read_ttft` turns the answer into the reading: the quantile is computed here from the
bucket rates (:func:`~scaler.sources.quantile.bucket_quantile`, Prometheus' own
interpolation), ``saturated`` when it is only a lower bound (the rank in the ``+Inf``
bucket), ``idle`` when the window holds no request, ``nan`` when requests flow but no
quantile comes out.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from scaler.config.policy import TargetPolicy
from scaler.config.vocabulary import SignalName
from scaler.core.observation import WorkloadSnapshot
from scaler.core.signals import SignalReading, SignalStatus
from scaler.sources.prometheus.answers import QueryOutcome
from scaler.sources.prometheus.split import PodSeries, SeriesFault, SplitAnswers, TtftSeries
from scaler.sources.promql import (
    TTFT_BUCKET_METRIC,
    TTFT_COUNT_METRIC,
    TTFT_HISTOGRAM,
    HistogramKind,
    NativePart,
    QueryKind,
    QueryPlan,
    TtftPart,
    build_ttft_query,
    pod_group,
    pods_selector,
    promql_duration,
    target_selector,
)
from scaler.sources.quantile import bucket_quantile

__all__ = [
    "MIN_SCRAPES_PER_WINDOW",
    "TtftPlan",
    "TtftRoute",
    "history_ttft_plan",
    "plan_ttft",
    "read_ttft",
    "ttft_metric_name",
]

#: ``rate()`` needs two samples in its window; four scrape intervals make that hold even
#: when a scrape is late or missed (vLLM's and Prometheus' own advice).
MIN_SCRAPES_PER_WINDOW = 4
_NAME = SignalName.TTFT_P95
# histogram_fraction below the quantile by more than float noise: the rank was in +Inf.
_FRACTION_SLACK = 1e-6


def ttft_metric_name(representation: HistogramKind | None) -> str:
    """The TTFT metric as reported (like the KV-cache metric name): the classic bucket
    series, or the native histogram's own name."""
    if representation is HistogramKind.NATIVE:
        return f"{TTFT_HISTOGRAM} (native histogram)"
    return TTFT_BUCKET_METRIC


@dataclass(frozen=True, slots=True)
class TtftRoute:
    """How one target's TTFT is read this cycle.

    Attributes:
        key: the target key.
        representation: classic or native; None when no own pod has a TTFT histogram.
        pods: own pods with a TTFT histogram (every series, for explicit matchers).
        request_rate: first tokens per second over those pods in the window (first round);
            None when unknown (series without a pod label).
        groups: the (namespace, pod group) pairs read from the recording rule; empty when
            the raw histogram is read.
        asked: the target is in the second round's query.
        raw_because: why the recording rule was not used ('' when it was, or none exists).
        fault: a fault of one of its pods' request-rate series in the first round (then
            nothing is asked, and the reading takes the fault's status).
    """

    key: str
    representation: HistogramKind | None = None
    pods: tuple[str, ...] = ()
    request_rate: float | None = None
    groups: tuple[tuple[str, str], ...] = ()
    asked: bool = False
    raw_because: str = ""
    fault: SeriesFault | None = None

    @property
    def query(self) -> str:
        """``recorded`` or ``raw``: where the bucket rates come from."""
        return "recorded" if self.groups else "raw"


@dataclass(frozen=True, slots=True)
class TtftPlan:
    """The second round: its query and each TTFT-enabled target's route.

    Attributes:
        query: the ``ttft_buckets`` PromQL; None when no target needs it.
        routes: target key -> how its TTFT is read.
        parts: what the query asks per target read from the raw histogram.
        recorded: the (namespace, pod group) pairs it reads from the recording rule.
    """

    query: str | None
    routes: dict[str, TtftRoute] = field(default_factory=dict)
    parts: frozenset[TtftPart] = frozenset()
    recorded: frozenset[tuple[str, str]] = frozenset()

    def covers(self, needed: TtftPlan) -> bool:
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
    """Own pod -> {representation: request rate} from the ``ttft_rate`` answer."""
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
) -> SeriesFault | None:
    """The first fault among the target's own pods' ``ttft_rate`` series (every series of
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
    return SeriesFault(fault.status, f"ttft_rate query: pod {pod}: {fault.detail}{more}")


def _rates(own: Mapping[str, Mapping[str, float]], kind: HistogramKind) -> dict[str, float]:
    return {pod: m[kind] for pod, m in own.items() if kind in m}


def _group_members(series: PodSeries) -> dict[tuple[str, str], set[str]]:
    """(namespace, pod group) -> the pods with a classic TTFT histogram in it (indexed once
    per selector group: 1,000 targets would otherwise scan 8,000 pods each)."""
    out: dict[tuple[str, str], set[str]] = {}
    for (ns, pod), metrics in series.by_pod.items():
        if HistogramKind.CLASSIC in metrics:
            out.setdefault((ns, pod_group(pod)), set()).add(pod)
    return out


def _recorded_groups(
    target: TargetPolicy,
    series: PodSeries,
    members: Mapping[tuple[str, str], set[str]],
    own: Mapping[str, Mapping[str, float]],
    own_names: set[str],
    rate_window_seconds: float,
) -> tuple[tuple[tuple[str, str], ...], str]:
    """The recorded groups that hold exactly this target's classic pods, or () and why not."""
    if target.prometheus_matchers is not None or not series.recorded:
        return (), ""
    ns = target.workload.namespace
    groups = sorted({pod_group(p) for p, m in own.items() if HistogramKind.CLASSIC in m})
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


def plan_ttft(
    targets: Sequence[TargetPolicy],
    snapshots: Mapping[str, WorkloadSnapshot],
    former: Mapping[str, frozenset[str]],
    plan: QueryPlan,
    split: SplitAnswers,
    *,
    recorded: bool = True,
) -> TtftPlan:
    """Decide the second round from the first one's answers (see the module docstring).

    Args:
        targets: every target of the cycle (those without TTFT are skipped).
        snapshots: target key -> its Kubernetes snapshot.
        former: target key -> pods it listed recently and no longer lists.
        plan: the first round's plan (selector groups, rate window).
        split: the first round's answers, split.
        recorded: read the recording rules' groups where they fit (False: raw only, as the
            backtest's history query is).

    Returns:
        The :class:`TtftPlan`; its query is None when no target needs a second round.
    """
    groups = split.pod_groups.get(QueryKind.TTFT_RATE)
    window = plan.rate_window_seconds
    routes: dict[str, TtftRoute] = {}
    members: dict[str, dict[tuple[str, str], set[str]]] = {}  # per selector group
    parts: list[TtftPart] = []
    read_recorded: dict[str, list[str]] = {}
    for t in targets:
        if _NAME not in t.signals.enabled():
            continue
        if groups is None:  # the first round's query failed or was not sent
            routes[t.key] = TtftRoute(t.key)
            continue
        series = groups.get(plan.selector_group[t.key], PodSeries())
        snap = snapshots.get(t.key)
        gone = former.get(t.key, frozenset())
        fault = _own_fault(t, series, snap, gone)
        if fault is not None:
            routes[t.key] = TtftRoute(t.key, fault=fault)
            continue
        own = _own_entries(t, series, snap, gone)
        classic = _rates(own, HistogramKind.CLASSIC)
        native = _rates(own, HistogramKind.NATIVE)
        unlabelled = t.prometheus_matchers is not None and series.no_pod_label > 0
        if not classic and not native and not unlabelled:
            routes[t.key] = TtftRoute(t.key)
            continue
        kind = HistogramKind.CLASSIC if classic or unlabelled else HistogramKind.NATIVE
        rates = classic if kind is HistogramKind.CLASSIC else native
        total = math.fsum(rates.values())
        rate: float | None = None if unlabelled or not math.isfinite(total) else total
        pods = tuple(sorted(rates))
        if rate == 0.0:
            routes[t.key] = TtftRoute(t.key, kind, pods, rate)
            continue
        own_names = ({p.name for p in snap.pods} if snap else set()) | set(gone)
        chosen: tuple[tuple[str, str], ...] = ()
        why = ""
        if kind is HistogramKind.CLASSIC and recorded and series.recorded:
            gid = plan.selector_group[t.key]
            if gid not in members:
                members[gid] = _group_members(series)
            chosen, why = _recorded_groups(t, series, members[gid], own, own_names, window)
        routes[t.key] = TtftRoute(t.key, kind, pods, rate, chosen, True, why)
        if chosen:
            for ns, g in chosen:
                read_recorded.setdefault(ns, []).append(g)
            continue
        if t.prometheus_matchers is not None:
            selector = target_selector(t)
        else:
            selector = pods_selector(t.workload.namespace, pods)
        q = float(t.signals.ttft_p95.quantile)
        parts.append(
            TtftPart(
                t.key,
                selector,
                q,
                classic=kind is HistogramKind.CLASSIC,
                native=kind is HistogramKind.NATIVE or unlabelled,
            )
        )
    query = build_ttft_query(parts, read_recorded, rate_window_seconds=window)
    recorded_pairs = frozenset((ns, g) for ns, gs in read_recorded.items() for g in gs)
    return TtftPlan(query, routes, frozenset(parts), recorded_pairs)


def history_ttft_plan(
    targets: Sequence[TargetPolicy],
    *,
    rate_window_seconds: float,
    native_histograms: bool = True,
) -> TtftPlan:
    """The TTFT question for history, which has no pod lists: each target's series by its
    :func:`~scaler.sources.promql.target_selector` (its explicit matchers, or its workload's
    pod-name pattern), both representations asked (the classic one alone when the backend
    has no native-histogram functions: :mod:`.backend`). Only the backtest uses it."""
    native = native_histograms
    parts = [
        TtftPart(t.key, target_selector(t), float(t.signals.ttft_p95.quantile), True, native)
        for t in targets
        if _NAME in t.signals.enabled()
    ]
    routes = {
        p.key: TtftRoute(p.key, HistogramKind.CLASSIC, asked=True, request_rate=None) for p in parts
    }
    return TtftPlan(build_ttft_query(parts, {}, rate_window_seconds=rate_window_seconds), routes)


def _no_histogram(
    scraped: bool,
    ready: int,
    rate_window_seconds: float,
    scrape_interval: float | None,
    ready_seconds: float | None,
) -> SignalReading:
    window = promql_duration(rate_window_seconds)
    if scraped and ready_seconds is not None:
        return SignalReading(
            _NAME,
            SignalStatus.WARMING_UP,
            source_metric=TTFT_BUCKET_METRIC,
            detail=f"no TTFT rate yet: the pods have been ready for {ready_seconds:.0f}s, less "
            f"than the {window} rate() window",
        )
    if scrape_interval is not None and (
        rate_window_seconds < MIN_SCRAPES_PER_WINDOW * scrape_interval
    ):
        return SignalReading(
            _NAME,
            SignalStatus.EMPTY,
            source_metric=TTFT_BUCKET_METRIC,
            detail=f"no TTFT rate over the {window} rate window: it is shorter than "
            f"{MIN_SCRAPES_PER_WINDOW} scrape intervals (the pods are scraped every "
            f"{scrape_interval:g}s), so rate() finds fewer than two samples; set "
            f"rate_window_seconds to at least {MIN_SCRAPES_PER_WINDOW * scrape_interval:g}",
        )
    both = (
        f"neither {TTFT_BUCKET_METRIC} / {TTFT_COUNT_METRIC} (classic histogram) nor "
        f"{TTFT_HISTOGRAM} (native histogram)"
    )
    if scraped:
        return SignalReading(
            _NAME,
            SignalStatus.ABSENT,
            source_metric=TTFT_BUCKET_METRIC,
            detail=f"{both} has series over the {window} rate window for the {ready} ready "
            "pods, although their vllm:num_requests_running series exist",
        )
    return SignalReading(
        _NAME,
        SignalStatus.EMPTY,
        source_metric=TTFT_BUCKET_METRIC,
        detail=f"{both} has series over the {window} rate window",
    )


def _idle(metric: str, rate_window_seconds: float) -> SignalReading:
    # 0/0 in histogram_quantile: no requests in the window. Valid, no pressure.
    return SignalReading(
        _NAME,
        SignalStatus.IDLE,
        value=0.0,
        source_metric=metric,
        detail=f"no requests in the last {promql_duration(rate_window_seconds)} (request rate 0)",
    )


def _value_reading(
    value: float, total: float, lower_bound: bool, above_top: float, metric: str, window: float
) -> SignalReading:
    if math.isnan(value):
        if total == 0.0:
            return _idle(metric, window)
        return SignalReading(
            _NAME,
            SignalStatus.NAN,
            source_metric=metric,
            detail=f"TTFT quantile NaN while requests flow at {total:g}/s",
        )
    if math.isinf(value) or value < 0:
        shown = "+Inf" if value == math.inf else repr(value)
        status = SignalStatus.INF if math.isinf(value) else SignalStatus.NEGATIVE
        return SignalReading(
            _NAME, status, source_metric=metric, detail=f"TTFT quantile: value {shown}"
        )
    if lower_bound:
        share = f"{above_top:.0%} of first tokens" if above_top > 0 else "first tokens"
        return SignalReading(
            _NAME,
            SignalStatus.SATURATED,
            value=value,
            source_metric=metric,
            detail=f"at least {value:g} s, true size unknown: {share} in the window took "
            f"longer than the histogram's top finite bucket ({value:g} s); the TTFT "
            "histogram's top bucket is too low",
        )
    return SignalReading(_NAME, SignalStatus.OK, value=value, source_metric=metric)


def read_ttft(
    target: TargetPolicy,
    route: TtftRoute | None,
    split: SplitAnswers,
    *,
    scraped: bool,
    ready: int,
    rate_window_seconds: float,
    scrape_interval: float | None = None,
    ready_seconds: float | None = None,
) -> SignalReading:
    """The TTFT reading of one target from both rounds (see the module docstring).

    Args:
        target: the target.
        route: its route from :func:`plan_ttft` (None: the first round was not read).
        split: both rounds' answers, split.
        scraped: some ready pod of the target exports ``vllm:num_requests_running``.
        ready: its ready pods (for messages).
        rate_window_seconds: the ``rate()`` window, seconds.
        scrape_interval: the pods' scrape interval found at start, seconds (None: unknown).
        ready_seconds: how long the longest-ready pod has been ready, when every ready pod
            has been ready for less than the rate window (a fresh fleet: no rate can exist
            yet, ``warming_up``); None otherwise.
    """
    first = split.answers.get(QueryKind.TTFT_RATE)
    if first is None or not first.outcome.ok or route is None:
        return _failed(first.outcome if first else None, "ttft_rate")
    if route.fault is not None:
        return _faulty(route.fault, TTFT_BUCKET_METRIC)
    metric = ttft_metric_name(route.representation)
    if route.representation is None:
        return _no_histogram(scraped, ready, rate_window_seconds, scrape_interval, ready_seconds)
    if not route.asked:
        return _idle(metric, rate_window_seconds)
    second = split.answers.get(QueryKind.TTFT_BUCKETS)
    if second is None or not second.outcome.ok or split.ttft is None:
        return _failed(second.outcome if second else None, "ttft_buckets", metric)
    ttft = split.ttft
    fault = ttft.faults.get(target.key) or next(
        (f for g in route.groups if (f := ttft.group_faults.get(g)) is not None), None
    )
    if fault is not None:
        return _faulty(fault, metric, "ttft_buckets query: ")
    q = float(target.signals.ttft_p95.quantile)
    native = ttft.native.get(target.key)
    if native is not None and NativePart.QUANTILE in native:
        return _native_reading(native, q, rate_window_seconds)
    buckets = _buckets(route, ttft, target.key)
    if buckets is None:
        return SignalReading(
            _NAME,
            SignalStatus.EMPTY,
            source_metric=metric,
            detail=f"no TTFT bucket rates ({route.query}) for the {len(route.pods)} pods with "
            "requests in the first round",
        )
    for le, rate in sorted(buckets.items()):
        if not math.isfinite(rate) or rate < 0:
            return _bad_rate(le, rate, metric)
    est = bucket_quantile(q, buckets.items())
    return _value_reading(
        est.value, est.total, est.lower_bound, est.above_top, metric, rate_window_seconds
    )


def _bad_rate(le: float, rate: float, metric: str) -> SignalReading:
    """A bucket rate that no counter can have: NaN, infinite or negative."""
    if math.isnan(rate):
        status, shown = SignalStatus.NAN, "NaN"
    elif math.isinf(rate):
        status, shown = SignalStatus.INF, "+Inf" if rate > 0 else "-Inf"
    else:
        status, shown = SignalStatus.NEGATIVE, repr(rate)
    bound = "+Inf" if math.isinf(le) else f"{le:g}"
    return SignalReading(
        _NAME, status, source_metric=metric, detail=f"TTFT bucket le={bound}: rate {shown}"
    )


def _buckets(route: TtftRoute, ttft: TtftSeries, key: str) -> dict[float, float] | None:
    """The target's bucket rates: its own series, or its recorded groups added up."""
    if not route.groups:
        return ttft.buckets.get(key)
    total: dict[float, float] = {}
    for group in route.groups:
        rates = ttft.groups.get(group)
        if rates is None:
            return None
        for le, v in rates.items():
            total[le] = total.get(le, 0.0) + v
    return total


def _native_reading(
    native: Mapping[NativePart, float], q: float, rate_window_seconds: float
) -> SignalReading:
    metric = ttft_metric_name(HistogramKind.NATIVE)
    value = native[NativePart.QUANTILE]
    count = native.get(NativePart.COUNT, math.nan)
    fraction = native.get(NativePart.FRACTION)
    clamped = fraction is not None and math.isfinite(value) and fraction < q - _FRACTION_SLACK
    above = max(0.0, 1.0 - fraction) if clamped and fraction is not None else 0.0
    return _value_reading(value, count, clamped, above, metric, rate_window_seconds)


def _faulty(fault: SeriesFault, metric: str, prefix: str = "") -> SignalReading:
    """The reading of a target whose own TTFT series are faulty (duplicated or malformed)."""
    return SignalReading(_NAME, fault.status, source_metric=metric, detail=prefix + fault.detail)


def _failed(outcome: QueryOutcome | None, name: str, metric: str = "") -> SignalReading:
    status = outcome.status if outcome else SignalStatus.EMPTY
    detail = outcome.detail if outcome else "query not sent"
    return SignalReading(
        _NAME, status, source_metric=metric or TTFT_BUCKET_METRIC, detail=f"{name} query: {detail}"
    )
