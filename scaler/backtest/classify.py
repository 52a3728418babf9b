"""One step of history -> the readings the live source would have produced at that time.

The live source's rules are reused, not re-implemented: the per-step instant vectors are fed
to the same splitting (:func:`scaler.sources.prometheus.split_answers`) and per-target
classification (:func:`scaler.sources.prometheus.read_targets`) that
:class:`scaler.sources.prometheus.PrometheusSource` applies to its instant answers (per-pod
sums over the ready pods with data, ``partial`` when some have none, ``absent`` versus
``empty``, the new KV-cache name preferred per pod, TTFT ``idle`` only when the request rate
is exactly 0, NaN/Inf/negative invalid, frozen and hung pods left out given the previous
step's ``pod_history``); ``tests/backtest/test_classify.py`` pins that this adapter and
``PrometheusSource.read`` agree on the same vector.

What history does not have is the Kubernetes side: which pods were ready. A pod counts as
ready at a step when it has a ``vllm:num_requests_running`` sample then (vLLM serves
``/metrics`` only once its model is loaded). So a signal is ``partial`` only when a pod that
exports ``running`` lacks that signal's series, and pods that are not ready but scraped (the
live source would drop their series) count here.

Since when a pod is ready (the capacity signal takes a sample, and counts a pod's rate as a
whole window's, only from pods Ready for 1.5 rate windows) is the time of the first step of
its current run of steps with a ``running`` sample: up to one step plus one scrape interval
later than its Ready condition (plus the time Prometheus takes to start scraping a target it
discovers only then: it passes discovered changes on every 5 s), so history takes samples at
most that much later than the controller did. A pod already there at the first step was
ready before the history begins and counts as ready for long (``ready_seconds`` infinite), as
the controller sees a pod that was ready before it started.

The capacity signal's input (:class:`~scaler.core.observation.ThroughputReading`) is built
by the live source's :func:`~scaler.sources.prometheus.demand.throughput_of` from the same
readings: the per-pod rates of the throughput query, each pod's waiting requests and
KV-cache usage, stalled pods left out.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from scaler.config.policy import TargetPolicy
from scaler.config.signal_specs import histogram_specs
from scaler.config.vocabulary import SignalName
from scaler.core.observation import PodInfo, ThroughputReading, WorkloadSnapshot
from scaler.core.signals import SignalReading, SignalStatus
from scaler.sources.prometheus import (
    Answer,
    PodHistory,
    PodSeries,
    QueryOutcome,
    read_targets,
    split_answers,
)
from scaler.sources.prometheus.demand import throughput_of
from scaler.sources.prometheus.histograms import plan_histogram
from scaler.sources.promql import THROUGHPUT_METRICS, QueryKind, QueryPlan

__all__ = ["StepReadings", "readings_at_step"]

Sample = tuple[dict[str, str], float]


@dataclass(frozen=True, slots=True)
class StepReadings:
    """One target's readings at one step.

    Attributes:
        signals: one reading per enabled signal (see :class:`~scaler.core.signals.SignalReading`;
            per-pod values are sums over the pods with data).
        pods: pods of the target with a ``vllm:num_requests_running`` sample at this step.
        kv_metric: the KV-cache metric name(s) found ('' when none).
        pod_history: the stall detector's per-pod histories after this step: hand them to
            the next step (see :mod:`scaler.sources.prometheus.stalls`).
        throughput: the capacity signal's input, as the live source builds it.
        pod_infos: the pods as the decision core sees them (ready, with ``ready_seconds``).
        ready_since: pod -> the time (Unix seconds; ``-inf`` for a pod there at the first
            step) of the first step of its current run with a sample: hand it to the next
            step.
        throughput_counters: the throughput counters (``vllm:request_success_total``, ...)
            that at least one of the target's pods has a rate of at this step.
    """

    signals: dict[SignalName, SignalReading]
    pods: int
    kv_metric: str
    pod_history: dict[str, PodHistory] = field(default_factory=dict)
    throughput: ThroughputReading | None = None
    pod_infos: tuple[PodInfo, ...] = ()
    ready_since: dict[str, float] = field(default_factory=dict)
    throughput_counters: frozenset[str] = frozenset()


def _pod_names(target: TargetPolicy, group: PodSeries | None) -> list[str]:
    """The target's pods with a ``running`` series at this step, sorted."""
    ns = target.workload.namespace
    # History has no pod list: the target's pods are those its own selector picks. Targets
    # that share a namespace's default selector are told apart by their pod-name pattern.
    own = re.compile(target.pod_name_regex()) if target.prometheus_matchers is None else None
    return sorted(
        pod
        for (pod_ns, pod) in (group.by_pod if group else {})
        if pod_ns in (ns, "") and (own is None or own.fullmatch(pod))
    )


def _snapshot(
    target: TargetPolicy, names: Sequence[str], ready_since: Mapping[str, float], now: float | None
) -> WorkloadSnapshot:
    pods = tuple(
        PodInfo(
            name=n,
            ready=True,
            terminating=False,
            age_seconds=math.inf,
            ready_seconds=now - ready_since[n] if now is not None else None,
        )
        for n in names
    )
    return WorkloadSnapshot(
        namespace=target.workload.namespace,
        spec_replicas=len(pods),
        status_replicas=len(pods),
        selector="",
        resource_version="",
        pods=pods,
    )


def readings_at_step(
    targets: Sequence[TargetPolicy],
    plan: QueryPlan,
    vectors: Mapping[QueryKind, Sequence[Sample]],
    *,
    rate_window_seconds: float,
    history: Mapping[str, Mapping[str, PodHistory]] | None = None,
    now: float | None = None,
    ready_since: Mapping[str, Mapping[str, float]] | None = None,
) -> dict[str, StepReadings]:
    """Classify the plan's answers at one step into readings, per target key.

    Args:
        targets: the targets the plan was built for.
        plan: the controller's query plan (:func:`scaler.sources.promql.build_query_plan`).
        vectors: query kind -> the ``(labels, value)`` series with a sample at this step; a
            kind of the plan missing here is an answer with no series (``empty``);
            ``ttft_buckets`` holds the per-target bucket rates of
            :func:`~scaler.backtest.history.history_queries`.
        rate_window_seconds: the TTFT ``rate()`` window (only for messages).
        history: target key -> the ``pod_history`` of its readings at the previous step
            (None: the first step).
        now: the step's time, Unix seconds (None: the pods' ready times are unknown).
        ready_since: target key -> the ``ready_since`` of its readings at the previous step
            (None: the first step, whose pods count as ready since before it).

    Returns:
        Target key -> :class:`StepReadings`.
    """
    answers: dict[QueryKind, Answer] = {}
    queries = dict(plan.queries)
    for kind in vectors:
        if not kind.per_pod:
            queries[kind] = f"(the {kind} of history)"
    for kind, query in queries.items():
        series = list(vectors.get(kind, ()))
        answers[kind] = Answer(
            QueryOutcome(kind, SignalStatus.OK, series=len(series), query=query), series
        )
    split = split_answers(answers)

    running = split.pod_groups.get(QueryKind.RUNNING, {})
    first = ready_since is None
    since: dict[str, dict[str, float]] = {}
    snapshots: dict[str, WorkloadSnapshot] = {}
    for t in targets:
        names = _pod_names(t, running.get(plan.selector_group[t.key]))
        before = (ready_since or {}).get(t.key, {})
        start = -math.inf if first or now is None else now
        since[t.key] = {n: before.get(n, start) for n in names}
        snapshots[t.key] = _snapshot(t, names, since[t.key], now)
    # Which targets had TTFT (ITL) requests at this step, from the per-pod request rates as the
    # live source decides it; the bucket rates are history's, read per target.
    plans = {
        s.name: plan_histogram(s, targets, snapshots, {}, plan, split, recorded=False)
        for s in histogram_specs()
    }
    readings = read_targets(
        targets,
        snapshots,
        plan,
        split,
        rate_window_seconds=rate_window_seconds,
        histogram_plans=plans,
        history=history,
    )
    rates = split.pod_groups.get(QueryKind.THROUGHPUT, {})
    out: dict[str, StepReadings] = {}
    for t in targets:
        tr = readings[t.key]
        snap = snapshots[t.key]
        out[t.key] = StepReadings(
            dict(tr.signals),
            len(snap.pods),
            tr.kv_metric,
            tr.pod_history,
            throughput=throughput_of(tr),
            pod_infos=snap.pods,
            ready_since=since.get(t.key, {}),
            throughput_counters=_counters(rates.get(plan.selector_group[t.key]), snap),
        )
    return out


def _counters(group: PodSeries | None, snap: WorkloadSnapshot) -> frozenset[str]:
    """The throughput counters that at least one of the snapshot's pods has a series of."""
    if group is None:
        return frozenset()
    found: set[str] = set()
    for p in snap.pods:
        for key in ((snap.namespace, p.name), ("", p.name)):
            found.update(m for m in group.by_pod.get(key, {}) if m in THROUGHPUT_METRICS)
    return frozenset(found)
