"""The decision core: signals, state and ``now`` in; a decision with its reason and new state out.

Pure: no I/O, no asyncio, no clock reads. :func:`decide` runs the phases in order, each
returning replicas and what shaped them (:class:`~scaler.core.reasons.Phase`, a guard's hold a
:class:`~scaler.core.reasons.Hold`): :mod:`scaler.core.guards` (the recommendation and its
guards), then :mod:`scaler.core.phases` (stabilization, the learning floor, step limits,
min/max, another writer); :mod:`scaler.core.messages` words the outcome. The algorithm follows
the Kubernetes HPA (``pkg/controller/podautoscaler``: replica calculator, stabilization and
``behavior`` rate limits) with changes for LLM serving:

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
   - TTFT adds at most one replica (:data:`~scaler.core.evaluation.TTFT_NOT_LOAD_STEP`) while
     its breach is not the fleet's load (:func:`~scaler.core.guards.not_load`): fewer than half
     the ready pods are busy (a request waiting or the KV cache at its target; the capacity
     estimator's own test of "one pod's bad luck", :func:`scaler.core.capacity.overloaded`), and
     the capacity signal either has an estimate and an ``ok`` reading and measures the demand
     below its target utilization of what the ready replicas serve, or is still learning (then
     the learning floor, rule 4, keeps the replicas that broke from coming back). A TTFT p95 over
     a rate window can come from a handful of
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
   :func:`~scaler.core.phases.down_window_seconds`): to the time the demand forecast's trend
   takes to lower the demand by one standard deviation of its burstiness, at least one rate
   window, and never back past a hold for missing or invalid signals or a seeded history
   (``TargetState.last_blocked_at``). While the capacity signal is learning, a scale-down
   also stops at the learning floor (:func:`~scaler.core.phases.learning_floor`): one replica
   above a fleet TTFT scaled up, scaled with the demand since; the first estimate ends it.
5. Per-period step limits (HPA ``behavior.policies`` with ``selectPolicy: Max``), then the
   min/max clamp. A scale-down may also remove ``max_surplus_percent_per_period`` of the
   replicas above what the capacity signal asks for, when it has an estimate and an ``ok``
   reading (see :func:`~scaler.core.phases.limit_step`).

Every decision's reason and message say what happened, with the numbers: a hold at the
current replicas is ``within_tolerance`` only when the signal that asks for the most is
inside its tolerance band; when it is outside but its proportional rule still gives the
current replicas (15 waiting on 2 replicas against 10 per replica: ratio 0.75, yet
``ceil(15 / 10) = 2``), the reason is ``demand_covered`` and the message shows the rounding.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import StrEnum

from scaler.config.policy import TargetPolicy
from scaler.config.vocabulary import SignalName
from scaler.core.capacity import SEED_WEIGHT
from scaler.core.evaluation import EPS as _EPS
from scaler.core.evaluation import SignalEvaluation, evaluate_signal
from scaler.core.guards import (
    Recommended,
    backlog_cap,
    capacity_learning,
    capacity_replicas,
    not_load,
    recommend,
    settling,
)
from scaler.core.load_time import observe_starts
from scaler.core.messages import final_reason, floor_note, left_out, not_load_note, shortened
from scaler.core.observation import Observation, ReplicaCounts
from scaler.core.phases import (
    SeasonalAsk,
    clamp,
    down_window_seconds,
    hold_at_learning_floor,
    hold_for_outside_writer,
    learning_floor,
    limit_step,
    outside_write,
    raise_learning_floor,
    seasonal_phase,
    size_backlog,
    stabilize,
)
from scaler.core.reasons import Because, Limit, Phase, Reason
from scaler.core.signals import SignalReading, SignalStatus
from scaler.core.sizing import CapacityView, evaluate_capacity
from scaler.core.state import Recommendation, ScaleEvent, TargetState, compact

__all__ = [
    "Decision",
    "Direction",
    "capacity_replicas",
    "decide",
    "down_window_seconds",
    "learning_floor",
]


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
        phases: each phase's outcome, in order (:class:`~scaler.core.reasons.Phase`: the
            recommendation with its guard's hold, the stabilization, the learning floor, the
            step limit, the clamp, the outside writer); empty for a decision made without
            them (a target whose scaling is disabled).
        seasonal: what the seasonal forecast asked for (None for a decision made without
            the phases).
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
    phases: tuple[Phase, ...] = ()
    seasonal: SeasonalAsk | None = None

    @property
    def direction(self) -> Direction:
        """Up, down or none, relative to the current replicas."""
        if self.desired_replicas > self.current_replicas:
            return Direction.UP
        if self.desired_replicas < self.current_replicas:
            return Direction.DOWN
        return Direction.NONE


def _missing_reading(name: SignalName) -> SignalReading:
    return SignalReading(name, SignalStatus.EMPTY, detail="no reading from the source")


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

    The phases, in order (HPA's ``normalizeDesiredReplicasWithBehaviors``), each returning
    replicas and what shaped them (:class:`~scaler.core.reasons.Phase`):
    :func:`~scaler.core.guards.recommend` (per-signal rule and guards, a hold as a
    :class:`~scaler.core.reasons.Hold`), :func:`~scaler.core.phases.stabilize`,
    :func:`~scaler.core.phases.hold_at_learning_floor`, :func:`~scaler.core.phases.limit_step`,
    :func:`~scaler.core.phases.clamp`, then :func:`~scaler.core.phases.hold_for_outside_writer`;
    :func:`~scaler.core.messages.final_reason` words the outcome.

    Args:
        policy: the target's policy.
        observation: replica counts and a reading per enabled signal (a missing reading counts
            as ``empty``).
        state: the state returned by the previous decision, or ``None`` on the first cycle
            (the history is then seeded with the current replicas).
        now: the controller's clock, seconds.
        ttft_window_seconds: the ``rate()`` window ``W`` of the latency queries (the policy
            file's ``rate_window_seconds``), seconds: for ``2 W`` after the last cycle that
            saw replicas starting, a latency signal asks for no more than the current replicas.

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
    lagging = settling(state, now, ttft_window_seconds)
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
    learning = capacity_learning(extra)
    if not learning and state.learning_floor is not None:
        state = replace(state, learning_floor=None)  # an estimate: the capacity signal sizes
    not_the_load = not_load(
        policy, observation, capacity, capacity_replicas(extra), learning=learning
    )
    evaluations = (
        *(
            evaluate_signal(
                policy,
                observation.signals.get(name) or _missing_reading(name),
                counts,
                settling=lagging,
                not_load=not_the_load is not None,
            )
            for name in policy.signals.queried()
        ),
        *extra,
    )
    # 1. what the signals ask for, and the guards' hold
    rec = recommend(policy, counts, evaluations, settling=lagging, window=ttft_window_seconds)
    if rec.hold is not None and rec.hold.blocked:
        state = replace(state, last_blocked_at=now)
    # 1b. the seasonal forecast, by max, for scale-up only
    season = _seasonal(policy, observation, extra, capacity, rec.replicas, now, rec)
    if season.raised:
        rec = replace(rec, replicas=season.phase.replicas, hold=None)
    state = _prune(state, policy, now)
    surplus_over = capacity_replicas(evaluations)
    down_window = down_window_seconds(
        policy, state, now, ttft_window_seconds, capacity_replicas=surplus_over
    )
    # 2. the stabilization windows, 3. the learning floor
    stabilized = stabilize(policy, state, current, rec.replicas, now, down_window=down_window)
    floor = learning_floor(state)
    floored = hold_at_learning_floor(floor, stabilized, current)
    state = replace(
        state,
        recommendations=(*state.recommendations, Recommendation(now, rec.recorded)),
    )
    # 4. the backlog sized by the capacity signal, 5. the step limits, 6. min and max,
    # 7. another writer
    cap = backlog_cap(evaluations)
    drained = size_backlog(policy, floored, current, cap, outgrown=outgrown(capacity, counts, cap))
    stepped = limit_step(
        policy, state, current, drained.replicas, now, capacity_replicas=surplus_over
    )
    clamped = clamp(policy, rec.replicas, stepped.replicas)
    written, state = hold_for_outside_writer(policy, state, current, clamped.replicas, now)
    # the floor's result replaces the window's
    limits = (
        (floored.limits or stabilized.limits) + drained.limits + stepped.limits + clamped.limits
    )
    desired = written.replicas
    if learning and desired > current and rec.driving is not None:
        state = raise_learning_floor(state, rec.driving, current)
    hold = written.hold or rec.hold
    because: Because
    if hold is not None and desired == current:
        because = hold
    else:
        because = final_reason(policy, counts, rec.replicas, desired, limits, rec.driving, hold)
        if because.reason in (Reason.WITHIN_TOLERANCE, Reason.DEMAND_COVERED):
            because = because.noted(left_out(evaluations))
        elif rec.replicas < current:
            because = because.noted(shortened(policy, state, down_window))
    if Limit.LEARNING_FLOOR in limits and state.learning_floor is not None and floor is not None:
        because = because.noted(floor_note(state.learning_floor, floor))
    if not_the_load is not None:
        because = because.noted(not_load_note(rec.driving, counts, not_the_load))
    if season.raised:
        because = because.noted(season.note())
    return Decision(
        current_replicas=current,
        desired_replicas=desired,
        recommended_replicas=rec.replicas,
        reason=because.reason,
        driving_signal=rec.driving.name if rec.driving else None,
        message=because.message,
        limits=limits,
        signals=evaluations,
        replicas=counts,
        outside_write=outside_write(state, current),
        state=state,
        capacity=capacity,
        phases=(rec.phase, season.phase, stabilized, floored, drained, stepped, clamped, written),
        seasonal=season,
    )


def _seasonal(
    policy: TargetPolicy,
    observation: Observation,
    extra: tuple[SignalEvaluation, ...],
    capacity: CapacityView | None,
    recommended: int,
    now: float,
    rec: Recommended,
) -> SeasonalAsk:
    """The seasonal phase (:func:`scaler.core.phases.seasonal_phase`) over the capacity
    signal's horizon (the model load plus half the rate window) plus the forecast's control
    interval: one model load plus one control interval ahead."""
    forecast = observation.seasonal
    horizon = capacity.horizon_seconds if capacity is not None else 0.0
    if forecast is not None:
        horizon += forecast.interval_seconds
    return seasonal_phase(
        observation.seasonal if policy.signals.capacity_enabled else None,
        extra[0] if extra else None,
        horizon,
        recommended,
        blocked=rec.hold is not None and rec.hold.blocked,
        now=now,
    )


def outgrown(view: CapacityView | None, counts: ReplicaCounts, ask: int | None) -> bool:
    """The backlog is the other signals' to size: the capacity estimate rests on fewer than
    :data:`~scaler.core.capacity.SEED_WEIGHT` samples (one busy window is thin evidence to cap
    the queue with), or the backlog grows (the rate arriving more than 5% above the rate
    served) while every replica the capacity signal asks for is ready and awake (its estimate
    is too high)."""
    if view is None or ask is None:
        return False
    if view.samples < SEED_WEIGHT:
        return True
    arriving, served = view.demand_tokens_per_second, view.served_tokens_per_second
    if arriving is None or served is None:
        return False
    return arriving > 1.05 * served and counts.ready - counts.sleeping >= ask


def _begin(state: TargetState | None, counts: ReplicaCounts, now: float) -> TargetState:
    """The state this cycle starts from: seeded with the current replicas when it has no
    history, and noting that replicas are starting now."""
    if state is None or not state.recommendations:
        state = (state or TargetState()).reseeded(counts.current, now)
    if counts.starting > 0:
        state = replace(state, last_starting_at=now)
    return state
