"""The start-up check: every configured signal's query returns series.

``recommend`` (and any caller that wants to fail loudly at start) runs
:func:`check_configured_queries` once before the first round: a signal whose query fails, or
whose selector returns no series at all, is a configuration problem (a renamed metric, a
wrong selector, a Deployment that does not exist) rather than an outage to ride out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from scaler.config.policy import TargetPolicy
from scaler.config.vocabulary import SignalName
from scaler.core.observation import WorkloadSnapshot
from scaler.core.signals import SignalStatus
from scaler.sources.prometheus.source import PrometheusSource
from scaler.sources.promql import SIGNAL_QUERY, QueryKind, build_query_plan, target_selector

__all__ = ["ConfiguredQueryProblem", "check_configured_queries"]


@dataclass(frozen=True, slots=True)
class ConfiguredQueryProblem:
    """A configured signal whose query returns no series at all (or fails).

    Attributes:
        target: target key.
        signal: the signal.
        status: ``absent`` (other vLLM series exist: a renamed or missing metric),
            ``empty`` (nothing at all for the selector), or the failed query's status.
        query: the PromQL of this target alone for that signal (paste it into the
            Prometheus UI to see what it returns).
        detail: a human explanation.
    """

    target: str
    signal: SignalName
    status: SignalStatus
    query: str
    detail: str

    def __str__(self) -> str:
        return f"{self.target} {self.signal}: {self.status}: {self.detail}; query: {self.query}"


async def check_configured_queries(
    source: PrometheusSource,
    policy_targets: Sequence[TargetPolicy],
    snapshots: Mapping[str, WorkloadSnapshot] | None = None,
) -> list[ConfiguredQueryProblem]:
    """Check at start that every enabled signal's query returns series (dry-run).

    A signal fails the check when its query fails or when the target's selector (or TTFT
    expression) returns no series at all, before any pod filtering, unless the reading is
    ``warming_up`` (every ready pod younger than the TTFT rate window: a fresh fleet, not a
    configuration problem). Snapshots are optional: without them only the raw series count
    is checked.

    Returns:
        The problems, empty when every configured query returns data. The caller should
        fail loudly (log an error naming each query, exit non-zero) when it is not empty;
        ``str(problem)`` is a one-line message naming target, signal, status and query.
    """
    result = await source.read(policy_targets, snapshots or {})
    problems: list[ConfiguredQueryProblem] = []
    for t in policy_targets:
        tr = result.targets[t.key]
        running_found = tr.series_found.get(QueryKind.RUNNING, 0) > 0
        own = build_query_plan([t], rate_window_seconds=source.rate_window_seconds).queries
        for name in t.signals.queried():
            kind = SIGNAL_QUERY[name]
            outcome = result.queries.get(kind)
            query = own.get(kind, "")
            if outcome is None or not outcome.ok:
                status = outcome.status if outcome else SignalStatus.EMPTY
                detail = outcome.detail if outcome else "query not sent"
                problems.append(ConfiguredQueryProblem(t.key, name, status, query, detail))
                continue
            if tr.series_found.get(kind, 0) > 0:
                continue
            if tr.signals[name].status is SignalStatus.WARMING_UP:
                continue  # a fresh fleet: the series are younger than the rate window
            if running_found:
                status = SignalStatus.ABSENT
                detail = (
                    f"{kind} query returns no series for {t.key} although "
                    "vllm:num_requests_running series exist for its selector"
                )
            else:
                status = SignalStatus.EMPTY
                detail = (
                    f"{kind} query returns no series for {t.key}: no vLLM series match "
                    f"its selector {{{target_selector(t)}}}"
                )
            problems.append(ConfiguredQueryProblem(t.key, name, status, query, detail))
    return problems
