"""The decision's reason and message, worded from its numbers (pure).

:func:`scaler.core.decide.decide` computes the replicas; this module says why in one human
sentence with the numbers (``scale up 2 -> 5 (capacity: demand 41k tok/s, ...)``), and the
notes a hold adds (the signals it left out, a shortened scale-down window, a bounded TTFT
ask). The reason is one :class:`~scaler.core.reasons.Reason`; the wording is free to change,
the reasons are not.
"""

from __future__ import annotations

from scaler.config.policy import TargetPolicy
from scaler.config.signal_specs import Sizing
from scaler.config.wording import counted
from scaler.core.evaluation import EPS as _EPS
from scaler.core.evaluation import LATENCY_MAX_RATIO, TTFT_NOT_LOAD_STEP, SignalEvaluation
from scaler.core.observation import ReplicaCounts
from scaler.core.reasons import Because, Hold, Limit, Reason
from scaler.core.signals import SignalStatus
from scaler.core.sizing import human
from scaler.core.state import LearningFloor, TargetState

__all__ = [
    "describe_invalid",
    "final_reason",
    "floor_note",
    "left_out",
    "not_load_note",
    "shortened",
]


def final_reason(
    policy: TargetPolicy,
    counts: ReplicaCounts,
    recommended: int,
    desired: int,
    limits: tuple[Limit, ...],
    driving: SignalEvaluation | None,
    held: Hold | None,
) -> Because:
    """The decision's reason and message: a hold's own when nothing changes (a guard's or
    the outside writer's :class:`~scaler.core.reasons.Hold`, else the phase that held: the
    clamp at a bound, the learning floor, the stabilization window, the step limit, or the
    signals' own band), else the phase that shaped the change (the clamp, the step limit,
    the learning floor, the window) or none."""
    current = counts.current
    sig = ""
    if driving is not None and driving.name.spec.sizing is Sizing.DERIVED and driving.valid:
        sig = f" ({driving.name}: {driving.detail})"
    elif driving is not None and driving.value is not None and driving.ratio is not None:
        # a saturated reading is a lower bound: say so
        at_least = ">= " if driving.status is SignalStatus.SATURATED else ""
        sig = (
            f" ({driving.name} {at_least}{driving.value:.3g} vs target {driving.target:.3g}, "
            f"ratio {at_least}{driving.ratio:.2f})"
        )
    if desired == current:
        if held is not None:
            return held
        if recommended > current and current >= policy.max_replicas:
            return Because(
                Reason.AT_MAX, f"signals ask for {recommended}, already at max {current}{sig}"
            )
        if recommended < current and current <= policy.min_replicas:
            return Because(
                Reason.AT_MIN, f"signals ask for {recommended}, already at min {current}{sig}"
            )
        if Limit.LEARNING_FLOOR in limits:
            return Because(
                Reason.STABILIZED,
                f"signals ask for {recommended}; the learning floor holds {current}{sig}",
            )
        if Limit.STABILIZATION in limits:
            return Because(
                Reason.STABILIZED,
                f"signals ask for {recommended}; the stabilization window holds {current}{sig}",
            )
        if Limit.BACKLOG in limits:
            return Because(
                Reason.STABILIZED,
                f"signals ask for {recommended}; the capacity signal sizes the backlog as work "
                f"to drain: holding {current}{sig}",
            )
        if Limit.STEP_LIMIT in limits:
            return Because(
                Reason.STEP_LIMITED,
                f"signals ask for {recommended}; the per-period step is used up{sig}",
            )
        return _hold_reason(policy, counts, driving)
    verb = "up" if desired > current else "down"
    if Limit.MAX_REPLICAS in limits and desired == policy.max_replicas:
        return Because(
            Reason.AT_MAX,
            f"scale {verb} {current} -> {desired}: signals ask for {recommended}, clamped to "
            f"max_replicas {policy.max_replicas}{sig}",
        )
    if Limit.MIN_REPLICAS in limits and desired == policy.min_replicas:
        return Because(
            Reason.AT_MIN,
            f"scale {verb} {current} -> {desired}: signals ask for {recommended}, clamped to "
            f"min_replicas {policy.min_replicas}{sig}",
        )
    if Limit.STEP_LIMIT in limits:
        return Because(
            Reason.STEP_LIMITED,
            f"scale {verb} {current} -> {desired}: signals ask for {recommended}, "
            f"limited by the per-period step{sig}",
        )
    if Limit.LEARNING_FLOOR in limits:
        return Because(
            Reason.STABILIZED,
            f"scale {verb} {current} -> {desired}: signals ask for {recommended}, "
            f"the learning floor allows {desired}{sig}",
        )
    if Limit.BACKLOG in limits:
        return Because(
            Reason.STABILIZED,
            f"scale {verb} {current} -> {desired}: signals ask for {recommended}; the capacity "
            f"signal sizes the backlog as work to drain, {desired}{sig}",
        )
    if Limit.STABILIZATION in limits:
        return Because(
            Reason.STABILIZED,
            f"scale {verb} {current} -> {desired}: signals ask for {recommended}, "
            f"the stabilization window allows {desired}{sig}",
        )
    if desired > current:
        return Because(Reason.SCALE_UP, f"scale up {current} -> {desired}{sig}")
    return Because(Reason.SCALE_DOWN, f"scale down {current} -> {desired}{sig}")


def _hold_reason(
    policy: TargetPolicy, counts: ReplicaCounts, driving: SignalEvaluation | None
) -> Because:
    """Why the signals ask for exactly the current replicas: the deciding signal is inside
    its tolerance band, or outside it while its proportional rule gives the current count."""
    current = counts.current
    e = driving
    if e is None or e.value is None or e.ratio is None:
        return Because(Reason.WITHIN_TOLERANCE, f"no signal asks for a change: holding {current}")
    tol = policy.tolerance
    band = f"{1 - tol.scale_down:.2f}-{1 + tol.scale_up:.2f}"
    # a saturated reading is a lower bound (only one above its band asks for replicas)
    at_least = ">= " if e.status is SignalStatus.SATURATED else ""
    if _in_band(policy, e):
        return Because(
            Reason.WITHIN_TOLERANCE,
            f"{e.name} {e.value:.3g} vs target {e.target:.3g} (ratio {e.ratio:.2f}) is within "
            f"its tolerance band {band}: holding {current}",
        )
    side = "below" if e.ratio < 1 else "above"
    demand = e.demand_replicas if e.demand_replicas is not None else current
    unit = e.name.spec.symbol
    if e.name.spec.sizing is Sizing.DERIVED:  # the capacity signal: in the policy's unit
        unit = f" {policy.signals.capacity.unit_text}"
    if not e.name.latency:
        # per replica: the per-pod sums, and the capacity signal's forecast (tokens/s)
        total = e.value * max(current, 1)
        return Because(
            Reason.DEMAND_COVERED,
            f"{e.name} {e.value:.3g}{unit} per replica vs target {e.target:.3g}{unit} (ratio "
            f"{e.ratio:.2f}) is {side} its tolerance band {band}, but {total:.3g}{unit} in all "
            f"need ceil({total:.3g} / {e.target:.3g}) = {counted(demand, 'replica')}: "
            f"holding {current}",
        )
    covered = f", no more than the {current} asked for" if demand < current else ""
    if demand < current and counts.stuck:
        covered += f" ({counts.stuck} of them stuck)"
    if demand < current and counts.unschedulable:
        covered += f" ({counts.unschedulable} of them waiting for a node)"
    if counts.sleeping:
        covered += f" ({counts.sleeping} ready replica(s) asleep in vLLM's sleep mode, not serving)"
    return Because(
        Reason.DEMAND_COVERED,
        f"{e.name} {at_least}{e.value:.3g}{unit} vs target {e.target:.3g}{unit} (ratio "
        f"{at_least}{e.ratio:.2f}) is {side} "
        f"its tolerance band {band}, but asks for ceil({min(e.ratio, LATENCY_MAX_RATIO):.2f} "
        f"x {counts.serving} ready) = {demand} replicas{covered}: holding {current}",
    )


def _in_band(policy: TargetPolicy, e: SignalEvaluation) -> bool:
    """The evaluation's ratio lies in the target's tolerance band (bounds included)."""
    tol = policy.tolerance
    return e.ratio is not None and (1 - tol.scale_down - _EPS <= e.ratio <= 1 + tol.scale_up + _EPS)


def left_out(evaluations: tuple[SignalEvaluation, ...]) -> str:
    """``; left out: queue_depth nan (...)`` for the signals a hold could not use (unusable,
    or a saturated lower bound at or below its band, which asks for nothing), or ''. A
    capacity signal still ``learning`` is no fault and holds nothing back: not named."""
    unusable = [
        e
        for e in evaluations
        if e.desired_replicas is None and e.status is not SignalStatus.LEARNING
    ]
    if not unusable:
        return ""
    return "; left out: " + ", ".join(
        f"{e.name} {e.status}" + (f" ({e.detail})" if e.detail else "") for e in unusable
    )


def describe_invalid(evaluations: list[SignalEvaluation] | tuple[SignalEvaluation, ...]) -> str:
    parts = [
        f"{e.name} {e.status}" + (f" ({e.detail})" if e.detail else "")
        for e in evaluations
        if e.status.blocks_scale_down  # a capacity signal still learning is no fault
    ]
    return ", ".join(parts) if parts else "none"


def not_load_note(driving: SignalEvaluation | None, counts: ReplicaCounts, not_load: str) -> str:
    """``; ttft_p95 asks for ceil(2.00 x 4 ready) = 8, 1 replica more at most: ...`` when
    TTFT drives and its ask was bounded because its breach is not the load, else ''."""
    e = driving
    if (
        e is None
        or not e.name.spec.not_load
        or e.demand_replicas is None
        or e.desired_replicas is None
        or not counts.current < e.desired_replicas < e.demand_replicas
    ):
        return ""
    step = LATENCY_MAX_RATIO if e.status is SignalStatus.SATURATED else (e.ratio or 0.0)
    return (
        f"; {e.name} asks for ceil({min(step, LATENCY_MAX_RATIO):.2f} x {counts.serving} ready) "
        f"= {e.demand_replicas}, {counted(TTFT_NOT_LOAD_STEP, 'replica')} more at most: the "
        f"fleet is not loaded ({not_load})"
    )


def floor_note(floor: LearningFloor, replicas: int) -> str:
    """``; learning floor 5: TTFT broke on 4 replicas at a demand of 14.4k tok/s, ...``: the
    note of a scale-down the learning floor (:func:`scaler.core.phases.learning_floor`)
    held back, ``replicas`` its value this cycle."""
    return (
        f"; learning floor {replicas}: TTFT broke on {counted(floor.replicas - 1, 'replica')} "
        f"at a demand of {human(floor.level)} tok/s and the capacity signal has no estimate yet"
    )


def shortened(policy: TargetPolicy, state: TargetState, down_window: float) -> str:
    """``; scale-down window 95 s of 300 s: ...`` when a steady fall shortened it, else ''."""
    window = policy.scale_down.stabilization_window_seconds
    forecast = state.capacity.forecast
    if down_window >= window - _EPS or forecast is None:
        return ""
    return (
        f"; scale-down window {down_window:.0f} s of {window:.0f} s: demand falling "
        f"{-forecast.trend * 60:.3g} tok/s a minute, burstiness {forecast.burst_std:.3g} tok/s"
    )
