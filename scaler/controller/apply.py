"""The one place the control loop writes to the cluster: a target's
:class:`~scaler.controller.plan.WritePlan`, applied in order (Events, pod annotations, the
scale), then the status of the ``VLLMAutoscaler`` that defines it; each write fenced on
leadership at the moment it is sent.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import structlog

from scaler.actuators.kubernetes import (
    ApiFailure,
    CostPatches,
    ScaleOutcome,
    ScaleResult,
    WriteGuard,
)
from scaler.config.policy import TargetPolicy, WorkloadRef
from scaler.config.resource import ResourceRef
from scaler.controller.fence import WriteFence
from scaler.controller.plan import Event, WritePlan
from scaler.controller.removal import PendingRemoval, pending_removal, ranked, ranked_in_order
from scaler.core.decide import Direction
from scaler.core.drain import RemovalPlan
from scaler.core.observation import WorkloadSnapshot
from scaler.core.state import TargetState, record_write
from scaler.telemetry.metrics import ScalerMetrics

__all__ = ["Applied", "Applier", "StatusWriter", "Writer"]

#: Pod annotation failures that a retry will not fix: scale down without the ranking.
_PERMANENT = frozenset(
    {ApiFailure.UNAUTHORIZED, ApiFailure.FORBIDDEN, ApiFailure.INVALID, ApiFailure.NOT_FOUND}
)


class Writer(Protocol):
    """The write verbs of the actuator (:class:`scaler.actuators.kubernetes.KubernetesActuator`)."""

    async def scale(
        self, ref: WorkloadRef, replicas: int, *, current: WorkloadSnapshot, guard: WriteGuard
    ) -> ScaleResult: ...

    async def emit_event(
        self,
        ref: WorkloadRef | ResourceRef,
        *,
        reason: str,
        message: str,
        type: str = "Normal",
    ) -> bool: ...

    async def set_deletion_costs(
        self,
        namespace: str,
        costs: Mapping[str, int],
        *,
        current: Mapping[str, str | None],
        guard: WriteGuard,
    ) -> CostPatches: ...


class StatusWriter(Protocol):
    """Writes a resource's status (:class:`scaler.actuators.resources.ResourceStatusWriter`)."""

    async def write_status(
        self,
        ref: ResourceRef,
        status: Mapping[str, Any],
        *,
        removed: Sequence[str] = (),
        guard: WriteGuard,
    ) -> bool | None: ...


@dataclass(frozen=True, slots=True)
class Applied:
    """What applying a :class:`~scaler.controller.plan.WritePlan` ended in.

    Attributes:
        action: ``scaled``, ``unchanged``, ``dry_run`` or the failed write's outcome;
            ``none`` when nothing was to be written; ``not_leader`` when this replica does
            not lead (or stopped leading before the write was sent); ``pods_ranked`` when
            the pod-deletion-cost ranking was written and the scale-down waits for a later
            cycle.
        error: why the write failed ('' otherwise).
        state: the plan's state, with the write added when it succeeded.
        removal: the scale-down written, whose pods may still be live (None unless one
            was).
    """

    action: str
    error: str
    state: TargetState
    removal: PendingRemoval | None = None


class Applier:
    """Applies write plans through ``actuator``; counts and logs each failure once.

    Args:
        actuator: the write verbs.
        metrics: scale actions and failures, pods annotated, writes refused.
    """

    def __init__(
        self, actuator: Writer, metrics: ScalerMetrics, status: StatusWriter | None = None
    ) -> None:
        self.actuator = actuator
        self.metrics = metrics
        self.status = status
        self.log = structlog.get_logger("vllm_scaler")

    async def write_status(
        self,
        ref: ResourceRef,
        status: Mapping[str, Any],
        previous: Mapping[str, Any] | None,
        fence: WriteFence,
    ) -> bool:
        """Write a resource's status (the fields ``previous`` had and ``status`` has not are
        cleared); True when written. Fenced like every write: nothing is sent once this
        replica no longer leads."""
        if self.status is None:
            return False
        removed = sorted(set(previous or {}) - set(status))
        written = await self.status.write_status(ref, status, removed=removed, guard=fence.allows)
        if written is None:
            self.log.warning(
                "write_fenced",
                resource=ref.key(),
                write="status",
                message="this replica no longer leads; the status is not written",
            )
        self.metrics.status_writes.labels("written" if written else "failed").inc()
        return bool(written)

    async def emit(
        self, subject: WorkloadRef | ResourceRef, event: Event, fence: WriteFence
    ) -> bool:
        """Send one Event about ``subject`` unless this replica no longer leads."""
        if not fence.allows():
            return False
        return await self.actuator.emit_event(
            subject, reason=event.reason, message=event.message, type=event.type
        )

    async def apply(self, plan: WritePlan, fence: WriteFence) -> Applied:
        """Write what ``plan`` says, in order: Events, pod annotations, the scale.

        Each write is sent only if ``fence`` allows it at that moment; once it does not,
        nothing more is written and a change of replicas is reported as ``not_leader``.
        Before a scale-down of a kind that honours pod-deletion-cost, the scale is written
        only when the pods as read this cycle already carry the plan's ranking; otherwise
        the ranking is written and the scale-down waits for a later cycle (``pods_ranked``).
        Each failure is counted and logged once here (the actuator returns it) and reported
        as a ``FailedRescale`` Event.
        """
        t, d = plan.target, plan.decision
        ref = t.workload
        subject = plan.subject or ref
        for e in plan.events:
            if not fence.allows():
                return self._fenced(plan, "event")
            await self.actuator.emit_event(subject, reason=e.reason, message=e.message, type=e.type)
        if plan.not_leader:
            self.metrics.refused_writes.labels(t.key, "not_leader").inc()
            return Applied("not_leader", "", plan.state)
        if not plan.scale:
            ahead = plan.ahead
            if ahead is not None and not ranked_in_order(plan.snapshot.pods, ahead.chosen):
                patches = await self._write_ranking(plan, ahead, fence, when="ahead")
                if patches.fenced:
                    return self._fenced(plan, "pod_annotation")
            return Applied("none", "", plan.state)
        removal = plan.removal
        if removal is not None and not ranked(plan.snapshot.pods, removal.chosen):
            patches = await self._write_ranking(plan, removal, fence, when="next_cycle")
            if patches.fenced:
                return self._fenced(plan, "pod_annotation")
            if patches.patched or set(patches.failed.values()) - _PERMANENT:
                return Applied("pods_ranked", "", plan.state)
            self.log.warning(
                "scale_down_unranked",
                target=t.key,
                failed={pod: str(f) for pod, f in patches.failed.items()},
                message="no pod-deletion-cost annotation could be written; scaling down "
                "without choosing the idlest pods (check the RBAC for pods patch)",
            )
        result = await self.actuator.scale(
            ref, d.desired_replicas, current=plan.snapshot, guard=fence.allows
        )
        if result.outcome is ScaleOutcome.NOT_LEADER:
            return self._fenced(plan, "scale")
        if result.outcome is ScaleOutcome.SCALED:
            state = record_write(
                plan.state,
                from_replicas=d.current_replicas,
                to_replicas=d.desired_replicas,
                now=plan.now,
            )
            pending = None
            if d.direction is Direction.DOWN:
                pending = pending_removal(
                    plan.snapshot,
                    plan.removal,
                    d.current_replicas - d.desired_replicas,
                    plan.now,
                )
            self.metrics.scale_actions.labels(t.key, d.direction).inc()
            await self._emit(
                plan,
                fence,
                Event(
                    "SuccessfulRescale",
                    f"New size: {d.desired_replicas}; reason: {d.reason}: {d.message}",
                ),
            )
            return Applied(str(result.outcome), "", state, pending)
        if result.ok:
            return Applied(str(result.outcome), "", plan.state)
        self.metrics.scale_failures.labels(t.key, result.outcome).inc()
        self.log.error(
            "scale_failed",
            target=t.key,
            outcome=str(result.outcome),
            http_status=result.http_status,
            requests=result.requests,
            error=result.message,
        )
        await self._emit(plan, fence, Event("FailedRescale", result.message, "Warning"))
        return Applied(str(result.outcome), result.message, plan.state)

    async def _emit(self, plan: WritePlan, fence: WriteFence, event: Event) -> None:
        """Send the Event about a write that was made, unless leadership ended meanwhile."""
        if not fence.allows():
            self._log_fenced(plan.target, "event")
            return
        subject = plan.subject or plan.target.workload
        await self.actuator.emit_event(
            subject, reason=event.reason, message=event.message, type=event.type
        )

    async def _write_ranking(
        self, plan: WritePlan, removal: RemovalPlan, fence: WriteFence, *, when: str
    ) -> CostPatches:
        """Write ``removal``'s pod-deletion costs (each pod patch fenced).

        ``when`` says when the scale-down comes: ``next_cycle`` (it waits for a later
        cycle that reads this ranking back and still wants it) or ``ahead`` (a window or
        step limit holds it; the ranking is ready before it is allowed).
        """
        t = plan.target
        current = {p.name: p.deletion_cost for p in plan.snapshot.pods}
        patches = await self.actuator.set_deletion_costs(
            t.workload.namespace, removal.costs, current=current, guard=fence.allows
        )
        if patches.patched:
            self.metrics.pods_annotated.labels(t.key).inc(len(patches.patched))
        self.log.info(
            "scale_down_pods_chosen",
            target=t.key,
            remove=list(removal.chosen),
            in_flight=list(removal.load),
            annotated=list(patches.patched),
            failed={pod: str(f) for pod, f in patches.failed.items()},
            scale_down=when,
        )
        return patches

    def _log_fenced(self, t: TargetPolicy, write: str) -> None:
        self.log.warning(
            "write_fenced",
            target=t.key,
            write=write,
            message="this replica no longer leads (its last Lease renewal is older than the "
            "renew deadline); nothing more is written this cycle",
        )

    def _fenced(self, plan: WritePlan, write: str) -> Applied:
        """This replica stopped leading before a write of ``plan`` was sent."""
        t, d = plan.target, plan.decision
        self._log_fenced(t, write)
        if d.direction is Direction.NONE:
            return Applied("none", "", plan.state)
        self.metrics.refused_writes.labels(t.key, "not_leader").inc()
        return Applied("not_leader", "", plan.state)
