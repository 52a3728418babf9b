"""The Prometheus signal source: every target's readings in a constant number of queries.

:class:`PrometheusSource` sends the cycle's instant queries (:mod:`scaler.sources.promql`, at
most six whatever the number of targets, two more per latency histogram besides TTFT that a
target enables): the per-pod queries concurrently, and those that their answers shape: each
latency histogram's buckets query (:mod:`.histograms`: which targets have requests, in which
histogram representation, read raw or from the recording rules) and the throughput query
(where the recording rules hold fresh per-pod rates). Those two are sent with the first
round as the previous read planned them, and sent again only when this read's answers plan
them otherwise (a target that starts or stops, a recording that goes stale or comes back);
the first read of a plan sends each as soon as the answer it depends on is in. It splits
each answer per target as it comes in, while Prometheus computes the others
(:mod:`.split`), attributes series to the pods each target owns (:mod:`.attribution`) and
classifies them into readings (:mod:`.readings`). ``read`` never
raises for Prometheus trouble: every fault is a named status.

The source keeps state from one read to the next: the stall detector's per-pod histories
(:mod:`.stalls`), so that values that stopped moving are recognised across polls, and the
pods each target listed until recently (:mod:`.attribution`).
"""

from __future__ import annotations

import asyncio
import itertools
import re
import statistics
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx
import structlog

from scaler.config.durations import DurationError, unit_duration
from scaler.config.policy import DEFAULT_REPLICA_LABELS, TargetPolicy
from scaler.config.settings import redact_url
from scaler.config.signal_specs import histogram_specs
from scaler.config.vocabulary import SignalName
from scaler.core.observation import WorkloadSnapshot
from scaler.core.signals import SignalReading, SignalStatus
from scaler.sources.prometheus.answers import Answer, QueryOutcome, paused_gc
from scaler.sources.prometheus.attribution import PodMemory
from scaler.sources.prometheus.backend import (
    NATIVE_HISTOGRAM_PROBE,
    lacked_function,
    native_histograms_from,
)
from scaler.sources.prometheus.histograms import HistogramPlan, plan_histogram
from scaler.sources.prometheus.http import instant_query, query_body, register_url_credentials
from scaler.sources.prometheus.limits import MAX_SPLITS, halves, limited
from scaler.sources.prometheus.readings import TargetReadings, read_targets
from scaler.sources.prometheus.split import (
    SplitAnswers,
    Unattributed,
    merge_splits,
    recorded_throughput_namespaces,
    split_answers,
    with_ttft,
)
from scaler.sources.prometheus.stalls import PodHistory
from scaler.sources.promql import (
    RUNNING_METRIC,
    SIGNAL_QUERY,
    QueryKind,
    build_query_plan,
    build_throughput_query,
    label_value,
    promql_duration,
)

__all__ = ["PrometheusSource", "SourceResult"]

log = structlog.get_logger("scaler.sources.prometheus")


@dataclass(frozen=True, slots=True)
class SourceResult:
    """Everything one :meth:`PrometheusSource.read` produced.

    Attributes:
        targets: target key -> :class:`TargetReadings`, for every target passed in.
        queries: query kind -> :class:`QueryOutcome`, for every query sent.
        duration_seconds: wall time of the whole read.
        unattributed: query kind -> the series of its answer that named no selector group or
            target (left out; see :mod:`.split`).
        throughput_recorded_namespaces: namespaces whose pods' throughput was read from the
            recording rules (fresh there) rather than from the raw counters.
        unused_queries: queries sent early, as the previous read planned them, whose
            answers were not read because this read's first answers planned them otherwise
            (each then sent again as planned now, and counted in :attr:`queries`).
    """

    targets: dict[str, TargetReadings]
    queries: dict[QueryKind, QueryOutcome]
    duration_seconds: float = 0.0
    unattributed: dict[QueryKind, Unattributed] = field(default_factory=dict)
    throughput_recorded_namespaces: int = 0
    unused_queries: int = 0

    @property
    def queries_sent(self) -> int:
        """Number of HTTP queries sent (constant in the number of targets): at most 6, five
        per-pod ones and the TTFT query (left out when no target needs it), plus one or two
        on a read whose dependent queries were planned otherwise than the previous read's
        (:attr:`unused_queries`)."""
        return len(self.queries) + self.unused_queries

    def readings(self, key: str) -> dict[SignalName, SignalReading]:
        """The signal readings of target ``key`` (KeyError if it was not read)."""
        return self.targets[key].signals


class PrometheusSource:
    """Reads every target's signals from Prometheus in a constant number of queries.

    Args:
        client: the HTTP client (see :func:`~scaler.sources.prometheus.http.
            build_http_client` for auth and TLS); the caller owns and closes it.
        base_url: Prometheus base URL, e.g. ``http://prometheus:9090`` or a path-prefixed
            URL such as ``https://thanos/prometheus``.
        timeout_seconds: total deadline per query (client side; also sent to Prometheus
            as the ``timeout`` parameter so it stops evaluating).
        rate_window_seconds: ``rate()`` window of the TTFT and throughput queries
            (``Policy.rate_window_seconds``).
        clock: seconds, for how long a pod a target no longer lists is still known as its
            own (:class:`~scaler.sources.prometheus.attribution.PodMemory`).
        replica_labels: the labels the copies of one series differ in behind an HA
            Prometheus pair (``Policy.replica_labels``): every query reads one copy.

    Attributes:
        scrape_intervals: target key -> its pods' scrape interval, seconds, once found at
            start (:func:`~scaler.sources.prometheus.check.check_rate_window`); a TTFT
            without data then names a rate window that is too short.

    Raises:
        ValueError: a non-positive timeout or rate window.
    """

    def __init__(
        self,
        client: httpx.AsyncClient,
        *,
        base_url: str,
        timeout_seconds: float,
        rate_window_seconds: float,
        clock: Callable[[], float] = time.monotonic,
        replica_labels: Sequence[str] = DEFAULT_REPLICA_LABELS,
    ) -> None:
        if not timeout_seconds > 0:
            raise ValueError(f"timeout_seconds must be positive, got {timeout_seconds!r}")
        if not rate_window_seconds > 0:
            raise ValueError(f"rate_window_seconds must be positive, got {rate_window_seconds!r}")
        self._client = client
        self._url = base_url.rstrip("/") + "/api/v1/query"
        register_url_credentials(base_url)
        self._timeout = timeout_seconds
        self.rate_window_seconds = rate_window_seconds
        self.replica_labels = tuple(replica_labels)
        self.scrape_intervals: dict[str, float] = {}
        self.native_histograms: bool | None = None  # unknown until the first probe answers
        self._memory = PodMemory(clock)
        # The stall detector's memory: target -> pod -> history after the last read. Replaced
        # by each read, so targets and pods not read then start over (never judged on a gap).
        self._history: dict[str, dict[str, PodHistory]] = {}
        # The last read's dependent queries, sent early by the next read of the same plan
        # (one per part of the targets, see :mod:`.limits`).
        self._guesses: dict[frozenset[str], _Guess] = {}
        # The targets in parts that a backend's per-query limit made the source read apart,
        # for the targets they were found for; one part until a limit is hit.
        self._parts: list[frozenset[str]] = []
        self._parts_for: frozenset[str] = frozenset()

    async def read(
        self,
        policy_targets: Sequence[TargetPolicy],
        snapshots: Mapping[str, WorkloadSnapshot],
        *,
        log_absent: bool = True,
    ) -> SourceResult:
        """Read every enabled signal of every target.

        Args:
            policy_targets: the targets (their selectors and enabled signals).
            snapshots: target key -> its Kubernetes snapshot; per-pod series count only
                for the snapshot's live, ready pods. A target without a snapshot gets
                ``empty`` per-pod signals ("no workload snapshot").
            log_absent: log each ``absent`` signal as an error (False: a caller that
                reports them itself, the start-up check, so that each is said once).

        Returns:
            A :class:`SourceResult` with a :class:`TargetReadings` per target. Never raises
            for Prometheus faults; each becomes a named status. A signal ``absent`` while
            its target's pods are scraped is logged as an error (a configuration problem),
            naming the query that returned nothing.
            Frozen and hung pods are judged on this read and the previous ones (see
            :mod:`scaler.sources.prometheus.stalls`).
        """
        # The collector stays paused for the whole read, the awaits included: paused only
        # while each answer was decoded and split, it walked every answer's survivors right
        # after (a tenth of the read's CPU). The read's big containers are freed when it
        # returns, so little is left to collect; other tasks meanwhile run without cyclic
        # collection for at most the read's duration (bounded by the query timeout).
        with paused_gc():
            keys = frozenset(t.key for t in policy_targets)
            if keys != self._parts_for:  # other targets: one part again, until a limit
                self._parts, self._parts_for = [keys], keys
            results: list[SourceResult] = []
            leaves: list[frozenset[str]] = []
            refused = [0]
            for part in self._parts:
                chosen = [t for t in policy_targets if t.key in part]
                await self._read_within_limits(chosen, snapshots, results, leaves, refused)
            self._parts = leaves
            result = results[0] if len(results) == 1 else _merged(results, refused[0])
            if log_absent:
                _log_absent(result.targets.values(), result.queries)
            return result

    async def _read_within_limits(
        self,
        targets: list[TargetPolicy],
        snapshots: Mapping[str, WorkloadSnapshot],
        results: list[SourceResult],
        leaves: list[frozenset[str]],
        refused: list[int],
        depth: int = 0,
    ) -> None:
        """Read ``targets``; when an answer is refused for a per-query limit, read them again
        in two halves (:func:`~.limits.halves`), down to :data:`~.limits.MAX_SPLITS` levels."""
        result = await self._read(targets, snapshots)
        over = [o for o in result.queries.values() if limited(o)]
        parts = halves(targets) if over and depth < MAX_SPLITS else None
        if parts is None:
            results.append(result)
            leaves.append(frozenset(t.key for t in targets))
            return
        refused[0] += len(result.queries) + result.unused_queries
        log.warning(
            "query_split",
            query=str(over[0].kind),
            targets=len(targets),
            parts=[len(parts[0]), len(parts[1])],
            error=over[0].detail,
            message="the query backend refused a query over these targets for a per-query "
            "limit; they are read in two parts (and in parts from now on), so that only "
            "targets that alone exceed the limit lose the signal (raise the backend's limit, "
            "or read fewer series: the recording rules cut the TTFT buckets' series)",
        )
        for half in parts:
            await self._read_within_limits(half, snapshots, results, leaves, refused, depth + 1)

    async def _read(
        self,
        policy_targets: Sequence[TargetPolicy],
        snapshots: Mapping[str, WorkloadSnapshot],
    ) -> SourceResult:
        start = time.monotonic()
        window = self.rate_window_seconds
        if self.native_histograms is None:
            self.native_histograms = await self._probe_native_histograms()
        plan = build_query_plan(
            policy_targets,
            rate_window_seconds=window,
            native_histograms=self.native_histograms is not False,
            replica_labels=self.replica_labels,
        )
        former = self._memory.update(snapshots, rate_window_seconds=window)
        # The throughput query depends on the running answer, which says where the recording
        # rules hold fresh per-pod rates (read those instead of rate() over raw counters),
        # and the TTFT query on the request rates. Both are sent with the first round as the
        # previous cycle planned them (same per-pod plan), and sent again only when this
        # cycle's answers plan them otherwise.
        gid = plan.default_group if QueryKind.RUNNING in plan.queries else None
        part = frozenset(t.key for t in policy_targets)
        # the guess of the part read last with these targets (the same plan, or one the
        # targets changed since: its dependent queries may still cover them)
        known = max(self._guesses.items(), key=lambda kv: len(kv[0] & part), default=None)
        guess = known[1] if known is not None and known[1].queries == plan.queries else None
        first = {
            k: asyncio.ensure_future(self._query(k, q))
            for k, q in plan.queries.items()
            if not (gid is not None and k is QueryKind.THROUGHPUT)
        }
        early: dict[QueryKind, asyncio.Future[Answer]] = {}
        if guess is not None and gid is not None:
            early[QueryKind.THROUGHPUT] = asyncio.ensure_future(
                self._query(QueryKind.THROUGHPUT, guess.throughput)
            )
        # each latency histogram whose first round is asked: its spec and its buckets query
        rounds_of = {
            QueryKind(s.histogram.rate_query): (s, QueryKind(s.histogram.buckets_query))
            for s in histogram_specs()
            if s.histogram is not None and QueryKind(s.histogram.rate_query) in plan.queries
        }
        for spec, kind in rounds_of.values():
            guessed = guess.histograms.get(spec.name) if guess is not None else None
            if guessed is not None and guessed.query is not None:
                early[kind] = asyncio.ensure_future(self._query(kind, guessed.query))
        parts: dict[QueryKind, SplitAnswers] = {}
        histogram_plans: dict[SignalName, HistogramPlan] = {}
        recorded_throughput: list[str] = []
        throughput_query = plan.queries.get(QueryKind.THROUGHPUT, "")
        unused = 0  # early queries whose answers this cycle's plan does not read

        def drop(kind: QueryKind) -> None:
            nonlocal unused
            sent = early.pop(kind, None)
            if sent is not None:
                sent.cancel()
                unused += 1

        async def planned(kind: QueryKind, promql: str, reuse: bool) -> Answer:
            # The early answer when this cycle planned the same (for TTFT: when the early
            # query covers this cycle's plan), else the query as planned now.
            sent = early.pop(kind, None) if reuse else None
            if sent is not None:
                return await sent
            drop(kind)
            return await self._query(kind, promql)

        def split_now(kind: QueryKind, answer: Answer) -> None:
            parts[kind] = split_answers({kind: answer})

        async def split_when_answered(kind: QueryKind) -> None:
            # Each answer is split as it comes in, while Prometheus computes the others.
            split_now(kind, await first[kind])

        async def histogram_round(rate_kind: QueryKind) -> None:
            # A buckets query needs only its histogram's observation rates: it is sent as soon
            # as they answer.
            spec, kind = rounds_of[rate_kind]
            await split_when_answered(rate_kind)
            planned_now = plan_histogram(
                spec, policy_targets, snapshots, former, plan, parts[rate_kind]
            )
            histogram_plans[spec.name] = planned_now
            if planned_now.query is None:
                drop(kind)
                return
            guessed = guess.histograms.get(spec.name) if guess is not None else None
            covered = guessed is not None and guessed.covers(planned_now)
            answer = await planned(kind, planned_now.query, covered)
            parts[kind] = with_ttft(SplitAnswers({}), answer, kind)

        async def throughput_round(gid: str) -> None:
            nonlocal recorded_throughput, throughput_query
            await split_when_answered(QueryKind.RUNNING)
            running = parts[QueryKind.RUNNING].pod_groups.get(QueryKind.RUNNING, {})
            recorded_throughput = recorded_throughput_namespaces(
                running.get(gid), plan.default_namespaces, window
            )
            throughput_query = build_throughput_query(plan, recorded_throughput)
            same = guess is not None and guess.throughput == throughput_query
            answer = await planned(QueryKind.THROUGHPUT, throughput_query, same)
            split_now(QueryKind.THROUGHPUT, answer)

        own_round = {*rounds_of, *([QueryKind.RUNNING] if gid is not None else [])}
        rounds: list[asyncio.Future[Any]] = [
            asyncio.ensure_future(split_when_answered(k)) for k in first if k not in own_round
        ]
        if gid is not None:
            rounds.append(asyncio.ensure_future(throughput_round(gid)))
        for rate_kind in rounds_of:
            rounds.append(asyncio.ensure_future(histogram_round(rate_kind)))
        try:
            await asyncio.gather(*rounds)
        finally:  # cancelled (a stop mid-cycle): no query outlives the cycle
            for task in [*first.values(), *early.values(), *rounds]:
                task.cancel()
        self._guesses = {k: g for k, g in self._guesses.items() if not k & part}
        self._guesses[part] = _Guess(plan.queries, throughput_query, histogram_plans)
        order = [*plan.queries, *(kind for _, kind in rounds_of.values())]
        split = merge_splits([parts[k] for k in order if k in parts])
        targets = read_targets(
            policy_targets,
            snapshots,
            plan,
            split,
            rate_window_seconds=window,
            histogram_plans=histogram_plans,
            former=former,
            scrape_intervals=self.scrape_intervals,
            history=self._history,
        )
        # this read's targets' histories replace theirs; other parts' stay
        self._history = {k: h for k, h in self._history.items() if k not in part}
        self._history.update({k: tr.pod_history for k, tr in targets.items() if tr.pod_history})
        return SourceResult(
            targets=targets,
            queries={k: a.outcome for k, a in split.answers.items()},
            duration_seconds=time.monotonic() - start,
            unattributed=dict(split.unattributed),
            throughput_recorded_namespaces=len(recorded_throughput),
            unused_queries=unused,
        )

    async def lookback_delta_seconds(self) -> float | None:
        """The backend's instant-query lookback (Prometheus' ``--query.lookback-delta``, from
        ``/api/v1/status/flags``), seconds; None when the backend does not say (Thanos Query,
        VictoriaMetrics and proxies may not serve the flags)."""
        url = self._url.removesuffix("/query") + "/status/flags"
        try:
            answer = await self._client.get(url, timeout=self._timeout)
            flag = answer.json()["data"]["query.lookback-delta"]
        except Exception:  # any failure: unknown, never a reason to stop
            return None
        try:
            return unit_duration(str(flag))
        except DurationError:  # not a duration: unknown, as above
            return None

    async def probe_scrape_intervals(
        self,
        policy_targets: Sequence[TargetPolicy],
        snapshots: Mapping[str, WorkloadSnapshot],
    ) -> dict[str, float]:
        """Find each target's scrape interval from its pods' samples, once at start.

        One instant query of a range vector, ``vllm:num_requests_running{namespace=~...,
        pod=~...}[L]`` over one ready pod per target (L: four rate windows, at least 3 min),
        and the median gap between consecutive samples of that pod. The result is kept in
        :attr:`scrape_intervals` (a TTFT without data then names a too short rate window) and
        returned: target key -> seconds, for the targets whose pod had two samples or more.
        Never raises: on any failure the intervals stay unknown (an empty result).
        """
        probe: dict[tuple[str, str], list[str]] = {}
        for t in policy_targets:
            snap = snapshots.get(t.key)
            ready = sorted(snap.ready_pod_names) if snap else []
            if snap is not None and ready:
                probe.setdefault((snap.namespace, ready[0]), []).append(t.key)
        if not probe:
            return {}
        lookback = max(4 * self.rate_window_seconds, 180.0)
        namespaces = "|".join(re.escape(ns) for ns in sorted({ns for ns, _ in probe}))
        pods = "|".join(re.escape(pod) for pod in sorted({pod for _, pod in probe}))
        promql = (
            f'{RUNNING_METRIC}{{namespace=~"{label_value(namespaces)}",'
            f'pod=~"{label_value(pods)}"}}[{promql_duration(lookback)}]'
        )
        # kind: the probe reads the running gauge, as the cycle's running query does
        body, failed = await query_body(
            self._client, self._url, QueryKind.RUNNING, promql, timeout_seconds=self._timeout
        )
        try:
            if failed is not None:
                raise ValueError(f"{failed.status}: {failed.detail}")
            times = sample_times(body)
        except ValueError as err:
            log.warning("scrape_interval_unknown", url=redact_url(self._url), error=str(err))
            return {}
        found: dict[str, float] = {}
        for (ns, pod), keys in probe.items():
            gaps = [
                b - a for series in times.get((ns, pod), []) for a, b in itertools.pairwise(series)
            ]
            if gaps:
                for key in keys:
                    found[key] = round(statistics.median(gaps), 3)
        self.scrape_intervals = found
        return found

    async def probe_series_copies(
        self, policy_targets: Sequence[TargetPolicy]
    ) -> dict[str, list[str]] | None:
        """Whether the targets' vLLM series arrive more than once, differing only in a
        replica label (an HA Prometheus pair behind one endpoint without deduplication), once
        at start: ``count by (<replica labels>) (vllm:num_requests_running{namespace=~...})``.

        Returns:
            replica label -> its values, for the labels with more than one value (empty:
            every series comes once); None when unknown (no replica labels, or the query
            failed). The queries read one copy either way (:func:`~scaler.sources.promql.
            one_copy`); this only tells whether they had to.
        """
        namespaces = sorted({t.workload.namespace for t in policy_targets})
        if not self.replica_labels or not namespaces:
            return None
        union = "|".join(re.escape(ns) for ns in namespaces)
        promql = (
            f"count by ({', '.join(self.replica_labels)}) "
            f'({RUNNING_METRIC}{{namespace=~"{label_value(union)}"}})'
        )
        answer = await self._query(QueryKind.RUNNING, promql)
        if not answer.outcome.ok:
            return None
        values: dict[str, set[str]] = {}
        for labels, _ in answer.series:
            for name in self.replica_labels:
                if name in labels:
                    values.setdefault(name, set()).add(labels[name])
        return {name: sorted(v) for name, v in values.items() if len(v) > 1}

    async def probe(self) -> QueryOutcome | None:
        """The start-up probe: one query, :meth:`_probe_native_histograms`' (it is not asked
        again at the first read when it was answered). Returns None when Prometheus answered
        as an API that can be queried, else the failed outcome (transport, timeout, an HTTP
        status such as 401 or 403 with the server's message, a body that is not the API's):
        see :func:`~scaler.sources.prometheus.check.probe_problem`."""
        outcome = await self._native_histogram_outcome()
        return None if self.native_histograms is not None else outcome

    async def _native_histogram_outcome(self) -> QueryOutcome:
        answer = await self._query(QueryKind.TTFT_RATE, NATIVE_HISTOGRAM_PROBE)
        outcome = answer.outcome
        self.native_histograms = native_histograms_from(outcome.status, outcome.detail)
        if self.native_histograms is False:
            log.info(
                "native_histograms_unsupported",
                detail=outcome.detail,
                function=lacked_function(outcome.detail),
                message="the backend has no native-histogram functions: the latency histograms "
                "(TTFT, ITL) are read from classic histograms only",
            )
        return outcome

    async def _probe_native_histograms(self) -> bool | None:
        """Whether the backend knows the native-histogram functions (asked once, at the first
        read; :mod:`.backend`): Prometheus 2.40 on answers; VictoriaMetrics and older
        Prometheus reject an unknown function, which would fail the whole request-rate query.
        None when the answer says neither (an outage): asked again at the next read, native
        parts kept meanwhile."""
        await self._native_histogram_outcome()
        return self.native_histograms

    async def _query(self, kind: QueryKind, promql: str) -> Answer:
        return await instant_query(
            self._client, self._url, kind, promql, timeout_seconds=self._timeout
        )


def _merged(results: Sequence[SourceResult], refused: int) -> SourceResult:
    """One result of the parts' reads: every target's readings; per query the outcome of a
    part that failed, if any (it is a fault to report); ``refused``: queries of the reads
    that were split (sent, and refused for a limit) counted as unused."""
    queries: dict[QueryKind, QueryOutcome] = {}
    unattributed: dict[QueryKind, Unattributed] = {}
    for r in results:
        for kind, outcome in r.queries.items():
            if kind not in queries or (queries[kind].ok and not outcome.ok):
                queries[kind] = outcome
        for kind, lost in r.unattributed.items():
            seen = unattributed.get(kind)
            unattributed[kind] = (
                lost if seen is None else Unattributed(seen.count + lost.count, seen.first)
            )
    sent = sum(len(r.queries) + r.unused_queries for r in results)
    return SourceResult(
        targets={k: v for r in results for k, v in r.targets.items()},
        queries=queries,
        duration_seconds=sum(r.duration_seconds for r in results),
        unattributed=unattributed,
        throughput_recorded_namespaces=sum(r.throughput_recorded_namespaces for r in results),
        unused_queries=sent - len(queries) + refused,
    )


@dataclass(frozen=True, slots=True)
class _Guess:
    """What one read asked in its dependent queries, for the next read to send early.

    Attributes:
        queries: the per-pod plan's queries it was read with (the guess holds for that
            plan only).
        throughput: the throughput query as the running answer planned it.
        histograms: per latency signal, its second round as its observation rates planned it.
    """

    queries: Mapping[QueryKind, str]
    throughput: str
    histograms: Mapping[SignalName, HistogramPlan]


def sample_times(body: object) -> dict[tuple[str, str], list[list[float]]]:
    """(namespace, pod) -> per series of the pod, the sorted timestamps (seconds) of an
    instant query's range-vector answer.

    Per series, not merged per pod: behind an HA Prometheus pair each series comes once per
    replica, each scraped at its own phase, and their timestamps merged would halve the
    interval (a pod's engines, scraped together, give the same gaps either way).

    Raises:
        ValueError: the body is not a successful matrix answer.
    """
    data = body.get("data") if isinstance(body, dict) else None
    if not isinstance(data, dict) or data.get("resultType") != "matrix":
        raise ValueError("not a matrix answer")
    out: dict[tuple[str, str], list[list[float]]] = {}
    for item in data.get("result") or []:
        labels = item.get("metric") or {}
        values = item.get("values") or []
        key = (str(labels.get("namespace", "")), str(labels.get("pod", "")))
        out.setdefault(key, []).append(sorted({float(v[0]) for v in values}))
    return out


def _log_absent(
    targets: Iterable[TargetReadings], queries: Mapping[QueryKind, QueryOutcome]
) -> None:
    for tr in targets:
        for name, r in tr.signals.items():
            if r.status is SignalStatus.ABSENT:
                # a latency histogram's quantile query is sent only for pods with requests:
                # the query that returned nothing is its rate query
                histogram = name.spec.histogram
                query = queries.get(SIGNAL_QUERY[name]) or (
                    queries.get(QueryKind(histogram.rate_query)) if histogram else None
                )
                log.error(
                    "signal absent while the target's pods are scraped",
                    target=tr.key,
                    signal=str(name),
                    detail=r.detail,
                    query=query.query if query else "",
                )
