"""The replay on hand-built series (no Prometheus): model load, step limits, totals, risk."""

from __future__ import annotations

import pytest

from scaler.backtest.replay import fill_gaps, replay
from scaler.config.policy import TargetPolicy
from scaler.config.vocabulary import SignalName
from scaler.core.reasons import Reason
from scaler.core.signals import SignalReading, SignalStatus

STEP = 10.0


def _policy(**over: object) -> TargetPolicy:
    doc: dict[str, object] = {
        "workload": {"apiVersion": "apps/v1", "kind": "Deployment", "namespace": "llm",
                     "name": "vllm"},
        "min_replicas": 1,
        "max_replicas": 10,
        "signals": {"queue_depth": {"target_per_replica": 10},
                    "kv_cache_usage": {"enabled": False},
                    "ttft_p95": {"target_seconds": 2.0}},
        "scale_up": {"stabilization_window_seconds": 0, "max_replicas_per_period": 2,
                     "max_percent_per_period": 0, "period_seconds": 30},
        "scale_down": {"stabilization_window_seconds": 60, "max_replicas_per_period": 1,
                       "max_percent_per_period": 0, "period_seconds": 30},
    }  # fmt: skip
    doc.update(over)
    return TargetPolicy.model_validate(doc)


def _readings(waiting: float, ttft: float = 1.0) -> dict[SignalName, SignalReading]:
    return {
        SignalName.QUEUE_DEPTH: SignalReading(SignalName.QUEUE_DEPTH, SignalStatus.OK, waiting),
        SignalName.TTFT_P95: SignalReading(SignalName.TTFT_P95, SignalStatus.OK, ttft),
    }


def test_fill_gaps() -> None:
    assert fill_gaps([None, 2.0, None, 3.0, None]) == ([2, 2, 2, 3, 3], 3)
    with pytest.raises(ValueError):
        fill_gaps([None, None])


def test_scale_up_is_step_limited_and_replicas_become_ready_after_the_load() -> None:
    n = 12
    times = [1000.0 + i * STEP for i in range(n)]
    # 55 waiting requests for the whole window: demand is ceil(55 / 10) = 6 replicas.
    res = replay(
        _policy(),
        times,
        [_readings(55.0)] * n,
        [2.0] * n,
        [2.0] * n,
        model_load_seconds=25.0,
        ttft_window_seconds=60.0,
    )
    policy = [s.policy_replicas for s in res.steps]
    ready = [s.policy_ready for s in res.steps]
    # 2 -> 4 at once (2 per 30 s period), 4 -> 6 once the period has passed.
    assert policy[:4] == [4, 4, 4, 6]
    assert res.steps[0].reason is Reason.STEP_LIMITED
    # The first two added at t=1000 are ready at 1025, i.e. from step 3 (t=1030).
    assert ready[:4] == [2, 2, 2, 4]
    assert ready[6] == 6  # added at 1030, ready at 1055 -> step 6 (t=1060)
    s = res.summary
    assert [(e.from_replicas, e.to_replicas) for e in s.policy_events] == [(2, 4), (4, 6)]
    assert s.actual_events == ()
    assert s.actual_replica_hours == pytest.approx(2 * (n - 1) * STEP / 3600)
    expected = sum(policy[i] * STEP for i in range(n - 1)) / 3600
    assert s.policy_replica_hours == pytest.approx(expected)
    assert (s.policy_peak, s.actual_peak) == (6, 2)
    assert s.above_actual_steps == n and s.below_actual_steps == 0


def test_scale_down_waits_for_the_window_and_risk_counts_slow_steps_below_actual() -> None:
    n = 32
    times = [i * STEP for i in range(n)]
    # Quiet queue, but TTFT above its 2 s target from step 10 (a slow model, say). After its
    # first TTFT scale-up the policy waits for the model load and two TTFT rate windows
    # (2 x 60 s) before TTFT may ask again, hence 22 slow steps.
    readings = [_readings(0.0, ttft=1.0 if i < 10 else 3.0) for i in range(n)]
    # The actual fleet stays at 4 (someone pinned it).
    res = replay(
        _policy(),
        times,
        readings,
        [4.0] * n,
        [4.0] * n,
        model_load_seconds=60,
        ttft_window_seconds=60.0,
    )
    policy = [s.policy_replicas for s in res.steps]
    assert policy[0] == 4
    assert res.steps[0].reason is Reason.STABILIZED
    assert min(policy) < 4
    s = res.summary
    assert s.ttft_above_target_steps == n - 10
    assert min(policy[:10]) < 4  # scaled down while quiet
    slow_below = sum(1 for i in range(10, n) if policy[i] < 4)
    slow_above = sum(1 for i in range(10, n) if policy[i] > 4)
    assert s.risk_steps == slow_below > 0
    # TTFT above target asks for more, so the policy ends above the pinned 4.
    assert s.relief_steps == slow_above > 0
    assert s.below_actual_steps == sum(1 for p in policy if p < 4)


def test_start_uses_actual_ready_and_missing_actual_is_carried() -> None:
    times = [0.0, 10.0, 20.0]
    res = replay(
        _policy(signals={"queue_depth": {"target_per_replica": 10}, "ttft_p95": {"enabled": False},
                         "kv_cache_usage": {"enabled": False}}),
        times,
        [{SignalName.QUEUE_DEPTH: SignalReading(SignalName.QUEUE_DEPTH, SignalStatus.OK, 30.0)}]
        * 3,
        [3.0, None, 3.0],
        [1.0, None, None],
        model_load_seconds=15,
        ttft_window_seconds=60.0,
    )  # fmt: skip
    assert [s.policy_ready for s in res.steps] == [1, 1, 3]
    # a gap stays a gap (None); ready unknown where spec is known: spec stands in for it
    assert [s.actual_replicas for s in res.steps] == [3, None, 3]
    assert [s.actual_ready for s in res.steps] == [1, None, 3]
    s = res.summary
    assert s.actual_missing_steps == 1
    assert (s.covered_seconds, s.total_seconds) == (10.0, 20.0)
    assert s.risk_steps is None and s.ttft_above_target_steps is None


def test_lengths_must_match() -> None:
    with pytest.raises(ValueError):
        replay(_policy(), [0.0], [], [1.0], [1.0], model_load_seconds=1, ttft_window_seconds=60.0)


def test_gap_is_not_made_up_nor_counted_in_replica_hours() -> None:
    """Steps before the workload existed have no actual replicas: they stay None and are left
    out of both totals, so the comparison covers the time with history only."""
    times = [i * 60.0 for i in range(10)]
    quiet = {"queue_depth": {"target_per_replica": 10}, "ttft_p95": {"enabled": False},
             "kv_cache_usage": {"enabled": False}}  # fmt: skip
    res = replay(
        _policy(signals=quiet, min_replicas=1),
        times,
        [{SignalName.QUEUE_DEPTH: SignalReading(SignalName.QUEUE_DEPTH, SignalStatus.OK, 40.0)}]
        * 10,
        [None] * 6 + [4.0, 4.0, 4.0, 4.0],
        [None] * 6 + [4.0, 4.0, 4.0, 4.0],
        model_load_seconds=0,
        ttft_window_seconds=60.0,
    )
    assert [st.actual_replicas for st in res.steps] == [None] * 6 + [4] * 4
    s = res.summary
    assert s.actual_missing_steps == 6
    # 3 covered intervals of 60 s (the last step ends the range) at 4 replicas
    assert s.covered_seconds == 180.0 and s.total_seconds == 540.0
    assert s.actual_replica_hours == pytest.approx(4 * 180 / 3600)
    # the policy, 4 replicas for 40 waiting, is left out of the gap as well: equal to actual
    assert [st.policy_replicas for st in res.steps][6:] == [4] * 4
    assert s.policy_replica_hours == pytest.approx(s.actual_replica_hours)
    assert s.actual_peak == 4 and s.actual_events == ()
    assert s.below_actual_steps == s.above_actual_steps == 0


def test_text_report_shows_a_gap_and_the_covered_time() -> None:
    from scaler.backtest.history import ReplicaHistory, ReplicaSource
    from scaler.backtest.report import TargetBacktest, format_text

    spec: list[float | None] = [None] * 3 + [4.0] * 3 + [None] * 2 + [2.0] * 2
    p = _policy()
    res = replay(
        p,
        [i * 60.0 for i in range(10)],
        [_readings(40.0)] * 10,
        spec,
        spec,
        model_load_seconds=0,
        ttft_window_seconds=60.0,
    )
    hist = ReplicaHistory(ReplicaSource.KUBE_STATE_METRICS, spec, spec, None, ())
    lines = format_text([TargetBacktest(p, hist, res)], step_seconds=60).splitlines()
    gaps = [ln.split()[:2] for ln in lines if " gap " in ln]
    assert gaps == [["00:00:00", "gap"], ["00:06:00", "gap"]]
    # 4 covered minutes of 9: 4 replicas for 3 min, 2 for 1 min; the policy 4 throughout
    assert "  covered        4.0 min of 9.0 min (44%) had actual replicas" in "\n".join(lines)
    assert "  replica-hours  actual 0.233, policy 0.267 (+14% vs actual)" in lines


def test_text_report_gives_the_policys_message_at_every_change_of_its_replicas() -> None:
    """A scale-down clamped to min_replicas has reason at_min; its sentence was left out,
    while the shadow's line of the same step was there."""
    from scaler.backtest.history import ReplicaHistory, ReplicaSource
    from scaler.backtest.report import TargetBacktest, format_text

    spec: list[float | None] = [3.0] * 4
    p = _policy(min_replicas=2,
                signals={"queue_depth": {"target_per_replica": 10},
                         "kv_cache_usage": {"enabled": False}, "ttft_p95": {"enabled": False}},
                scale_down={"stabilization_window_seconds": 0, "max_replicas_per_period": 1,
                            "max_percent_per_period": 0, "period_seconds": 30})  # fmt: skip
    times = [i * 60.0 for i in range(4)]
    res = replay(p, times, [_readings(0.0)] * 4, spec, spec, model_load_seconds=0,
                 ttft_window_seconds=60.0)  # fmt: skip
    shadow = replay(p, times, [_readings(0.0)] * 4, spec, spec, model_load_seconds=0,
                    ttft_window_seconds=60.0)  # fmt: skip
    assert [(st.policy_replicas, st.reason) for st in res.steps][:1] == [(2, "at_min")]
    hist = ReplicaHistory(ReplicaSource.KUBE_STATE_METRICS, spec, spec, None, ())
    lines = format_text([TargetBacktest(p, hist, res, shadow)], step_seconds=60).splitlines()
    row = next(i for i, ln in enumerate(lines) if ln.startswith("  00:00:00"))
    assert lines[row + 1] == f"            {res.steps[0].message}"
    assert lines[row + 1].startswith("            scale down 3 -> 2: signals ask for 0")
    assert lines[row + 2] == f"            shadow: {shadow.steps[0].message}"


def test_counts_of_one_step_read_in_the_singular() -> None:
    from scaler.backtest.report import steps_text

    assert [steps_text(n) for n in (0, 1, 2, 1441)] == [
        "0 steps",
        "1 step",
        "2 steps",
        "1,441 steps",
    ]
