"""The scale-down stabilization window on a steady fall (``scale_down.
shorten_window_on_steady_fall``): it follows a demand that falls by more than its own noise,
keeps its whole length through recurring bursts, and never reaches back past an outage's hold
or a seeded history. All on a fake clock of 15 s cycles."""

from __future__ import annotations

import dataclasses
import json
import random

import pytest

from scaler.config.policy import TargetPolicy
from scaler.config.vocabulary import SignalName
from scaler.core.capacity import CapacityMemory
from scaler.core.decide import Decision, capacity_replicas, down_window_seconds
from scaler.core.evaluation import SignalEvaluation
from scaler.core.forecast import DemandForecast, observe_demand
from scaler.core.reasons import Reason
from scaler.core.signals import SignalStatus
from scaler.core.state import TargetState, decode_state, encode_state, record_write, resume
from tests.core.builders import RATE_WINDOW_SECONDS, decide
from tests.core.capacity_fleet import fleet_observation
from tests.core.test_capacity import capacity_policy

CYCLE = 15.0
#: A replica's capacity 10k tokens/s at utilization 0.85: the signal asks ceil(demand / 8.5k).
SEEDED = capacity_policy(
    seed_prompt_tokens_per_second=10_000, seed_generation_tokens_per_second=0
).model_copy(update={"max_replicas": 16})


def _without_shortening(policy: TargetPolicy) -> TargetPolicy:
    rules = policy.scale_down.model_copy(update={"shorten_window_on_steady_fall": False})
    return policy.model_copy(update={"scale_down": rules})


def _window(
    policy: TargetPolicy,
    state: TargetState,
    evaluations: tuple[SignalEvaluation, ...],
    now: float,
) -> float:
    """The scale-down window of a cycle, given the capacity signal's ask as decide() takes it
    from the cycle's evaluations."""
    return down_window_seconds(
        policy, state, now, RATE_WINDOW_SECONDS, capacity_replicas=capacity_replicas(evaluations)
    )


def _run(
    policy: TargetPolicy, demands: list[float], replicas: int, *, outage_at: int | None = None
) -> tuple[list[int], list[Decision]]:
    """Replays one demand (weighted tokens/s) per 15 s cycle from a history seeded long ago;
    the cycle ``outage_at`` reads no throughput (a Prometheus timeout)."""
    state = TargetState.seeded(replicas, -1000.0)
    out, decisions = [], []
    for i, demand in enumerate(demands):
        status = SignalStatus.TIMEOUT if i == outage_at else SignalStatus.OK
        d = decide(
            policy, fleet_observation(replicas, demand, throughput_status=status), state, i * CYCLE
        )
        state = d.state
        if d.desired_replicas != d.current_replicas:
            state = record_write(
                state, from_replicas=replicas, to_replicas=d.desired_replicas, now=i * CYCLE
            )
        replicas = d.desired_replicas
        out.append(replicas)
        decisions.append(dataclasses.replace(d, state=state))
    return out, decisions


def _fall(seed: int = 13) -> list[float]:
    """10 minutes steady at 68k tokens/s, then 20 minutes falling linearly to 8.5k, then 5
    minutes at 8.5k; +-3% noise."""
    rng = random.Random(seed)
    steady, falling, low = (
        [68_000.0] * 40,
        [68_000 - 59_500 * i / 80 for i in range(80)],
        [8_500.0] * 20,
    )
    return [d * (1 + rng.uniform(-0.03, 0.03)) for d in steady + falling + low]


def test_fall_seconds_is_the_time_the_trend_takes_to_fall_by_one_standard_deviation() -> None:
    """burst_std / -trend, only while falling and once the trend has had a few updates."""
    falling = DemandForecast(level=30_000, trend=-50.0, burstiness=4_000.0**2, at=0.0, samples=10)
    assert falling.fall_seconds() == 80.0
    assert dataclasses.replace(falling, trend=5.0).fall_seconds() is None
    assert dataclasses.replace(falling, trend=0.0).fall_seconds() is None
    assert dataclasses.replace(falling, samples=3).fall_seconds() is None


def test_a_steady_fall_is_followed_within_a_minute_not_five() -> None:
    """On a fall of about 3k tokens/s a minute (a replica every three minutes at 8.5k per
    replica), the whole 300 s window keeps each replica five minutes past the last cycle that
    needed it. Once the demand has fallen for a whole window (no rise inside it: no burst to
    hold for), the window shortens to the time the fall takes to exceed the demand's noise, at
    least the 60 s rate window: the fleet follows the capacity signal's ask a few cycles
    behind, every replica still serving under its capacity, with 12% fewer replica-cycles.
    The fall is dated from the level's last high (cycle 29, in the steady part: the level
    never came back to it) once the level lies more than one standard deviation below it, not
    from the trend's turn (cycle 43): the window shortens from cycle 49, before the capacity
    signal asks for fewer than 8."""
    demands = _fall()
    short, decisions = _run(SEEDED, demands, 8)
    whole, _ = _run(_without_shortening(SEEDED), demands, 8)
    assert whole[:40] == short[:40] == [8] * 40
    assert all(s <= w for s, w in zip(short, whole, strict=True))
    # every cycle serves under the capacity (10k per replica): no replica too few
    assert all(demand / r < 10_000 for demand, r in zip(demands, short, strict=True))
    forecast = decisions[63].state.capacity.forecast
    assert forecast is not None and forecast.falling_since == 43 * CYCLE
    assert forecast.high_at == 29 * CYCLE and forecast.fallen()
    # the trend turned at cycle 43, the level's last high was at cycle 29: a whole window
    # after it (cycle 49) the window is 160 s, and 75 s at cycle 63
    windows = [_window(SEEDED, d.state, d.signals, i * CYCLE) for i, d in enumerate(decisions)]
    assert set(windows[:49]) == {300.0}
    assert (round(windows[49]), round(windows[63])) == (160, 75)
    assert min(windows) == RATE_WINDOW_SECONDS
    assert (short.index(7), whole.index(7)) == (64, 78)
    assert (short.index(5), whole.index(5)) == (83, 99)
    assert (short[-1], whole[-1]) == (1, 2)
    # 802: the forecast never below the demand read now (a lagging level no longer trails a
    # step) keeps a replica a few cycles longer on the way down; still 11% under the window
    assert (sum(short), sum(whole)) == (802, 904)
    assert decisions[64].reason is Reason.SCALE_DOWN
    assert decisions[64].message.endswith(
        "; scale-down window 73 s of 300 s: demand falling 1.95e+03 tok/s a minute, "
        "burstiness 2.37e+03 tok/s"
    )


def test_a_fall_after_a_rise_is_dated_from_the_level_s_high() -> None:
    """Ten minutes rising from 20k to 68k tokens/s, then twenty falling to 8.5k. The level
    peaks at cycle 47, but the trend, which follows a change of slope only over its 300 s
    time constant, turns negative only at cycle 64. The level never rises again and lies more
    than one standard deviation below its high: the fall is dated from the high, so the
    window may shorten from a whole window after it (cycle 67) instead of after the trend's
    turn (cycle 84), and does as soon as the trend lowers the demand by its noise within the
    window (cycle 70). The fleet leaves 9 at cycle 75 instead of 80 with the whole window,
    every replica still serving under its capacity: 826 replica-cycles against 902 (a fall
    dated from the trend's turn left 9 at cycle 80 too, and took 839)."""
    rng = random.Random(5)
    up = [20_000 + 48_000 * i / 40 for i in range(40)]
    down = [68_000 - 59_500 * i / 80 for i in range(80)]
    demands = [d * (1 + rng.uniform(-0.03, 0.03)) for d in up + down + [8_500.0] * 20]
    replicas, decisions = _run(SEEDED, demands, 3)
    whole, _ = _run(_without_shortening(SEEDED), demands, 3)
    forecast = decisions[67].state.capacity.forecast
    assert forecast is not None
    assert (forecast.falling_since, forecast.high_at) == (64 * CYCLE, 47 * CYCLE)
    windows = [_window(SEEDED, d.state, d.signals, i * CYCLE) for i, d in enumerate(decisions)]
    assert set(windows[:70]) == {300.0} and round(windows[70]) == 297
    assert max(replicas) == 9 and (replicas.index(8, 47), whole.index(8, 47)) == (75, 80)
    # the forecast is never below the demand read now: both runs follow the rise sooner
    assert (sum(replicas), sum(whole)) == (809, 885)
    assert all(demand / r < 10_000 for demand, r in zip(demands, replicas, strict=True))


def test_recurring_bursts_keep_the_whole_window() -> None:
    """A 60 s burst of 60k tokens/s every 5 minutes over a 6k base: after each burst the
    demand drops steeply, but the next burst turns the trend up again before the demand has
    fallen for a whole window, so every cycle keeps 300 s and the fleet stays sized for the
    bursts (7 replicas, as with the option off)."""
    rng = random.Random(7)
    demands = [
        (60_000.0 if 10 <= i % 20 < 14 else 6_000.0) * (1 + rng.uniform(-0.03, 0.03))
        for i in range(160)
    ]
    replicas, decisions = _run(SEEDED, demands, 8)
    windows = [_window(SEEDED, d.state, d.signals, i * CYCLE) for i, d in enumerate(decisions)]
    assert set(windows) == {300.0}
    assert replicas == _run(_without_shortening(SEEDED), demands, 8)[0]
    # sized for the bursts as read, not the level smoothed under them (was 7 on the level)
    assert replicas[40:] == [8] * 120


def test_a_burst_on_the_way_down_restores_the_whole_window() -> None:
    """A 60 s burst of +30k tokens/s in the middle of the fall (cycles 80-83) does not turn
    the trend up, but lifts the level by more than the burstiness above its lowest point: the
    fall starts again at the burst's last rise (cycle 83), and the 12 replicas the burst
    asked for are held for a whole window after it. (The fleet had followed the fall to 6,
    where the whole window still kept 7: at 11.4k per replica TTFT broke and asked for twice
    the fleet. A burst of twelve standard deviations is met only by standing headroom.)"""
    demands = _fall()
    for i in range(80, 84):
        demands[i] += 30_000
    replicas, decisions = _run(SEEDED, demands, 8)
    windows = [_window(SEEDED, d.state, d.signals, i * CYCLE) for i, d in enumerate(decisions)]
    assert [d.state.capacity.forecast.trend < 0 for d in decisions[80:84]] == [True] * 4  # type: ignore[union-attr]
    assert decisions[83].state.capacity.forecast.falling_since == 83 * CYCLE  # type: ignore[union-attr]
    assert windows[79] == 60.0 and set(windows[80:103]) == {300.0} and windows[103] < 300.0
    assert replicas[80:100] == [12] * 20 and replicas[100] == 10


def test_an_outage_during_a_fall_restores_the_whole_window() -> None:
    """A Prometheus timeout mid-fall holds (scale-down needs every signal valid) and is
    recorded as the current replicas; the window then stays 300 s until a whole window of
    good samples has passed since it (case 04's rule), and shortens again after."""
    demands = _fall()
    outage = 70
    replicas, decisions = _run(SEEDED, demands, 8, outage_at=outage)
    assert decisions[outage].reason is Reason.SCALE_DOWN_BLOCKED_MISSING_SIGNAL
    assert decisions[outage].state.last_blocked_at == outage * CYCLE
    held = replicas[outage]
    windows = [_window(SEEDED, d.state, d.signals, i * CYCLE) for i, d in enumerate(decisions)]
    # 300 s = 20 cycles: no replica goes while the outage's hold is in the window
    assert replicas[outage : outage + 20] == [held] * 20
    assert set(windows[outage : outage + 21]) == {300.0}
    assert windows[outage + 21] < 300.0
    assert replicas[outage + 20] == held - 1


@pytest.mark.parametrize("status", [SignalStatus.LEARNING, SignalStatus.PARTIAL], ids=str)
def test_without_an_ok_capacity_reading_the_window_is_whole(status: SignalStatus) -> None:
    """The capacity signal still learning, or reading only part of the pods: 300 s in the
    middle of the fall, where an ok reading gives 60 s; and 300 s with the option off."""
    demands = _fall()
    _, decisions = _run(SEEDED, demands, 8)
    d, now = decisions[80], 80 * CYCLE
    assert _window(SEEDED, d.state, d.signals, now) == 60.0
    other = tuple(
        dataclasses.replace(e, status=status, valid=status is SignalStatus.PARTIAL)
        if e.name is SignalName.CAPACITY
        else e
        for e in d.signals
    )
    assert _window(SEEDED, d.state, other, now) == 300.0
    off = _without_shortening(SEEDED)
    assert _window(off, d.state, d.signals, now) == 300.0
    _, decisions = _run(off, demands, 8)
    assert all("scale-down window" not in d.message for d in decisions)


def test_a_seeded_history_counts_as_blocked_and_is_persisted() -> None:
    """A fresh start or a resume after a hole sets ``last_blocked_at`` (no shortened window
    reaches back past the seeded replicas); it survives the Lease's encoding with the fall's
    start and trough (and the capacity bounds seen before an estimate), a state saved before
    them decodes with None, and a clock that went back moves it to now."""
    assert TargetState.seeded(4, 10.0).last_blocked_at == 10.0
    falling = DemandForecast(
        30_000,
        -50.0,
        4_000.0**2,
        50.0,
        12,
        falling_since=-300.0,
        trough=29_000,
        high_at=-420.0,
        high=36_000,
        low=29_000,
    )
    s = dataclasses.replace(
        TargetState.seeded(4, 10.0),
        last_blocked_at=55.0,
        capacity=CapacityMemory(None, falling, lower=2_500.0, upper=6_000.0),
    )
    encoded = encode_state(s)
    assert (encoded["b"], encoded["df"], encoded["dh"], encoded["cb"]) == (
        55.0,
        [-300.0, 29_000],
        [-420.0, 36_000, 29_000],
        [2_500, 6_000],
    )
    assert decode_state(json.loads(json.dumps(encoded))) == s
    older = decode_state({k: v for k, v in encoded.items() if k not in ("b", "df", "dh")})
    assert older.last_blocked_at is None
    assert older.capacity.forecast == dataclasses.replace(
        falling, falling_since=None, trough=None, high_at=None, high=None, low=None
    )
    assert resume(s, saved_at=60.0, current_replicas=4, now=70.0, max_gap=60.0) == s
    assert (
        resume(s, saved_at=60.0, current_replicas=4, now=900.0, max_gap=60.0).last_blocked_at
        == 900.0
    )
    d = decide(SEEDED, fleet_observation(4, 30_000), s, 20.0)  # 55 s is in the future
    assert d.state.last_blocked_at == 20.0


@pytest.mark.parametrize("window", [0.0, 30.0])
def test_never_longer_than_the_configured_window(window: float) -> None:
    """A configured window shorter than the rate window is kept as it is."""
    rules = SEEDED.scale_down.model_copy(update={"stabilization_window_seconds": window})
    policy = SEEDED.model_copy(update={"scale_down": rules})
    _, decisions = _run(policy, _fall(), 8)
    assert all(
        _window(policy, d.state, d.signals, i * CYCLE) == window for i, d in enumerate(decisions)
    )


def test_the_high_moves_with_a_new_high_or_a_rise_beyond_the_noise() -> None:
    """The last high stays while the level stays below it and within one standard deviation
    of the burstiness above its lowest point since; a level above the high, or a rise of more
    than that standard deviation above the lowest point (the demand coming back, though not
    to the high), makes the update the new high."""
    f = DemandForecast(10_000, 0.0, 1_000.0**2, 0.0, 10, high_at=-600.0, high=20_000, low=9_000)
    quiet = observe_demand(f, 9_500, 15.0)
    assert (quiet.high_at, quiet.high, quiet.low) == (-600.0, 20_000, 9_000)
    assert quiet.fallen()
    back = observe_demand(quiet, 20_000, 30.0)  # level about 11.2k: above 9k + 1k
    assert back.high_at == 30.0 and back.high == back.level == back.low
    assert 11_000 < back.level < 11_500 and not back.fallen()
    above = observe_demand(dataclasses.replace(f, high=10_100), 11_000, 15.0)
    assert above.high_at == 15.0
    old = dataclasses.replace(f, high_at=None, high=None, low=None)
    assert not old.fallen() and observe_demand(old, 9_500, 15.0).high_at == 15.0
