"""The learning floor: while the capacity signal has no estimate, a fleet TTFT showed to be
too small is not scaled back down to that size at the same demand (see
:func:`scaler.core.decide.learning_floor`)."""

from __future__ import annotations

import dataclasses

from scaler.config.vocabulary import SignalName
from scaler.core.decide import Decision, learning_floor
from scaler.core.reasons import Limit, Reason
from scaler.core.signals import SignalReading, SignalStatus
from scaler.core.state import LearningFloor, TargetState, decode_state, encode_state
from tests.core.builders import decide
from tests.core.capacity_fleet import fleet_observation
from tests.core.test_capacity import capacity_policy

#: The fleet's demand, weighted tokens/s: 2k per replica on 4, far from busy (no sample). The
#: policy: TTFT and the capacity signal, without a seed (learning), queue and KV cache off.
DEMAND = 8_000.0
INTERVAL = 15.0


def _cycle(
    replicas: int, demand: float, state: TargetState | None, now: float, *, ttft: float | None
) -> Decision:
    """One cycle on ``replicas`` calm pods sharing ``demand``; ``ttft`` overrides TTFT p95."""
    obs = fleet_observation(replicas, demand)
    if ttft is not None:
        reading = SignalReading(SignalName.TTFT_P95, SignalStatus.OK, ttft)
        obs = dataclasses.replace(obs, signals={SignalName.TTFT_P95: reading})
    return decide(capacity_policy(), obs, state, now)


def _run(
    replicas: int, demand: float, state: TargetState, start: float, seconds: float
) -> tuple[int, TargetState, list[Decision]]:
    """Cycles every 15 s for ``seconds`` on a calm fleet, each decision applied at once."""
    decisions = []
    now = start
    while now < start + seconds:
        d = _cycle(replicas, demand, state, now, ttft=None)
        decisions.append(d)
        replicas, state = d.desired_replicas, d.state
        now += INTERVAL
    return replicas, state, decisions


def _breach() -> Decision:
    """4 calm replicas, nothing waiting, TTFT p95 5.3 s, the capacity signal learning."""
    return _cycle(4, DEMAND, None, 0.0, ttft=5.3)


def test_a_breach_while_learning_adds_one_replica_and_sets_the_floor_above_it() -> None:
    """No pod is busy: TTFT's proportional ask (ceil(2 x 4) = 8) is bounded to one replica,
    as once the capacity signal has an estimate, and 4 replicas are marked too few."""
    d = _breach()
    capacity = next(e for e in d.signals if e.name is SignalName.CAPACITY)
    assert capacity.status is SignalStatus.LEARNING
    assert (d.desired_replicas, d.driving_signal, d.reason) == (
        5,
        SignalName.TTFT_P95,
        Reason.SCALE_UP,
    )
    assert d.message.endswith(
        "1 replica more at most: the fleet is not loaded "
        "(the capacity signal is learning, 0 of 4 ready pods busy)"
    )
    assert d.state.learning_floor == LearningFloor(5, DEMAND)


def test_a_calm_fleet_at_the_same_demand_is_not_scaled_back_to_the_size_that_broke() -> None:
    """Half an hour later at the same demand the signals still ask for 1 (TTFT p95 0.3 s,
    nothing waiting); without the floor the fleet would be back at the 4 replicas that broke
    (and below) after one scale-down window."""
    d = _breach()
    replicas, _, decisions = _run(5, DEMAND, d.state, INTERVAL, 1800.0)
    assert replicas == 5
    assert {x.recommended_replicas for x in decisions[-10:]} == {1}
    last = decisions[-1]
    assert Limit.LEARNING_FLOOR in last.limits
    assert last.reason is Reason.STABILIZED
    assert last.message.startswith("signals ask for 1; the learning floor holds 5")
    assert last.message.endswith(
        "; learning floor 5: TTFT broke on 4 replicas at a demand of 8k tok/s and the "
        "capacity signal has no estimate yet"
    )


def test_the_floor_follows_the_demand_down() -> None:
    """Once the demand has halved, the floor is ceil(5 x 1/2) = 3: the fleet goes below 5."""
    d = _breach()
    replicas, state, _ = _run(5, DEMAND, d.state, INTERVAL, 600.0)
    assert replicas == 5
    replicas, state, _ = _run(5, DEMAND / 2, state, 615.0, 3600.0)
    assert learning_floor(state) == 3
    assert replicas == 3


def test_the_first_estimate_ends_the_floor() -> None:
    """A busy window within the SLO (TTFT at least half its target) gives the capacity signal
    its estimate: from then on it sizes the fleet, and the floor is gone."""
    d = _breach()
    _, state, _ = _run(5, DEMAND, d.state, INTERVAL, 300.0)
    assert state.learning_floor is not None
    busy = _cycle(5, 9_000.0 * 5, state, 315.0, ttft=None)
    assert state.capacity.estimate is None and busy.state.capacity.estimate is not None
    assert busy.state.learning_floor is None


def test_the_floor_is_kept_on_the_lease_and_older_states_load_without_it() -> None:
    state = _breach().state
    data = encode_state(state)
    assert data["lf"] == [5, DEMAND]
    assert decode_state(data).learning_floor == LearningFloor(5, DEMAND)
    del data["lf"]
    assert decode_state(data).learning_floor is None
