"""Prometheus faults through the real controller: what it does, what it exposes, how it recovers.

Each test runs the real loop (``tests/support/controller_harness.py``) with a policy whose
scale-down window is 0, so that with good data the target would scale down at once: a hold
during the fault is the fault's doing, and the first good cycle afterwards decides the
scale-down (written in the next cycle, once the pods' ranking is read back).
Source-level details of each status are pinned in ``tests/cases/test_prometheus_cases.py``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from scaler.core.reasons import Reason
from scaler.sources.promql import QueryKind
from tests.faults.helpers import (
    QUERY_KINDS,
    SIGNALS,
    names,
    no_window_policy,
    quiet,
    recovery_scales_down,
    serving,
)
from tests.support.controller_harness import NS, T0, Harness, HarnessFactory, captured_logs
from tests.support.fakeprom import R, Reply, kv, per_pod, ttft_answers

PODS = names(4)
LAST_OK = "vllm_scaler_last_successful_query_timestamp_seconds"


async def _refused(h: Harness) -> None:
    await h.prom.stop()


async def _stalled(h: Harness) -> None:
    for kind in QUERY_KINDS:
        h.fake.set(**{kind: Reply(R(), stall=True)})


def _all(reply: Reply) -> Callable[[Harness], Awaitable[None]]:
    async def apply(h: Harness) -> None:
        for kind in QUERY_KINDS:
            h.fake.set(**{kind: reply})

    return apply


ERROR_BODY = {
    "status": "error",
    "errorType": "execution",
    "error": "query processing would load too many samples into memory",
}

# fault name -> (how to inject it, the per-query reason, the per-signal reason)
WHOLE_QUERY_FAULTS: dict[str, tuple[Callable[[Harness], Awaitable[None]], str]] = {
    "connection_refused": (_refused, "transport"),
    "slow_past_the_timeout": (_stalled, "timeout"),
    "http_502_html": (_all(Reply("<html>502 Bad Gateway</html>", status=502)), "http_error"),
    "http_500_empty": (_all(Reply("", status=500)), "http_error"),
    "error_body_422": (_all(Reply(ERROR_BODY, status=422)), "query_error"),
    "error_body_503": (
        _all(Reply({**ERROR_BODY, "errorType": "timeout"}, status=503)),
        "query_error",
    ),
    "not_json": (_all(Reply("{not json", status=200)), "bad_response"),
    "wrong_shape": (
        _all(Reply({"status": "success", "data": {"resultType": "matrix"}})),
        "bad_response",
    ),
}


async def _recover(h: Harness, fault: str) -> None:
    if fault == "connection_refused":
        await h.prom.start()
    h.fake.release.set()
    h.fake.answers.clear()
    h.fake.set(**quiet(PODS))


# long enough for a healthy answer on a loaded CI machine, short enough for the stalls
STALL_TIMEOUT_SECONDS = 1.0


@pytest.mark.parametrize("fault", sorted(WHOLE_QUERY_FAULTS))
async def test_prometheus_fault_holds_exposes_and_recovers(
    make_harness: HarnessFactory, fault: str
) -> None:
    inject, reason = WHOLE_QUERY_FAULTS[fault]
    h = await make_harness(
        policy=no_window_policy(),
        replicas=4,
        ready=PODS,
        timeout_seconds=STALL_TIMEOUT_SECONDS,
        answers=quiet(PODS),
    )
    await inject(h)
    with captured_logs() as logs:
        for _ in range(3):
            r = await h.next_cycle()
            assert r.decision is not None
            assert r.decision.reason is Reason.NO_VALID_SIGNALS  # never read as zero load
            assert h.replicas() == 4 and h.patches() == []
    for sig in SIGNALS:
        assert h.query_errors(sig, reason) == 3
        assert h.signal_valid(sig) == 0
        assert h.signal_status(sig) == reason
    first_round = [k for k in QUERY_KINDS if k != "ttft_buckets"]
    for kind in first_round:
        assert h.count("vllm_scaler_query_failures_total", query=kind, reason=reason) == 3
        # never succeeded: the series holds the start (T0), so its age grows from there
        assert h.value(LAST_OK, signal=kind) == T0
    # the TTFT bucket query is built from the first round's answers: never sent without them
    # (not due: the first round's own timestamps carry the outage)
    assert h.count("vllm_scaler_query_failures_total", query="ttft_buckets", reason=reason) == 0
    assert h.value(LAST_OK, signal="ttft_buckets") == h.clock.now
    assert h.decisions("no_valid_signals") == 3
    failed = [e for e in logs if e["event"] == "query_failed"]
    assert len(failed) == 3 * len(first_round)
    assert all(e["reason"] == reason and e["detail"] for e in failed)

    await _recover(h, fault)  # good data again: the hold ends in the first good cycle
    await recovery_scales_down(h)
    assert h.value(LAST_OK, signal="waiting") == h.clock.now


async def test_idle_fleet_queries_not_sent_are_not_due(make_harness: HarnessFactory) -> None:
    """An idle fleet sends no ``ttft_buckets`` query (no target has requests): its
    last-success timestamp follows the clock, so the alert on its age stays quiet."""
    h = await make_harness(
        policy=no_window_policy(),
        replicas=4,
        ready=PODS,
        answers={**quiet(PODS), **ttft_answers("NaN", "0")},
    )
    for _ in range(12):  # 6 minutes of 30 s cycles: past the alert's 5
        await h.next_cycle()
        assert QueryKind.TTFT_BUCKETS not in h.fake.kinds_asked()
        for kind in QUERY_KINDS:
            assert h.value(LAST_OK, signal=kind) == h.clock.now
    assert h.clock.now == T0 + 360


async def test_prometheus_unreachable_from_the_start_ages_every_query(
    make_harness: HarnessFactory,
) -> None:
    """Prometheus refused from the first cycle: every sent query's series exists and holds
    the start (T0), so its age (what VllmScalerPrometheusQueriesFailing reads) grows."""
    h = await make_harness(policy=no_window_policy(), replicas=4, ready=PODS, answers=quiet(PODS))
    await h.prom.stop()
    for _ in range(12):
        await h.next_cycle()
    for kind in ("waiting", "running", "kv_cache", "ttft_rate"):
        assert h.value(LAST_OK, signal=kind) == T0
        assert h.count("vllm_scaler_query_failures_total", query=kind, reason="transport") == 12
    assert h.clock.now - T0 == 360


# fault name -> (answers that replace the quiet ones, the blocked signal, its status)
BAD_VALUE_FAULTS: dict[str, tuple[dict[str, Any], str, str]] = {
    "queue_metric_missing": ({"waiting": R()}, "queue_depth", "absent"),
    "nan_queue": ({"waiting": per_pod(dict.fromkeys(PODS, "NaN"))}, "queue_depth", "nan"),
    "inf_kv": ({"kv_cache": kv(dict.fromkeys(PODS, "+Inf"))}, "kv_cache_usage", "inf"),
    "negative_queue": ({"waiting": per_pod(dict.fromkeys(PODS, "-1"))}, "queue_depth", "negative"),
    "nan_ttft_with_traffic": (ttft_answers("NaN", "3"), "ttft_p95", "nan"),
    "partial_coverage": (
        {"waiting": per_pod(dict.fromkeys(PODS[:3], "0"))},
        "queue_depth",
        "partial",
    ),
    "restarted_with_little_history": (  # one series of four, no TTFT rate yet
        {
            "waiting": per_pod({"pod-2": "0"}),
            "kv_cache": kv({"pod-2": "0.1"}),
            "ttft_rate": R(),
            "ttft_buckets": R(),
        },
        "queue_depth",
        "partial",
    ),
    "kv_metric_renamed": ({"kv_cache": R()}, "kv_cache_usage", "absent"),
}


@pytest.mark.parametrize("fault", sorted(BAD_VALUE_FAULTS))
async def test_bad_values_block_scale_down_and_recover(
    make_harness: HarnessFactory, fault: str
) -> None:
    answers, signal, status = BAD_VALUE_FAULTS[fault]
    h = await make_harness(policy=no_window_policy(), replicas=4, ready=PODS, answers=quiet(PODS))
    h.fake.set(**answers)
    for _ in range(3):
        r = await h.next_cycle()
        assert r.decision is not None
        assert r.decision.reason is Reason.SCALE_DOWN_BLOCKED_MISSING_SIGNAL
        assert h.replicas() == 4 and h.patches() == []
    assert h.signal_status(signal) == status
    assert h.signal_valid(signal) == (1 if status == "partial" else 0)  # partial: up only
    assert h.query_errors(signal, status) == 3
    assert h.count("vllm_scaler_query_failures_total", query="waiting", reason=status) == 0

    h.fake.set(**quiet(PODS))
    await recovery_scales_down(h)


async def test_bad_values_never_block_a_scale_up_the_other_signals_ask_for(
    make_harness: HarnessFactory,
) -> None:
    h = await make_harness(
        replicas=2, ready=PODS[:2], answers=serving(dict.fromkeys(PODS[:2], "30"))
    )
    h.fake.set(kv_cache=kv(dict.fromkeys(PODS[:2], "NaN")), **ttft_answers("NaN", "3"))
    r = await h.cycle()
    assert r.decision is not None and r.decision.reason is Reason.SCALE_UP
    assert h.replicas() == 6  # 60 waiting / 10 per replica, queue depth alone
    assert h.signal_status("kv_cache_usage") == "nan"


async def test_stale_series_of_deleted_pods_are_dropped_and_counted(
    make_harness: HarnessFactory,
) -> None:
    h = await make_harness(policy=no_window_policy(), replicas=4, ready=PODS, answers=quiet(PODS))
    # Prometheus still returns (within its 5 min lookback) a deleted pod with a long queue.
    gone = "vllm-5c4d9-ggggg"  # listed for the target a cycle ago: its, not another app's
    h.add_ready([gone])
    h.store.mark_pod_terminating(NS, gone)
    await h.cycle()
    h.store.delete_pod(NS, gone)
    h.fake.set(waiting=per_pod({**dict.fromkeys(PODS, "0"), gone: "500", "other-app-0": "9"}))
    r = await h.next_cycle()
    assert r.decision is not None and r.decision.reason is Reason.STEP_LIMITED  # 4 -> 3
    assert r.readings is not None
    assert [(d.pod, str(d.reason)) for d in r.readings.dropped] == [(gone, "gone")]


async def test_outage_longer_than_the_window_then_a_whole_window_before_scale_down(
    make_harness: HarnessFactory,
) -> None:
    """With the default 300 s window, holds during an outage are recorded: a whole window of
    good data must pass after it before a scale-down (pinned in detail by case 04)."""
    h = await make_harness(
        replicas=4, ready=PODS, timeout_seconds=STALL_TIMEOUT_SECONDS, answers=quiet(PODS)
    )
    await h.prom.stop()
    for _ in range(20):  # ten minutes of outage
        r = await h.next_cycle()
        assert r.decision is not None and r.decision.reason is Reason.NO_VALID_SIGNALS
    await h.prom.start()
    last_hold = h.clock.now
    while True:
        r = await h.next_cycle()
        assert r.decision is not None
        if h.replicas() != 4:
            break
        assert r.decision.reason is Reason.STABILIZED
    assert h.clock.now - last_hold >= 300  # a whole window after the last hold
    assert h.replicas() == 3
    assert h.value(LAST_OK, signal="waiting") == h.clock.now


async def test_empty_answers_are_no_data_not_zero_load(make_harness: HarnessFactory) -> None:
    """Every query answers success with no series (a Prometheus that lost its data)."""
    h = await make_harness(policy=no_window_policy(), replicas=4, ready=PODS, answers=quiet(PODS))
    h.fake.answers.clear()
    for _ in range(3):
        r = await h.next_cycle()
        assert r.decision is not None and r.decision.reason is Reason.NO_VALID_SIGNALS
        assert h.replicas() == 4 and h.patches() == []
    for sig in SIGNALS:
        assert h.signal_status(sig) == "empty" and h.query_errors(sig, "empty") == 3
    # the queries themselves succeeded: no query failure, and the timestamp moves
    assert h.count("vllm_scaler_query_failures_total", query="waiting", reason="empty") == 0
    assert h.value(LAST_OK, signal="waiting") == h.clock.now
    assert h.clock.now > T0
