"""Table-driven tests of the decision core on a fake clock (plain floats for ``now``).

Each ``test_case_NN_*`` pins the expected behaviour of ../shared/cases/NN-*.md at the core
level; the same cases run again through HTTP in tests/controller.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from scaler.config.vocabulary import SignalName
from scaler.core.decide import Decision
from scaler.core.reasons import Reason
from scaler.core.signals import SignalStatus
from scaler.core.state import TargetState, record_write
from tests.support.policies import case_target

from .builders import KV, TTFT, Q, bad, decide, idle_ttft, obs, ok


def run(policy, cycles, *, start=0.0, interval=30.0, state=None) -> list[Decision]:
    """Feed observations one per interval, carrying state and applying each write."""
    out: list[Decision] = []
    now = start
    for o in cycles:
        d = decide(policy, o, state, now)
        state = d.state
        if d.desired_replicas != d.current_replicas:
            state = record_write(
                state, from_replicas=d.current_replicas, to_replicas=d.desired_replicas, now=now
            )
        out.append(d)
        now += interval
    return out


def all_good(current: int, waiting: float, kv_each: float = 0.1) -> tuple:
    return (ok(Q, waiting, pods=current), ok(KV, kv_each * current, pods=current), idle_ttft())


# --- case 01: an empty answer is not zero load ------------------------------------------


def test_case_01_all_empty_holds_current(policy):
    """Case 01: an empty answer for every signal is no data, never zero load: hold the replicas."""
    first = decide(policy, obs(6, *all_good(6, 48)), None, 0.0)
    empty = obs(
        6, bad(Q, SignalStatus.EMPTY), bad(KV, SignalStatus.EMPTY), bad(TTFT, SignalStatus.EMPTY)
    )
    d = decide(policy, empty, first.state, 30.0)
    assert d.desired_replicas == 6
    assert d.reason is Reason.NO_VALID_SIGNALS
    assert [(e.name, e.status, e.valid) for e in d.signals] == [
        (Q, SignalStatus.EMPTY, False),
        (KV, SignalStatus.EMPTY, False),
        (TTFT, SignalStatus.EMPTY, False),
        # on by default with TTFT: no throughput and nothing learned, it asks for nothing
        (SignalName.CAPACITY, SignalStatus.LEARNING, False),
    ]
    assert "queue_depth empty" in d.message and "capacity" not in d.message


# --- case 02: NaN, +Inf and very large values ------------------------------------------


@pytest.mark.parametrize(
    ("readings", "status"),
    [
        pytest.param(
            (bad(Q, SignalStatus.NAN), ok(KV, 4 * 0.5, pods=4), idle_ttft()),
            SignalStatus.NAN,
            id="a: queue NaN holds",
        ),
        pytest.param(
            (ok(Q, 8, pods=4), bad(KV, SignalStatus.INF), idle_ttft()),
            SignalStatus.INF,
            id="b: KV cache +Inf holds",
        ),
    ],
)
def test_case_02_non_finite_signal_is_invalid_and_holds(policy, readings, status):
    """Case 02: a NaN or +Inf reading makes its signal invalid (never 0, never huge): hold."""
    d = decide(policy, obs(4, *readings), None, 0.0)
    assert d.desired_replicas == 4
    assert d.reason is Reason.SCALE_DOWN_BLOCKED_MISSING_SIGNAL
    bad_eval = next(e for e in d.signals if e.status is status)
    assert bad_eval.valid is False and bad_eval.value is None and bad_eval.desired_replicas is None


def test_case_02_nan_does_not_block_scale_up_from_another_signal(policy):
    """Case 02: a NaN signal does not stop a scale-up another valid signal asks for."""
    d = decide(
        policy, obs(4, bad(Q, SignalStatus.NAN), ok(KV, 4 * 1.0, pods=4), idle_ttft()), None, 0.0
    )
    # KV 1.0 against 0.8 on 4 replicas: ceil(4 / 0.8) = 5.
    assert d.desired_replicas == 5
    assert d.reason is Reason.SCALE_UP and d.driving_signal is KV


def test_case_02c_huge_value_clamps_to_max_never_wraps():
    """Case 02c: a huge finite value is computed as a float and clamped to max, never wrapped."""
    policy = case_target(
        signals={"queue_depth": {"target_per_replica": 0.1}},
        scale_up={
            "stabilization_window_seconds": 0,
            "max_replicas_per_period": 100,
            "period_seconds": 60,
        },
    )
    d = decide(
        policy, obs(4, ok(Q, 214748365, pods=1), ok(KV, 0.4, pods=4), idle_ttft()), None, 0.0
    )
    assert d.desired_replicas == 10
    assert d.reason is Reason.AT_MAX
    assert "max_replicas" in d.limits
    assert d.recommended_replicas == 2147483650


def test_case_02c_with_default_step_limit_still_reports_the_clamp():
    """Case 02c: under the default step limit a huge value still reports the max clamp."""
    policy = case_target(signals={"queue_depth": {"target_per_replica": 0.1}})
    d = decide(
        policy, obs(4, ok(Q, 214748365, pods=1), ok(KV, 0.4, pods=4), idle_ttft()), None, 0.0
    )
    assert d.desired_replicas == 8  # +100% per period from 4
    assert set(d.limits) >= {"step_limit", "max_replicas"}
    assert d.reason is Reason.STEP_LIMITED


# --- case 03: idle TTFT NaN must not block scale-down ----------------------------------


def test_case_03_idle_scales_down_to_min_after_window(policy):
    """Case 03: an idle TTFT (NaN at zero request rate) is valid: min after the window."""
    idle = obs(4, ok(Q, 0, pods=4), ok(KV, 0.0, pods=4), idle_ttft())
    state = None
    replicas = 4
    history = []
    for i in range(12):  # 0..330 s, one cycle every 30 s
        o = obs(replicas, ok(Q, 0, pods=replicas), ok(KV, 0.0, pods=replicas), idle_ttft())
        d = decide(policy, o if i else idle, state, i * 30.0)
        state = d.state
        if d.desired_replicas != replicas:
            state = record_write(
                state, from_replicas=replicas, to_replicas=d.desired_replicas, now=i * 30.0
            )
        history.append((i * 30, d.desired_replicas, d.reason))
        replicas = d.desired_replicas
    # Held by the seeded history for the whole 300 s window, then down (1 per 60 s step).
    assert all(r == 4 for t, r, _ in history if t < 300), history
    assert history[10][1] == 3 and history[10][2] is Reason.STEP_LIMITED


def test_case_03_idle_scales_to_min_with_unlimited_step():
    """Case 03: idle, with no step limit, the target goes to min in one step after the window."""
    policy = case_target(
        scale_down={"stabilization_window_seconds": 300, "max_replicas_per_period": 10}
    )
    state = decide(policy, obs(4, *all_good(4, 0, 0.0)), None, 0.0).state
    d = decide(policy, obs(4, *all_good(4, 0, 0.0)), state, 301.0)
    assert d.desired_replicas == 1
    assert d.reason is Reason.AT_MIN


def test_case_03_counter_case_nan_with_traffic_blocks_scale_down():
    """Case 03: a NaN TTFT while requests flow is invalid and blocks the scale-down."""
    policy = case_target(
        scale_down={"stabilization_window_seconds": 300, "max_replicas_per_period": 10}
    )
    state = decide(policy, obs(4, *all_good(4, 0, 0.0)), None, 0.0).state
    nan = obs(4, ok(Q, 0, pods=4), ok(KV, 0.0, pods=4), bad(TTFT, SignalStatus.NAN))
    d = decide(policy, nan, state, 301.0)
    assert d.desired_replicas == 4
    assert d.reason is Reason.SCALE_DOWN_BLOCKED_MISSING_SIGNAL
    assert "ttft_p95 nan" in d.message


# --- case 04: outage, then partial data --------------------------------------------------


def test_case_04_outage_then_partial_coverage_holds_then_window_of_good_samples(policy):
    """Case 04: an outage, then partial data, hold; scale down after a window of good samples."""
    policy = case_target(
        scale_down={"stabilization_window_seconds": 300, "max_replicas_per_period": 10}
    )
    cycles = [obs(9, ok(Q, 90, pods=9), ok(KV, 9 * 0.8, pods=9), ok(TTFT, 2.0))]
    outage = obs(9, *(bad(n, SignalStatus.TRANSPORT) for n in (Q, KV, TTFT)))
    timeout = obs(9, *(bad(n, SignalStatus.TIMEOUT) for n in (Q, KV, TTFT)))
    cycles += [outage, outage, outage, timeout, timeout, timeout]
    partial = obs(9, ok(Q, 0, pods=1, missing=8), ok(KV, 0.0, pods=1, missing=8), idle_ttft())
    cycles.append(partial)
    good_idle = obs(9, *all_good(9, 0, 0.0))
    cycles += [good_idle] * 12
    ds = run(policy, cycles)
    assert [d.desired_replicas for d in ds[:7]] == [9] * 7
    assert all(d.reason is Reason.NO_VALID_SIGNALS for d in ds[1:7])
    assert ds[7].desired_replicas == 9
    assert ds[7].reason is Reason.SCALE_DOWN_BLOCKED_MISSING_SIGNAL
    # Full coverage is back at t=240 s (index 8); holds are in the history, so the first
    # scale-down comes a whole 300 s window after the last hold (t=210 s) -> t=510 s.
    first_down = next(i for i, d in enumerate(ds) if d.desired_replicas < 9)
    assert first_down * 30 == 510
    assert ds[first_down].desired_replicas == 1


# --- case 05: one signal missing means no scale-down -----------------------------------


def test_case_05_timeout_on_ttft_blocks_scale_down(policy):
    """Case 05: one signal unavailable (TTFT timeout) means no scale-down."""
    state = decide(policy, obs(5, *all_good(5, 0)), None, -400.0).state
    o = obs(5, ok(Q, 0, pods=5), ok(KV, 0.5, pods=5), bad(TTFT, SignalStatus.QUERY_ERROR))
    d = decide(policy, o, state, 0.0)
    assert d.desired_replicas == 5
    assert d.reason is Reason.SCALE_DOWN_BLOCKED_MISSING_SIGNAL
    assert next(e for e in d.signals if e.name is TTFT).valid is False


def test_case_05_scale_up_uses_the_valid_signals(policy):
    """Case 05: with one signal unavailable, scale-up still uses the valid signals."""
    o = obs(5, ok(Q, 80, pods=5), ok(KV, 0.5, pods=5), bad(TTFT, SignalStatus.QUERY_ERROR))
    d = decide(policy, o, None, 0.0)
    assert d.desired_replicas == 8
    assert d.reason is Reason.SCALE_UP and d.driving_signal is Q


# --- case 07: KV gauge renamed -> absent ------------------------------------------------


def test_case_07_absent_kv_blocks_scale_down_allows_scale_up(policy):
    """Case 07: an absent KV-cache signal blocks scale-down and allows scale-up on the others."""
    state = decide(policy, obs(4, *all_good(4, 0)), None, -400.0).state
    low = obs(4, ok(Q, 6, pods=4), bad(KV, SignalStatus.ABSENT), idle_ttft())
    d = decide(policy, low, state, 0.0)
    assert d.desired_replicas == 4 and d.reason is Reason.SCALE_DOWN_BLOCKED_MISSING_SIGNAL
    high = obs(4, ok(Q, 60, pods=4), bad(KV, SignalStatus.ABSENT), idle_ttft())
    d = decide(policy, high, state, 30.0)
    assert d.desired_replicas == 6 and d.reason is Reason.SCALE_UP


# --- case 10: starting replicas never cause a cascade ------------------------------------


def test_case_10_starting_pods_count_as_capacity_asked_for(policy):
    """Case 10: demand is compared with the replicas asked for, starting ones included."""
    policy = case_target(model_load_timeout_seconds=600)
    d0 = decide(policy, obs(2, ok(Q, 40, pods=2), ok(KV, 0.6, pods=2), idle_ttft()), None, 0.0)
    assert d0.desired_replicas == 4
    state = record_write(d0.state, from_replicas=2, to_replicas=4, now=0.0)
    o = obs(4, ok(Q, 44, pods=2), ok(KV, 0.6, pods=2), idle_ttft(), ready=2, starting=2)
    d1 = decide(policy, o, state, 30.0)
    assert d1.desired_replicas in (4, 5)
    assert d1.desired_replicas == 4  # 44 / (10 x 4) = 1.1 is inside the band
    assert d1.reason is Reason.WAITING_FOR_STARTING
    # Ten more cycles of the same busy ready pods never cascade.
    for i in range(10):
        d1 = decide(policy, o, d1.state, 60.0 + 30 * i)
        assert d1.desired_replicas == 4


def test_case_10_more_demand_than_asked_for_still_scales_up():
    """Case 10: demand above the replicas asked for still scales up while replicas are starting."""
    policy = case_target()
    o = obs(4, ok(Q, 60, pods=2), ok(KV, 0.6, pods=2), idle_ttft(), ready=2, starting=2)
    d = decide(policy, o, None, 0.0)
    assert d.desired_replicas == 6  # ceil(60 / 10), never 4 x 30 / 10 = 12


def test_no_scale_down_while_replicas_start(policy):
    o = obs(4, ok(Q, 2, pods=2), ok(KV, 0.2, pods=2), idle_ttft(), ready=2, starting=2)
    state = TargetState.seeded(4, -1000.0)
    d = decide(policy, o, state, 0.0)
    assert d.desired_replicas == 4 and d.reason is Reason.WAITING_FOR_STARTING


def test_ttft_doubles_at_most_per_decision():
    policy = case_target(
        signals={"queue_depth": {"enabled": False}, "kv_cache_usage": {"enabled": False}},
        scale_up={"stabilization_window_seconds": 0, "max_replicas_per_period": 100},
    )
    d = decide(policy, obs(3, ok(TTFT, 40.0)), None, 0.0)
    assert d.desired_replicas == 6  # ratio 20 is capped at 2: ceil(2 x 3)
    assert d.signals[0].ratio == 20.0


def test_ttft_asks_for_nothing_more_while_replicas_start():
    policy = case_target(
        signals={"queue_depth": {"enabled": False}, "kv_cache_usage": {"enabled": False}}
    )
    o = obs(4, ok(TTFT, 6.0), ready=2, starting=2)
    d = decide(policy, o, None, 0.0)
    assert d.desired_replicas == 4  # TTFT lags until the 2 starting replicas serve
    assert d.reason is Reason.WAITING_FOR_STARTING
    o = obs(4, ok(TTFT, 6.0), ready=4, starting=0)
    d = decide(policy, o, d.state, 120.0)
    assert d.desired_replicas == 8  # two rate windows later: ceil(min(3.0, 2) x 4)


def test_ttft_holds_for_one_rate_window_after_replicas_become_ready():
    # The TTFT quantile over rate(...[W]) still counts requests that queued before the new
    # replicas served: for 2 W after the last cycle that saw replicas starting it may not ask
    # for more than the replicas asked for (the queue and KV cache still may).
    policy = case_target(
        signals={"queue_depth": {"enabled": False}, "kv_cache_usage": {"enabled": False}}
    )
    d = decide(policy, obs(4, ok(TTFT, 6.0), ready=2, starting=2), None, 0.0)
    assert d.state.last_starting_at == 0.0
    ready = obs(4, ok(TTFT, 6.0), ready=4, starting=0)
    held = decide(policy, ready, d.state, 105.0)
    assert held.desired_replicas == 4
    # nothing is starting now: the hold is the rate window's, and says so
    assert held.reason is Reason.WAITING_FOR_TTFT_WINDOW
    assert held.message == (
        "ttft_p95 6 s is over a 60 s rate window that may still hold requests queued before "
        "the replicas that were starting became ready; TTFT asks for more only 120 s after "
        "replicas were last starting; holding 4"
    )
    assert held.signals[0].ratio == 3.0  # the reading is reported unchanged
    assert decide(policy, ready, d.state, 120.0).desired_replicas == 8
    # a longer rate window holds longer
    assert decide(policy, ready, d.state, 165.0, ttft_window_seconds=90.0).desired_replicas == 4
    assert decide(policy, ready, d.state, 180.0, ttft_window_seconds=90.0).desired_replicas == 8
    # a fresh controller (no state) has seen nothing starting: TTFT acts at once
    assert decide(policy, ready, None, 45.0).desired_replicas == 8


def test_queue_still_scales_up_while_ttft_settles():
    policy = case_target()
    d = decide(
        policy,
        obs(4, ok(Q, 20, pods=2), ok(KV, 1.0, pods=2), ok(TTFT, 6.0), ready=2, starting=2),
        None,
        0.0,
    )
    o = obs(4, ok(Q, 80, pods=4), ok(KV, 2.0, pods=4), ok(TTFT, 6.0))
    d = decide(policy, o, d.state, 30.0)
    assert d.desired_replicas == 8  # queue: ceil(80 / 10); TTFT alone would hold 4
    assert d.driving_signal is Q


def test_ttft_settle_time_survives_a_clock_jump_back():
    policy = case_target(
        signals={"queue_depth": {"enabled": False}, "kv_cache_usage": {"enabled": False}}
    )
    d = decide(policy, obs(4, ok(TTFT, 6.0), ready=2, starting=2), None, 5000.0)
    ready = obs(4, ok(TTFT, 6.0), ready=4, starting=0)
    # the clock went back an hour: the settle time is moved to now, not held for an hour
    d = decide(policy, ready, d.state, 1400.0)
    assert d.desired_replicas == 4 and d.state.last_starting_at == 1400.0
    assert decide(policy, ready, d.state, 1520.0).desired_replicas == 8


# --- case 11: stale series of deleted pods -----------------------------------------------


def test_case_11_after_scale_down_waits_for_drain(policy):
    """Case 11: after a scale-down, no further scale-down while removed pods are still draining."""
    # The source dropped pod-c's series; two ready pods with 0 and 1 waiting, pod-c terminating.
    state = TargetState.seeded(2, -1000.0)
    o = obs(2, ok(Q, 1, pods=2), ok(KV, 0.1, pods=2), idle_ttft(), terminating=1)
    d = decide(policy, o, state, 0.0)
    assert d.desired_replicas == 2
    assert d.reason is Reason.WAITING_FOR_DRAIN


def test_a_drain_hold_keeps_the_signals_ask_in_the_window_not_the_held_replicas(policy):
    """A hold that waits for a draining pod delays the scale-down, but the stabilization
    window keeps what the signals asked for: once the pod is gone the next step follows the
    step limit, not a window of held replicas."""
    state = TargetState.seeded(6, -1000.0)
    quiet = (ok(Q, 0, pods=6), ok(KV, 0.6, pods=6), idle_ttft())
    d = decide(policy, obs(6, *quiet, terminating=1), state, 0.0)
    assert (d.desired_replicas, d.reason) == (6, Reason.WAITING_FOR_DRAIN)
    assert d.recommended_replicas == 6
    assert d.state.recommendations[-1].replicas == 1  # kv: ceil(0.6 / 0.8); queue 0
    d = decide(policy, obs(6, *quiet), d.state, 15.0)
    assert (d.desired_replicas, d.reason) == (5, Reason.STEP_LIMITED)


def test_a_ttft_settling_hold_keeps_the_other_signals_ask_in_the_window():
    """While TTFT's window still holds the queue the new replicas drained, its hold at the
    current replicas is recorded as what the other signals ask for; a hold for an invalid
    signal is still recorded as the current replicas."""
    policy = case_target()
    d = decide(policy, obs(8, ok(Q, 20, pods=4), ok(KV, 2.0, pods=4), ok(TTFT, 6.0),
                           ready=4, starting=4), None, 0.0)  # fmt: skip
    drained = obs(8, ok(Q, 0, pods=8), ok(KV, 1.6, pods=8), ok(TTFT, 6.0))
    held = decide(policy, drained, d.state, 60.0)
    assert (held.desired_replicas, held.reason) == (8, Reason.WAITING_FOR_TTFT_WINDOW)
    assert held.state.recommendations[-1].replicas == 2  # kv: ceil(1.6 / 0.8)
    outage = obs(8, bad(Q, SignalStatus.TRANSPORT), ok(KV, 1.6, pods=8), ok(TTFT, 0.5))
    blocked = decide(policy, outage, held.state, 75.0)
    assert blocked.reason is Reason.SCALE_DOWN_BLOCKED_MISSING_SIGNAL
    assert blocked.state.recommendations[-1].replicas == 8


# --- case 12: one pod's failed scrape ------------------------------------------------------


def test_case_12_missing_pod_counts_as_zero_for_scale_up(policy):
    """Case 12: a ready pod without series counts as zero load for a scale-up."""
    o = obs(4, ok(Q, 83, pods=3, missing=1), ok(KV, 1.5, pods=3, missing=1), idle_ttft())
    d = decide(policy, o, None, 0.0)
    assert d.recommended_replicas == 9
    assert d.desired_replicas == 8  # +100 % of 4 in one period
    assert d.reason is Reason.STEP_LIMITED


def test_case_12_missing_pod_blocks_scale_down(policy):
    """Case 12: a ready pod without series blocks a scale-down (partial coverage)."""
    state = TargetState.seeded(4, -1000.0)
    o = obs(4, ok(Q, 3, pods=3, missing=1), ok(KV, 0.3, pods=3, missing=1), idle_ttft())
    d = decide(policy, o, state, 0.0)
    assert d.desired_replicas == 4
    assert d.reason is Reason.SCALE_DOWN_BLOCKED_MISSING_SIGNAL


# --- case 15: tolerance boundaries ----------------------------------------------------------


def _queue_only(**kw):
    return case_target(
        max_replicas=20,
        signals={
            "queue_depth": {"target_per_replica": 4},
            "kv_cache_usage": {"enabled": False},
            "ttft_p95": {"enabled": False},
        },
        scale_down={"stabilization_window_seconds": 0, "max_replicas_per_period": 10},
        **kw,
    )


@pytest.mark.parametrize(
    ("tolerance", "waiting", "expected", "reason"),
    [
        pytest.param(
            {"scale_up": 0.1, "scale_down": 0.1}, 41, 10, Reason.WITHIN_TOLERANCE,
            id="1.025 within 0.1 holds",
        ),
        pytest.param(
            {"scale_up": 0.1, "scale_down": 0.1}, 44, 10, Reason.WITHIN_TOLERANCE,
            id="exactly 1.10 holds",
        ),
        pytest.param(
            {"scale_up": 0.1, "scale_down": 0.1}, 45, 12, Reason.SCALE_UP,
            id="1.125 above 1.10 scales up",
        ),
        pytest.param(
            {"scale_up": 0.0, "scale_down": 0.1}, 41, 11, Reason.SCALE_UP,
            id="up tolerance 0: 1.025 scales up",
        ),
        pytest.param(
            {"scale_up": 0.0, "scale_down": 0.1}, 36, 10, Reason.WITHIN_TOLERANCE,
            id="exactly 0.90 holds",
        ),
        pytest.param(
            {"scale_up": 0.0, "scale_down": 0.1}, 35, 9, Reason.SCALE_DOWN,
            id="0.875 below 0.90 scales down",
        ),
    ],
)  # fmt: skip
def test_case_15_tolerance_boundaries(tolerance, waiting, expected, reason):
    """Case 15: separate strict tolerance bands: exactly 1.10 or 0.90 holds, beyond moves."""
    policy = _queue_only(tolerance=tolerance)
    d = decide(policy, obs(10, ok(Q, waiting, pods=10)), TargetState.seeded(10, -10.0), 0.0)
    assert (d.desired_replicas, d.reason) == (expected, reason)


# --- case 16: another writer changes spec.replicas ------------------------------------------


def test_case_16_outside_write_is_noticed_and_reapplied_at_most_once_per_cooldown(policy):
    """Case 16: an outside write is noticed and re-applied at most once per cooldown."""
    busy = (ok(Q, 60, pods=2), ok(KV, 1.0, pods=2), idle_ttft())
    state = record_write(TargetState.seeded(6, -100.0), from_replicas=2, to_replicas=6, now=0.0)
    state = replace(state, scale_events=())
    d1 = decide(policy, obs(2, *busy), state, 30.0)
    assert d1.outside_write is True
    assert d1.desired_replicas == 6
    state = record_write(d1.state, from_replicas=2, to_replicas=6, now=30.0)
    state = replace(state, scale_events=())
    d2 = decide(policy, obs(2, *busy), state, 60.0)
    assert d2.desired_replicas == 2
    assert d2.reason is Reason.OUTSIDE_WRITER


def test_never_changes_when_desired_equals_current(policy):
    d = decide(policy, obs(3, ok(Q, 30, pods=3), ok(KV, 2.4, pods=3), ok(TTFT, 2.0)), None, 0.0)
    assert d.desired_replicas == d.current_replicas == 3
    assert d.reason is Reason.WITHIN_TOLERANCE


# --- general rules -----------------------------------------------------------------------


def test_restart_never_scales_down_at_once(policy):
    d = decide(policy, obs(6, *all_good(6, 0, 0.0)), None, 0.0)
    assert d.desired_replicas == 6 and d.reason is Reason.STABILIZED


def test_current_below_min_is_raised_to_min():
    policy = case_target(min_replicas=3)
    d = decide(policy, obs(1, *all_good(1, 5, 0.5)), None, 0.0)
    assert d.desired_replicas == 3 and d.reason is Reason.AT_MIN


def test_current_above_max_is_lowered_to_max():
    policy = case_target(max_replicas=4)
    d = decide(policy, obs(7, *all_good(7, 70, 0.8)), None, 0.0)
    assert d.desired_replicas == 4 and d.reason is Reason.AT_MAX


def test_scale_up_stabilization_window_takes_lowest_recommendation():
    policy = case_target(
        scale_up={"stabilization_window_seconds": 60, "max_replicas_per_period": 10}
    )
    d0 = decide(policy, obs(2, *all_good(2, 20, 0.4)), None, 0.0)
    d1 = decide(policy, obs(2, *all_good(2, 60, 0.4)), d0.state, 30.0)
    assert d1.desired_replicas == 2 and d1.reason is Reason.STABILIZED
    d2 = decide(policy, obs(2, *all_good(2, 60, 0.4)), d1.state, 61.0)
    assert d2.desired_replicas == 6 and d2.reason is Reason.SCALE_UP


def test_step_limit_counts_earlier_scale_ups_in_the_period():
    policy = case_target(
        max_replicas=50,
        scale_up={
            "stabilization_window_seconds": 0,
            "max_replicas_per_period": 2,
            "period_seconds": 60,
        },
    )
    ds = run(
        policy,
        [
            obs(2, *all_good(2, 200, 0.4)),
            obs(4, *all_good(4, 200, 0.4)),
            obs(4, *all_good(4, 200, 0.4)),
        ],
        interval=30.0,
    )
    assert [d.desired_replicas for d in ds] == [4, 4, 6]
    assert [d.reason for d in ds] == [Reason.STEP_LIMITED, Reason.STEP_LIMITED, Reason.STEP_LIMITED]


def test_step_limit_period_starts_before_writes_in_both_directions():
    """HPA's periodStartReplicas (horizontal.go): current - added + removed over every write in
    the period, whichever direction the limit is for."""
    policy = case_target(
        max_replicas=50,
        scale_up={
            "stabilization_window_seconds": 0,
            "max_replicas_per_period": 2,
            "max_percent_per_period": 0,
            "period_seconds": 60,
        },
        scale_down={
            "stabilization_window_seconds": 0,
            "max_replicas_per_period": 1,
            "period_seconds": 60,
        },
    )
    # 6 -> 5 (the queue asks for 5), then 30 s later the queue asks for 20: the period started
    # at 6, so the scale-up may reach 6 + 2 = 8 (counting only scale-ups it stopped at 7)
    ds = run(policy, [obs(6, *all_good(6, 50, 0.1)), obs(5, *all_good(5, 200, 0.1))])
    assert [(d.desired_replicas, d.reason) for d in ds] == [
        (5, Reason.SCALE_DOWN),
        (8, Reason.STEP_LIMITED),
    ]
    # 4 -> 6 (step-limited from 4), then 30 s later, all 6 ready, the queue asks for 1: the
    # period started at 4, so the scale-down may reach 4 - 1 = 3 (counting only scale-downs
    # it stopped at 5)
    ds = run(policy, [obs(4, *all_good(4, 200, 0.1)), obs(6, *all_good(6, 10, 0.1))])
    assert [(d.desired_replicas, d.reason) for d in ds] == [
        (6, Reason.STEP_LIMITED),
        (3, Reason.STEP_LIMITED),
    ]


def test_scale_down_reason_and_message_name_the_driving_signal():
    policy = case_target(
        scale_down={"stabilization_window_seconds": 0, "max_replicas_per_period": 10}
    )
    d = decide(policy, obs(6, ok(Q, 20, pods=6), ok(KV, 6 * 0.2, pods=6), idle_ttft()), None, 0.0)
    assert d.desired_replicas == 2 and d.reason is Reason.SCALE_DOWN
    assert d.driving_signal is Q
    assert "queue_depth" in d.message and "6 -> 2" in d.message
