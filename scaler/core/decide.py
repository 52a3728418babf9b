"""The decision core: signals, state and ``now`` in; a decision with its reason and new state out.

Pure: no I/O, no asyncio, no clock reads. The algorithm follows the Kubernetes HPA
(``pkg/controller/podautoscaler``: replica calculator, stabilization and ``behavior`` rate
limits) with changes for LLM serving:

1. Per signal, HPA's proportional rule with separate scale-up and scale-down tolerances:

   - per-pod signals (queue depth, KV-cache usage): ``ratio = S / (target x current)`` and
     ``desired = ceil(S / target)``, where ``S`` is the sum over ready pods with data and
     ``current`` is ``spec.replicas``. Starting pods and ready pods without data count as zero
     load (HPA's rule for scaling up), which is why a slow model load cannot cascade: demand is
     compared with the replicas already asked for, not with the ready ones.
   - TTFT quantile: ``ratio = value / target`` and ``desired = ceil(min(ratio, 2) x ready)``
     (HPA Object metric, with AIBrix APA's 2x step because latency is not proportional to
     load); an idle TTFT asks for nothing, and while replicas are starting, and for two TTFT
     rate windows ``W`` after the last cycle that saw one starting, TTFT asks for no more
     than the replicas already asked for. TTFT lags twice: nothing changes before the new
     replicas serve, and after that the quantile over ``rate(...[W])`` still holds the first
     tokens of requests that queued before they served: the last cycle that saw a replica
     starting is up to one control interval before it was ready, the old queue then drains
     over some seconds (each request's TTFT is recorded at its first token), and each of
     those first tokens stays in the window for ``W`` seconds. Read during that time TTFT
     would double the fleet again for a queue the new replicas already drain (a 2x overshoot
     the bench showed on ``conv``). ``2 W`` covers the window plus the drain and the
     interval; queue depth and KV cache are instant readings and keep scaling up meanwhile.
   - TTFT adds at most one replica (:data:`~scaler.core.evaluation.TTFT_NOT_LOAD_STEP`) while its
     breach is not the fleet's load (:func:`_ttft_not_load`): fewer than half the ready pods are
     busy (a request waiting or the KV cache at its target; the capacity estimator's own test of
     "one pod's bad luck", :func:`scaler.core.capacity.overloaded`), and the capacity signal either
     has an estimate and an ``ok`` reading and measures the demand below its target utilization of
     what the ready replicas serve, or is still learning (then the learning floor, rule 4, keeps the
     replicas that broke from coming back). A TTFT p95 over a rate window can come from a handful of
     requests on one pod: on the bench's ``synthetic:ramp`` (seed 3, 3,210 s) two 22.5k-token
     prompts met on one pod under random routing, the second waited about 6 s for KV cache and four
     short requests queued behind it, all inside one scrape interval; the window's p95 read 5.3 s
     for 45 s at utilization 0.38 with nothing waiting anywhere, and the proportional rule doubled 4
     replicas to 8 (undone minutes later: a sawtooth tooth and 0.33 GPU-hours). More replicas do not
     fix such a wait. One replica is still added, not none: the same test also passes on bursts
     shorter than the rate window, whose mean hides them (round-robin ``code`` and ``steady-long``
     scale up by one on TTFT at utilization 0.5-0.7 with no pod busy, and lose 1.1 and 0.08 points
     of the share within the SLO when TTFT asks for nothing there). A breach on a loaded fleet
     (utilization at the target) or with half the pods busy, or while the capacity signal has an
     estimate but no ``ok`` reading, keeps the proportional ask: the safety net for a capacity
     estimate that is too high.
   - a ``saturated`` reading is only a lower bound of the quantile (the histogram's top finite
     bucket): above the band it asks for the largest step a latency signal may take
     (``ceil(2 x ready)``), since the true ratio is at least the one read and its size is
     unknown; at or below the band it asks for nothing (and, not being fully valid, blocks a
     scale-down).
   - inside the band ``[1 - down_tolerance, 1 + up_tolerance]`` the signal asks for the
     current replicas; a result that would move against the ratio's direction is replaced by
     the current replicas (HPA does the same).

2. The largest per-signal result wins. Scale-up may use any usable subset of signals;
   scale-down needs every enabled signal fully valid (``ok`` or ``idle``).
3. Guards: no scale-down while replicas are starting (``waiting_for_pending``) or while pods
   removed earlier are still draining (``waiting_for_drain``: terminating pods, and live pods
   the controller's own scale-down removes, ``ReplicaCounts.removing``; never the surge or
   canary pods of a rollout).
4. Stabilization (HPA): up to the lowest recommendation in the scale-up window, down to the
   highest in the scale-down window. Holds for missing or invalid signals are recorded as the
   current replicas, so after an outage a whole window of good samples must pass before a
   scale-down. A hold that only waits, for draining pods (``waiting_for_drain``) or for
   TTFT's rate window to pass the queue the new replicas drained
   (``waiting_for_ttft_window``), records what the valid signals ask for (TTFT left out while
   it settles): it delays this cycle's scale-down but is no evidence that the current replicas
   are needed. Recorded as the current replicas, each such hold would keep the fleet a whole
   window past it: after a surge, TTFT's holds while its window still shows the drained queue
   would push the window out beyond the queue's last ask, and with a larger scale-down step one
   pod still draining after a removal would freeze the next for a whole window.
   Once the demand has fallen for a whole window without a rise (dated from the level's
   last high once it lies more than one standard deviation of the burstiness below it), the
   scale-down window shortens (``scale_down.shorten_window_on_steady_fall``,
   :func:`down_window_seconds`): to the time the demand forecast's trend takes to lower the
   demand by one standard deviation of its burstiness, at least one rate window, and never
   back past a hold for missing or invalid signals or a seeded history
   (``TargetState.last_blocked_at``). While the capacity signal is learning, a scale-down
   also stops at the learning floor (:func:`learning_floor`): one replica above a fleet TTFT
   scaled up, scaled with the demand since; the first estimate ends it.
5. Per-period step limits (HPA ``behavior.policies`` with ``selectPolicy: Max``), then the
   min/max clamp. A scale-down may also remove ``max_surplus_percent_per_period`` of the
   replicas above what the capacity signal asks for, when it has an estimate and an ``ok``
   reading (see :func:`limit_step`).

Every decision's reason and message say what happened, with the numbers: a hold at the
current replicas is ``within_tolerance`` only when the signal that asks for the most is
inside its tolerance band; when it is outside but its proportional rule still gives the
current replicas (15 waiting on 2 replicas against 10 per replica: ratio 0.75, yet
``ceil(15 / 10) = 2``), the reason is ``demand_covered`` and the message shows the rounding.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from enum import StrEnum

from scaler.config.policy import ScalingRules, TargetPolicy
from scaler.config.vocabulary import SignalName
from scaler.config.wording import counted
from scaler.core.capacity import CapacityView, busy_pods, evaluate_capacity, half_busy
from scaler.core.evaluation import EPS as _EPS
from scaler.core.evaluation import (
    SignalEvaluation,
    ceil_replicas,
    evaluate_signal,
)
from scaler.core.load_time import observe_starts
from scaler.core.messages import (
    describe_invalid,
    final_reason,
    floor_note,
    left_out,
    not_load_note,
    shortened,
)
from scaler.core.observation import Observation, ReplicaCounts
from scaler.core.reasons import Limit, Reason
from scaler.core.signals import SignalReading, SignalStatus
from scaler.core.state import LearningFloor, Recommendation, ScaleEvent, TargetState, compact

# Holds recorded as the current replicas for want of valid signals: a window shortened by a
# steady fall never reaches back past them.
_BLOCKED = (Reason.NO_VALID_SIGNALS, Reason.SCALE_DOWN_BLOCKED_MISSING_SIGNAL)

# For this many TTFT rate windows after the last cycle that saw replicas starting, TTFT asks
# for no more than the current replicas (its window still holds the queue they drain; see
# the module docstring).
_TTFT_SETTLE_WINDOWS = 2.0


class Direction(StrEnum):
    """The direction of a decision relative to the current replicas."""

    UP = "up"
    DOWN = "down"
    NONE = "none"


@dataclass(frozen=True, slots=True)
class Decision:
    """The outcome of one cycle for one target.

    Attributes:
        current_replicas: ``spec.replicas`` observed this cycle.
        desired_replicas: what ``spec.replicas`` should be (equal to current for a hold).
        recommended_replicas: what the signals asked for after the guards, before
            stabilization, step limits and min/max.
        reason: one :class:`~scaler.core.reasons.Reason`.
        driving_signal: the signal whose result won, if any.
        message: one human sentence that explains the reason with the numbers.
        limits: every :class:`Limit` that changed the result, in phase order, even when
            another one gives the reason.
        signals: each enabled signal's evaluation.
        outside_write: ``spec.replicas`` differs from the value we last wrote.
        state: the new state to keep for the next cycle.
        capacity: what the capacity signal saw and computed (None when it is off).
    """

    current_replicas: int
    desired_replicas: int
    recommended_replicas: int
    reason: Reason
    driving_signal: SignalName | None
    message: str
    limits: tuple[Limit, ...]
    signals: tuple[SignalEvaluation, ...]
    replicas: ReplicaCounts
    outside_write: bool
    state: TargetState
    capacity: CapacityView | None = None

    @property
    def direction(self) -> Direction:
        """Up, down or none, relative to the current replicas."""
        if self.desired_replicas > self.current_replicas:
            return Direction.UP
        if self.desired_replicas < self.current_replicas:
            return Direction.DOWN
        return Direction.NONE


@dataclass(frozen=True, slots=True)
class Recommended:
    """The outcome of :func:`recommend`: what the signals ask for after the guards.

    Attributes:
        replicas: the recommendation (the current replicas when a guard holds a scale-down).
        driving: the evaluation whose result won, if any signal was usable.
        held: the reason and message of a guard that holds the current replicas, if any.
        recorded: what the stabilization history keeps for this cycle: ``replicas``, except
            for a hold that only waits, which records what the signals ask for (see the
            module docstring).
    """

    replicas: int
    recorded: int
    driving: SignalEvaluation | None = None
    held: tuple[Reason, str] | None = None


@dataclass(frozen=True, slots=True)
class Phase:
    """The outcome of one phase after :func:`recommend`: replicas and what limited them."""

    replicas: int
    limits: tuple[Limit, ...] = ()


def _missing_reading(name: SignalName) -> SignalReading:
    return SignalReading(name, SignalStatus.EMPTY, detail="no reading from the source")


def _period_start(state: TargetState, rules: ScalingRules, current: int, now: float) -> int:
    """The replicas at the start of the policy period ending at ``now`` (seconds).

    ``current`` minus the replicas our writes added plus those they removed inside the period
    (``now - period_seconds`` excluded), both directions counted whichever way the limit is
    for: HPA's ``periodStartReplicas`` (``horizontal.go``,
    ``calculateScaleUpLimitWithScalingRules`` and ``calculateScaleDownLimitWithBehaviors``
    read both ``scaleUpEvents`` and ``scaleDownEvents``). A scale-down right after a scale-up
    in the same period is limited from the replicas before the scale-up, and the other way
    round.
    """
    cutoff = now - rules.period_seconds
    added = 0
    removed = 0
    for ev in state.scale_events:
        if ev.at <= cutoff:
            continue
        delta = ev.to_replicas - ev.from_replicas
        if delta > 0:
            added += delta
        else:
            removed -= delta
    # Floor at 0: after an outside write our own moves no longer add up to the current count.
    return max(0, current - added + removed)


def _up_limit(policy: TargetPolicy, state: TargetState, current: int, now: float) -> int:
    rules = policy.scale_up
    start = _period_start(state, rules, current, now)
    by_pods = start + rules.max_replicas_per_period
    by_percent = ceil_replicas(start * (1 + rules.max_percent_per_period / 100))
    return max(by_pods, by_percent)


def _down_limit(
    policy: TargetPolicy,
    state: TargetState,
    current: int,
    now: float,
    capacity_replicas: int | None,
) -> int:
    rules = policy.scale_down
    start = _period_start(state, rules, current, now)
    by_pods = start - rules.max_replicas_per_period
    by_percent = math.floor(start * (1 - rules.max_percent_per_period / 100) + _EPS)
    by_surplus = start
    if capacity_replicas is not None and capacity_replicas < start:
        surplus = start - capacity_replicas
        by_surplus = start - math.floor(surplus * rules.max_surplus_percent_per_period / 100 + _EPS)
    return max(0, min(by_pods, by_percent, by_surplus))


def _prune(state: TargetState, policy: TargetPolicy, now: float) -> TargetState:
    keep_recs = max(
        policy.scale_up.stabilization_window_seconds, policy.scale_down.stabilization_window_seconds
    )
    keep_events = max(policy.scale_up.period_seconds, policy.scale_down.period_seconds)
    # The clock went backwards (NTP step, VM restore): entries "from the future" are moved to
    # now. Left as they were, they would sit inside every window for the length of the jump
    # (a 0 s scale-up window would take the min over them and block scale-up for an hour
    # after a one-hour jump). At now they still hold scale-down for a whole window and count
    # for the step limits for a period: conservative, and bounded.
    recs = tuple(r for r in state.recommendations if r.at > now - keep_recs - _EPS)
    evs = tuple(e for e in state.scale_events if e.at > now - keep_events)
    rewrite = state.last_rewrite_at
    if any(r.at > now for r in recs) or any(e.at > now for e in evs):
        recs = tuple(Recommendation(min(r.at, now), r.replicas) for r in recs)
        # Bounded under repeated jumps: one entry per replica count (lossless for the
        # windows, see compact()) and one up and one down move for the step limits.
        recs = compact(replace(state, recommendations=recs)).recommendations
        past = tuple(e for e in evs if e.at <= now)
        future = [e.to_replicas - e.from_replicas for e in evs if e.at > now]
        up, down = sum(d for d in future if d > 0), -sum(d for d in future if d < 0)
        moved = ((ScaleEvent(now, 0, up),) if up else ()) + (
            (ScaleEvent(now, down, 0),) if down else ()
        )
        evs = past + moved
    if rewrite is not None and rewrite > now:
        rewrite = now
    starting = state.last_starting_at
    if starting is not None and starting > now:
        starting = now
    blocked = state.last_blocked_at
    if blocked is not None and blocked > now:
        blocked = now
    return replace(
        state,
        recommendations=recs,
        scale_events=evs,
        last_rewrite_at=rewrite,
        last_starting_at=starting,
        last_blocked_at=blocked,
    )


def decide(
    policy: TargetPolicy,
    observation: Observation,
    state: TargetState | None,
    now: float,
    *,
    ttft_window_seconds: float,
) -> Decision:
    """Decide the desired replicas of one target for this cycle.

    The phases, in order (HPA's ``normalizeDesiredReplicasWithBehaviors``): :func:`recommend`
    (per-signal rule and guards), :func:`stabilize`, :func:`limit_step`, :func:`clamp`, then
    :func:`hold_for_outside_writer`.

    Args:
        policy: the target's policy.
        observation: replica counts and a reading per enabled signal (a missing reading counts
            as ``empty``).
        state: the state returned by the previous decision, or ``None`` on the first cycle
            (the history is then seeded with the current replicas).
        now: the controller's clock, seconds.
        ttft_window_seconds: the ``rate()`` window ``W`` of the TTFT query (the policy
            file's ``rate_window_seconds``), seconds: for ``2 W`` after the last cycle that
            saw replicas starting, TTFT asks for no more than the current replicas.

    Returns:
        A :class:`Decision`; never raises for any observation.
    """
    counts = observation.replicas
    current = counts.current
    state = _begin(state, counts, now)
    if observation.pods:
        state = replace(
            state,
            load_times=observe_starts(
                state.load_times, observation.pods, max_seconds=policy.model_load_timeout_seconds
            ),
        )
    settling = _ttft_settling(state, now, ttft_window_seconds)
    capacity: CapacityView | None = None
    extra: tuple[SignalEvaluation, ...] = ()
    if policy.signals.capacity_enabled:
        evaluation, capacity, memory = evaluate_capacity(
            policy,
            observation,
            state.capacity,
            state.load_times.median_seconds,
            now,
            window_seconds=ttft_window_seconds,
        )
        extra = (evaluation,)
        state = replace(state, capacity=memory)
    learning = _capacity_learning(extra)
    if not learning and state.learning_floor is not None:
        state = replace(state, learning_floor=None)  # an estimate: the capacity signal sizes
    not_load = _ttft_not_load(
        policy, observation, capacity, _capacity_replicas(extra), learning=learning
    )
    evaluations = (
        *(
            evaluate_signal(
                policy,
                observation.signals.get(name) or _missing_reading(name),
                counts,
                settling=settling,
                not_load=not_load is not None,
            )
            for name in policy.signals.queried()
        ),
        *extra,
    )
    rec = recommend(policy, counts, evaluations, settling=settling, window=ttft_window_seconds)
    if rec.held is not None and rec.held[0] in _BLOCKED:
        state = replace(state, last_blocked_at=now)
    state = _prune(state, policy, now)
    capacity_replicas = _capacity_replicas(evaluations)
    down_window = down_window_seconds(
        policy, state, now, ttft_window_seconds, capacity_replicas=capacity_replicas
    )
    stabilized = stabilize(policy, state, current, rec.replicas, now, down_window=down_window)
    floor = learning_floor(state)
    if floor is not None and floor > stabilized.replicas and current > stabilized.replicas:
        stabilized = Phase(min(floor, current), (Limit.LEARNING_FLOOR,))
    state = replace(
        state,
        recommendations=(*state.recommendations, Recommendation(now, rec.recorded)),
    )
    stepped = limit_step(
        policy,
        state,
        current,
        stabilized.replicas,
        now,
        capacity_replicas=capacity_replicas,
    )
    clamped = clamp(policy, rec.replicas, stepped.replicas)
    limits = stabilized.limits + stepped.limits + clamped.limits
    desired, state, held = hold_for_outside_writer(policy, state, current, clamped.replicas, now)
    if learning and desired > current and rec.driving is not None:
        state = _raise_floor(state, rec.driving, current)
    held = held or rec.held
    if held is None or desired != current:
        held = final_reason(policy, counts, rec.replicas, desired, limits, rec.driving, held)
        if held[0] in (Reason.WITHIN_TOLERANCE, Reason.DEMAND_COVERED):
            held = (held[0], held[1] + left_out(evaluations))
        elif rec.replicas < current:
            held = (held[0], held[1] + shortened(policy, state, down_window))
    if Limit.LEARNING_FLOOR in limits and state.learning_floor is not None and floor is not None:
        held = (held[0], held[1] + floor_note(state.learning_floor, floor))
    if not_load is not None:
        held = (held[0], held[1] + not_load_note(rec.driving, counts, not_load))
    return Decision(
        current_replicas=current,
        desired_replicas=desired,
        recommended_replicas=rec.replicas,
        reason=held[0],
        driving_signal=rec.driving.name if rec.driving else None,
        message=held[1],
        limits=limits,
        signals=evaluations,
        replicas=counts,
        outside_write=_outside_write(state, current),
        state=state,
        capacity=capacity,
    )


def _begin(state: TargetState | None, counts: ReplicaCounts, now: float) -> TargetState:
    """The state this cycle starts from: seeded with the current replicas when it has no
    history, and noting that replicas are starting now."""
    if state is None or not state.recommendations:
        state = (state or TargetState()).reseeded(counts.current, now)
    if counts.starting > 0:
        state = replace(state, last_starting_at=now)
    return state


def _ttft_not_load(
    policy: TargetPolicy,
    observation: Observation,
    capacity: CapacityView | None,
    capacity_replicas: int | None,
    *,
    learning: bool = False,
) -> str | None:
    """Why a TTFT breach this cycle is not the fleet's load, or None when it may be.

    Not the load: fewer than half the ready pods are busy (a request waiting, or the KV cache
    at the KV signal's target: the capacity estimator's own test of a breach that is one
    pod's bad luck, :func:`scaler.core.capacity.overloaded`), and either the capacity signal
    has an estimate and an ``ok`` reading (``capacity_replicas`` is not None) and the demand
    it measures is below its target utilization of what the ready replicas serve at that
    estimate, or it is still ``learning`` (no estimate: the learning floor,
    :func:`learning_floor`, then keeps the replicas that broke from coming back). Returns the
    numbers for the decision message.
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


def _ttft_settling(state: TargetState, now: float, window: float) -> bool:
    """Replicas were starting less than two TTFT rate windows ago (see the module docstring)."""
    # min(): after the clock went backwards the stored time is in the future (see _prune)
    return (
        state.last_starting_at is not None
        and now - min(state.last_starting_at, now) < _TTFT_SETTLE_WINDOWS * window - _EPS
    )


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
    :func:`decide`.
    """
    current = counts.current
    usable = [e for e in evaluations if e.valid and e.desired_replicas is not None]
    if not usable:
        return Recommended(
            current,
            current,
            held=(
                Reason.NO_VALID_SIGNALS,
                f"no signal is usable, holding {current}: " + describe_invalid(evaluations),
            ),
        )
    driving = max(usable, key=lambda e: (e.desired_replicas or 0, e.ratio or 0.0))
    asked = driving.desired_replicas or 0
    replicas = asked
    recorded = asked
    if asked < current:
        held = _scale_down_guard(counts, evaluations, asked)
        if held is not None:
            replicas = current
            # waiting, not needing: the history keeps the signals' ask
            recorded = asked if held[0] is Reason.WAITING_FOR_DRAIN else current
    elif asked == current:
        held = _starting_guard(policy, counts, usable, settling=settling, window=window)
        if held is not None and held[0] is Reason.WAITING_FOR_TTFT_WINDOW:
            # TTFT's window still holds the drained queue: the others' ask is the need (never
            # above current: the driving signal asks for current and wins the max)
            others = [e.desired_replicas or 0 for e in usable if not e.name.latency]
            recorded = max(others) if others else current
    else:
        held = None
    return Recommended(replicas, recorded, driving, held)


def _scale_down_guard(
    counts: ReplicaCounts, evaluations: tuple[SignalEvaluation, ...], asked: int
) -> tuple[Reason, str] | None:
    """Why a scale-down to ``asked`` must wait, if it must."""
    blocking = [e for e in evaluations if e.status.blocks_scale_down]
    if blocking:
        return Reason.SCALE_DOWN_BLOCKED_MISSING_SIGNAL, (
            f"signals ask for {asked}, but scale-down needs every signal valid: "
            + describe_invalid(blocking)
        )
    if counts.starting > 0:
        return Reason.WAITING_FOR_STARTING, (
            f"{counts.starting} replica(s) still starting; no scale-down until ready"
        )
    # Only pods being removed: a rollout's surge or canary pods beyond spec.replicas are not.
    if counts.terminating > 0 or counts.removing > 0:
        return Reason.WAITING_FOR_DRAIN, (
            f"{counts.terminating + counts.removing} pod(s) removed earlier "
            "still draining; no further scale-down until they are gone"
        )
    return None


def _starting_guard(
    policy: TargetPolicy,
    counts: ReplicaCounts,
    usable: list[SignalEvaluation],
    *,
    settling: bool,
    window: float,
) -> tuple[Reason, str] | None:
    """Why a hold at the current replicas is the starting replicas' doing, if it is."""
    current = counts.current
    if counts.starting > 0 and any((e.demand_replicas or 0) > counts.ready for e in usable):
        return Reason.WAITING_FOR_STARTING, (
            f"demand is covered by {current} replicas asked for, "
            f"{counts.starting} of them still starting"
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
    settle = _TTFT_SETTLE_WINDOWS * window
    # No replica is starting now (that case is above): the hold is the rate window's.
    return Reason.WAITING_FOR_TTFT_WINDOW, (
        f"{lagging[0].name} {lagging[0].value:.3g} s is over a {window:.0f} s rate window that may "
        "still hold requests queued before the replicas that were starting became ready; "
        f"TTFT asks for more only {settle:.0f} s after replicas were last starting; "
        f"holding {current}"
    )


def down_window_seconds(
    policy: TargetPolicy,
    state: TargetState,
    now: float,
    rate_window: float,
    *,
    capacity_replicas: int | None,
) -> float:
    """The scale-down stabilization window for this cycle, seconds.

    ``scale_down.stabilization_window_seconds``, unless the demand falls steadily
    (``scale_down.shorten_window_on_steady_fall``). The window holds a fleet for demand that
    comes back within it. Once the demand forecast has fallen for a whole window without a
    rise (``DemandForecast.falling_since``: its trend negative at every update, its level never
    more than one standard deviation of the burstiness above its lowest point), nothing came
    back. The fall is dated from the level's last high (``DemandForecast.high_at``: no update
    since reached it or rose more than one standard deviation above the lowest level since)
    when the level lies more than one standard deviation below that high
    (:meth:`~scaler.core.forecast.DemandForecast.fallen`), else from the trend's turn: the
    trend, smoothed over five rate windows, turns negative minutes after the level did at
    the top of a rise, and a drop larger than the noise since the high is the evidence that
    the demand did not come back. Then, while the capacity signal has an estimate and an
    ``ok`` reading (``capacity_replicas``, what it then asks for, is not None) the window is
    the time the trend takes to lower the demand by one standard deviation of its burstiness
    (:meth:`~scaler.core.forecast.DemandForecast.fall_seconds`), at least ``rate_window``
    (the ``rate()`` window, seconds: recommendations inside one share most of their data) and
    at most the configured window. A recommendation older than that answered a demand that
    has since fallen by more than its noise, and the capacity signal's ask already carries
    ``headroom`` standard deviations of it. Recurring bursts keep the whole window: each
    turns the trend up or lifts the level. The window never reaches back past
    ``state.last_blocked_at`` (a hold for missing or invalid signals, a seeded history), so
    after an outage or a restart a whole window of good samples still passes first.
    """
    window = policy.scale_down.stabilization_window_seconds
    if not policy.scale_down.shorten_window_on_steady_fall or capacity_replicas is None:
        return window
    blocked = state.last_blocked_at
    if blocked is not None and now - blocked < window + _EPS:
        return window
    forecast = state.capacity.forecast
    if forecast is None or forecast.falling_since is None:
        return window
    fall = forecast.fall_seconds()
    start = forecast.falling_since
    if forecast.high_at is not None and forecast.fallen():
        # fallen by more than the noise since the last high: the fall began there, before
        # the trend (lagging by its time constant) turned
        start = min(start, forecast.high_at)
    if fall is None or now - start < window - _EPS:
        return window  # a rise inside the window: recurring bursts keep it whole
    return min(window, max(rate_window, fall))


def stabilize(
    policy: TargetPolicy,
    state: TargetState,
    current: int,
    recommended: int,
    now: float,
    *,
    down_window: float | None = None,
) -> Phase:
    """HPA stabilization: up to the min over the scale-up window, down to the max over the
    scale-down window of ``state``'s earlier recommendations and ``recommended``.

    Earlier entries count only when strictly inside the window. ``down_window`` (seconds)
    replaces ``scale_down.stabilization_window_seconds`` when given
    (:func:`down_window_seconds`).
    """
    earlier = state.recommendations
    up_cut = now - policy.scale_up.stabilization_window_seconds
    down_cut = now - (
        policy.scale_down.stabilization_window_seconds if down_window is None else down_window
    )
    up_rec = min([recommended, *(r.replicas for r in earlier if r.at > up_cut)])
    down_rec = max([recommended, *(r.replicas for r in earlier if r.at > down_cut)])
    stabilized = min(max(current, up_rec), down_rec)
    return Phase(stabilized, (Limit.STABILIZATION,) if stabilized != recommended else ())


def _capacity_learning(evaluations: tuple[SignalEvaluation, ...]) -> bool:
    """The capacity signal is on and has no estimate yet (``learning``)."""
    return any(
        e.name is SignalName.CAPACITY and e.status is SignalStatus.LEARNING for e in evaluations
    )


def _raise_floor(state: TargetState, driving: SignalEvaluation, current: int) -> TargetState:
    """``state`` with the learning floor above ``current`` when TTFT drives this scale-up
    and the demand forecast has a level (see :func:`learning_floor`)."""
    forecast = state.capacity.forecast
    if not driving.name.spec.learning_floor or forecast is None or forecast.level <= 0:
        return state
    old = state.learning_floor
    if old is not None and old.replicas > current:
        return state  # a higher floor from an earlier breach still stands
    return replace(state, learning_floor=LearningFloor(current + 1, forecast.level))


def learning_floor(state: TargetState) -> int | None:
    """The fewest replicas a scale-down may leave this cycle, while the capacity signal is
    learning, or None.

    Until the capacity signal has an estimate, scale-down follows the queue, KV-cache and
    TTFT signals, and none of them says how much load one replica takes: their proportional
    rules read a calm fleet (TTFT p95 a quarter of its target, KV cache a third full) as room
    for half the replicas. On the bench's ``synthetic:steady-long`` (a constant request rate
    with long prompts) TTFT broke on 4 replicas, TTFT doubled them to 8, and the queue, KV
    and TTFT signals then took the fleet back down to 4 a replica a minute, where TTFT broke
    again a minute later: the evidence that 4 replicas were too few for that demand was
    there, and no signal kept it. A TTFT breach that scales up ``n`` replicas while the
    capacity signal is learning is that evidence, as the capacity estimator's own breach
    samples are once it has an estimate: the floor is ``n + 1`` at the demand forecast's
    level of that cycle (``state.learning_floor``), scaled with the demand since, like any
    proportional rule, ``min(n + 1, ceil((n + 1) x level now / level then))``, so a demand that
    falls (the night after a peak) lowers it, while a steady one keeps it. A later breach
    above it raises it; the first estimate ends it (the capacity signal then sizes the
    fleet). It only holds back scale-downs; a fleet below it is not scaled up by it.
    """
    floor = state.learning_floor
    if floor is None:
        return None
    forecast = state.capacity.forecast
    if forecast is None:
        return floor.replicas
    return min(floor.replicas, ceil_replicas(floor.replicas * forecast.level / floor.level))


def _capacity_replicas(evaluations: tuple[SignalEvaluation, ...]) -> int | None:
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


def limit_step(
    policy: TargetPolicy,
    state: TargetState,
    current: int,
    desired: int,
    now: float,
    *,
    capacity_replicas: int | None = None,
) -> Phase:
    """HPA ``behavior`` rate limits: the most the replicas may move in this period.

    Each direction allows the larger change of its limits (HPA's ``selectPolicy: Max``),
    counted from the replicas at the start of the period (before every write of ours inside
    it, scale-ups and scale-downs alike, as HPA's ``periodStartReplicas``; see
    :func:`_period_start`): ``max_replicas_per_period`` and
    ``max_percent_per_period`` of them, and for a scale-down also
    ``max_surplus_percent_per_period`` of the surplus over ``capacity_replicas`` (what the
    capacity signal asks for, when it has an estimate and an ``ok`` reading; None: no
    surplus is known and only the first two apply). The surplus is the part of the fleet
    the capacity signal says the forecast demand does not need: after a surge sized by the
    queue, it goes in a few periods instead of one replica a period, and near the need the
    step is one replica again.
    """
    if desired > current:
        # never below current: after an outside write lowered the replicas, our own moves in
        # the period can exceed the current count, and the limit must not turn into a cut
        limit = max(_up_limit(policy, state, current, now), current)
        if desired > limit:
            return Phase(limit, (Limit.STEP_LIMIT,))
    elif desired < current:
        limit = min(_down_limit(policy, state, current, now, capacity_replicas), current)
        if desired < limit:
            return Phase(limit, (Limit.STEP_LIMIT,))
    return Phase(desired)


def clamp(policy: TargetPolicy, recommended: int, desired: int) -> Phase:
    """Min/max replicas. A limit is reported when it cut the recommendation too, even if the
    earlier phases already kept ``desired`` inside the range."""
    limits: tuple[Limit, ...] = ()
    if desired > policy.max_replicas or recommended > policy.max_replicas:
        desired = min(desired, policy.max_replicas)
        limits += (Limit.MAX_REPLICAS,)
    if desired < policy.min_replicas or recommended < policy.min_replicas:
        desired = max(desired, policy.min_replicas)
        limits += (Limit.MIN_REPLICAS,)
    return Phase(desired, limits)


def _outside_write(state: TargetState, current: int) -> bool:
    return state.last_written_replicas is not None and state.last_written_replicas != current


def hold_for_outside_writer(
    policy: TargetPolicy, state: TargetState, current: int, desired: int, now: float
) -> tuple[int, TargetState, tuple[Reason, str] | None]:
    """Re-apply over another writer of ``spec.replicas`` at most once per cooldown.

    Returns:
        ``(desired, state, held)``: the replicas to write (``current`` when holding), the
        state (noting a re-apply now), and the reason and message of a hold.
    """
    if not _outside_write(state, current) or desired == current:
        return desired, state, None
    cooldown = max(policy.scale_down.stabilization_window_seconds, 60.0)
    if state.last_rewrite_at is not None and now - state.last_rewrite_at < cooldown:
        return (
            current,
            state,
            (
                Reason.OUTSIDE_WRITER,
                f"spec.replicas was changed to {current} by another writer (we wrote "
                f"{state.last_written_replicas}); already re-applied within the "
                f"{cooldown:.0f} s cooldown, holding instead of fighting",
            ),
        )
    return desired, replace(state, last_rewrite_at=now), None
