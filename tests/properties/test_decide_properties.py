"""Property-based tests of the decision core: bounds, direction, convergence."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from scaler.config.policy import TargetPolicy
from scaler.core.decide import Decision, Direction
from scaler.core.observation import Observation, ReplicaCounts
from scaler.core.reasons import Reason
from scaler.core.signals import SignalName, SignalReading, SignalStatus
from scaler.core.state import TargetState, record_write
from tests.core.builders import decide
from tests.support.policies import case_target

values = st.one_of(
    st.floats(min_value=0, max_value=1e6),
    st.sampled_from([0.0, float("nan"), float("inf"), -1.0, 1e308]),
)
readings = st.builds(
    SignalReading,
    name=st.just(SignalName.QUEUE_DEPTH),
    status=st.sampled_from(list(SignalStatus)),
    value=st.one_of(st.none(), values),
)


@st.composite
def policies(draw: st.DrawFn) -> TargetPolicy:
    lo = draw(st.integers(1, 5))
    hi = draw(st.integers(lo, 30))
    return case_target(
        min_replicas=lo,
        max_replicas=hi,
        tolerance={
            "scale_up": draw(st.sampled_from([0, 0.1, 0.3])),
            "scale_down": draw(st.sampled_from([0, 0.1, 0.3])),
        },
        scale_up={
            "stabilization_window_seconds": draw(st.sampled_from([0, 30, 120])),
            "max_replicas_per_period": draw(st.integers(1, 8)),
            "max_percent_per_period": draw(st.sampled_from([0, 100, 900])),
            "period_seconds": 60,
        },
        scale_down={
            "stabilization_window_seconds": draw(st.sampled_from([0, 60, 300])),
            "max_replicas_per_period": draw(st.integers(1, 4)),
            "max_percent_per_period": draw(st.sampled_from([0, 50, 100])),
            "period_seconds": draw(st.sampled_from([15, 60])),
        },
    )


@st.composite
def observations(draw: st.DrawFn) -> Observation:
    current = draw(st.integers(0, 40))
    ready = draw(st.integers(0, current + 3))
    counts = ReplicaCounts(
        current=current,
        status=ready,
        ready=ready,
        starting=draw(st.integers(0, 3)),
        stuck=draw(st.integers(0, 2)),
        terminating=draw(st.integers(0, 3)),
    )
    signals: dict[SignalName, SignalReading] = {}
    for name in SignalName:
        if draw(st.booleans()) or name is SignalName.QUEUE_DEPTH:
            r = draw(readings)
            signals[name] = SignalReading(name, r.status, r.value, detail="drawn")
    return Observation(counts, signals)


def _asked(d: Decision) -> set[Direction]:
    """The directions the usable signals ask for, relative to the current replicas."""
    out: set[Direction] = set()
    for e in d.signals:
        if e.desired_replicas is None:
            continue
        if e.desired_replicas > d.current_replicas:
            out.add(Direction.UP)
        elif e.desired_replicas < d.current_replicas:
            out.add(Direction.DOWN)
    return out


@settings(max_examples=300, deadline=None)
@given(
    policy=policies(),
    steps=st.lists(st.tuples(observations(), st.floats(0, 120)), min_size=1, max_size=25),
)
def test_within_bounds_and_never_against_the_signals(
    policy: TargetPolicy, steps: list[tuple[Observation, float]]
) -> None:
    state: TargetState | None = None
    now = 1_000.0
    for observation, dt in steps:
        now += dt
        d = decide(policy, observation, state, now)
        current = d.current_replicas
        if d.reason is Reason.OUTSIDE_WRITER:
            assert d.desired_replicas == current  # holds someone else's value
        else:
            assert policy.min_replicas <= d.desired_replicas <= policy.max_replicas
        asked = _asked(d)
        if d.direction is Direction.UP:
            assert Direction.UP in asked or current < policy.min_replicas, d.message
        if d.direction is Direction.DOWN:
            assert asked == {Direction.DOWN} or current > policy.max_replicas, d.message
            # a scale-down (other than to max) needs every enabled signal valid
            if current <= policy.max_replicas:
                assert all(e.status.usable_for_scale_down for e in d.signals)
                assert d.replicas.starting == 0
        state = d.state
        if d.direction is not Direction.NONE:
            state = record_write(
                state, from_replicas=current, to_replicas=d.desired_replicas, now=now
            )


def _constant(
    policy: TargetPolicy, replicas: int, total_queue: float, kv_sum: float, ttft: float
) -> Observation:
    counts = ReplicaCounts(current=replicas, status=replicas, ready=replicas)
    signals: dict[SignalName, SignalReading] = {
        SignalName.QUEUE_DEPTH: SignalReading(SignalName.QUEUE_DEPTH, SignalStatus.OK, total_queue),
        SignalName.KV_CACHE_USAGE: SignalReading(
            SignalName.KV_CACHE_USAGE, SignalStatus.OK, kv_sum
        ),
        SignalName.TTFT_P95: SignalReading(SignalName.TTFT_P95, SignalStatus.OK, ttft),
    }
    return Observation(counts, signals)


@settings(max_examples=200, deadline=None)
@given(
    policy=policies(),
    start=st.integers(1, 30),
    total_queue=st.floats(0, 400),
    kv_sum=st.floats(0, 20),
    ttft=st.floats(0, 10),
)
def test_constant_signals_converge_without_oscillating(
    policy: TargetPolicy, start: int, total_queue: float, kv_sum: float, ttft: float
) -> None:
    """The fleet follows each decision at once (replicas ready, same total load)."""
    replicas, now, state = start, 0.0, None
    history = [replicas]
    for _ in range(300):  # 75 minutes of 15 s cycles
        d: Decision = decide(
            policy, _constant(policy, replicas, total_queue, kv_sum, ttft), state, now
        )
        state = d.state
        if d.desired_replicas != replicas:
            state = record_write(
                state, from_replicas=replicas, to_replicas=d.desired_replicas, now=now
            )
            replicas = d.desired_replicas
        history.append(replicas)
        now += 15.0
    moves = [b - a for a, b in itertools.pairwise(history) if b != a]
    assert all(m > 0 for m in moves) or all(m < 0 for m in moves), history  # monotone
    assert history[-40:] == [history[-1]] * 40, history  # settled: ten minutes unchanged
