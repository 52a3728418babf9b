"""The capacity signal in its default unit, seconds of replica work per second: the backlog
sized as work to drain, the phase that caps the other signals at its ask, standing headroom,
and the unit kept with the persisted state. The real path (Prometheus, the simulator's
exposition) is in ``tests/sources/test_work_demand_real.py``."""

from __future__ import annotations

import dataclasses

import pytest

from scaler.config.policy import TargetPolicy
from scaler.core.capacity import CapacityEstimate, CapacityMemory, learn_from_window
from scaler.core.phases import size_backlog
from scaler.core.reasons import Limit, Phase, PhaseName
from scaler.core.signals import SignalStatus
from scaler.core.sizing import arrival_rate, evaluate_capacity
from scaler.core.state import TargetState, decode_state, encode_state
from tests.core.capacity_fleet import fleet_observation
from tests.support.policies import case_target

WINDOW = 60.0


def _policy(**capacity: object) -> TargetPolicy:
    return case_target(
        max_replicas=50,
        signals={
            "queue_depth": {"enabled": False},
            "kv_cache_usage": {"enabled": False},
            "ttft_p95": {"target_seconds": 2.0},
            "capacity": {"enabled": True, **capacity},
        },
    )


def test_a_draining_backlog_is_not_read_as_arriving_load() -> None:
    """Served 10 s of work per second while the backlog fell from 300 to 0 s of work over a
    minute: 5 arrive; while it grew by as much, 15 arrive; one reading alone: the rate served."""
    assert arrival_rate(10.0, ((0.0, 300.0), (30.0, 150.0), (60.0, 0.0))) == pytest.approx(5.0)
    assert arrival_rate(10.0, ((0.0, 0.0), (60.0, 300.0))) == pytest.approx(15.0)
    assert arrival_rate(10.0, ((60.0, 300.0),)) == 10.0
    assert arrival_rate(1.0, ((0.0, 600.0), (60.0, 0.0))) == 0.0  # never below 0


@pytest.mark.parametrize(
    ("floored", "ask", "current", "expected", "limited"),
    [
        pytest.param(40, 9, 3, 9, True, id="queue-asks-40-capacity-9: capped"),
        pytest.param(40, 2, 6, 6, True, id="never-below-the-current-replicas"),
        pytest.param(7, 9, 3, 7, False, id="under-the-ask: unchanged"),
        pytest.param(40, None, 3, 40, False, id="no-estimate: the safety nets size it"),
    ],
)
def test_the_backlog_phase_caps_the_other_signals_at_the_capacity_ask(
    floored: int, ask: int | None, current: int, expected: int, limited: bool
) -> None:
    phase = size_backlog(_policy(), Phase(PhaseName.LEARNING_FLOOR, floored), current, ask)
    assert phase.name is PhaseName.BACKLOG
    assert phase.replicas == expected
    assert (Limit.BACKLOG in phase.limits) is limited


def test_the_backlog_phase_is_off_when_the_policy_says_so() -> None:
    phase = size_backlog(_policy(size_backlog=False), Phase(PhaseName.LEARNING_FLOOR, 40), 3, 9)
    assert phase.replicas == 40 and phase.limits == ()


def _ask(policy: TargetPolicy) -> int:
    memory = CapacityMemory(estimate=CapacityEstimate(1.0, 40, 0.0), unit="work")
    obs = fleet_observation(4, 40_000.0)
    evaluation, _, _ = evaluate_capacity(policy, obs, memory, None, 100.0, window_seconds=WINDOW)
    assert evaluation.desired_replicas is not None
    return evaluation.desired_replicas


def test_standing_headroom_holds_its_fraction_of_capacity_above_the_forecast() -> None:
    """With 50% standing headroom the signal asks for 1.5 times the replicas (rounded up)."""
    base = _ask(_policy())
    more = _ask(_policy(standing_headroom=0.5))
    assert base >= 1
    assert more == pytest.approx(1.5 * base, abs=1)
    assert more > base


def test_the_unit_travels_with_the_state_and_an_older_one_is_dropped_not_misread() -> None:
    """A work-unit estimate round-trips with its unit; an estimate saved before the unit
    existed (weighted tokens, 10k per replica) is dropped at the next cycle, not read as
    10,000 seconds of work per second."""
    memory = CapacityMemory(estimate=CapacityEstimate(0.9, 12, 50.0), unit="work")
    state = TargetState(capacity=memory)
    back = decode_state(encode_state(state))
    assert back.capacity.unit == "work"
    assert back.capacity.estimate == CapacityEstimate(0.9, 12, 50.0)
    old = decode_state(encode_state(TargetState(capacity=CapacityMemory(CapacityEstimate(1e4, 9)))))
    assert old.capacity.unit == "weighted_tokens"
    _, view, after = evaluate_capacity(
        _policy(), fleet_observation(4, 40_000.0), old.capacity, None, 100.0, window_seconds=WINDOW
    )
    assert after.unit == "work"
    assert after.estimate is None or after.estimate.tokens_per_second < 100
    assert view.capacity_tokens_per_second is None or view.capacity_tokens_per_second < 100


def test_a_backlog_that_grows_on_the_fleet_the_capacity_asked_for_is_the_safety_nets() -> None:
    """Once every replica the capacity signal asks for serves and the backlog still grows,
    its estimate is too high (the mix turned to long prompts): the cap lifts."""
    phase = size_backlog(_policy(), Phase(PhaseName.LEARNING_FLOOR, 40), 9, 9, outgrown=True)
    assert phase.replicas == 40 and phase.limits == ()


def test_when_the_fit_moves_the_prices_the_estimate_is_reexpressed_in_the_new_ones() -> None:
    """The estimate is seconds of work per second at the prices it was learned in; when the
    fit raises the prefill price by half, the same replica's work is half as much again in
    the new prices (this window is all prefill), so the estimate and the rate served with
    room follow: 0.8 -> 1.2 and 0.6 -> 0.9 s/s. Left in the old prices, it read 0.80 of the
    truth at the end of ``synthetic:cache-shift`` after the prefill factor moved 1.00 -> 1.37."""
    policy = _policy()
    profile = policy.signals.capacity.cost
    dearer = profile.model_copy(
        update={"prefill_seconds_per_token": 1.5 * profile.prefill_seconds_per_token}
    )
    obs = fleet_observation(8, 32_000)  # 4,000 prompt tokens/s a replica, TTFT 0.3 s: no sample
    memory = CapacityMemory(
        estimate=CapacityEstimate(0.8, 20, 0.0), served=0.6, unit="work", priced_in=profile
    )
    after, sample = learn_from_window(policy, obs, memory, dearer, 600.0, window_seconds=WINDOW)
    assert sample is None
    assert after.estimate is not None
    assert after.estimate.tokens_per_second == pytest.approx(1.2)
    assert after.estimate.samples == 20
    assert after.served == pytest.approx(0.9)
    assert after.priced_in == dearer
    # the same prices again: nothing moves
    again, _ = learn_from_window(policy, obs, after, dearer, 700.0, window_seconds=WINDOW)
    assert again.estimate == after.estimate
    # without a usable reading the old prices are kept until one comes
    blind = fleet_observation(8, 32_000, throughput_status=SignalStatus.EMPTY)
    kept, _ = learn_from_window(policy, blind, memory, dearer, 600.0, window_seconds=WINDOW)
    assert kept.estimate == memory.estimate and kept.priced_in == profile
    # prices not known yet (a restart): taken as the current ones, nothing rescaled
    fresh = dataclasses.replace(memory, priced_in=None)
    taken, _ = learn_from_window(policy, obs, fresh, dearer, 600.0, window_seconds=WINDOW)
    assert taken.estimate == memory.estimate and taken.priced_in == dearer
