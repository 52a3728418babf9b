"""What the controller writes for one target in one cycle, as a value.

The control loop first plans every write of a target (:class:`WritePlan`: Kubernetes Events,
pod-deletion-cost annotations, the scale subresource, the state to keep), then one function
applies the plan (:meth:`scaler.controller.loop.Controller.apply`). Planning is pure apart
from the loop's memory of Events already sent; applying is the only place that writes.
"""

from __future__ import annotations

from dataclasses import dataclass

from scaler.config.policy import TargetPolicy
from scaler.core.decide import Decision
from scaler.core.drain import RemovalPlan
from scaler.core.observation import WorkloadSnapshot
from scaler.core.state import TargetState

__all__ = ["Event", "WritePlan", "stuck_event", "stuck_pods"]


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
