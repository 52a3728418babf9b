"""Clock jumps (NTP steps, VM restores): the core never crashes, and never scales down
because the clock went backwards; a backward jump does not freeze scale-up either."""

from __future__ import annotations

import random

import pytest

from scaler.core.decide import Decision, Direction
from scaler.core.reasons import Reason
from scaler.core.state import TargetState, record_write
from tests.core.builders import KV, TTFT, Q, decide, obs, ok
from tests.faults.helpers import names, quiet
from tests.support.controller_harness import HarnessFactory
from tests.support.policies import case_target

POLICY = case_target()


def step(state: TargetState | None, current: int, queue: float, now: float) -> Decision:
    return decide(POLICY, obs(current, ok(Q, queue), ok(KV, 0.1), ok(TTFT, 0.5)), state, now)


def run_low(state: TargetState | None, current: int, start: float, cycles: int) -> Decision:
    d = step(state, current, 0.0, start)
    for i in range(1, cycles):
        d = step(d.state, current, 0.0, start + 15 * i)
    return d


def test_backward_jump_does_not_block_scale_up() -> None:
    d = run_low(None, 4, 10_000.0, 40)  # ten quiet minutes: recommendations of 1
    d = step(d.state, 4, 80.0, 10_600.0 - 3600)  # clock one hour back; a burst
    assert (d.direction, d.desired_replicas) == (Direction.UP, 8)
    assert "stabilization" not in d.limits


@pytest.mark.parametrize(
    "jump",
    [
        pytest.param(1.0, id="1 s"),
        pytest.param(60.0, id="1 min"),
        pytest.param(3600.0, id="1 h"),
        pytest.param(86_400.0 * 365, id="1 year"),
    ],
)
def test_backward_jump_never_scales_down(jump: float) -> None:
    # busy for five minutes at 8 replicas, then the load drops and the clock jumps back
    now = 50_000.0
    d = step(None, 8, 80.0, now)
    for i in range(1, 20):
        d = step(d.state, 8, 80.0, now + 15 * i)
    now = now + 15 * 20 - jump
    for i in range(20):  # five minutes after the jump: still inside the held window
        d = step(d.state, 8, 0.0, now + 15 * i)
        assert d.direction is not Direction.DOWN, (i, d.reason, d.message)
        assert d.reason is Reason.STABILIZED
    # the recommendations moved to the jump time hold a whole window, then it resumes
    d = step(d.state, 8, 0.0, now + 301)
    assert d.direction is Direction.DOWN and d.desired_replicas == 7


def test_backward_jump_keeps_the_step_limit_for_at_most_a_period() -> None:
    d = step(None, 2, 60.0, 1_000.0)
    assert d.desired_replicas == 6
    state = record_write(d.state, from_replicas=2, to_replicas=6, now=1_000.0)
    d = step(state, 6, 200.0, 1_000.0 - 3600)  # back an hour: the +4 counts for one period
    assert d.desired_replicas == 6 and "step_limit" in d.limits  # the +4 used the period up
    d = step(d.state, 6, 200.0, 1_000.0 - 3600 + 61)
    assert d.desired_replicas == 10  # a period after the jump: no longer counted


def test_forward_jump_lets_windows_expire_and_steps_stay_limited() -> None:
    d = step(None, 8, 80.0, 1_000.0)
    d = step(d.state, 8, 0.0, 1_000.0 + 86_400)  # a day forward, quiet
    # the windows are over, but the step limit still allows one replica per period
    assert (d.direction, d.desired_replicas, d.reason) == (Direction.DOWN, 7, Reason.STEP_LIMITED)


@pytest.mark.parametrize(
    "forward",
    [pytest.param(True, id="both ways"), pytest.param(False, id="backward only")],
)
def test_random_jumps_never_crash_and_state_stays_bounded(forward: bool) -> None:
    rnd = random.Random(7)
    state: TargetState | None = None
    current, now = 4, 1_000_000.0
    for _ in range(5_000):
        jumps = [-rnd.uniform(0, 600), rnd.uniform(0, 7200) if forward else 15.0]
        now += rnd.choice([15.0, 15.0, 15.0, 15.0, *jumps])
        d = step(state, current, rnd.choice([0.0, 5.0, 40.0, 200.0]), now)
        assert POLICY.min_replicas <= d.desired_replicas <= POLICY.max_replicas
        state = d.state
        if d.desired_replicas != current:
            state = record_write(
                state, from_replicas=current, to_replicas=d.desired_replicas, now=now
            )
            current = d.desired_replicas
        assert all(r.at <= now for r in state.recommendations)
        # one entry per cycle within the longest window (300 s / 15 s), plus after a jump
        # one per replica count; one write per cycle within the period, plus two
        assert len(state.recommendations) <= 300 / 15 + 1 + POLICY.max_replicas + 1
        assert len(state.scale_events) <= 60 / 15 + 1 + 2


async def test_controller_survives_a_backward_clock_jump(make_harness: HarnessFactory) -> None:
    pods = names(4)
    h = await make_harness(replicas=4, ready=pods, answers=quiet(pods))
    for _ in range(5):
        r = await h.next_cycle()
        assert r.decision is not None and r.decision.reason is Reason.STABILIZED
    h.clock.advance(-7200)  # two hours back
    for _ in range(9):  # four and a half minutes: no scale-down
        r = await h.next_cycle()
        assert r.decision is not None and r.decision.direction is not Direction.DOWN
    assert h.replicas() == 4 and h.patches() == []
    for _ in range(3):
        r = await h.next_cycle()
    assert h.replicas() == 3  # a whole window after the jump, it resumes


def test_step_limit_never_reverses_a_scale_up_after_an_outside_write() -> None:
    """Found by tests/properties: we scaled 1 -> 4, someone set 2, the signals ask for 3.
    The up limit (start of period = 2 - 3 moved, floored at 0, plus 1) was 1: a scale-down."""
    policy = case_target(
        max_replicas=3,
        tolerance={"scale_up": 0, "scale_down": 0},
        scale_up={
            "stabilization_window_seconds": 0,
            "max_replicas_per_period": 1,
            "max_percent_per_period": 0,
            "period_seconds": 60,
        },
    )
    d = decide(policy, obs(1, ok(Q, 40), ok(KV, 0.1), ok(TTFT, 0.5)), None, 0.0)
    state = record_write(d.state, from_replicas=1, to_replicas=4, now=0.0)
    d = decide(policy, obs(2, ok(Q, 25), ok(KV, 0.1), ok(TTFT, 0.5)), state, 15.0)
    assert d.recommended_replicas == 3
    assert d.direction is not Direction.DOWN
    assert d.desired_replicas == 2 and d.reason is Reason.STEP_LIMITED
