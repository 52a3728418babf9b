"""The phases of a decision after the recommendation, each returning replicas and what shaped
them (pure), as the HPA's ``normalizeDesiredReplicasWithBehaviors`` does:

1. :func:`stabilize`: the stabilization windows (HPA's ``stabilizeRecommendationWithBehaviors``),
   the scale-down window shortened while the demand falls steadily (:func:`down_window_seconds`);
2. :func:`hold_at_learning_floor`: while the capacity signal is learning, no scale-down below
   one replica above the last fleet a latency breach scaled up (:func:`learning_floor`;
   :func:`raise_learning_floor` sets it after a decision);
3. :func:`size_backlog`: while the capacity signal sizes the fleet (an estimate and a usable
   reading), the queue-depth signal asks for no more replicas than it and the other signals
   do: the backlog the queue sees is work to drain within a stated time, not a steady rate
   (``capacity.size_backlog``);
4. :func:`limit_step`: the per-period step limits (HPA's ``behavior`` policies,
   ``convertDesiredReplicasWithBehaviorRate``), counted from the replicas at the start of the
   period;
5. :func:`clamp`: min and max replicas;
6. :func:`hold_for_outside_writer`: re-apply over another writer of ``spec.replicas`` at most
   once per cooldown.

Each returns a :class:`~scaler.core.reasons.Phase`; :func:`scaler.core.decide.decide` runs them
in this order after :func:`scaler.core.guards.recommend`, and
:func:`scaler.core.messages.final_reason` words the outcome from them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from scaler.config.policy import ScalingRules, TargetPolicy
from scaler.core.evaluation import EPS as _EPS
from scaler.core.evaluation import SignalEvaluation, ceil_replicas
from scaler.core.reasons import Hold, Limit, Phase, PhaseName, Reason
from scaler.core.seasonal import SeasonalForecast, seasonal_replicas
from scaler.core.signals import SignalStatus
from scaler.core.state import LearningFloor, TargetState

__all__ = [
    "SeasonalAsk",
    "clamp",
    "down_window_seconds",
    "hold_at_learning_floor",
    "hold_for_outside_writer",
    "learning_floor",
    "limit_step",
    "outside_write",
    "raise_learning_floor",
    "seasonal_phase",
    "size_backlog",
    "stabilize",
]


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
    limits = (Limit.STABILIZATION,) if stabilized != recommended else ()
    return Phase(PhaseName.STABILIZE, stabilized, limits)


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


def hold_at_learning_floor(floor: int | None, stabilized: Phase, current: int) -> Phase:
    """The learning floor's phase: a scale-down that the stabilization window lets go below
    ``floor`` (this cycle's :func:`learning_floor`) stops at it, never above the current
    replicas, and its result replaces the window's (its limit is the floor's); otherwise the
    window's replicas pass unchanged, with no limit of this phase."""
    if floor is None or floor <= stabilized.replicas or current <= stabilized.replicas:
        return Phase(PhaseName.LEARNING_FLOOR, stabilized.replicas)
    return Phase(PhaseName.LEARNING_FLOOR, min(floor, current), (Limit.LEARNING_FLOOR,))


def size_backlog(
    policy: TargetPolicy,
    floored: Phase,
    current: int,
    capacity_ask: int | None,
    *,
    outgrown: bool = False,
) -> Phase:
    """No more replicas than the capacity signal asks for while it sizes the fleet.

    A burst leaves a queue; the queue-depth signal asks for the replicas that would hold it at
    its target per replica, and TTFT doubles the fleet, as if the backlog were a steady rate
    (on a ten-fold step of 10 minutes from idle both asked for 4-8 times the replicas the load
    needs). The capacity signal prices the same backlog as work to drain within
    ``capacity.backlog_drain_seconds`` on top of the arrival rate, and lets it go as the queue
    drains. So while it has an estimate and a usable reading (``capacity_ask``, None
    otherwise), the replicas the earlier phases leave are capped at its ask, never below the
    current replicas (scale-down is the window's and the step limits' to pace). Without an
    estimate the queue and TTFT signals size the fleet as before: they are the safety nets;
    and so they are when the backlog grows although every replica the capacity signal asks
    for is serving (``outgrown``: its estimate is too high, as right after the mix turned to
    long prompts). Off with ``capacity.size_backlog: false``.
    """
    if capacity_ask is None or outgrown or not policy.signals.capacity.size_backlog:
        return Phase(PhaseName.BACKLOG, floored.replicas)
    cap = max(capacity_ask, current)
    if floored.replicas <= cap:
        return Phase(PhaseName.BACKLOG, floored.replicas)
    return Phase(PhaseName.BACKLOG, cap, (Limit.BACKLOG,))


def raise_learning_floor(
    state: TargetState, driving: SignalEvaluation, current: int
) -> TargetState:
    """``state`` with the learning floor above ``current`` when a latency signal whose spec
    says so (:attr:`~scaler.config.signal_specs.SignalSpec.learning_floor`: TTFT) drives
    this scale-up and the demand forecast has a level (see :func:`learning_floor`)."""
    forecast = state.capacity.forecast
    if not driving.name.spec.learning_floor or forecast is None or forecast.level <= 0:
        return state
    old = state.learning_floor
    if old is not None and old.replicas > current:
        return state  # a higher floor from an earlier breach still stands
    return replace(state, learning_floor=LearningFloor(current + 1, forecast.level))


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
            return Phase(PhaseName.STEP_LIMIT, limit, (Limit.STEP_LIMIT,))
    elif desired < current:
        limit = min(_down_limit(policy, state, current, now, capacity_replicas), current)
        if desired < limit:
            return Phase(PhaseName.STEP_LIMIT, limit, (Limit.STEP_LIMIT,))
    return Phase(PhaseName.STEP_LIMIT, desired)


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
    return Phase(PhaseName.CLAMP, desired, limits)


def outside_write(state: TargetState, current: int) -> bool:
    """``spec.replicas`` differs from the value we last wrote (someone else changed it)."""
    return state.last_written_replicas is not None and state.last_written_replicas != current


def hold_for_outside_writer(
    policy: TargetPolicy, state: TargetState, current: int, desired: int, now: float
) -> tuple[Phase, TargetState]:
    """Re-apply over another writer of ``spec.replicas`` at most once per cooldown.

    Returns:
        The phase (the replicas to write: ``current`` with an ``outside_writer``
        :class:`~scaler.core.reasons.Hold` while holding) and the state (noting a re-apply
        now).
    """
    if not outside_write(state, current) or desired == current:
        return Phase(PhaseName.OUTSIDE_WRITER, desired), state
    cooldown = max(policy.scale_down.stabilization_window_seconds, 60.0)
    if state.last_rewrite_at is not None and now - state.last_rewrite_at < cooldown:
        hold = Hold(
            Reason.OUTSIDE_WRITER,
            f"spec.replicas was changed to {current} by another writer (we wrote "
            f"{state.last_written_replicas}); already re-applied within the "
            f"{cooldown:.0f} s cooldown, holding instead of fighting",
        )
        return Phase(PhaseName.OUTSIDE_WRITER, current, (), hold), state
    return Phase(PhaseName.OUTSIDE_WRITER, desired), replace(state, last_rewrite_at=now)


@dataclass(frozen=True, slots=True)
class SeasonalAsk:
    """The seasonal phase's outcome for one cycle (for the decision's message, metrics and
    reports).

    Attributes:
        phase: the replicas after it (:class:`~scaler.core.reasons.Phase`).
        demand: the forecast peak over the horizon, in the demand's units (None: not asked).
        replicas: what that demand needs at the capacity signal's target (None: not asked).
        horizon_seconds: the horizon read.
        raised: the forecast raised the recommendation (it is the reason for the replicas).
        forecast: the fit read (None: none), with its check and whether it is in use.
    """

    phase: Phase
    demand: float | None
    replicas: int | None
    horizon_seconds: float
    raised: bool
    forecast: SeasonalForecast | None = None

    def note(self) -> str:
        """A clause for the decision's message ("" when the forecast did not raise it)."""
        if not self.raised or self.demand is None:
            return ""
        return (
            f"seasonal forecast: demand {self.demand:.4g} within {self.horizon_seconds:.0f} s "
            f"needs {self.replicas} replicas"
        )


def seasonal_phase(
    forecast: SeasonalForecast | None,
    capacity: SignalEvaluation | None,
    horizon_seconds: float,
    recommended: int,
    *,
    blocked: bool,
    now: float,
) -> SeasonalAsk:
    """Combine the seasonal forecast with the recommendation: by max, for scale-up only.

    The forecast's peak over the horizon (one model load plus one control interval, the time a
    replica started now needs to serve) over what one replica serves at the capacity signal's
    target utilization (``capacity.target``) is the replicas the recurring load will need. The
    recommendation is raised to it, never lowered: a forecast of a fall is no reason for a
    scale-down below what the present demand needs (the short-horizon forecast and the other
    signals size for that), and the scale-down that follows a forecast rise is still paced by
    the stabilization window and the step limits. Nothing is asked while a guard blocks for
    missing or invalid signals (``blocked``: an outage is not a forecast's occasion to act),
    while the capacity signal has no estimate or no reading usable for a scale-up, or while the
    forecast is off or stale.
    """
    keep = SeasonalAsk(
        Phase(PhaseName.SEASONAL, recommended), None, None, horizon_seconds, False, forecast
    )
    if (
        blocked
        or capacity is None
        or capacity.status is SignalStatus.LEARNING
        or not capacity.status.usable_for_scale_up
    ):
        return keep
    replicas, demand = seasonal_replicas(forecast, now, horizon_seconds, capacity.target)
    if replicas is None:
        return keep
    raised = replicas > recommended
    return SeasonalAsk(
        Phase(PhaseName.SEASONAL, max(recommended, replicas)),
        demand,
        replicas,
        horizon_seconds,
        raised,
        forecast,
    )
