"""The whole backtest without I/O choices: read history, classify every step, replay.

The caller provides the range-query function (:class:`~scaler.backtest.history.
PrometheusRangeClient` or a fake) and an optional progress hook; nothing here prints.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from scaler.backtest.classify import StepReadings, readings_at_step
from scaler.backtest.history import (
    ALL_REPLICA_SOURCES,
    PROMETHEUS_MAX_POINTS,
    RangeQuery,
    ReplicaHistory,
    ReplicaSource,
    StepGrid,
    chunk_grid,
    history_queries,
    read_replica_history,
    read_signal_history,
    replica_queries,
)
from scaler.backtest.replay import ReplayResult, replay
from scaler.backtest.report import TargetBacktest
from scaler.config.policy import Policy, TargetPolicy
from scaler.config.vocabulary import SignalName
from scaler.sources.prometheus import PodHistory
from scaler.sources.promql import THROUGHPUT_METRICS

__all__ = ["NoReplicaHistoryError", "Progress", "run_backtest"]


class Progress(Protocol):
    """Progress of the reads, in range requests (one per query and chunk)."""

    def add_total(self, requests: int) -> None:
        """More requests are coming than announced."""

    def advance(self) -> None:
        """One request is done."""


class NoReplicaHistoryError(RuntimeError):
    """No replica source had data for a target; the message names the target (``key``) and
    the queries tried."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(message)
        self.key = key


@dataclass(frozen=True, slots=True)
class _NoProgress:
    def add_total(self, requests: int) -> None:
        pass

    def advance(self) -> None:
        pass


def run_backtest(
    query_range: RangeQuery,
    policy: Policy,
    targets: Sequence[TargetPolicy],
    grid: StepGrid,
    *,
    model_load_seconds: float | None = None,
    max_points: int = PROMETHEUS_MAX_POINTS,
    replica_sources: Sequence[ReplicaSource] = ALL_REPLICA_SOURCES,
    progress: Progress | None = None,
    on_no_history: Callable[[NoReplicaHistoryError], None] | None = None,
    native_histograms: bool = True,
) -> list[TargetBacktest]:
    """Read the history of ``targets`` over ``grid`` and replay each through its policy.

    Args:
        query_range: runs one range query (the client, or a stand-in).
        policy: the policy file (its ``rate_window_seconds`` is the queries' window).
        targets: the targets of ``policy`` to backtest, each replayed with its shadow too.
        grid: the evaluation times; each step is one control cycle of the replay.
        model_load_seconds: seconds until a replica the policy adds is ready, for every
            replay; None (``--model-load-seconds`` not given): each replay uses its own
            policy's ``signals.capacity.model_load_seconds`` (the target's for the target,
            the shadow's for its shadow, the target's when the shadow does not set it:
            :meth:`~scaler.config.policy.TargetPolicy.shadow_target`; the field's default is
            120 s), the time the controller assumes until it has observed a start.
        max_points: most steps per range request.
        replica_sources: where to look for the actual replicas, in order.
        progress: told of every range request (None: nobody).
        on_no_history: given, a target whose actual replicas are in none of the sources is
            handed to it and left out, and the others are replayed (a fault in one target's
            history touches that target only); None: it raises.
        native_histograms: the backend has the native-histogram functions (the client asks,
            as the controller does: :meth:`~scaler.backtest.history.PrometheusRangeClient.
            native_histograms`); False: the queries read classic histograms only.

    Returns:
        One :class:`~scaler.backtest.report.TargetBacktest` per target with replica
        history, in order.

    Raises:
        HistoryError: a range query failed.
        NoReplicaHistoryError: a target's actual replicas are in none of the sources, and no
            ``on_no_history`` was given.
    """
    prog = progress or _NoProgress()
    # the signals either the policy or its shadow decides on, read once for both
    readers = [t.reading_target() for t in targets]
    chunks = len(chunk_grid(grid, max_points))
    window = policy.rate_window_seconds
    labels = policy.replica_labels
    plan_kinds = len(
        history_queries(
            readers,
            rate_window_seconds=window,
            native_histograms=native_histograms,
            replica_labels=labels,
        )
    )
    prog.add_total(chunks * plan_kinds)  # the replica reads are announced as they start
    signals = read_signal_history(
        query_range,
        readers,
        rate_window_seconds=window,
        grid=grid,
        max_points=max_points,
        on_chunk=prog.advance,
        native_histograms=native_histograms,
        replica_labels=labels,
    )
    replicas = {}
    for t in readers:
        hist = read_replica_history(
            query_range,
            t,
            grid=grid,
            sources=replica_sources,
            max_points=max_points,
            on_chunk=prog.advance,
            on_query=lambda: prog.add_total(chunks),
        )
        if hist.source is None:
            tried = [q[0] for s in hist.tried if (q := replica_queries(t, s))]
            err = NoReplicaHistoryError(
                t.key,
                f"{t.key}: no replica history from {' or '.join(map(str, hist.tried))}; "
                f"queries tried: {'; '.join(tried)}",
            )
            if on_no_history is None:
                raise err
            on_no_history(err)
            continue
        replicas[t.key] = hist

    per_step = []
    history: dict[str, dict[str, PodHistory]] = {}  # the stall detector's, step to step
    since: dict[str, dict[str, float]] | None = None  # each pod's ready time, step to step
    for i, now in enumerate(grid.times):
        step = readings_at_step(
            readers,
            signals.plan,
            {kind: m.get(i, []) for kind, m in signals.matrices.items()},
            rate_window_seconds=policy.rate_window_seconds,
            history=history,
            now=now,
            ready_since=since,
        )
        history = {k: r.pod_history for k, r in step.items() if r.pod_history}
        since = {k: r.ready_since for k, r in step.items()}
        per_step.append(step)

    def replay_as(p: TargetPolicy, hist: ReplicaHistory) -> ReplayResult:
        return replay(
            p,
            grid.times,
            [step[p.key].signals for step in per_step],
            hist.spec,
            hist.ready,
            model_load_seconds=(
                p.signals.capacity.model_load_seconds
                if model_load_seconds is None
                else model_load_seconds
            ),
            ttft_window_seconds=policy.rate_window_seconds,
            throughput=[step[p.key].throughput for step in per_step],
            pods=[step[p.key].pod_infos for step in per_step],
        )

    out = []
    for t in (t for t in targets if t.key in replicas):
        hist = replicas[t.key]
        shadow = t.shadow_target()
        out.append(
            TargetBacktest(
                t,
                hist,
                replay_as(t, hist),
                replay_as(shadow, hist) if shadow is not None else None,
                notes=_missing_counters(t, [step[t.key] for step in per_step]),
            )
        )
    return out


def _missing_counters(target: TargetPolicy, steps: Sequence[StepReadings]) -> tuple[str, ...]:
    """What to say, once, about a target whose policy or shadow enables the capacity signal
    while some of vLLM's throughput counters are nowhere in its history (its pods exported
    ``running`` but never a rate of that counter): the capacity signal then reads no demand at
    any step and decides as the controller does without it."""
    policies = [p for p in (target, target.shadow_target()) if p is not None]
    if not any(SignalName.CAPACITY in p.signals.enabled() for p in policies):
        return ()
    if not any(s.pods for s in steps):
        return ()
    seen = frozenset().union(*(s.throughput_counters for s in steps))
    missing = [m for m in THROUGHPUT_METRICS if m not in seen]
    if not missing:
        return ()
    return (
        f"{target.key}: no {' / '.join(missing)} series in the history of its pods (vLLM's "
        "throughput counters): the capacity signal reads no demand at any step and decides "
        "as the controller does without it",
    )
