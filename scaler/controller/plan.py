"""What the controller writes for one target in one cycle, as a value.

The control loop first plans every write of a target (:func:`plan_writes`, a
:class:`WritePlan`: Kubernetes Events, pod-deletion-cost annotations, the scale subresource,
the state to keep), then one function applies the plan (:meth:`scaler.controller.apply.
Applier.apply`). Planning is pure apart from the target's record (a kind without
pod-deletion-cost is said once); applying is the only place that writes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import structlog

from scaler.actuators.kubernetes import DELETION_COST_KINDS
from scaler.config.policy import TargetPolicy
from scaler.config.resource import ResourceRef
from scaler.controller.records import TargetRecord
from scaler.core.decide import Decision, Direction
from scaler.core.drain import RemovalPlan, plan_removal
from scaler.core.observation import WorkloadSnapshot
from scaler.core.reasons import Reason
from scaler.core.state import TargetState
from scaler.sources.prometheus import TargetReadings

__all__ = ["Event", "WritePlan", "plan_writes", "stuck_event", "stuck_pods"]

log = structlog.get_logger("vllm_scaler")

#: Holds during which the ranking of a scale-down the signals ask for is written ahead.
_RANK_AHEAD = frozenset({Reason.STABILIZED, Reason.STEP_LIMITED})


@dataclass(frozen=True, slots=True)
class Event:
    """A Kubernetes Event about the target (``reason`` in CamelCase, as HPA writes them)."""

    reason: str
    message: str
    type: str = "Normal"


@dataclass(frozen=True, slots=True)
class WritePlan:
    """Everything to write for one target this cycle, in the order it is written.

    Attributes:
        target: the target.
        snapshot: the target's scale subresource and pods as read this cycle (the scale
            write's resourceVersion precondition).
        decision: the decision to carry out (after pause, pin and conflicts).
        events: Events to send first (refusals, stuck replicas); empty unless this process
            may write.
        removal: before a scale-down, the pod-deletion-cost annotations that make the idlest
            pods the ones removed; None when not scaling down or the kind ignores them.
        ahead: while the stabilization window or the step limit holds a scale-down the
            signals ask for, the ranking it will need (written unless already in place);
            None otherwise.
        scale: write ``decision.desired_replicas`` (the actuator answers ``dry_run`` in a dry
            run).
        not_leader: the decision changes the replicas but another replica leads: nothing is
            written.
        state: the state to keep; a successful scale adds its write to it.
        now: the cycle's time (controller clock, seconds), the time of the write.
        subject: what the Events are about: the ``VLLMAutoscaler`` that defines the target
            (as the HPA's are on the HPA); None: the workload (a policy file's target).
    """

    target: TargetPolicy
    snapshot: WorkloadSnapshot
    decision: Decision
    state: TargetState
    now: float
    events: tuple[Event, ...] = ()
    removal: RemovalPlan | None = None
    ahead: RemovalPlan | None = None
    scale: bool = False
    not_leader: bool = False
    subject: ResourceRef | None = None


def stuck_event(t: TargetPolicy, snap: WorkloadSnapshot, d: Decision) -> Event | None:
    """A Warning Event naming the replicas not Ready past the model load timeout, if any."""
    if d.replicas.stuck <= 0:
        return None
    timeout = t.model_load_timeout_seconds
    stuck = stuck_pods(snap, timeout)
    shown = ", ".join(stuck[:5]) + (f" and {len(stuck) - 5} more" if len(stuck) > 5 else "")
    message = (
        f"{d.replicas.stuck} replica(s) not Ready after model_load_timeout_seconds "
        f"{timeout:g}: {shown or 'not created yet'}; they serve nothing, and as "
        "spec.replicas already counts them no replicas are added to replace them "
        "(a pod without a node shows the scheduler's reason; otherwise an image that does "
        "not pull or a model that does not load: see the pods' events and logs)"
    )
    return Event("ReplicasStuck", message, "Warning")


def stuck_pods(snap: WorkloadSnapshot, timeout_seconds: float) -> list[str]:
    """``name (phase)`` of the live pods not Ready past the model load timeout since their
    current start (:attr:`~scaler.core.observation.PodInfo.start_seconds`), and ``name
    (phase, the scheduler's reason)`` of those waiting for a node longer than it, sorted."""
    out = []
    for p in snap.pods:
        if p.terminating or p.finished or p.ready:
            continue
        if p.unschedulable is not None and p.age_seconds >= timeout_seconds:
            out.append(f"{p.name} ({p.phase}, {p.unschedulable})")
        elif p.unschedulable is None and p.start_seconds >= timeout_seconds:
            out.append(f"{p.name} ({p.phase})")
    return sorted(out)


def plan_writes(
    t: TargetPolicy,
    snap: WorkloadSnapshot,
    readings: TargetReadings,
    decision: Decision,
    record: TargetRecord,
    now: float,
    *,
    writes: bool,
    dry_run: bool,
    events: Sequence[Event] = (),
    subject: ResourceRef | None = None,
) -> WritePlan:
    """What to write for one target: ``events`` (those due), pod annotations, the scale, the
    state. ``writes``: this process may write now (not a dry run, and it leads)."""
    changes = decision.direction is not Direction.NONE
    not_leader = changes and not dry_run and not writes
    d = decision
    removal = ahead = None
    if writes and d.direction is Direction.DOWN:
        removal = _removal(t, snap, readings, record, d.current_replicas - d.desired_replicas)
    elif writes and d.reason in _RANK_AHEAD and d.recommended_replicas < d.current_replicas:
        coming = d.current_replicas - max(d.recommended_replicas, t.min_replicas)
        if coming > 0:
            ahead = _removal(t, snap, readings, record, coming)
    return WritePlan(
        target=t,
        snapshot=snap,
        decision=decision,
        state=decision.state,
        now=now,
        events=tuple(events) if writes else (),
        removal=removal,
        ahead=ahead,
        scale=changes and not not_leader,
        not_leader=not_leader,
        subject=subject,
    )


def _removal(
    t: TargetPolicy,
    snap: WorkloadSnapshot,
    readings: TargetReadings,
    record: TargetRecord,
    remove: int,
) -> RemovalPlan | None:
    """The ``remove`` idlest pods, to rank lowest by pod-deletion-cost before a scale-down."""
    ref = t.workload
    if ref.kind not in DELETION_COST_KINDS:
        if not record.cost_unsupported_logged:
            record.cost_unsupported_logged = True
            log.info(
                "pod_deletion_cost_unsupported",
                target=t.key,
                kind=ref.kind,
                message=f"a {ref.kind} removes the highest ordinal on scale-down and "
                "ignores pod-deletion-cost; draining relies on the pods' grace period",
            )
        return None
    return plan_removal(snap.pods, readings.pod_load, remove)
