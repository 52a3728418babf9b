"""The Prometheus signal source: every target's readings in a constant number of queries.

:class:`PrometheusSource` sends the cycle's instant queries (:mod:`scaler.sources.promql`, at
most six whatever the number of targets) concurrently, splits the answers per target
(:mod:`.split`) and classifies them into readings (:mod:`.readings`). ``read`` never raises
for Prometheus trouble: every fault is a named status.

The source keeps one piece of state from one read to the next: the stall detector's per-pod
histories (:mod:`.stalls`), so that values that stopped moving are recognised across polls.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import httpx
import structlog

from scaler.config.policy import TargetPolicy
from scaler.config.vocabulary import SignalName
from scaler.core.observation import WorkloadSnapshot
from scaler.core.signals import SignalReading, SignalStatus
from scaler.sources.prometheus.answers import QueryOutcome
from scaler.sources.prometheus.http import instant_query, register_url_credentials
from scaler.sources.prometheus.readings import TargetReadings, read_targets
from scaler.sources.prometheus.split import Unattributed, split_answers
from scaler.sources.prometheus.stalls import PodHistory
from scaler.sources.promql import SIGNAL_QUERY, QueryKind, build_query_plan

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
    """

    targets: dict[str, TargetReadings]
    queries: dict[QueryKind, QueryOutcome]
    duration_seconds: float = 0.0
    unattributed: dict[QueryKind, Unattributed] = field(default_factory=dict)

    @property
    def queries_sent(self) -> int:
        """Number of HTTP queries sent (constant in the number of targets, at most 6)."""
        return len(self.queries)

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
        # The stall detector's memory: target -> pod -> history after the last read. Replaced
        # by each read, so targets and pods not read then start over (never judged on a gap).
        self._history: dict[str, dict[str, PodHistory]] = {}

    async def read(
        self,
        policy_targets: Sequence[TargetPolicy],
        snapshots: Mapping[str, WorkloadSnapshot],
    ) -> SourceResult:
        """Read every enabled signal of every target.

        Args:
            policy_targets: the targets (their selectors and enabled signals).
            snapshots: target key -> its Kubernetes snapshot; per-pod series count only
                for the snapshot's live, ready pods. A target without a snapshot gets
                ``empty`` per-pod signals ("no workload snapshot").

        Returns:
            A :class:`SourceResult` with a :class:`TargetReadings` per target. Never raises
            for Prometheus faults; each becomes a named status. A signal ``absent`` while
            its target's pods are scraped is logged as an error (a configuration problem).
            Frozen and hung pods are judged on this read and the previous ones (see
            :mod:`scaler.sources.prometheus.stalls`).
        """
        start = time.monotonic()
        plan = build_query_plan(policy_targets, rate_window_seconds=self.rate_window_seconds)
        answers = await asyncio.gather(
            *(
                instant_query(self._client, self._url, kind, promql, timeout_seconds=self._timeout)
                for kind, promql in plan.queries.items()
            )
        )
        split = split_answers(dict(zip(plan.queries, answers, strict=True)))
        targets = read_targets(
            policy_targets,
            snapshots,
            plan,
            split,
            rate_window_seconds=self.rate_window_seconds,
            history=self._history,
        )
        self._history = {k: tr.pod_history for k, tr in targets.items() if tr.pod_history}
        queries = {k: a.outcome for k, a in split.answers.items()}
        _log_absent(targets.values(), queries)
        return SourceResult(
            targets=targets,
            queries=queries,
            duration_seconds=time.monotonic() - start,
            unattributed=dict(split.unattributed),
        )


def _log_absent(
    targets: Iterable[TargetReadings], queries: Mapping[QueryKind, QueryOutcome]
) -> None:
    for tr in targets:
        for name, r in tr.signals.items():
            if r.status is SignalStatus.ABSENT:
                query = queries.get(SIGNAL_QUERY[name])
                log.error(
                    "signal absent while the target's pods are scraped",
                    target=tr.key,
                    signal=str(name),
                    detail=r.detail,
                    query=query.query if query else "",
                )
