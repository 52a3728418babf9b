"""Inter-token latency (``itl_p95``) as a signal: off by default, a target required, and in the
decision a second latency constraint beside TTFT (the replica count that keeps both within
target), with TTFT's lag rules but without its not-the-load bound."""

from __future__ import annotations

import pytest

from scaler.config.policy import PolicyError, TargetPolicy
from scaler.config.vocabulary import SignalName
from scaler.core.latency import latency_checks, within_targets
from scaler.core.reasons import Reason
from scaler.core.signals import SignalReading, SignalStatus
from scaler.core.state import Recommendation, TargetState
from tests.core.builders import KV, TTFT, Q, decide, obs, ok
from tests.support.policies import case_policy, case_target

ITL = SignalName.ITL_P95


def _policy(**itl: object) -> TargetPolicy:
    signals = {
        "queue_depth": {"target_per_replica": 10},
        "kv_cache_usage": {"target_ratio": 0.8},
        "ttft_p95": {"target_seconds": 2.0},
        "itl_p95": {"enabled": True, "target_seconds": 0.1, **itl},
    }
    return case_target(signals=signals)


def _history(replicas: int) -> TargetState:
    return TargetState(recommendations=(Recommendation(-600.0, replicas),))


def test_itl_is_off_by_default_and_its_target_has_no_default() -> None:
    assert ITL not in case_target().signals.enabled()
    with pytest.raises(PolicyError) as err:
        case_policy(signals={"itl_p95": {"enabled": True}})
    assert (
        "signals.itl_p95.target_seconds: value null (the default): expected a number of seconds "
        "while itl_p95 is enabled"
    ) in str(err.value)
    assert "depends on the model and its GPU" in str(err.value)
    on = _policy()
    assert on.signals.target_of(ITL) == 0.1 and ITL in on.signals.queried()
    assert ITL.unit == "seconds" and ITL.latency and not ITL.per_pod


def test_the_decision_keeps_both_ttft_and_itl_within_target() -> None:
    """TTFT at 1.5x its target asks for ceil(1.5 x 4) = 6, ITL at 1.8x for ceil(1.8 x 4) = 8:
    the fleet that keeps both within target is 8, and the decision says ITL drove it."""
    o = obs(4, ok(Q, 0), ok(KV, 1.0), ok(TTFT, 3.0), ok(ITL, 0.18))
    d = decide(_policy(), o, _history(4), 0.0)
    assert (d.desired_replicas, d.reason, d.driving_signal) == (8, Reason.SCALE_UP, ITL)
    assert d.message == "scale up 4 -> 8 (itl_p95 0.18 vs target 0.1, ratio 1.80)"
    o = obs(4, ok(Q, 0), ok(KV, 1.0), ok(TTFT, 3.6), ok(ITL, 0.12))
    d = decide(_policy(), o, _history(4), 0.0)
    assert (d.desired_replicas, d.driving_signal) == (8, TTFT)  # TTFT's 1.8 wins this time


def test_an_itl_breach_on_a_fleet_that_is_not_busy_is_the_load() -> None:
    """Nothing waits and the KV cache is low: TTFT's breach there is bounded to one replica
    (one pod's bad luck), an ITL breach is not (a larger decode batch streams each token
    slower before any request waits)."""
    o = obs(4, ok(Q, 0), ok(KV, 0.8), ok(ITL, 0.2))
    d = decide(_policy(), o, _history(4), 0.0)
    assert d.desired_replicas == 8 and "more at most" not in d.message


def test_itl_waits_for_starting_replicas_and_its_rate_window_as_ttft_does() -> None:
    """While replicas start, and for two rate windows after, a latency signal asks for no more
    than the replicas asked for: its window still holds the queue they drain."""
    starting = obs(4, ok(Q, 0), ok(KV, 0.8), ok(ITL, 0.2), ready=2, starting=2)
    d = decide(_policy(), starting, _history(4), 0.0)
    assert (d.desired_replicas, d.reason) == (4, Reason.WAITING_FOR_STARTING)
    ready = obs(4, ok(Q, 0), ok(KV, 0.8), ok(ITL, 0.2))
    d = decide(_policy(), ready, d.state, 30.0)
    assert (d.desired_replicas, d.reason) == (4, Reason.WAITING_FOR_TTFT_WINDOW)
    assert d.message.startswith("itl_p95 0.2 s is over a 60 s rate window")
    assert "ITL asks for more only 120 s after replicas were last starting" in d.message
    d = decide(_policy(), ready, d.state, 130.0)
    assert (d.desired_replicas, d.reason) == (8, Reason.SCALE_UP)


def test_an_idle_itl_is_valid_and_allows_a_scale_down() -> None:
    idle = SignalReading(ITL, SignalStatus.IDLE, 0.0)
    o = obs(4, ok(Q, 0), ok(KV, 0.4), SignalReading(TTFT, SignalStatus.IDLE, 0.0), idle)
    d = decide(_policy(), o, _history(4), 0.0)
    assert (d.desired_replicas, d.reason) == (3, Reason.STEP_LIMITED)  # one a minute


def test_the_latency_constraints_seam_lists_every_slo_against_its_target() -> None:
    """What a sizing rule needs to learn only from cycles within every SLO."""
    policy = _policy()
    both_in = obs(4, ok(TTFT, 1.0), ok(ITL, 0.05))
    checks = latency_checks(policy, both_in)
    assert [(c.name, c.ratio) for c in checks] == [(TTFT, 0.5), (ITL, 0.5)]
    assert within_targets(checks) is True
    assert within_targets(latency_checks(policy, obs(4, ok(TTFT, 1.0), ok(ITL, 0.2)))) is False
    saturated_below = SignalReading(ITL, SignalStatus.SATURATED, 0.08)
    assert within_targets(latency_checks(policy, obs(4, ok(TTFT, 1.0), saturated_below))) is None
    missing = latency_checks(policy, obs(4, ok(TTFT, 1.0)))
    assert missing[1].status is SignalStatus.EMPTY and within_targets(missing) is None
    assert within_targets(latency_checks(case_target(), obs(4, ok(TTFT, 1.0)))) is True
