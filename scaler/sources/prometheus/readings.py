"""Each target's readings from one cycle's split answers (pure, no I/O).

:func:`read_targets` matches per-pod series to each target's live, ready pods by their exact
names (:mod:`.attribution`: the pods the Kubernetes API lists for the target, and the ones it
listed until recently, whose lingering series are dropped as ``gone``; other pods of a shared
namespace are not the target's at all), sums them per signal, and names every fault:
``empty`` when a query answered with no series, ``absent`` when the signal is missing while
the pods are provably scraped, ``partial`` when some ready pods lack series, NaN/Inf/negative
values. The latency histograms (TTFT, ITL) are read by :mod:`.histograms` (``warming_up`` while
every ready pod is younger than the rate window, ``idle`` only when the request rate is exactly
0). Missing data is never read as zero.

A fault in one series touches only the target that owns it: a pod of the target with two
series (``duplicate_series``) or a malformed one (``bad_response``), in a per-pod answer or
among its TTFT buckets, makes that target's signal unusable, and every other target reads
the same answer as usual. Pods whose values stopped moving (:mod:`.stalls`: frozen gauges,
hung engines) are kept out of the sums, with the status ``frozen`` or ``hung``; the per-pod
request and token rates are on each target's readings (:attr:`TargetReadings.throughput`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum

from scaler.config.policy import TargetPolicy
from scaler.config.signal_specs import SPECS
from scaler.config.vocabulary import SignalName
from scaler.core.observation import PodInfo, WorkloadSnapshot
from scaler.core.signals import SignalReading, SignalStatus
from scaler.sources.prometheus.answers import QueryOutcome, short_detail
from scaler.sources.prometheus.histograms import (
    HistogramPlan,
    HistogramRoute,
    histogram_metric_name,
    read_histogram,
)
from scaler.sources.prometheus.split import PodSeries, SeriesFault, SplitAnswers
from scaler.sources.prometheus.stalls import (
    PodGauges,
    PodHistory,
    PodStall,
    StallKind,
    track_stalls,
)
from scaler.sources.prometheus.throughput import Throughput, read_throughput
from scaler.sources.promql import (
    KV_METRICS,
    SIGNAL_QUERY,
    QueryKind,
    QueryPlan,
    asleep_group,
    gauge_metrics,
    sample_age_group,
)

__all__ = [
    "SAMPLE_AGE_FLOOR_SECONDS",
    "SAMPLE_AGE_INTERVALS",
    "DropReason",
    "DroppedSeries",
    "TargetReadings",
    "read_targets",
    "sample_age_limit_seconds",
]

#: A pod's newest sample older than this many scrape intervals is not current (a scrape
#: that failed leaves no sample at all: Prometheus marks its series stale at once).
SAMPLE_AGE_INTERVALS = 3
#: ... and never younger than this, seconds (a scrape of a busy pod can take seconds).
SAMPLE_AGE_FLOOR_SECONDS = 45.0
#: The scrape interval assumed before it is found (kube-prometheus' default), seconds.
_ASSUMED_SCRAPE_INTERVAL_SECONDS = 30.0


def sample_age_limit_seconds(scrape_interval: float | None) -> float:
    """How old a pod's newest sample may be and still count as current, seconds:
    :data:`SAMPLE_AGE_INTERVALS` scrape intervals (30 s assumed when unknown), at least
    :data:`SAMPLE_AGE_FLOOR_SECONDS`."""
    interval = scrape_interval or _ASSUMED_SCRAPE_INTERVAL_SECONDS
    return max(SAMPLE_AGE_INTERVALS * interval, SAMPLE_AGE_FLOOR_SECONDS)


class DropReason(StrEnum):
    """Why a per-pod series was not counted for its target."""

    TERMINATING = "terminating"  # the pod has a deletionTimestamp
    NOT_READY = "not_ready"  # live but not Ready (still loading, or failing probes)
    GONE = "gone"  # listed for the target until recently, no longer listed (deleted)
    UNKNOWN_POD = "unknown_pod"  # picked by the target's explicit matchers, not its pod
    NO_POD_LABEL = "no_pod_label"  # the series has no ``pod`` label to match


@dataclass(frozen=True, slots=True)
class DroppedSeries:
    """A per-pod series the selector picked but that does not count (stale, not ready...)."""

    query: QueryKind
    namespace: str
    pod: str
    reason: DropReason


@dataclass(frozen=True, slots=True)
class TargetReadings:
    """What the source read for one target.

    Attributes:
        key: the target key (``namespace/kind/name``).
        signals: one reading per *enabled* signal of the target's policy.
        kv_metric: KV-cache metric name(s) found on the ready pods, preferred name first,
            comma-separated when pods differ (mid-upgrade); '' when none was found.
        pods_missing: per-pod signal -> ready pods with no series for it.
        pods_unscraped: ready pods without a ``vllm:num_requests_running`` series (not
            scraped, or scrape failing); empty when the running query failed.
        dropped: series picked by the selector but not counted (pods not live or not ready).
        series_found: query -> series the target's selector (or TTFT expression) returned
            before any pod filtering; the dry-run check uses it.
        pod_load: ready pod -> requests in flight (``vllm:num_requests_running`` plus
            ``vllm:num_requests_waiting``, summed over engines); only pods with both series
            (running only when the waiting query was not sent); 0 for a frozen or hung pod,
            whose numbers serve nobody. Ranks pods for scale-down.
        histogram_metrics: latency signal -> the histogram read (``..._bucket``, or the
            native histogram's name with ``(native histogram)``, under the name its pods
            export); a signal whose histogram was not found is not in it.
        histogram_queries: latency signal -> ``recorded`` (the recording rules' per-group
            buckets) or ``raw``; a signal not asked (idle, not found) is not in it.
        throughput: per ready pod, requests, prompt tokens and generated tokens per second
            over the rate window (:class:`~scaler.sources.prometheus.throughput.Throughput`).
        stalled: ready pods whose values stopped moving this poll (frozen gauges, hung
            engines; :mod:`scaler.sources.prometheus.stalls`), kept out of the signals.
        gauges: ready pod -> its waiting, running and KV-cache values this poll (only pods
            with a value for every per-pod query the target reads).
        pod_history: the stall detector's per-pod histories after this poll: hand them to
            the next :func:`read_targets` of this target.
        sleeping: ready pods whose vLLM engine is in sleep mode
            (``vllm:engine_sleep_state{sleep_state="awake"}`` 0): Ready over HTTP, serving
            nothing until woken; never judged frozen or hung (an engine asleep does not step).
    """

    key: str
    signals: dict[SignalName, SignalReading]
    kv_metric: str = ""
    pods_missing: dict[SignalName, frozenset[str]] = field(default_factory=dict)
    pods_unscraped: frozenset[str] = frozenset()
    dropped: tuple[DroppedSeries, ...] = ()
    series_found: dict[QueryKind, int] = field(default_factory=dict)
    pod_load: dict[str, float] = field(default_factory=dict)
    histogram_metrics: dict[SignalName, str] = field(default_factory=dict)
    histogram_queries: dict[SignalName, str] = field(default_factory=dict)
    throughput: Throughput = field(
        default_factory=lambda: Throughput(SignalStatus.EMPTY, detail="not read")
    )
    stalled: dict[str, PodStall] = field(default_factory=dict)
    pod_history: dict[str, PodHistory] = field(default_factory=dict)
    gauges: dict[str, PodGauges] = field(default_factory=dict)
    sleeping: frozenset[str] = frozenset()

    @property
    def ttft_metric(self) -> str:
        """The TTFT histogram read; '' when none was found."""
        return self.histogram_metrics.get(SignalName.TTFT_P95, "")

    @property
    def ttft_query(self) -> str:
        """``recorded`` or ``raw`` for TTFT; '' when no TTFT bucket was asked."""
        return self.histogram_queries.get(SignalName.TTFT_P95, "")


#: The answers a signal is read from, where it is more than its own query's: both rounds of a
#: latency histogram of the registry.
_ANSWERS_OF: dict[SignalName, tuple[QueryKind, ...]] = {
    s.name: (QueryKind(s.histogram.rate_query), QueryKind(s.histogram.buckets_query))
    for s in SPECS
    if s.histogram is not None
}


def _partial_answers(outcomes: Iterable[QueryOutcome | None]) -> str:
    """What the backend said of the answers that may lack data ('' when none did)."""
    said = [
        f"the {o.kind} answer is partial ({len(o.partial)} warning"
        f"{'s' if len(o.partial) > 1 else ''}: {'; '.join(o.partial)})"
        for o in outcomes
        if o is not None and o.ok and o.partial
    ]
    return short_detail("; ".join(said)) if said else ""


def _partial_reading(
    reading: SignalReading, outcomes: Sequence[QueryOutcome | None]
) -> SignalReading:
    """``reading``, read from answers that the backend flagged as possibly incomplete (Thanos
    and Mimir partial responses, VictoriaMetrics' ``isPartial``): never full coverage. A
    reading that would be ``ok`` or ``idle`` is ``partial`` (usable for a scale-up that the
    data already shows, never for a scale-down); any other keeps its status, and each names
    the partial answer."""
    said = _partial_answers(outcomes)
    if not said:
        return reading
    if reading.status in (SignalStatus.OK, SignalStatus.IDLE):
        return replace(reading, status=SignalStatus.PARTIAL, detail=said)
    return replace(reading, detail=f"{reading.detail}; {said}" if reading.detail else said)


def _names(pods: Sequence[str] | frozenset[str], limit: int = 5) -> str:
    ordered = sorted(pods)
    shown = ", ".join(ordered[:limit])
    return shown + (f" and {len(ordered) - limit} more" if len(ordered) > limit else "")


def _bad_value_reading(
    name: SignalName, value: float, where: str, source_metric: str = ""
) -> SignalReading | None:
    """A reading for a non-finite or negative value, or None if the value is fine."""
    if math.isnan(value):
        status, shown = SignalStatus.NAN, "NaN"
    elif math.isinf(value):
        status, shown = SignalStatus.INF, "+Inf" if value > 0 else "-Inf"
    elif value < 0:
        status, shown = SignalStatus.NEGATIVE, repr(value)
    else:
        return None
    return SignalReading(
        name, status, source_metric=source_metric, detail=f"{where}: value {shown}"
    )


#: A 0-1 ratio may read this much above 1 from float rounding and still be a ratio.
_RATIO_SLACK = 1e-6


def _ratio_out_of_range(
    name: SignalName, value: float, pod: str, metric: str
) -> SignalReading | None:
    """A reading for a 0-1 ratio gauge above 1 (a percent where a ratio belongs), or None."""
    if value <= 1.0 + _RATIO_SLACK:
        return None
    return SignalReading(
        name,
        SignalStatus.OUT_OF_RANGE,
        source_metric=metric,
        detail=f"pod {pod}: {metric} {value:g} is above 1, where vLLM exports a 0-1 ratio "
        "(1 means 100 percent): a percent from another engine, a simulator or a recording "
        "rule? The signal is not used until the value is a ratio",
    )


def read_targets(
    policy_targets: Sequence[TargetPolicy],
    snapshots: Mapping[str, WorkloadSnapshot],
    plan: QueryPlan,
    split: SplitAnswers,
    *,
    rate_window_seconds: float,
    ttft_plan: HistogramPlan | None = None,
    histogram_plans: Mapping[SignalName, HistogramPlan] | None = None,
    former: Mapping[str, frozenset[str]] | None = None,
    scrape_intervals: Mapping[str, float] | None = None,
    history: Mapping[str, Mapping[str, PodHistory]] | None = None,
) -> dict[str, TargetReadings]:
    """Classify the split answers of one cycle into each target's readings (pure, no I/O).

    Per-pod series count only for the snapshot's live, ready pods; a series of a pod that
    belongs to another target (picked by a shared selector) is that target's, not stale.

    Args:
        policy_targets: the targets the plan was built for.
        snapshots: target key -> its Kubernetes snapshot (a target without one gets
            ``empty`` per-pod signals).
        plan: the cycle's query plan (for each target's selector group).
        split: the cycle's answers, split (:func:`~scaler.sources.prometheus.split.
            split_answers`), both rounds.
        rate_window_seconds: the TTFT ``rate()`` window (for messages only).
        ttft_plan: how each target's TTFT was asked (:func:`~scaler.sources.prometheus.
            ttft.plan_ttft`), the same as ``histogram_plans[ttft_p95]``.
        histogram_plans: latency signal -> how each target's histogram was asked
            (:func:`~scaler.sources.prometheus.histograms.plan_histogram`); a signal without
            a plan reads as not asked.
        former: target key -> pods it listed until recently (:class:`~scaler.sources.
            prometheus.attribution.PodMemory`); their series are dropped as ``gone``.
        scrape_intervals: target key -> its pods' scrape interval found at start, seconds.
        history: target key -> the ``pod_history`` of its readings from the previous poll
            (the stall detector's memory; None or a missing target: a first poll).

    Returns:
        Target key -> :class:`TargetReadings`, for every target of ``policy_targets``.
        Nothing is logged: an ``absent`` signal is a configuration problem the caller reports.
    """
    known_pods: set[tuple[str, str]] = {
        (snap.namespace, p.name) for snap in snapshots.values() for p in snap.pods
    }
    former = former or {}
    plans = dict(histogram_plans or {})
    if ttft_plan is not None:
        plans[SignalName.TTFT_P95] = ttft_plan
    intervals = scrape_intervals or {}
    history = history or {}
    return {
        t.key: _TargetReader(
            target=t,
            snapshot=snapshots.get(t.key),
            gid=plan.selector_group[t.key],
            split=split,
            known_pods=known_pods,
            former=former.get(t.key, frozenset()),
            rate_window_seconds=rate_window_seconds,
            routes={n: r for n, plan in plans.items() if (r := plan.routes.get(t.key))},
            scrape_interval=intervals.get(t.key),
            history=history.get(t.key, {}),
        ).read()
        for t in policy_targets
    }


@dataclass(slots=True)
class _TargetReader:
    """Turns the split answers into one target's readings."""

    target: TargetPolicy
    snapshot: WorkloadSnapshot | None
    gid: str
    split: SplitAnswers
    known_pods: set[tuple[str, str]]
    former: frozenset[str]
    rate_window_seconds: float
    history: Mapping[str, PodHistory]
    routes: Mapping[SignalName, HistogramRoute] = field(default_factory=dict)
    scrape_interval: float | None = None
    dropped: list[DroppedSeries] = field(default_factory=list)
    series_found: dict[QueryKind, int] = field(default_factory=dict)
    # per query: ready pod -> the fault of its series (see split.SeriesFault)
    faults: dict[QueryKind, dict[str, SeriesFault]] = field(default_factory=dict)
    _pod_cache: dict[QueryKind, dict[str, dict[str, float]] | None] = field(default_factory=dict)
    _ready: frozenset[str] | None = None
    _listed: dict[str, PodInfo] | None = None
    _own_names: list[str] | None = None

    @property
    def ready(self) -> frozenset[str]:
        """The snapshot's live, ready pods (computed once: every query's values use it)."""
        if self._ready is None:
            self._ready = self.snapshot.ready_pod_names if self.snapshot else frozenset()
        return self._ready

    def _own(self, snap: WorkloadSnapshot) -> tuple[dict[str, PodInfo], list[str]]:
        """The pods the snapshot lists by name, and those with the ones listed until
        recently, sorted (computed once per target and cycle)."""
        if self._listed is None or self._own_names is None:
            self._listed = {p.name: p for p in snap.pods}
            self._own_names = sorted(self._listed.keys() | self.former)
        return self._listed, self._own_names

    def outcome(self, kind: QueryKind) -> QueryOutcome | None:
        ans = self.split.answers.get(kind)
        return ans.outcome if ans else None

    def pod_values(self, kind: QueryKind) -> dict[str, dict[str, float]] | None:
        """Ready pod -> {metric: value} for a per-pod query; None if the query failed.

        Series of pods that are not live and ready are recorded in ``dropped`` (once per
        query: the result is cached). Ready pods whose series are faulty are in
        ``faults[kind]`` and left out.
        """
        if kind not in self._pod_cache:
            values = self._pod_values(kind)
            grp = (self.split.pod_groups.get(kind) or {}).get(self.gid)
            if values is not None and grp is not None and grp.faults and self.snapshot:
                ns = self.snapshot.namespace
                faults = {p: f for p in self.ready if (f := grp.fault(ns, p)) is not None}
                if faults:
                    self.faults[kind] = faults
                    values = {p: m for p, m in values.items() if p not in faults}
            self._pod_cache[kind] = values
        return self._pod_cache[kind]

    def _pod_values(self, kind: QueryKind) -> dict[str, dict[str, float]] | None:
        groups = self.split.pod_groups.get(kind)
        if groups is None:
            return None
        grp = groups.get(self.gid, PodSeries())
        snap = self.snapshot
        if self.target.prometheus_matchers is None:
            # The default group selects whole namespaces (see build_query_plan): only the
            # target's own pods' series are its, looked up by their exact names.
            if snap is None:
                self.series_found[kind] = 0
                return {}
            return self._own_pod_values(kind, grp, snap)
        self.series_found[kind] = grp.count
        out: dict[str, dict[str, float]] = {}
        if snap is None:
            return out
        pods = {p.name: p for p in snap.pods}
        ready = self.ready
        for _ in range(grp.no_pod_label):
            self.dropped.append(DroppedSeries(kind, snap.namespace, "", DropReason.NO_POD_LABEL))
        for (ns, pod), metrics in sorted(grp.by_pod.items()):
            ns = ns or snap.namespace
            if ns == snap.namespace and pod in ready:
                out[pod] = metrics
                continue
            info = pods.get(pod) if ns == snap.namespace else None
            if info is not None and not info.serves:
                continue  # a worker of a group whose leader serves: not demand, not stale
            if info is not None:
                reason = DropReason.TERMINATING if info.terminating else DropReason.NOT_READY
            elif ns == snap.namespace and pod in self.former:
                reason = DropReason.GONE
            elif (ns, pod) in self.known_pods:
                continue  # another target's pod, picked by a shared selector
            else:
                reason = DropReason.UNKNOWN_POD
            self.dropped.append(DroppedSeries(kind, ns, pod, reason))
        return out

    def _own_pod_values(
        self, kind: QueryKind, grp: PodSeries, snap: WorkloadSnapshot
    ) -> dict[str, dict[str, float]]:
        """:meth:`_pod_values` for a target sharing its namespace's group: the series of its
        own pods, looked up by name; those of pods it listed until recently are dropped."""
        ns = snap.namespace
        ready = self.ready
        found = grp.no_pod_label
        out: dict[str, dict[str, float]] = {}
        dropped: list[DroppedSeries] = []
        listed, names = self._own(snap)
        for name in names:
            # A series without a namespace label is matched on the target's namespace; the
            # namespaced one wins when both exist.
            for key in (("", name), (ns, name)):
                metrics = grp.by_pod.get(key)
                if metrics is None:
                    found += key in grp.faults  # its only series was malformed
                    continue
                found += 1
                info = listed.get(name)
                if info is None:
                    dropped.append(DroppedSeries(kind, ns, name, DropReason.GONE))
                elif name in ready:
                    out[name] = metrics
                elif not info.serves:
                    continue  # a worker of a group whose leader serves: not demand, not stale
                else:
                    reason = DropReason.TERMINATING if info.terminating else DropReason.NOT_READY
                    dropped.append(DroppedSeries(kind, ns, name, reason))
        self.series_found[kind] = found
        self.dropped.extend(
            [DroppedSeries(kind, ns, "", DropReason.NO_POD_LABEL)] * grp.no_pod_label
        )
        self.dropped.extend(dropped)
        return out

    def read(self) -> TargetReadings:
        running = self.pod_values(QueryKind.RUNNING)
        scraped = bool(running)  # at least one ready pod of this target exports vLLM series
        unscraped = self.ready - set(running) if running is not None else frozenset()
        throughput = read_throughput(
            self.outcome(QueryKind.THROUGHPUT),
            self.pod_values(QueryKind.THROUGHPUT),
            self.faults.get(QueryKind.THROUGHPUT, {}),
            self.ready,
            # rate() needs two samples: one scrape interval more than a gauge's first sample
            self.not_scraped_yet(self.ready, extra_scrapes=1),
        )
        said = _partial_answers([self.outcome(QueryKind.THROUGHPUT)])
        if said and throughput.status is SignalStatus.OK:
            throughput = replace(throughput, status=SignalStatus.PARTIAL, detail=said)
        gauges = self.gauges(running)
        sleeping = self.sleeping()
        awake = {p: g for p, g in gauges.items() if p not in sleeping}
        history, stalled = track_stalls(self.history, awake, dict(throughput.pods))

        signals: dict[SignalName, SignalReading] = {}
        pods_missing: dict[SignalName, frozenset[str]] = {}
        kv_metric = ""
        metrics: dict[SignalName, str] = {}
        queries: dict[SignalName, str] = {}
        for name in self.target.signals.queried():
            spec = name.spec
            if spec.histogram is not None:
                route = self.routes.get(name)
                signals[name] = read_histogram(
                    spec,
                    self.target,
                    route,
                    self.split,
                    scraped=scraped,
                    ready=len(self.ready),
                    rate_window_seconds=self.rate_window_seconds,
                    scrape_interval=self.scrape_interval,
                    ready_seconds=self.ready_for_less_than_window(),
                )
                # a target whose series are faulty has series (the check names the fault)
                found = len(route.pods) or int(route.fault is not None) if route else 0
                self.series_found[QueryKind(spec.histogram.buckets_query)] = found
                if route is not None and route.pods:
                    metrics[name] = histogram_metric_name(spec, route.representation, route.names)
                if route is not None and route.asked:
                    queries[name] = route.query
                continue
            reading, missing = self.per_pod(name, scraped, stalled)
            signals[name] = reading
            if missing:
                pods_missing[name] = missing
            if name is SignalName.KV_CACHE_USAGE:
                kv_metric = reading.source_metric
        for name, reading in signals.items():
            kinds = _ANSWERS_OF.get(name, (SIGNAL_QUERY[name],))
            signals[name] = _partial_reading(reading, [self.outcome(k) for k in kinds])
        return TargetReadings(
            key=self.target.key,
            signals=signals,
            kv_metric=kv_metric,
            pods_missing=pods_missing,
            pods_unscraped=frozenset(unscraped),
            dropped=tuple(self.dropped),
            series_found=dict(self.series_found),
            pod_load=self.pod_load(running, stalled),
            histogram_metrics=metrics,
            histogram_queries=queries,
            throughput=throughput,
            stalled=stalled,
            pod_history=history,
            gauges=gauges,
            sleeping=sleeping,
        )

    def gauges(self, running: dict[str, dict[str, float]] | None) -> dict[str, PodGauges]:
        """Each ready pod's waiting, running and KV-cache values, for the stall detector and
        the capacity signal: only pods with a finite, non-negative value for every query the
        target reads (others are unknown: one pod's NaN queue must not become the capacity
        signal's demand, nor fail the cycle of every target)."""
        if not running:
            return {}
        enabled = self.target.signals.enabled()
        waiting = self.pod_values(QueryKind.WAITING) if SignalName.QUEUE_DEPTH in enabled else {}
        kv = self.pod_values(QueryKind.KV_CACHE) if SignalName.KV_CACHE_USAGE in enabled else {}
        if waiting is None or kv is None:
            return {}
        out: dict[str, PodGauges] = {}
        for pod, metrics in running.items():
            w: float | None = None
            k: float | None = None
            if SignalName.QUEUE_DEPTH in enabled:
                if pod not in waiting:
                    continue
                w = math.fsum(waiting[pod].values())
            if SignalName.KV_CACHE_USAGE in enabled:
                name = next((m for m in KV_METRICS if m in kv.get(pod, {})), None)
                if name is None:
                    continue
                k = kv[pod][name]
            g = PodGauges(waiting=w, running=math.fsum(metrics.values()), kv_cache=k)
            if all(v is None or (math.isfinite(v) and v >= 0) for v in (w, g.running, k)):
                out[pod] = g
        return out

    def pod_load(
        self, running: dict[str, dict[str, float]] | None, stalled: Mapping[str, PodStall]
    ) -> dict[str, float]:
        """Requests in flight per ready pod (running + waiting); pods lacking data are left
        out; frozen or hung pods count 0 (a scale-down should take them first)."""
        if not running:
            return {}
        waiting_sent = QueryKind.WAITING in self.split.answers
        waiting = self.pod_values(QueryKind.WAITING) if waiting_sent else {}
        if waiting is None:
            return {}
        out: dict[str, float] = {}
        for pod, metrics in running.items():
            if waiting_sent and pod not in waiting:
                continue
            total = math.fsum(metrics.values()) + math.fsum((waiting.get(pod) or {}).values())
            if math.isfinite(total) and total >= 0:
                out[pod] = 0.0 if pod in stalled else total
        return out

    def per_pod(
        self, name: SignalName, scraped: bool, stalled: Mapping[str, PodStall]
    ) -> tuple[SignalReading, frozenset[str]]:
        """Reading of a per-pod signal: the sum over the ready pods with data that are
        neither frozen nor hung."""
        kind = SIGNAL_QUERY[name]
        outcome = self.outcome(kind)
        values = self.pod_values(kind)
        if outcome is None or values is None:
            status = outcome.status if outcome else SignalStatus.EMPTY
            detail = outcome.detail if outcome else "query not sent"
            return SignalReading(name, status, detail=f"{kind} query: {detail}"), frozenset()
        if self.snapshot is None:
            return SignalReading(name, SignalStatus.EMPTY, detail="no workload snapshot"), (
                frozenset()
            )
        ready = self.ready
        if not ready:
            return SignalReading(name, SignalStatus.EMPTY, detail="no ready pods"), frozenset()
        faults = self.faults.get(kind)
        if faults:
            # Which of the pod's series is right cannot be told: this target's signal is
            # unusable this cycle; other targets of the same answer are not touched.
            pod = min(faults)
            return SignalReading(
                name,
                faults[pod].status,
                pods_with_data=len(values),
                pods_missing=len(ready) - len(values),
                detail=f"pod {pod}: {faults[pod].detail}"
                + (f" (and {len(faults) - 1} more pods)" if len(faults) > 1 else ""),
            ), frozenset(ready - values.keys())

        per_pod: dict[str, float] = {}
        metric_used: dict[str, str] = {}
        names = gauge_metrics(name)
        for pod, metrics in values.items():
            if len(names) > 1:
                # Prefer the new name per pod: vLLM 0.9.2-0.10 exports both KV-cache names.
                metric = next((m for m in names if m in metrics), None)
                if metric is None:
                    continue
            else:
                metric = next(iter(metrics))
            per_pod[pod] = metrics[metric]
            metric_used[pod] = metric
        if len(names) > 1:
            # Mid-upgrade pods may differ: report every name found, preferred first.
            source_metric = ",".join(m for m in names if m in metric_used.values())
            wanted = " or ".join(names)
        else:
            source_metric = wanted = names[0]

        if not per_pod:
            if scraped:
                return SignalReading(
                    name,
                    SignalStatus.ABSENT,
                    pods_missing=len(ready),
                    source_metric=source_metric,
                    detail=f"no {wanted} series for {len(ready)} ready pods, although their "
                    "vllm:num_requests_running series exist (renamed or disabled metric?)",
                ), ready
            return SignalReading(
                name,
                SignalStatus.EMPTY,
                pods_missing=len(ready),
                source_metric=source_metric,
                detail=f"no series for any of {len(ready)} ready pods",
            ), ready

        for pod in sorted(per_pod):
            bad = _bad_value_reading(name, per_pod[pod], f"pod {pod}", source_metric)
            gauge = name.spec.gauge
            if bad is None and gauge is not None and gauge.ratio:
                bad = _ratio_out_of_range(name, per_pod[pod], pod, metric_used[pod])
            if bad is not None:
                return bad, frozenset(ready - per_pod.keys())

        lagging = self.lagging(per_pod)
        for pod in lagging:
            del per_pod[pod]  # not current: unknown now, like a pod without series
        # A pod Ready for less than a scrape's reach may not have been scraped yet: no series
        # is expected there, not a fault (the sum is over the pods scraped).
        just_ready = self.not_scraped_yet(frozenset(ready - per_pod.keys() - lagging.keys()))
        missing = frozenset(ready - per_pod.keys()) - just_ready
        stuck = [stalled[p] for p in sorted(per_pod) if p in stalled]
        if stuck:
            return self.stalled_reading(name, per_pod, stuck, missing, source_metric), missing
        total = self.per_replica_sum(name, per_pod)
        if missing:
            absent = missing - lagging.keys()
            parts = [self.lag_detail(lagging)] if lagging else []
            if absent:
                parts.append(
                    f"{len(absent)} of {len(ready)} ready pods have no series: " + _names(absent)
                )
            return SignalReading(
                name,
                SignalStatus.PARTIAL,
                value=total,
                pods_with_data=len(per_pod),
                pods_missing=len(missing),
                source_metric=source_metric,
                detail="; ".join(parts),
            ), missing
        return SignalReading(
            name,
            SignalStatus.OK,
            value=total,
            pods_with_data=len(per_pod),
            source_metric=source_metric,
            detail=(
                f"{len(just_ready)} pod{'s' if len(just_ready) > 1 else ''} Ready for less than "
                f"{sample_age_limit_seconds(self.scrape_interval):.0f}s, not scraped yet: "
                + _names(just_ready)
                if just_ready
                else ""
            ),
        ), missing

    def not_scraped_yet(self, pods: frozenset[str], *, extra_scrapes: int = 0) -> frozenset[str]:
        """Those of ``pods`` Ready for less than :func:`sample_age_limit_seconds` (plus
        ``extra_scrapes`` scrape intervals: a ``rate()`` needs a second sample): their
        first scrape may not have happened yet (one every scrape interval, from when the
        pod's address is published). A pod whose Ready time is unknown is not one of them."""
        if not pods or self.snapshot is None:
            return frozenset()
        limit = sample_age_limit_seconds(self.scrape_interval) + extra_scrapes * (
            self.scrape_interval or _ASSUMED_SCRAPE_INTERVAL_SECONDS
        )
        return frozenset(
            p.name
            for p in self.snapshot.pods
            if p.name in pods and p.ready_seconds is not None and p.ready_seconds < limit
        )

    def sleeping(self) -> frozenset[str]:
        """Ready pods with an engine in sleep mode (the ``running`` answer's ``s<i>@asleep``
        group; pods without vLLM's sleep-state gauge are awake)."""
        groups = self.split.pod_groups.get(QueryKind.RUNNING) or {}
        grp = groups.get(asleep_group(self.gid))
        if grp is None or self.snapshot is None:
            return frozenset()
        ns = self.snapshot.namespace
        return frozenset(
            pod
            for pod in self.ready
            if any(
                v > 0
                for v in (grp.by_pod.get((ns, pod)) or grp.by_pod.get(("", pod)) or {}).values()
            )
        )

    def sample_ages(self) -> dict[str, float]:
        """Ready pod -> the age of its newest ``vllm:num_requests_running`` sample, seconds
        (the ``running`` answer's ``s<i>@age`` group); pods without one are left out."""
        groups = self.split.pod_groups.get(QueryKind.RUNNING) or {}
        grp = groups.get(sample_age_group(self.gid))
        if grp is None or self.snapshot is None:
            return {}
        ns = self.snapshot.namespace
        out: dict[str, float] = {}
        for pod in self.ready:
            ages = grp.by_pod.get((ns, pod)) or grp.by_pod.get(("", pod))
            if ages:
                age = max(ages.values())
                if math.isfinite(age):
                    out[pod] = age
        return out

    def lagging(self, per_pod: Mapping[str, float]) -> dict[str, float]:
        """The pods among ``per_pod`` whose newest sample is older than the limit
        (:func:`sample_age_limit_seconds`), with their ages."""
        ages = self.sample_ages()
        limit = sample_age_limit_seconds(self.scrape_interval)
        return {p: ages[p] for p in sorted(per_pod) if ages.get(p, 0.0) > limit}

    def lag_detail(self, lagging: Mapping[str, float]) -> str:
        """What a person needs to know about pods whose samples are not current."""
        limit = sample_age_limit_seconds(self.scrape_interval)
        oldest = max(lagging.values())
        return (
            f"the newest samples of {len(lagging)} of {len(self.ready)} ready pods are up to "
            f"{oldest:.0f} s old (more than {limit:.0f} s, {SAMPLE_AGE_INTERVALS} scrape "
            "intervals): not current, left out (a remote-write backlog, a stalled agent or "
            "federation delay?): " + _names(list(lagging))
        )

    def per_replica_sum(self, name: SignalName, per_pod: Mapping[str, float]) -> float:
        """The signal's sum over replicas: over pods, but the KV cache, a ratio per engine,
        as the mean of each group's pods when a replica is a group of pods (a group of two
        pods at 0.9 is one replica at 0.9, not 1.8); a queue adds up over every pod."""
        snap = self.snapshot
        if name is not SignalName.KV_CACHE_USAGE or snap is None or not snap.grouped:
            return math.fsum(per_pod.values())
        group_of = {p.name: p.group or p.name for p in snap.pods}
        groups: dict[str, list[float]] = {}
        for pod, value in per_pod.items():
            groups.setdefault(group_of.get(pod, pod), []).append(value)
        return math.fsum(math.fsum(v) / len(v) for v in groups.values())

    def stalled_reading(
        self,
        name: SignalName,
        per_pod: dict[str, float],
        stuck: list[PodStall],
        missing: frozenset[str],
        source_metric: str,
    ) -> SignalReading:
        """The reading when some ready pods are frozen or hung: the sum over the others."""
        left_out = {s.pod for s in stuck}
        kept = {p: v for p, v in per_pod.items() if p not in left_out}
        hung = any(s.kind is StallKind.HUNG for s in stuck)
        detail = "; ".join(s.describe() for s in stuck[:3])
        if len(stuck) > 3:
            detail += f"; and {len(stuck) - 3} more pods"
        detail += ": left out of the sum"
        if missing:
            detail += f"; {len(missing)} ready pods have no series: " + _names(missing)
        return SignalReading(
            name,
            SignalStatus.HUNG if hung else SignalStatus.FROZEN,
            value=self.per_replica_sum(name, kept),
            pods_with_data=len(kept),
            pods_missing=len(missing),
            source_metric=source_metric,
            detail=detail,
        )

    def ready_for_less_than_window(self) -> float | None:
        """Seconds the longest-ready pod has been ready, when every ready pod has been ready
        for less than the ``rate()`` window (their series cannot hold two samples of it
        yet); None otherwise, or when a ready time is unknown."""
        if self.snapshot is None:
            return None
        times = [p.ready_seconds for p in self.snapshot.pods if p.ready and not p.terminating]
        if not times or any(t is None for t in times):
            return None
        longest = max(t for t in times if t is not None)
        return longest if longest < self.rate_window_seconds else None
