"""Reasons and messages that tell the truth: every hold and change says what happened.

A hold at the current replicas is ``within_tolerance`` only when the deciding signal is inside
its band; outside it, while the proportional rule still gives the current replicas, it is
``demand_covered`` with the arithmetic in the message.
"""

from __future__ import annotations

import pytest

from scaler.core.decide import Decision
from scaler.core.observation import Observation
from scaler.core.reasons import Reason
from scaler.core.signals import SignalReading, SignalStatus
from scaler.core.state import TargetState
from tests.support.policies import case_target

from .builders import KV, TTFT, Q, bad, decide, idle_ttft, obs, ok


def settled(o: Observation) -> Decision:
    """The default case policy's decision on ``o``, with a history of the current replicas
    long past every window (so no window holds anything)."""
    return decide(case_target(), o, TargetState.seeded(o.replicas.current, -1000.0), 0.0)


@pytest.mark.parametrize(
    ("current", "waiting", "reason", "message"),
    [
        pytest.param(
            2, 15, Reason.DEMAND_COVERED,
            "queue_depth 7.5 per replica vs target 10 (ratio 0.75) is below its tolerance band "
            "0.90-1.10, but 15 in all need ceil(15 / 10) = 2 replicas: holding 2",
            id="ratio 0.75 on 2 replicas rounds up to 2",
        ),
        pytest.param(
            4, 31, Reason.DEMAND_COVERED,
            "queue_depth 7.75 per replica vs target 10 (ratio 0.78) is below its tolerance band "
            "0.90-1.10, but 31 in all need ceil(31 / 10) = 4 replicas: holding 4",
            id="ratio 0.78 on 4 replicas rounds up to 4",
        ),
        pytest.param(
            1, 8, Reason.DEMAND_COVERED,
            "queue_depth 8 per replica vs target 10 (ratio 0.80) is below its tolerance band "
            "0.90-1.10, but 8 in all need ceil(8 / 10) = 1 replica: holding 1",
            id="ratio 0.8 on 1 replica rounds up to 1, in the singular",
        ),
        pytest.param(
            2, 19, Reason.WITHIN_TOLERANCE,
            "queue_depth 9.5 vs target 10 (ratio 0.95) is within its tolerance band 0.90-1.10: "
            "holding 2",
            id="ratio 0.95 is within the band",
        ),
    ],
)  # fmt: skip
def test_a_hold_says_whether_the_ratio_is_in_its_band_or_rounds_to_current(
    current: int, waiting: float, reason: Reason, message: str
) -> None:
    """A hold is 'within tolerance' only inside the band; outside it the rounding is shown."""
    d = settled(obs(current, ok(Q, waiting, pods=current), ok(KV, 0.0, pods=current), idle_ttft()))
    assert (d.desired_replicas, d.reason, d.message) == (current, reason, message)


def test_ttft_above_its_band_covered_by_stuck_replicas_is_not_within_tolerance() -> None:
    """TTFT at 1.5x its target from 2 ready replicas asks for 3; 4 are asked for, 2 stuck."""
    d = settled(obs(4, ok(Q, 40, pods=2), ok(KV, 1.6, pods=2), ok(TTFT, 3.0), ready=2, stuck=2))
    assert (d.desired_replicas, d.reason) == (4, Reason.DEMAND_COVERED)
    assert d.message == (
        "ttft_p95 3 s vs target 2 s (ratio 1.50) is above its tolerance band 0.90-1.10, but "
        "asks for ceil(1.50 x 2 ready) = 3 replicas, no more than the 4 asked for (2 of them "
        "stuck): holding 4"
    )


def test_a_hold_names_the_signals_it_left_out() -> None:
    """A hold decided by the usable signals says which ones it could not use."""
    d = settled(obs(2, ok(Q, 19, pods=2), bad(KV, SignalStatus.DUPLICATE_SERIES), idle_ttft()))
    assert d.reason is Reason.WITHIN_TOLERANCE
    assert d.message.endswith("; left out: kv_cache_usage duplicate_series (test duplicate_series)")


def test_no_usable_signal_says_so_even_when_values_were_read() -> None:
    """A NaN was read: the hold says no signal is usable, not that none could be read."""
    d = decide(
        case_target(),
        obs(3, bad(Q, SignalStatus.NAN), bad(KV, SignalStatus.INF), bad(TTFT, SignalStatus.NAN)),
        None,
        0.0,
    )
    assert d.reason is Reason.NO_VALID_SIGNALS
    assert d.message.startswith("no signal is usable, holding 3: queue_depth nan")


def test_a_frozen_signal_blocks_a_scale_down_and_says_why() -> None:
    """Frozen values count as no load for scale-up; the scale-down they allow waits."""
    frozen = SignalReading(
        Q, SignalStatus.FROZEN, 0.0, pods_with_data=1, detail="pod pod-0 frozen: ..."
    )
    d = settled(obs(2, frozen, ok(KV, 0.0, pods=2), idle_ttft()))
    assert (d.desired_replicas, d.reason) == (2, Reason.SCALE_DOWN_BLOCKED_MISSING_SIGNAL)
    assert d.message == (
        "signals ask for 0, but scale-down needs every signal valid: queue_depth frozen "
        "(pod pod-0 frozen: ...)"
    )
    assert d.signals[0].valid  # usable to scale up on the pods that move
