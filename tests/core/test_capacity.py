"""The capacity signal (scaler.core.capacity): what a cycle's sample is, how the estimate moves,
and the learned capacity on a steady load, through an idle hour and a Prometheus outage."""

from __future__ import annotations

import dataclasses
import math
import random

import pytest

from scaler.config.policy import TargetPolicy
from scaler.config.vocabulary import SignalName
from scaler.core import sizing as sizing_module
from scaler.core.capacity import (
    SEED_WEIGHT,
    CapacityEstimate,
    CapacityMemory,
    CapacitySample,
    capacity_sample,
    learn_capacity,
    learn_from_window,
    served_with_room,
    sizing_capacity,
)
from scaler.core.decide import Decision
from scaler.core.observation import Observation, PodInfo, ThroughputReading
from scaler.core.reasons import Reason
from scaler.core.signals import SignalReading, SignalStatus
from scaler.core.sizing import evaluate_capacity
from scaler.core.state import TargetState, record_write
from tests.core.builders import decide
from tests.core.capacity_fleet import BOUNDARY, fleet_observation, ttft_p95
from tests.support.policies import case_target

WINDOW = 60.0


def capacity_policy(**capacity: object) -> TargetPolicy:
    """The cases' target with the capacity signal on (queue and KV off, TTFT on), in weighted
    tokens: these cases are the estimator's, whose bounds do not depend on the unit
    (``tests/core/test_work_capacity.py`` has the default unit, seconds of work)."""
    capacity = {"unit": "weighted_tokens", **capacity}
    return case_target(
        max_replicas=30,
        signals={
            "queue_depth": {"enabled": False},
            "kv_cache_usage": {"enabled": False},
            "ttft_p95": {"target_seconds": 2.0},
            "capacity": {"enabled": True, **capacity},
        },
    )


POLICY = capacity_policy()


def _step(
    policy: TargetPolicy, obs: Observation, state: TargetState | None, now: float
) -> Decision:
    """One cycle, with the scale write recorded as the actuator would."""
    d = decide(policy, obs, state, now)
    if d.desired_replicas != d.current_replicas:
        return dataclasses.replace(
            d,
            state=record_write(
                d.state, from_replicas=d.current_replicas, to_replicas=d.desired_replicas, now=now
            ),
        )
    return d


def _estimate(d: Decision) -> float:
    est = d.state.capacity.estimate
    assert est is not None
    return est.tokens_per_second


def test_learned_capacity_converges_on_a_steady_load_and_stays_through_idle_and_outage() -> None:
    """On a steady load (60k tokens/s, +-3% noise) a fleet that starts with 4 replicas, too few
    for it, learns a replica's capacity, settles, and keeps exactly that estimate through an
    idle hour and a 20-minute Prometheus outage (no sample: nothing moves, nothing decays)."""
    rng = random.Random(13)
    replicas, now, state = 4, 0.0, None
    estimates: list[float] = []
    for _ in range(240):  # one hour of 15 s cycles
        demand = 60_000 * (1 + rng.uniform(-0.03, 0.03))
        d = _step(POLICY, fleet_observation(replicas, demand), state, now)
        replicas, state, now = d.desired_replicas, d.state, now + 15
        if d.state.capacity.estimate is not None:
            estimates.append(_estimate(d))
    # learned from the busy cycles near the target, inside the bracket the fleet showed
    assert estimates, "never learned"
    settled = estimates[-1]
    assert 0.7 * BOUNDARY <= settled <= BOUNDARY
    assert estimates[-120:] == [settled] * 120  # the second half hour moves it no more
    # sized from it: demand / (capacity x 0.85), within the tolerance band
    assert (
        replicas == math.ceil(60_000 / (settled * 0.85))
        or abs(60_000 / (replicas * settled * 0.85) - 1) <= 0.1
    )
    assert ttft_p95(60_000 / replicas) <= 2.0

    # an idle hour: the demand is zero, TTFT idle; the fleet goes to its minimum
    for _ in range(240):
        d = _step(POLICY, fleet_observation(replicas, 0.0), state, now)
        replicas, state, now = d.desired_replicas, d.state, now + 15
        assert _estimate(d) == settled
    assert replicas == 1

    # a Prometheus outage: every query fails; the estimate and the replicas stay
    for _ in range(80):
        d = _step(
            POLICY,
            fleet_observation(
                replicas,
                60_000,
                throughput_status=SignalStatus.TRANSPORT,
                ttft_status=SignalStatus.TRANSPORT,
            ),
            state,
            now,
        )
        assert d.reason is Reason.NO_VALID_SIGNALS and d.desired_replicas == replicas
        assert _estimate(d) == settled
        state, now = d.state, now + 15

    # the load comes back: the same estimate sizes the fleet at once
    d = _step(POLICY, fleet_observation(replicas, 60_000), state, now)
    assert d.driving_signal is SignalName.CAPACITY and d.capacity is not None
    assert d.capacity.capacity_tokens_per_second == settled
    forecast = d.capacity.forecast_tokens_per_second
    assert forecast is not None and forecast >= 60_000
    assert d.recommended_replicas == math.ceil(forecast / (settled * 0.85) - 1e-9)


def _sample(obs: Observation, policy: TargetPolicy = POLICY) -> CapacitySample | None:
    return capacity_sample(policy, obs, window_seconds=WINDOW)


def _with_ttft(obs: Observation, value: float) -> Observation:
    reading = SignalReading(SignalName.TTFT_P95, SignalStatus.OK, value)
    return dataclasses.replace(obs, signals={SignalName.TTFT_P95: reading})


@pytest.mark.parametrize(
    ("obs", "expected"),
    [
        pytest.param(
            fleet_observation(8, 64_000), CapacitySample(8_000.0, True, near_target=True),
            id="busy-within-near-target",
        ),
        pytest.param(
            _with_ttft(fleet_observation(8, 56_000), 0.5), CapacitySample(7_000.0, True),
            id="busy-within-far-below-target",
        ),
        pytest.param(
            fleet_observation(4, 60_000), CapacitySample(15_000.0 + 1_000 / WINDOW, False),
            id="beyond-the-slo-at-the-rate-offered",
        ),
        pytest.param(_with_ttft(fleet_observation(8, 64_000), 2.1), None, id="inside-the-band"),
        pytest.param(fleet_observation(10, 30_000), None, id="within-but-not-busy"),
        pytest.param(fleet_observation(8, 0.0), None, id="idle"),
        pytest.param(fleet_observation(8, 64_000, ready_seconds=60.0), None,
                     id="pods-ready-for-less-than-1.5-windows"),
        pytest.param(
            fleet_observation(8, 64_000, throughput_status=SignalStatus.EMPTY), None,
            id="throughput-empty",
        ),
        pytest.param(
            fleet_observation(8, 64_000, ttft_status=SignalStatus.NAN), None, id="ttft-nan",
        ),
    ],
)  # fmt: skip
def test_what_a_cycle_teaches(obs: Observation, expected: CapacitySample | None) -> None:
    """Only trusted readings are samples: within the SLO while busy (a lower bound) or beyond
    it (an upper bound); never from an idle, partial, unsettled or failed reading."""
    assert _sample(obs) == expected


def test_a_breach_teaches_only_when_the_fleet_is_overloaded_for_two_cycles() -> None:
    """A breach with fewer than half the pods busy is one pod's bad luck; an overload seen at
    one cycle only is a burst inside the window, whose rate its mean hides."""
    overloaded = fleet_observation(4, 60_000)
    assert (
        capacity_sample(POLICY, overloaded, window_seconds=WINDOW, overloaded_before=False) is None
    )
    assert overloaded.throughput is not None
    one_busy = {
        name: dataclasses.replace(pod, waiting=1.0 if i == 0 else 0.0)
        for i, (name, pod) in enumerate(overloaded.throughput.pods.items())
    }
    unlucky = dataclasses.replace(
        overloaded, throughput=ThroughputReading(SignalStatus.OK, one_busy)
    )
    assert _sample(unlucky) is None


def test_a_fleet_saturated_for_a_whole_window_is_bounded_by_the_rate_it_served() -> None:
    """Every pod with a request waiting at every cycle of a window serves all it can: more
    than it serves within the SLO, so the breach's bound is the rate served (15,000 tokens/s
    a replica here), not the rate offered, which counts the queue as if a replica could have
    served it (a long-prompt mix queued behind a full KV cache offered 2.2-2.9x what one
    replica served on ``synthetic:mix-shift``)."""
    saturated = fleet_observation(4, 60_000)  # every pod has a request waiting, TTFT 6 s
    cost = POLICY.signals.capacity.cost
    estimate = CapacityEstimate(20_000.0, 20, learned_at=0.0)
    memory = CapacityMemory(estimate=estimate, overloaded=True)
    offered = 15_000.0 + 1_000.0 / WINDOW  # a waiting request of 1,000 tokens per pod
    samples = []
    for k in range(1, 7):  # cycles of 15 s from t = 60: saturated from the first
        now = 45.0 + 15.0 * k
        memory, sample = learn_from_window(
            POLICY, saturated, memory, cost, now, window_seconds=WINDOW
        )
        samples.append(None if sample is None else sample.tokens_per_second)
    assert memory.saturated_since == 60.0
    # t = 60: saturated since this cycle only (the rate offered); t = 120: a whole window
    assert samples[0] == pytest.approx(offered)
    assert samples[1:4] == [None, None, None]  # one sample per window
    assert samples[4] == pytest.approx(15_000.0)
    # one pod without a request waiting ends the saturation
    assert saturated.throughput is not None
    pods = dict(saturated.throughput.pods)
    first = next(iter(pods))
    pods[first] = dataclasses.replace(pods[first], waiting=0.0)
    eased = dataclasses.replace(saturated, throughput=ThroughputReading(SignalStatus.OK, pods))
    memory, _ = learn_from_window(POLICY, eased, memory, cost, 200.0, window_seconds=WINDOW)
    assert memory.saturated_since is None


def test_no_sample_while_a_pod_drains_or_a_ready_pod_lacks_rates() -> None:
    """A pod removed in the window served part of its traffic; a ready pod without rates
    makes the per-replica rate unknown."""
    obs = fleet_observation(8, 64_000)
    draining = dataclasses.replace(obs, replicas=dataclasses.replace(obs.replicas, terminating=1))
    assert _sample(draining) is None
    assert obs.throughput is not None
    partial = dataclasses.replace(
        obs,
        throughput=ThroughputReading(
            SignalStatus.PARTIAL, dict(list(obs.throughput.pods.items())[:7])
        ),
    )
    assert _sample(partial) is None
    extra = dataclasses.replace(
        obs,
        pods=(*obs.pods, PodInfo("vllm-5d8f7c9b4-new", True, False, 4000.0, ready_seconds=3600)),
    )
    assert _sample(extra) is None


#: The step of the 21st sample: 0.25 / sqrt(21) in log space.
_STEP_21 = 0.25 / math.sqrt(21)


def _est(value: float, samples: int = 20) -> CapacityEstimate:
    return CapacityEstimate(value, samples, 0.0)


@pytest.mark.parametrize(
    ("estimate", "sample", "expected"),
    [
        pytest.param(None, CapacitySample(8_000.0, True, True), 8_000.0, id="starts-near-target"),
        pytest.param(None, CapacitySample(8_000.0, True, False), None, id="no-start-far-below"),
        pytest.param(None, CapacitySample(8_000.0, False), None, id="no-start-beyond-alone"),
        pytest.param(_est(8_000.0), CapacitySample(9_000.0, True), 8_000 * math.exp(_STEP_21),
                     id="within-above-raises-one-step"),
        pytest.param(_est(8_000.0), CapacitySample(8_100.0, True), 8_100.0,
                     id="never-past-the-sample"),
        pytest.param(_est(8_000.0), CapacitySample(6_000.0, True), 8_000.0,
                     id="within-below-says-nothing"),
        pytest.param(_est(8_000.0), CapacitySample(9_000.0, False), 8_000.0,
                     id="beyond-above-says-nothing"),
        pytest.param(_est(8_000.0), CapacitySample(6_000.0, False), 8_000 * math.exp(-_STEP_21),
                     id="beyond-below-lowers-one-step"),
        pytest.param(_est(8_000.0, 1_000), CapacitySample(6_000.0, False), 8_000 * math.exp(-0.04),
                     id="late-steps-floor-at-4-percent"),
    ],
)  # fmt: skip
def test_how_a_sample_moves_the_estimate(
    estimate: CapacityEstimate | None, sample: CapacitySample, expected: float | None
) -> None:
    """A sample is a bound: it moves the estimate by one bounded step towards it in log space,
    only when it is on the other side."""
    out = learn_capacity(POLICY, CapacityMemory(estimate), sample, 100.0).estimate
    if expected is None:
        assert out is None
    else:
        assert out is not None
        assert out.tokens_per_second == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize(
    ("lower", "upper", "expected"),
    [
        pytest.param(6_000.0, 9_000.0, math.sqrt(6_000.0 * 9_000.0), id="between-the-bounds"),
        pytest.param(9_500.0, 9_000.0, 9_000.0, id="contradicting-bounds-the-lower-rate"),
        pytest.param(3_000.0, 9_000.0, None, id="bracket-wider-than-2x-says-too-little"),
    ],
)
def test_an_estimate_starts_from_a_bracket(
    lower: float, upper: float, expected: float | None
) -> None:
    """Without a seed or a sample near the target, a rate served within the SLO and one at
    which it broke at most twice as high start the estimate at their geometric mean."""
    memory = learn_capacity(POLICY, CapacityMemory(), CapacitySample(lower, True), 0.0)
    assert memory.estimate is None and memory.lower == lower
    memory = learn_capacity(POLICY, memory, CapacitySample(upper, False), 60.0)
    if expected is None:
        assert memory.estimate is None and (memory.lower, memory.upper) == (lower, upper)
    else:
        assert memory.estimate is not None
        assert memory.estimate.tokens_per_second == pytest.approx(expected)


def test_an_outlier_moves_the_estimate_by_one_step_only() -> None:
    """A sample a hundred times the estimate (a glitch) raises it by one step, not to it."""
    memory = CapacityMemory(_est(8_000.0, 100))
    out = learn_capacity(POLICY, memory, CapacitySample(800_000.0, True), 100.0).estimate
    assert out is not None and out.tokens_per_second == pytest.approx(8_000 * math.exp(0.04))


def test_seed_and_bounds() -> None:
    """A seed starts the estimate (prompt + weight x generated tokens/s) and counts as several
    samples; the learned value stays inside the policy's bounds."""
    policy = capacity_policy(
        seed_prompt_tokens_per_second=5_000,
        seed_generation_tokens_per_second=250,
        min_tokens_per_second=2_000,
        max_tokens_per_second=9_500,
    )
    seeded = learn_capacity(policy, CapacityMemory(), None, 0.0).estimate
    assert seeded == CapacityEstimate(5_000 + 16 * 250, SEED_WEIGHT, None)
    up = learn_capacity(
        policy, CapacityMemory(_est(9_400.0)), CapacitySample(20_000.0, True), 1.0
    ).estimate
    assert up is not None and up.tokens_per_second == 9_500
    down = learn_capacity(
        policy, CapacityMemory(_est(2_100.0)), CapacitySample(100.0, False), 1.0
    ).estimate
    assert down is not None and down.tokens_per_second == 2_000


def test_the_decision_message_explains_the_replicas() -> None:
    """desired = ceil(forecast / (capacity x utilization)), said with the numbers."""
    policy = capacity_policy(
        seed_prompt_tokens_per_second=10_000, seed_generation_tokens_per_second=0
    )
    d = decide(policy, fleet_observation(2, 41_000), None, 0.0)
    assert d.driving_signal is SignalName.CAPACITY
    assert d.desired_replicas == math.ceil(41_000 / (10_000 * 0.85))  # 5: step limit is 4 pods
    assert d.message == (
        "scale up 2 -> 5 (capacity: demand 41k tok/s, forecast 41k over 150 s, capacity 10k "
        "per replica at TTFT p95 <= 2 s, target utilization 0.85: 5)"
    )
    assert d.capacity is not None and d.capacity.utilization == pytest.approx(41_000 / 20_000)


def test_a_capacity_hold_below_its_band_shows_the_forecast_in_tokens_per_second() -> None:
    """The capacity signal's value is the forecast per replica in tokens/s (not seconds): a
    hold below its band shows the whole forecast and its rounding, ceil(27k / 8.5k) = 4."""
    policy = capacity_policy(
        seed_prompt_tokens_per_second=10_000, seed_generation_tokens_per_second=0
    )
    d = decide(policy, fleet_observation(4, 27_000), TargetState.seeded(4, -1000.0), 0.0)
    assert (d.desired_replicas, d.reason, d.driving_signal) == (
        4, Reason.DEMAND_COVERED, SignalName.CAPACITY,
    )  # fmt: skip
    assert d.message == (
        "capacity 6.76e+03 tok/s per replica vs target 8.5e+03 tok/s (ratio 0.79) is below its "
        "tolerance band 0.90-1.10, but 2.7e+04 tok/s in all need ceil(2.7e+04 / 8.5e+03) = 4 "
        "replicas: holding 4"
    )


def test_learning_asks_for_nothing_and_holds_back_nothing() -> None:
    """Without an estimate the signal is `learning`: the other signals scale down as usual."""
    policy = capacity_policy()
    replicas, state = 4, None
    reasons = []
    for i in range(40):  # a trickle: capacity learning, the others go down to the minimum
        d = _step(policy, fleet_observation(replicas, 10.0), state, 15.0 * i)
        replicas, state = d.desired_replicas, d.state
        cap = next(e for e in d.signals if e.name is SignalName.CAPACITY)
        assert cap.status is SignalStatus.LEARNING and not cap.valid
        reasons.append(d.reason)
    assert replicas == 1
    assert Reason.SCALE_DOWN_BLOCKED_MISSING_SIGNAL not in reasons


def test_a_failed_throughput_reading_blocks_scale_down() -> None:
    """With an estimate, a missing throughput reading is never zero demand (HPA's rule)."""
    policy = capacity_policy(
        seed_prompt_tokens_per_second=10_000, seed_generation_tokens_per_second=0
    )
    d = decide(
        policy,
        fleet_observation(6, 10_000, throughput_status=SignalStatus.TIMEOUT),
        TargetState.seeded(6, -1000.0),
        0.0,
    )
    assert d.desired_replicas == 6
    assert d.reason is Reason.SCALE_DOWN_BLOCKED_MISSING_SIGNAL


@pytest.mark.parametrize(
    "status", [SignalStatus.EMPTY, SignalStatus.TIMEOUT, SignalStatus.ABSENT], ids=str
)
def test_without_an_estimate_an_unusable_throughput_reading_holds_nothing_back(
    status: SignalStatus,
) -> None:
    """No seed and nothing learned: whatever the demand, the signal could ask for nothing, so
    a failed or absent throughput reading leaves it `learning` (not a blocking status) and
    the other signals scale down as they would without it."""
    d = decide(
        POLICY,
        _with_ttft(fleet_observation(6, 0.0, throughput_status=status), 0.2),
        TargetState.seeded(6, -1000.0),
        0.0,
    )
    cap = next(e for e in d.signals if e.name is SignalName.CAPACITY)
    assert (cap.status, cap.valid, cap.desired_replicas) == (SignalStatus.LEARNING, False, None)
    assert cap.detail.startswith("no capacity estimate yet; demand unknown")
    assert d.reason is not Reason.SCALE_DOWN_BLOCKED_MISSING_SIGNAL
    assert d.desired_replicas < 6  # TTFT 0.2 s of a 2 s target: the fleet shrinks


def _scale_down_minutes(policy: TargetPolicy, minutes: int) -> tuple[list[int], Decision]:
    """The replicas at the end of each minute (15 s cycles, a fake clock from 0) of a fleet of
    32 that a steady 68k tokens/s needs 8 of (capacity 10k x 0.85: ceil(68k / 8.5k)), and the
    last decision."""
    replicas, state = 32, TargetState.seeded(32, -1000.0)
    out = []
    for minute in range(minutes):
        for cycle in range(4):
            d = _step(
                policy, fleet_observation(replicas, 68_000), state, 60.0 * minute + 15 * cycle
            )
            replicas, state = d.desired_replicas, d.state
        out.append(replicas)
    return out, d


def test_the_surplus_over_the_capacity_ask_goes_a_quarter_per_period() -> None:
    """32 replicas where the capacity signal asks for 8: a quarter of the surplus goes each
    60 s period (of 24, 6 go; then 4, 3, 2, 2), then one replica a period near the need. The
    fleet stops at 9: from 9 replicas on a request waits on every pod of the toy fleet, and
    that work spread over the 150 s horizon asks for ceil(68.06k / 8.5k) = 9."""
    seeded = {"seed_prompt_tokens_per_second": 10_000, "seed_generation_tokens_per_second": 0}
    policy = capacity_policy(**seeded).model_copy(update={"max_replicas": 32})
    d = decide(policy, fleet_observation(32, 68_000), TargetState.seeded(32, -1000.0), 0.0)
    cap = next(e for e in d.signals if e.name is SignalName.CAPACITY)
    assert cap.desired_replicas == 8
    assert (d.desired_replicas, d.reason) == (26, Reason.STEP_LIMITED)
    assert _scale_down_minutes(policy, 13)[0] == [26, 22, 19, 17, 15, 14, 13, 12, 11, 10, 9, 9, 9]

    # off (0), or the capacity signal still learning: one replica a period, as before
    off = policy.model_copy(
        update={
            "scale_down": policy.scale_down.model_copy(update={"max_surplus_percent_per_period": 0})
        }
    )
    assert _scale_down_minutes(off, 4)[0] == [31, 30, 29, 28]
    learning = POLICY.model_copy(update={"max_replicas": 32})
    replicas, last = _scale_down_minutes(learning, 4)
    assert replicas == [31, 30, 29, 28]
    cap = next(e for e in last.signals if e.name is SignalName.CAPACITY)
    assert cap.status is SignalStatus.LEARNING  # 2.4k per replica: not busy, nothing learned


def _window(replicas: int, per_replica: float, ttft: float, *, busy: bool) -> Observation:
    """A trusted window: ``replicas`` settled pods each serving ``per_replica`` weighted
    tokens/s (prompt tokens only), a TTFT p95 of ``ttft`` seconds, a request waiting on every
    pod when ``busy``."""
    obs = fleet_observation(replicas, per_replica * replicas)
    assert obs.throughput is not None
    loads = {
        name: dataclasses.replace(load, waiting=1.0 if busy else 0.0)
        for name, load in obs.throughput.pods.items()
    }
    return _with_ttft(
        dataclasses.replace(obs, throughput=ThroughputReading(SignalStatus.OK, loads)), ttft
    )


def _burst_then_steady(policy: TargetPolicy) -> tuple[list[Decision], list[int]]:
    """A fleet of 4 first sees one busy window whose TTFT p95 (1.12 s) came from a burst while
    its mean rate was 488 tokens/s per replica, then two hours of a steady 20k tokens/s that
    it serves with room (TTFT p95 0.3 s, nothing waiting), whatever its size."""
    replicas, now, state = 4, 0.0, None
    d = _step(policy, _window(replicas, 488.0, 1.12, busy=True), state, now)
    decisions, fleet = [d], [d.desired_replicas]
    replicas, state, now = d.desired_replicas, d.state, now + 15
    for _ in range(480):
        d = _step(policy, _window(replicas, 20_000 / replicas, 0.3, busy=False), state, now)
        decisions.append(d)
        replicas, state, now = d.desired_replicas, d.state, now + 15
        fleet.append(replicas)
    return decisions, fleet


def test_a_young_estimate_from_one_burst_window_cannot_scale_wildly(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The estimate's first sample can be a window near the target whose TTFT came from a
    burst, not from the load (488 tokens/s per replica, on replicas that serve 10k). Sized on
    that alone, the steady 20k tokens/s that the fleet (5 replicas after the burst window)
    serves with room asks for ``ceil(20k / (488 x 0.85)) = 49`` replicas: the maximum, 30, for
    two hours. The capacity it sizes with is at least half the rate served with room (4k
    per replica on 5 replicas): the fleet follows the forecast's headroom for the step from
    2k to 20k tokens/s up to 18, then settles where ``ceil(20.1k / (2k x 0.85)) = 12`` is
    within the tolerance band. The estimate itself is
    not moved (no busy window teaches it)."""
    decisions, fleet = _burst_then_steady(POLICY)
    first = decisions[0].state.capacity.estimate
    assert first == CapacityEstimate(488.0, 1, 0.0)
    asks = [
        e.demand_replicas for d in decisions[1:] for e in d.signals if e.name is SignalName.CAPACITY
    ]
    assert max(a for a in asks if a is not None) == 19
    assert asks[-160:] == [12] * 160  # the last 40 minutes
    assert max(fleet) == 18 and fleet[-300:] == [13] * 300
    last = decisions[-1]
    assert last.state.capacity.estimate == first
    assert last.state.capacity.served == 4_000.0
    assert last.capacity is not None and last.capacity.capacity_tokens_per_second == 488.0
    detail = next(e.detail for e in last.signals if e.name is SignalName.CAPACITY)
    assert "capacity 2k per replica" in detail
    assert "the estimate 488 rests on 1 sample)" in detail

    # without the guard the same young estimate takes the fleet to its maximum and keeps it
    monkeypatch.setattr(
        sizing_module,
        "sizing_capacity",
        lambda policy, memory: memory.estimate.tokens_per_second if memory.estimate else None,
    )
    _, unguarded = _burst_then_steady(POLICY)
    assert unguarded[-300:] == [30] * 300


def test_half_the_rate_served_with_room_is_the_least_capacity_sized_with() -> None:
    """Whatever the estimate rests on (one sample, a seed, many samples), the signal sizes
    with at least half the rate served with room; above that, with the estimate as learned.
    A breach at or below the rate served with room drops it (the mix changed); one above it
    leaves it."""
    for samples in (1, SEED_WEIGHT, 40):
        memory = CapacityMemory(CapacityEstimate(4_000.0, samples), served=10_000.0)
        assert sizing_capacity(POLICY, memory) == 5_000.0
        assert sizing_capacity(POLICY, dataclasses.replace(memory, served=7_000.0)) == 4_000.0
    assert sizing_capacity(POLICY, CapacityMemory(served=7_000.0)) is None

    memory = CapacityMemory(CapacityEstimate(4_000.0, 3, 0.0), served=10_000.0)
    room = _window(4, 9_000.0, 0.3, busy=False)
    breach_above = fleet_observation(4, 4 * 12_000.0)  # TTFT 6 s, every pod busy
    breach_below = _with_ttft(fleet_observation(4, 4 * 9_000.0), 6.0)
    for obs, served in ((room, 10_000.0), (breach_above, 10_000.0), (breach_below, None)):
        _, _, after = evaluate_capacity(
            POLICY, obs, dataclasses.replace(memory, overloaded=True), None, 120.0,
            window_seconds=WINDOW,
        )  # fmt: skip
        assert after.served == served
        assert after.estimate == memory.estimate  # a breach above the estimate tells nothing


def test_what_counts_as_served_with_room() -> None:
    """A trusted window with TTFT p95 under half its target, busy or not, counts; a window
    near the target, an untrusted one, or an idle one does not."""
    assert (
        served_with_room(POLICY, _window(4, 5_000.0, 0.3, busy=False), window_seconds=WINDOW)
        == 5_000.0
    )
    assert (
        served_with_room(POLICY, _window(4, 5_000.0, 0.99, busy=True), window_seconds=WINDOW)
        == 5_000.0
    )
    assert (
        served_with_room(POLICY, _window(4, 5_000.0, 1.0, busy=False), window_seconds=WINDOW)
        is None
    )
    assert served_with_room(POLICY, fleet_observation(4, 0.0), window_seconds=WINDOW) is None
    assert (
        served_with_room(
            POLICY, fleet_observation(4, 20_000, ready_seconds=60.0), window_seconds=WINDOW
        )
        is None
    )
