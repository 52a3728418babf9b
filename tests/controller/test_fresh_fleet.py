"""A healthy start prints no error: a fleet whose pods became ready less than a rate() window
ago has no TTFT rate yet, which is what it is (``warming_up``), not a missing metric.

Once a pod has been ready for a whole window, a TTFT signal without series is ``absent``
again, logged as an error, and fails the start-up check: real configuration problems stay
loud. Through the real loop, the Kubernetes stand-in (Ready times from its pods' conditions)
and the fake Prometheus over HTTP.
"""

from __future__ import annotations

import pytest

from scaler.core.signals import SignalStatus
from scaler.sources.prometheus import check_configured_queries
from tests.support.controller_harness import KEY, HarnessFactory, captured_logs
from tests.support.fakeprom import idle_without_ttft, pods

TWO = pods(2)
# no TTFT series: rate() over the 60 s window has fewer than two samples of these pods
IDLE = idle_without_ttft(TWO)


@pytest.mark.parametrize(
    ("ready_ages", "status", "loud"),
    [
        pytest.param((2.0, 5.0), SignalStatus.WARMING_UP, False, id="fresh-fleet"),
        pytest.param((5.0, 600.0), SignalStatus.ABSENT, True, id="one-pod-ready-a-window"),
        pytest.param((600.0, 900.0), SignalStatus.ABSENT, True, id="long-ready-fleet"),
    ],
)
async def test_ttft_without_series_is_warming_up_only_while_every_pod_is_younger_than_the_window(
    make_harness: HarnessFactory,
    ready_ages: tuple[float, float],
    status: SignalStatus,
    loud: bool,
) -> None:
    h = await make_harness(replicas=2, answers=IDLE)
    for name, age in zip(TWO, ready_ages, strict=True):
        h.add_ready([name], age=age)
    with captured_logs() as logs:
        report = await h.cycle()
    assert report.decision is not None
    ttft = next(e for e in report.decision.signals if e.name == "ttft_p95")
    assert ttft.status is status
    problems = [e for e in logs if e["log_level"] in ("error", "warning")]
    if loud:
        assert [(e["event"], e.get("reason")) for e in problems] == [
            ("signal absent while the target's pods are scraped", None),
            ("signal_invalid", None),
            ("decision", "scale_down_blocked_missing_signal"),  # idle at 2, min 1
        ]
        assert h.query_errors("ttft_p95", "absent") == 1
    else:
        assert problems == []  # the blocked scale-down is logged as info
        assert ttft.detail == (
            "no TTFT rate yet: the pods have been ready for 5s, less than the 60s rate() window"
        )
        assert [e["event"] for e in logs if e["event"] == "signal_warming_up"] == [
            "signal_warming_up"
        ]
        assert h.query_errors("ttft_p95", "warming_up") == 0
    assert h.signal_valid("ttft_p95") == 0  # not usable either way
    assert report.decision.desired_replicas == 2  # an idle fleet at two holds

    # the start-up check (recommend) fails on the missing metric only
    snap = await h.actuator.read(h.policy.targets[0].workload)
    found = await check_configured_queries(h.source, h.policy.targets, {KEY: snap})
    assert [(p.signal, p.status) for p in found] == ([("ttft_p95", status)] if loud else [])


async def test_the_same_fleet_is_loud_once_a_window_has_passed(
    make_harness: HarnessFactory,
) -> None:
    """Warming up clears by itself: a window later, still no series is a real problem."""
    h = await make_harness(replicas=2, answers=IDLE)
    h.add_ready(TWO, age=1.0)
    first = await h.cycle()
    assert first.decision is not None
    assert {e.name: e.status for e in first.decision.signals}["ttft_p95"] is SignalStatus.WARMING_UP
    h.clock.now += 60.0
    later = await h.cycle()
    assert later.decision is not None
    assert {e.name: e.status for e in later.decision.signals}["ttft_p95"] is SignalStatus.ABSENT
