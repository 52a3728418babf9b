"""The control loop: read every target, decide, act, report.

One cycle: read each target's scale subresource and pods (Kubernetes actuator), read every
signal for all targets in a constant number of queries (Prometheus source), run the pure
decision core per target, write ``spec.replicas`` where the decision changes it, and export
the outcome (metrics, one log event per decision, Kubernetes Events on rescale).

A failure of one target never stops the others; a failure of the whole source is a set of
invalid signals, which the core turns into holds.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import structlog

from scaler.actuators.kubernetes import KubeApiError, ScaleResult
from scaler.config.policy import Policy, TargetPolicy, WorkloadRef
from scaler.core.decide import Decision, Direction, decide
from scaler.core.observation import Observation, WorkloadSnapshot
from scaler.core.signals import SignalName
from scaler.core.state import TargetState, record_write
from scaler.sources.prometheus import SourceResult, TargetReadings
from scaler.telemetry.metrics import ScalerMetrics


class SignalSource(Protocol):
    """Reads every target's signals (see :class:`scaler.sources.prometheus.PrometheusSource`)."""

    async def read(
        self,
        policy_targets: Sequence[TargetPolicy],
        snapshots: Mapping[str, WorkloadSnapshot],
    ) -> SourceResult: ...


class Actuator(Protocol):
    """Reads and writes scale subresources (see :mod:`scaler.actuators.kubernetes`)."""

    @property
    def dry_run(self) -> bool: ...

    async def read(self, ref: WorkloadRef) -> WorkloadSnapshot: ...

    async def scale(
        self, ref: WorkloadRef, replicas: int, *, current: WorkloadSnapshot
    ) -> ScaleResult: ...

    async def emit_event(
        self, ref: WorkloadRef, *, reason: str, message: str, type: str = "Normal"
    ) -> bool: ...


@dataclass(frozen=True, slots=True)
class TargetReport:
    """The outcome of one cycle for one target.

    Attributes:
        target: the target key ``namespace/Kind/name``.
        decision: the decision, or None when the target could not be read.
        readings: what the source read (None when the target could not be read).
        action: ``scaled``, ``unchanged``, ``dry_run`` or the failed write's outcome; ``none``
            when nothing was asked; ``read_failed`` when the target could not be read.
        error: why the target could not be read or written.
    """

    target: str
    decision: Decision | None
    readings: TargetReadings | None
    action: str
    error: str = ""

    def as_json(self) -> dict[str, Any]:
        """The ``recommend --output json`` object of this target."""
        d = self.decision
        out: dict[str, Any] = {"target": self.target, "action": self.action}
        if d is None:
            out.update(
                current_replicas=None,
                desired_replicas=None,
                reason="target_read_failed",
                message=self.error,
                signals=[],
            )
            return out
        out.update(
            current_replicas=d.current_replicas,
            desired_replicas=d.desired_replicas,
            recommended_replicas=d.recommended_replicas,
            reason=str(d.reason),
            message=d.message,
            driving_signal=str(d.driving_signal) if d.driving_signal else None,
            limits=list(d.limits),
            replicas={
                "ready": d.replicas.ready,
                "starting": d.replicas.starting,
                "stuck": d.replicas.stuck,
                "terminating": d.replicas.terminating,
            },
            signals=[
                {
                    "name": str(e.name),
                    "value": e.value,
                    "target": e.target,
                    "ratio": e.ratio,
                    "valid": e.valid,
                    "status": str(e.status),
                    "desired_replicas": e.desired_replicas,
                    "detail": e.detail,
                }
                for e in d.signals
            ],
        )
        if self.readings is not None:
            out["kv_cache_metric"] = self.readings.kv_metric
        return out


class Controller:
    """Runs control cycles over every target of a policy.

    Args:
        policy: the targets.
        source: the signal source.
        actuator: the Kubernetes actuator (``dry_run`` for recommendations).
        metrics: where to export our own metrics.
        clock: epoch seconds; the only "now" the loop and the core see.
    """

    def __init__(
        self,
        *,
        policy: Policy,
        source: SignalSource,
        actuator: Actuator,
        metrics: ScalerMetrics,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.policy = policy
        self.source = source
        self.actuator = actuator
        self.metrics = metrics
        self.clock = clock
        self.states: dict[str, TargetState] = {}
        self.log = structlog.get_logger("vllm_scaler")
        metrics.dry_run.set(1 if actuator.dry_run else 0)

    async def _read_target(self, t: TargetPolicy) -> WorkloadSnapshot | KubeApiError:
        try:
            return await self.actuator.read(t.workload)
        except KubeApiError as err:
            return err

    async def run_cycle(self) -> list[TargetReport]:
        """Run one control cycle over every target; never raises for I/O failures."""
        started = time.monotonic()
        targets = self.policy.targets
        reads = await asyncio.gather(*(self._read_target(t) for t in targets))
        snapshots: dict[str, WorkloadSnapshot] = {}
        reports: list[TargetReport] = []
        for t, r in zip(targets, reads, strict=True):
            if isinstance(r, KubeApiError):
                self.metrics.target_errors.labels(t.key, r.outcome).inc()
                self.log.error(
                    "target_read_failed", target=t.key, outcome=str(r.outcome), error=r.message
                )
                reports.append(TargetReport(t.key, None, None, "read_failed", r.message))
            else:
                snapshots[t.key] = r
        readable = [t for t in targets if t.key in snapshots]
        result = await self.source.read(readable, snapshots) if readable else None
        now = self.clock()
        if result is not None:
            self._export_queries(result, now)
        for t in readable:
            assert result is not None
            reports.append(
                await self._decide_and_act(t, snapshots[t.key], result.targets[t.key], now)
            )
        self.metrics.cycle_duration.observe(time.monotonic() - started)
        self.metrics.cycles.inc()
        self.metrics.last_cycle.set(self.clock())
        order = {t.key: i for i, t in enumerate(targets)}
        return sorted(reports, key=lambda r: order[r.target])

    def _export_queries(self, result: SourceResult, now: float) -> None:
        m = self.metrics
        m.queries.inc(result.queries_sent)
        for kind, outcome in result.queries.items():
            if outcome.ok:
                m.last_query_success.labels(str(kind)).set(now)
            else:
                m.query_failures.labels(str(kind), str(outcome.status)).inc()
                self.log.warning(
                    "query_failed",
                    query=str(kind),
                    reason=str(outcome.status),
                    detail=outcome.detail,
                )

    async def _decide_and_act(
        self, t: TargetPolicy, snap: WorkloadSnapshot, readings: TargetReadings, now: float
    ) -> TargetReport:
        obs = Observation(snap.counts(t.model_load_timeout_seconds), readings.signals)
        decision = decide(t, obs, self.states.get(t.key), now)
        state = decision.state
        m = self.metrics
        m.record_decision(
            t.key,
            decision,
            min_replicas=t.min_replicas,
            max_replicas=t.max_replicas,
            tolerance_up=t.tolerance.scale_up,
            tolerance_down=t.tolerance.scale_down,
        )
        for name in (SignalName.QUEUE_DEPTH, SignalName.KV_CACHE_USAGE):
            if name in readings.signals:
                m.pods_missing_metrics.labels(t.key, name).set(
                    len(readings.pods_missing.get(name, frozenset()))
                )
        if readings.dropped:
            m.stale_series_dropped.labels(t.key).inc(len(readings.dropped))
        if readings.kv_metric:
            m.kv_metric.labels(t.key, readings.kv_metric).set(1)
        for e in decision.signals:
            if not e.status.usable_for_scale_down:
                m.query_errors.labels(str(e.name), str(e.status)).inc()
                self.log.warning(
                    "signal_invalid",
                    target=t.key,
                    signal=str(e.name),
                    status=str(e.status),
                    detail=e.detail,
                )

        action = "none"
        error = ""
        if decision.direction is not Direction.NONE:
            result = await self.actuator.scale(t.workload, decision.desired_replicas, current=snap)
            action = str(result.outcome)
            if result.outcome.value == "scaled":
                state = record_write(
                    state,
                    from_replicas=decision.current_replicas,
                    to_replicas=decision.desired_replicas,
                    now=now,
                )
                m.scale_actions.labels(t.key, decision.direction).inc()
                await self.actuator.emit_event(
                    t.workload,
                    reason="SuccessfulRescale",
                    message=(
                        f"New size: {decision.desired_replicas}; reason: {decision.reason}: "
                        f"{decision.message}"
                    ),
                )
            elif not result.ok:
                error = result.message
                m.scale_failures.labels(t.key, result.outcome).inc()
                self.log.error("scale_failed", target=t.key, outcome=action, error=result.message)
                await self.actuator.emit_event(
                    t.workload, reason="FailedRescale", message=result.message, type="Warning"
                )
        self.states[t.key] = state
        self._log_decision(t, decision, readings, action)
        return TargetReport(t.key, decision, readings, action, error)

    def _log_decision(
        self, t: TargetPolicy, d: Decision, readings: TargetReadings, action: str
    ) -> None:
        signals = {
            str(e.name): (round(e.value, 4) if e.value is not None else str(e.status))
            for e in d.signals
        }
        level = "info"
        if d.reason.value in (
            "no_valid_signals",
            "scale_down_blocked_missing_signal",
            "outside_writer",
        ):
            level = "warning"
        if d.outside_write:
            self.log.warning(
                "outside_write",
                target=t.key,
                written=d.state.last_written_replicas,
                found=d.current_replicas,
                message="spec.replicas was changed by another writer since our last write",
            )
        getattr(self.log, level)(
            "decision",
            target=t.key,
            current=d.current_replicas,
            desired=d.desired_replicas,
            reason=str(d.reason),
            action=action,
            ready=d.replicas.ready,
            pending=d.replicas.starting,
            terminating=d.replicas.terminating,
            signals=signals,
            message=d.message,
        )

    async def run(self, *, interval_seconds: float, stop: asyncio.Event) -> None:
        """Run cycles every ``interval_seconds`` until ``stop`` is set.

        A cycle that raises unexpectedly is logged and the loop goes on (no crash loop);
        the next cycle starts one interval after the previous one started.
        """
        while not stop.is_set():
            started = time.monotonic()
            try:
                await self.run_cycle()
            except Exception:  # the loop must survive a bug in one cycle
                self.log.exception("cycle_failed")
            delay = max(0.0, interval_seconds - (time.monotonic() - started))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=delay)
