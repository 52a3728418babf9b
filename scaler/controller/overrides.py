"""What overrides the decision core on a target: other autoscalers, pause and pin (pure).

And what replaces it: a target whose ``spec.replicas`` is 0 is not decided at all
(:func:`disabled_decision`).

- conflict: an autoscaling/v2 HorizontalPodAutoscaler or a KEDA ScaledObject targets the same
  workload; vllm-scaler then recommends only, never writes.
- ``vllm-scaler.io/paused: "true"`` on the workload holds it entirely (an invalid pin too).
- ``vllm-scaler.io/pinned-replicas: "N"`` on the workload writes N whatever the signals say.

In that order: a conflict wins over a pause, a pause over a pin. The decision's message keeps
what the signals asked for.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

from scaler.actuators.kubernetes import ScaleOwner
from scaler.actuators.writers import ReplicasWriter
from scaler.config.policy import WorkloadRef
from scaler.controller.plan import Event
from scaler.core.decide import Decision
from scaler.core.observation import ReplicaCounts
from scaler.core.reasons import Reason
from scaler.core.state import TargetState

__all__ = [
    "PAUSED_ANNOTATION",
    "PINNED_ANNOTATION",
    "REFUSALS",
    "Control",
    "disabled_decision",
    "override",
    "read_control",
    "refusal_events",
    "selector_required_decision",
    "shared_pods_text",
]

#: Workload annotation that pauses vllm-scaler on it (value ``"true"``).
PAUSED_ANNOTATION = "vllm-scaler.io/paused"
#: Workload annotation that pins its replicas (a non-negative integer).
PINNED_ANNOTATION = "vllm-scaler.io/pinned-replicas"
#: The kinds of refusal Event, each repeated at most every few minutes while unchanged.
REFUSALS = ("conflict", "invalid_pin", "paused", "ambiguous_selector")


@dataclass(frozen=True, slots=True)
class Control:
    """What, besides the signals, governs a target this cycle.

    Attributes:
        conflicts: the other autoscalers that target the workload.
        paused: the workload carries ``vllm-scaler.io/paused: "true"``.
        pin: the replicas of a valid ``vllm-scaler.io/pinned-replicas`` annotation.
        invalid_pin: the annotation's value when it is not a replica count.
        replicas_writer: the field manager that owns ``spec.replicas`` now, when it is not
            this controller's (an outside write then names it); None otherwise.
        same_manager: the owner carries this controller's own field manager name although
            the value is not ours (another installation of vllm-scaler, or a process that
            borrows its name).
        shared: pods whose owner cannot be told that other targets' selectors pick too
            (``(pod, the other targets)``): counted by none of them.
    """

    conflicts: tuple[ScaleOwner, ...] = ()
    paused: bool = False
    pin: int | None = None
    invalid_pin: str | None = None
    replicas_writer: ReplicasWriter | None = None
    same_manager: bool = False
    shared: tuple[tuple[str, tuple[str, ...]], ...] = ()


def read_control(
    ref: WorkloadRef,
    owners: Iterable[ScaleOwner],
    annotations: Mapping[str, str],
    *,
    writer: ReplicasWriter | None = None,
    own_manager: str = "",
) -> Control:
    """Conflicts with other autoscalers, the pause/pin annotations of one target, and who
    owns its ``spec.replicas`` (``writer``, from ``managedFields``; ``own_manager`` is this
    controller's field manager).

    A pin is a non-negative integer up to 1,000,000; anything else is ``invalid_pin``.
    """
    conflicts = tuple(o for o in owners if o.targets(ref))
    paused = annotations.get(PAUSED_ANNOTATION, "").strip().lower() == "true"
    raw = annotations.get(PINNED_ANNOTATION)
    pin: int | None = None
    invalid: str | None = None
    if raw is not None:
        text = raw.strip()
        if text.isdigit() and int(text) <= 1_000_000:
            pin = int(text)
        else:
            invalid = raw
    return Control(
        conflicts,
        paused,
        pin,
        invalid,
        replicas_writer=writer,
        same_manager=writer is not None and writer.manager == own_manager,
    )


def _outside_writer(d: Decision, c: Control) -> Decision:
    """``d`` with the writer of an outside change named, when the fields tell it."""
    w = c.replicas_writer
    if not d.outside_write or w is None:
        return d
    if c.same_manager:
        who = (
            f"{w.describe()}, this controller's own name: another installation of vllm-scaler "
            "(its own Lease, its own policy) or a process borrowing the name scales this "
            "workload too; give each workload to one installation"
        )
    else:
        who = w.describe()
    return replace(d, message=f"{d.message}; spec.replicas was last written by {who}")


def override(d: Decision, c: Control) -> Decision:
    """The core's decision with conflicts, pause and pin applied (message keeps the core's).

    Under a conflict or a pause the state forgets our last write: another owner (or a
    person) sets the replicas now, and their value is no outside write once we own them
    again.
    """
    core = f"signals: {d.reason}: {d.message}" if d.message else f"signals: {d.reason}"
    if c.conflicts:
        names = ", ".join(o.label for o in c.conflicts)
        return _hold(
            d,
            Reason.CONFLICT,
            f"{names} also scales this workload; recommending "
            f"{d.desired_replicas} without writing ({core})",
        )
    if c.paused or c.invalid_pin is not None:
        why = (
            f"{PAUSED_ANNOTATION}=true"
            if c.paused
            else f"{PINNED_ANNOTATION}={c.invalid_pin!r} is not a replica count"
        )
        return _hold(
            d, Reason.PAUSED, f"paused ({why}); would scale to {d.desired_replicas} ({core})"
        )
    if c.pin is not None:
        return replace(
            d,
            desired_replicas=c.pin,
            reason=Reason.PINNED,
            outside_write=False,
            message=f"pinned by {PINNED_ANNOTATION}={c.pin} (otherwise "
            f"{d.desired_replicas}; {core})",
        )
    if c.shared and d.desired_replicas <= d.current_replicas:
        # a scale-up on the target's own pods goes ahead; nothing else while pods are shared
        held = replace(
            d,
            desired_replicas=d.current_replicas,
            reason=Reason.AMBIGUOUS_SELECTOR,
            message=f"{shared_pods_text(c.shared)}: neither target counts them, and no "
            f"scale-down until their owner can be told ({core})",
        )
        return _outside_writer(held, c)
    return _outside_writer(d, c)


def shared_pods_text(shared: tuple[tuple[str, tuple[str, ...]], ...]) -> str:
    """``pods a, b are also picked by the selector of llm/Deployment/x, and their owner
    cannot be told``."""
    pods = [p for p, _ in shared]
    others = sorted({o for _, targets in shared for o in targets})
    shown = ", ".join(pods[:5]) + (f" and {len(pods) - 5} more" if len(pods) > 5 else "")
    return (
        f"{'pod' if len(pods) == 1 else 'pods'} {shown} {'is' if len(pods) == 1 else 'are'} "
        f"also picked by the selector of {', '.join(others)}, and "
        f"{'its' if len(pods) == 1 else 'their'} owner cannot be told"
    )


def selector_required_decision(counts: ReplicaCounts, kind: str) -> Decision:
    """The decision for a target whose scale subresource answers no ``status.selector``.

    Its pods cannot be told from the namespace's other pods, so no signal is read and
    nothing is written (the HPA's rule: ScalingActive=False, SelectorRequired); the replica
    counts of pods are unknown (the pod counts are 0 here, and never exported as such).
    """
    return _not_decided(
        counts,
        Reason.SELECTOR_REQUIRED,
        f"the {kind}'s scale subresource answers no status.selector, so its pods cannot be "
        "told: nothing is read or written (as the HPA: ScalingActive=False, SelectorRequired); "
        "a custom resource's CRD needs spec.versions[].subresources.scale.labelSelectorPath "
        "naming a string field with the pods' selector, which its operator must write",
    )


def disabled_decision(counts: ReplicaCounts) -> Decision:
    """The decision for a target whose ``spec.replicas`` is 0: scaling disabled.

    The HPA's rule (``ScalingActive=False``, reason ``ScalingDisabled``): people and idlers
    park workloads at 0, and raising them to the minimum would fight them. No signal is
    evaluated (a parked workload has no series; that is not a failed read) and the state
    is empty: scaling resumes from the replicas someone sets, with a fresh history.
    """
    return _not_decided(
        counts,
        Reason.SCALING_DISABLED,
        "spec.replicas is 0 (set by a person or an idler): scaling is disabled and "
        "nothing is written; it resumes from the replicas set when they go above 0",
    )


def _not_decided(counts: ReplicaCounts, reason: Reason, message: str) -> Decision:
    """A target held at its replicas without evaluating any signal (``reason`` says why)."""
    return Decision(
        current_replicas=counts.current,
        desired_replicas=counts.current,
        recommended_replicas=counts.current,
        reason=reason,
        driving_signal=None,
        message=message,
        limits=(),
        signals=(),
        replicas=counts,
        outside_write=False,
        state=TargetState(),
    )


def _hold(d: Decision, reason: Reason, message: str) -> Decision:
    """``d`` held at the current replicas by someone else, forgetting our last write."""
    return replace(
        d,
        desired_replicas=d.current_replicas,
        reason=reason,
        outside_write=False,
        message=message,
        state=replace(d.state, last_written_replicas=None),
    )


def refusal_events(ref: WorkloadRef, c: Control, core: Decision) -> dict[str, tuple[object, Event]]:
    """The refusal Events ``c`` calls for, by kind (see :data:`REFUSALS`).

    Each comes with a signature: the same kind with the same signature is a repeat.
    """
    out: dict[str, tuple[object, Event]] = {}
    if c.conflicts:
        names = ", ".join(f"{o.kind} {o.namespace}/{o.name}" for o in c.conflicts)
        out["conflict"] = (
            tuple(sorted(o.label for o in c.conflicts)),
            Event(
                "ConflictingAutoscaler",
                f"{names} also targets this {ref.kind}; vllm-scaler will not "
                f"write spec.replicas while it exists (recommends {core.desired_replicas}, "
                f"current {core.current_replicas})",
                "Warning",
            ),
        )
        return out
    if c.invalid_pin is not None:
        out["invalid_pin"] = (
            c.invalid_pin,
            Event(
                "InvalidPinnedReplicas",
                f"annotation {PINNED_ANNOTATION}={c.invalid_pin!r} is not a replica "
                "count (a non-negative integer); holding the current replicas",
                "Warning",
            ),
        )
    if c.shared:
        out["ambiguous_selector"] = (
            c.shared,
            Event(
                "AmbiguousSelector",
                f"{shared_pods_text(c.shared)} (no ownerReferences that lead to one of the "
                f"workloads): vllm-scaler counts them for neither and does not scale this "
                f"{ref.kind} down meanwhile; give each workload's pods a label of its own",
                "Warning",
            ),
        )
    if c.paused:
        out["paused"] = (
            True,
            Event(
                "ScalingPaused",
                f"paused by annotation {PAUSED_ANNOTATION}=true; replicas stay "
                f"{core.current_replicas} (signals ask for {core.desired_replicas}: "
                f"{core.reason})",
            ),
        )
    return out
