"""decide()'s named phases: each returns replicas and what shaped them, a guard's hold is a
:class:`~scaler.core.reasons.Hold` (its reason, its sentence and what the stabilization
history keeps), and the learning floor is a phase of its own between the window and the step
limits (scaler/core/guards.py, scaler/core/phases.py)."""

from __future__ import annotations

import dataclasses

from scaler.config.vocabulary import SignalName
from scaler.core.reasons import Hold, Limit, PhaseName, Reason
from scaler.core.signals import SignalReading, SignalStatus
from scaler.core.state import Recommendation, TargetState
from tests.core.builders import KV, TTFT, Q, bad, decide, idle_ttft, obs, ok
from tests.core.capacity_fleet import fleet_observation
from tests.core.test_capacity import capacity_policy
from tests.support.policies import case_target

ORDER = [
    PhaseName.RECOMMEND,
    PhaseName.SEASONAL,
    PhaseName.STABILIZE,
    PhaseName.LEARNING_FLOOR,
    PhaseName.BACKLOG,
    PhaseName.STEP_LIMIT,
    PhaseName.CLAMP,
    PhaseName.OUTSIDE_WRITER,
]


def _history(replicas: int, at: float) -> TargetState:
    """A state whose window holds ``replicas`` asked for at ``at`` (a long-running target)."""
    return TargetState(recommendations=(Recommendation(at, replicas),))


def test_every_decision_runs_the_phases_in_order_each_with_its_replicas_and_limits() -> None:
    """60 waiting on 2 replicas at 10 per replica asks for 6; the step limit allows 6
    (2 + max(4 pods, 100%)), or 3 at one pod a period; the clamp at max 10 does nothing."""
    policy = case_target(max_replicas=10)
    d = decide(policy, obs(2, ok(Q, 60), ok(KV, 0.6), idle_ttft()), _history(2, -600), 0.0)
    assert [p.name for p in d.phases] == ORDER
    assert [p.replicas for p in d.phases] == [6] * len(ORDER)
    policy = case_target(max_replicas=10, scale_up={"max_replicas_per_period": 1})
    d = decide(policy, obs(2, ok(Q, 60), ok(KV, 0.6), idle_ttft()), _history(2, -600), 0.0)
    by = {p.name: p for p in d.phases}
    assert by[PhaseName.STEP_LIMIT].replicas == 3
    assert by[PhaseName.STEP_LIMIT].limits == (Limit.STEP_LIMIT,)
    assert (d.desired_replicas, d.reason, d.limits) == (3, Reason.STEP_LIMITED, (Limit.STEP_LIMIT,))


def test_a_guard_holds_as_a_type_with_its_reason_message_and_history_entry() -> None:
    """An invalid signal holds a scale-down: the recommendation phase carries a Hold that
    blocks (its history entry is the current replicas); the decision says the hold's words."""
    policy = case_target()
    o = obs(4, ok(Q, 0), bad(KV, SignalStatus.EMPTY), idle_ttft())
    d = decide(policy, o, _history(4, -600), 0.0)
    hold = d.phases[0].hold
    assert isinstance(hold, Hold) and hold.blocked and hold.recorded is None
    assert hold.reason is Reason.SCALE_DOWN_BLOCKED_MISSING_SIGNAL
    assert (d.reason, d.message) == (hold.reason, hold.message)
    assert d.state.last_blocked_at == 0.0
    assert d.state.recommendations[-1] == Recommendation(0.0, 4)


def test_a_hold_that_only_waits_records_what_the_signals_ask_for() -> None:
    """A pod removed earlier still drains: the scale-down waits (current replicas), but the
    stabilization history keeps the signals' ask, 1, not the 4 held."""
    policy = case_target()
    o = dataclasses.replace(
        obs(4, ok(Q, 0), ok(KV, 0.1), idle_ttft()),
        replicas=dataclasses.replace(obs(4).replicas, terminating=1),
    )
    d = decide(policy, o, _history(4, -600), 0.0)
    hold = d.phases[0].hold
    assert hold is not None and not hold.blocked
    assert (hold.reason, hold.recorded) == (Reason.WAITING_FOR_DRAIN, 1)
    assert (d.desired_replicas, d.reason) == (4, Reason.WAITING_FOR_DRAIN)
    assert d.state.recommendations[-1] == Recommendation(0.0, 1)


def test_the_outside_writer_rule_is_the_last_phase_and_holds_with_its_own_reason() -> None:
    """Someone set 6 over our 4, and we re-applied within the cooldown: the last phase holds
    6 with an ``outside_writer`` Hold, whatever the earlier phases asked for."""
    policy = case_target()
    state = dataclasses.replace(_history(4, -600), last_written_replicas=4, last_rewrite_at=-30.0)
    d = decide(policy, obs(6, ok(Q, 0), ok(KV, 0.1), idle_ttft()), state, 0.0)
    last = d.phases[-1]
    assert last.name is PhaseName.OUTSIDE_WRITER and last.replicas == 6
    assert last.hold is not None and last.hold.reason is Reason.OUTSIDE_WRITER
    assert (d.desired_replicas, d.reason) == (6, Reason.OUTSIDE_WRITER)


def test_the_learning_floor_is_a_phase_whose_result_replaces_the_windows() -> None:
    """While the capacity signal learns, a TTFT breach on 4 calm replicas raises the floor to
    5; half an hour later the signals ask for 1 and the window lets them, the floor phase
    holds 5."""
    policy = capacity_policy()
    breach = dataclasses.replace(
        fleet_observation(4, 8_000.0),
        signals={TTFT: SignalReading(TTFT, SignalStatus.OK, 5.3)},
    )
    d = decide(policy, breach, None, 0.0)
    assert d.desired_replicas == 5 and d.state.learning_floor is not None
    state, replicas = d.state, 5
    for i in range(1, 121):
        d = decide(policy, fleet_observation(replicas, 8_000.0), state, 15.0 * i)
        state, replicas = d.state, d.desired_replicas
    by = {p.name: p for p in d.phases}
    assert by[PhaseName.STABILIZE].replicas == 1  # the window has nothing higher left
    assert by[PhaseName.LEARNING_FLOOR].replicas == 5
    assert by[PhaseName.LEARNING_FLOOR].limits == (Limit.LEARNING_FLOOR,)
    assert d.limits == (Limit.LEARNING_FLOOR,)  # the floor's result replaces the window's
    assert (d.desired_replicas, d.reason) == (5, Reason.STABILIZED)
    quiet = decide(case_target(), obs(3, ok(Q, 30), ok(KV, 0.3), idle_ttft()), None, 0.0)
    floor = next(p for p in quiet.phases if p.name is PhaseName.LEARNING_FLOOR)
    assert floor.limits == () and floor.replicas == quiet.phases[2].replicas


def test_no_usable_signal_is_a_blocking_hold_of_the_first_phase() -> None:
    policy = case_target()
    o = obs(3, *(bad(n, SignalStatus.TRANSPORT) for n in (Q, KV, SignalName.TTFT_P95)))
    d = decide(policy, o, _history(3, -600), 0.0)
    hold = d.phases[0].hold
    assert hold is not None and hold.blocked and hold.reason is Reason.NO_VALID_SIGNALS
    assert all(p.replicas == 3 for p in d.phases)
