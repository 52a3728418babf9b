"""The first phase of a decision: what the signals ask for, and the guards that hold (pure).

:func:`recommend` takes each enabled signal's evaluation (:mod:`scaler.core.evaluation`),
lets the largest ask win (HPA: scale-up may use any usable signal) and holds the current
replicas where a guard says so, as a :class:`~scaler.core.reasons.Hold`:

- ``no_valid_signals``: no signal is usable (a Prometheus outage never looks like zero load);
- ``scale_down_blocked_missing_signal``: a scale-down while an enabled signal is invalid
  (HPA's rule: never scale down on a partial picture);
- ``waiting_for_pending``: replicas still start (a scale-down waits until they are ready; a
  hold at the current replicas is theirs when the demand needs them);
- ``waiting_for_drain``: pods removed earlier still drain;
- ``waiting_for_ttft_window``: no replica starts any more, but some did less than two rate
  windows ago, and only a latency signal asks for more: its window may still hold requests
  that queued before they served (:func:`settling`).

Beside it the inputs the evaluations take: :func:`settling` (a latency signal's lag after
replicas started) and :func:`not_load` (a latency breach the fleet's load does not explain).
"""

from __future__ import annotations

from dataclasses import dataclass

from scaler.config.policy import TargetPolicy
from scaler.config.vocabulary import SignalName
from scaler.config.wording import counted
from scaler.core.capacity import busy_pods, half_busy
from scaler.core.evaluation import EPS as _EPS
from scaler.core.evaluation import SignalEvaluation
from scaler.core.messages import describe_invalid
from scaler.core.observation import Observation, ReplicaCounts
from scaler.core.reasons import Hold, Phase, PhaseName, Reason
from scaler.core.signals import SignalStatus
from scaler.core.sizing import CapacityView
from scaler.core.state import TargetState

__all__ = [
    "SETTLE_WINDOWS",
    "Recommended",
    "backlog_cap",
    "capacity_learning",
    "capacity_replicas",
    "not_load",
    "recommend",
    "settling",
]

#: For this many rate windows after the last cycle that saw replicas starting, a latency
#: signal asks for no more than the current replicas (its window still holds the queue they
#: drain; see :mod:`scaler.core.decide`).
SETTLE_WINDOWS = 2.0


@dataclass(frozen=True, slots=True)
class Recommended:
    """The outcome of :func:`recommend`, the first phase: what the signals ask for after the
    guards.

    Attributes:
        replicas: the recommendation (the current replicas when a guard holds).
        driving: the evaluation whose result won, if any signal was usable.
        hold: the guard that holds the current replicas, and why, if one does.
    """

    replicas: int
    driving: SignalEvaluation | None = None
    hold: Hold | None = None

    @property
    def recorded(self) -> int:
        """What the stabilization history keeps for this cycle: the recommendation, or what
        the hold says (a hold that only waits records what the signals ask for)."""
        if self.hold is not None and self.hold.recorded is not None:
            return self.hold.recorded
        return self.replicas

    @property
    def phase(self) -> Phase:
        """The recommendation as the decision's first :class:`~scaler.core.reasons.Phase`."""
        return Phase(PhaseName.RECOMMEND, self.replicas, (), self.hold)


def recommend(
    policy: TargetPolicy,
    counts: ReplicaCounts,
    evaluations: tuple[SignalEvaluation, ...],
    *,
    settling: bool,
    window: float,
) -> Recommended:
    """The largest per-signal result, then the guards that hold the current replicas.

    Scale-up may use any usable signal; scale-down needs every enabled signal valid, no
    replica starting and no pod still draining. ``settling`` and ``window`` (seconds) as in
    :func:`scaler.core.decide.decide`.
    """
    current = counts.current
    usable = [e for e in evaluations if e.valid and e.desired_replicas is not None]
    if not usable:
        return Recommended(
            current,
            hold=Hold(
                Reason.NO_VALID_SIGNALS,
                f"no signal is usable, holding {current}: " + describe_invalid(evaluations),
            ),
        )
    driving = max(usable, key=lambda e: (e.desired_replicas or 0, e.ratio or 0.0))
    asked = driving.desired_replicas or 0
    if asked < current:
        hold = _scale_down_guard(counts, evaluations, asked)
        return Recommended(asked if hold is None else current, driving, hold)
    if asked == current:
        return Recommended(
            asked,
            driving,
            _starting_guard(policy, counts, usable, settling=settling, window=window),
        )
    return Recommended(asked, driving)


def _scale_down_guard(
    counts: ReplicaCounts, evaluations: tuple[SignalEvaluation, ...], asked: int
) -> Hold | None:
    """Why a scale-down to ``asked`` must wait, if it must."""
    blocking = [e for e in evaluations if e.status.blocks_scale_down]
    if blocking:
        return Hold(
            Reason.SCALE_DOWN_BLOCKED_MISSING_SIGNAL,
            f"signals ask for {asked}, but scale-down needs every signal valid: "
            + describe_invalid(blocking),
        )
    if counts.starting > 0:
        return Hold(
            Reason.WAITING_FOR_STARTING,
            f"{counts.starting} replica(s) still starting; no scale-down until ready",
        )
    # Only pods being removed: a rollout's surge or canary pods beyond spec.replicas are not.
    if counts.terminating > 0 or counts.removing > 0:
        return Hold(
            Reason.WAITING_FOR_DRAIN,
            f"{counts.terminating + counts.removing} pod(s) removed earlier "
            "still draining; no further scale-down until they are gone",
            # waiting, not needing: the history keeps the signals' ask
            recorded=asked,
        )
    return None


def _starting_guard(
    policy: TargetPolicy,
    counts: ReplicaCounts,
    usable: list[SignalEvaluation],
    *,
    settling: bool,
    window: float,
) -> Hold | None:
    """Why a hold at the current replicas is the starting replicas' doing, if it is."""
    current = counts.current
    coming = counts.starting + counts.unschedulable
    if coming > 0 and any((e.demand_replicas or 0) > counts.ready for e in usable):
        parts = [f"{counts.starting} of them still starting"] if counts.starting else []
        if counts.unschedulable:
            parts.append(f"{counts.unschedulable} of them waiting for a node")
        return Hold(
            Reason.WAITING_FOR_STARTING,
            f"demand is covered by {current} replicas asked for, " + ", ".join(parts),
        )
    if not settling:
        return None
    lagging = [
        e
        for e in usable
        if e.name.latency and (e.ratio or 0.0) > 1 + policy.tolerance.scale_up + _EPS
    ]
    if not lagging:
        return None
    settle = SETTLE_WINDOWS * window
    first = lagging[0]
    # the latency signal's window still holds the drained queue: the others' ask is the need
    # (never above current: the driving signal asks for current and wins the max)
    others = [e.desired_replicas or 0 for e in usable if not e.name.latency]
    # No replica is starting now (that case is above): the hold is the rate window's.
    return Hold(
        Reason.WAITING_FOR_TTFT_WINDOW,
        f"{first.name} {first.value:.3g}{first.name.spec.symbol} is over a {window:.0f} s rate "
        "window that may still hold requests queued before the replicas that were starting "
        f"became ready; {first.name.spec.short} asks for more only {settle:.0f} s after "
        f"replicas were last starting; holding {current}",
        recorded=max(others) if others else current,
    )


def settling(state: TargetState, now: float, window: float) -> bool:
    """Replicas were starting less than two rate windows ``window`` (seconds) ago: a latency
    quantile may still hold the queue from before they served (see
    :mod:`scaler.core.decide`)."""
    # min(): after the clock went backwards the stored time is in the future (see _prune)
    return (
        state.last_starting_at is not None
        and now - min(state.last_starting_at, now) < SETTLE_WINDOWS * window - _EPS
    )


def not_load(
    policy: TargetPolicy,
    observation: Observation,
    capacity: CapacityView | None,
    capacity_replicas: int | None,
    *,
    learning: bool = False,
) -> str | None:
    """Why a latency breach this cycle is not the fleet's load, or None when it may be
    (applied to the signals whose spec says so, TTFT:
    :attr:`~scaler.config.signal_specs.SignalSpec.not_load`).

    Not the load: fewer than half the ready pods are busy (a request waiting, or the KV cache
    at the KV signal's target: the capacity estimator's own test of a breach that is one
    pod's bad luck, :func:`scaler.core.capacity.overloaded`), and either the capacity signal
    has an estimate and an ``ok`` reading (``capacity_replicas`` is not None) and the demand
    it measures is below its target utilization of what the ready replicas serve at that
    estimate, or it is still ``learning`` (no estimate: the learning floor,
    :func:`scaler.core.phases.learning_floor`, then keeps the replicas that broke from coming
    back). Returns the numbers for the decision message.
    """
    u = policy.signals.capacity.target_utilization
    if not learning:
        if capacity_replicas is None or capacity is None or capacity.utilization is None:
            return None
        if capacity.utilization >= u:
            return None
    reading = observation.throughput
    busy = busy_pods(policy, reading)
    if busy is None or reading is None or half_busy(busy, len(reading.pods)):
        return None
    pods = counted(len(reading.pods), "ready pod")
    if learning or capacity is None or capacity.utilization is None:
        return f"the capacity signal is learning, {busy} of {pods} busy"
    return (
        f"utilization {capacity.utilization:.2g} of the capacity signal's target {u:g}, "
        f"{busy} of {pods} busy"
    )


def capacity_learning(evaluations: tuple[SignalEvaluation, ...]) -> bool:
    """The capacity signal is on and has no estimate yet (``learning``)."""
    return any(
        e.name is SignalName.CAPACITY and e.status is SignalStatus.LEARNING for e in evaluations
    )


def backlog_cap(evaluations: tuple[SignalEvaluation, ...]) -> int | None:
    """What the capacity signal asks for when it has an estimate and a reading usable to
    scale up (``ok``, or ``partial``: pods too new for their rates, counted at the mean of the
    others), else None; with it, what the signals other than queue depth ask for when that is
    more: the most the backlog phase lets the queue-depth signal ask for
    (:func:`scaler.core.phases.size_backlog`). The queue depth measures a backlog as if it
    were a steady rate; a latency breach (TTFT, ITL) or a full KV cache on a busy fleet is
    still the safety net it was, and keeps its own ask."""
    ask = None
    for e in evaluations:
        if (
            e.name is SignalName.CAPACITY
            and e.status in (SignalStatus.OK, SignalStatus.PARTIAL)
            and e.valid
            and e.desired_replicas is not None
        ):
            ask = e.desired_replicas
    if ask is None:
        return None
    others = [
        e.desired_replicas
        for e in evaluations
        if e.valid
        and e.desired_replicas is not None
        and e.name not in (SignalName.CAPACITY, SignalName.QUEUE_DEPTH)
    ]
    return max([ask, *others])


def capacity_replicas(evaluations: tuple[SignalEvaluation, ...]) -> int | None:
    """What the capacity signal asks for when it has an estimate and a fully valid (``ok``)
    reading, else None."""
    for e in evaluations:
        if (
            e.name is SignalName.CAPACITY
            and e.status is SignalStatus.OK
            and e.valid
            and e.desired_replicas is not None
        ):
            return e.desired_replicas
    return None
