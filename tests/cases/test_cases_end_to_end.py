"""Each shared case (../shared/cases) through the real code path.

Per test: the Kubernetes stand-in (``KubeStore`` + ``KubeApiServer``) over HTTP with Deployment
``llm/vllm`` and the case's pods, reached through a kubeconfig and the real kubernetes-asyncio
client; the fake Prometheus over HTTP answering the case's ``R[...]``; the real
``PrometheusSource``, ``KubernetesActuator``, ``ScalerMetrics`` and ``Controller`` on one fake
clock. Each cycle asserts the replicas in the stand-in, whether a PATCH was sent, the
decision's reason and the exported metrics (read back from ``metrics.registry``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import pytest

from scaler.config.vocabulary import SignalName
from scaler.controller.report import report_json
from scaler.core.reasons import Reason
from tests.support.controller_harness import (
    KEY,
    NAME,
    NS,
    T0,
    Harness,
    HarnessFactory,
    captured_logs,
    case_policy,
    decision_of,
)
from tests.support.fakeprom import (
    R,
    Reply,
    Ttft,
    case_file,
    fleet,
    per_pod,
    pods,
    query_timed_out,
    sample,
)
from tests.support.replicas import ReplicaSetSim

Q = "queue_depth"
KV = "kv_cache_usage"
TTFT = "ttft_p95"
SIGNALS = (Q, KV, TTFT)
KV_QUERY_NAMES = "vllm:kv_cache_usage_perc|vllm:gpu_cache_usage_perc"


def serving(
    waiting: Mapping[str, str],
    kv_values: Mapping[str, str],
    *,
    ttft_value: str = "1.0",
    rate: str = "4",
) -> dict[str, Any]:
    """Answers of scraped vLLM pods: waiting, running (one per pod with waiting), KV, TTFT."""
    return fleet(waiting, waiting=waiting, kv_cache=kv_values, ttft=(ttft_value, rate))


def each(names: list[str], value: str) -> dict[str, str]:
    return dict.fromkeys(names, value)


def spread(total: int, names: list[str]) -> dict[str, str]:
    """Integer waiting values over ``names`` that sum to ``total``."""
    base, extra = divmod(total, len(names))
    return {n: str(base + (1 if i < extra else 0)) for i, n in enumerate(names)}


def assert_hold(h: Harness, replicas: int, patches_before: int) -> None:
    assert h.replicas() == replicas
    assert len(h.patches()) == patches_before
    assert h.target_value("vllm_scaler_desired_replicas") == replicas
    assert h.target_value("vllm_scaler_current_replicas") == replicas


# --- 01: an empty answer during a Prometheus incident is not zero load -------------------


async def test_case_01_empty_answers_hold_and_count_empty(make_harness: HarnessFactory) -> None:
    """Case 01: empty answers for every query hold the replicas, count 'empty' errors and warn."""
    case_file("01-empty-result-is-not-zero.md")
    six = pods(6)
    h = await make_harness(
        replicas=6, ready=six, answers=serving(each(six, "8"), each(six, "0.5"), ttft_value="1.5")
    )
    first = await h.cycle()  # last cycle: waiting sums to 48
    assert first.decision is not None
    assert first.decision.signals[0].value == 8.0  # 48 waiting over 6 replicas
    assert first.decision.reason is Reason.STABILIZED  # 48 asks for 5; the window holds 6
    assert_hold(h, 6, 0)

    h.fake.answers.clear()  # every query now answers R[]
    with captured_logs() as logs:
        report = await h.next_cycle()

    d = decision_of(report)
    assert (d.current_replicas, d.desired_replicas) == (6, 6)
    assert d.reason is Reason.NO_VALID_SIGNALS
    assert report.action == "none"
    assert_hold(h, 6, 0)
    for sig in SIGNALS:
        assert h.query_errors(sig, "empty") == 1
        assert h.signal_valid(sig) == 0
        assert h.signal_status(sig) == "empty"
        assert math.isnan(h.target_value("vllm_scaler_signal_value", signal=sig) or 0.0)
    assert h.decisions("no_valid_signals") == 1
    assert h.target_value("vllm_scaler_pods_missing_metrics", signal=Q) == 6
    warned = {(e["event"], e.get("signal")) for e in logs if e["log_level"] == "warning"}
    assert {("signal_invalid", s) for s in SIGNALS} <= warned
    assert ("decision", None) in warned  # the hold itself is logged as a warning


# --- 02: NaN, +Inf and very large values --------------------------------------------------


async def test_case_02a_nan_queue_is_invalid_and_holds(make_harness: HarnessFactory) -> None:
    """Case 02a: a NaN queue reading is invalid ('nan') and holds."""
    case_file("02-nan-inf-overflow.md")
    four = pods(4)
    h = await make_harness(replicas=4, ready=four)
    h.fake.set(**fleet(four, waiting=R(sample("pod-0", "NaN")), kv_cache="0.5"))
    report = await h.cycle()
    d = decision_of(report)
    assert d.desired_replicas == 4
    assert d.reason is Reason.SCALE_DOWN_BLOCKED_MISSING_SIGNAL
    assert_hold(h, 4, 0)
    assert h.query_errors(Q, "nan") == 1
    assert h.signal_valid(Q) == 0 and h.signal_status(Q) == "nan"
    assert math.isnan(h.target_value("vllm_scaler_signal_value", signal=Q) or 0.0)
    assert h.signal_valid(KV) == 1 and h.signal_valid(TTFT) == 1
    assert h.target_value("vllm_scaler_recommended_replicas") == 4


async def test_case_02a_nan_queue_does_not_block_scale_up_on_kv(
    make_harness: HarnessFactory,
) -> None:
    """Case 02a: a NaN queue reading does not block a scale-up on the KV cache."""
    case_file("02-nan-inf-overflow.md")
    four = pods(4)
    h = await make_harness(replicas=4, ready=four)
    h.fake.set(**fleet(four, waiting=R(sample("pod-0", "NaN")), kv_cache="1.0"))
    report = await h.cycle()
    d = decision_of(report)
    # KV 1.0 on each of 4 pods against 0.8: ceil(4 / 0.8) = 5
    assert (d.desired_replicas, d.reason, d.driving_signal) == (
        5,
        Reason.SCALE_UP,
        SignalName.KV_CACHE_USAGE,
    )
    assert report.action == "scaled"
    assert h.replicas() == 5
    assert len(h.patches()) == 1
    assert h.query_errors(Q, "nan") == 1
    assert h.count("vllm_scaler_scale_actions_total", target=KEY, direction="up") == 1


async def test_case_02b_inf_kv_is_invalid_and_holds(make_harness: HarnessFactory) -> None:
    """Case 02b: a +Inf KV-cache reading is invalid ('inf') and holds."""
    case_file("02-nan-inf-overflow.md")
    four = pods(4)
    h = await make_harness(replicas=4, ready=four)
    inf_on_one = {"pod-0": "+Inf", "pod-1": "0.5", "pod-2": "0.5", "pod-3": "0.5"}
    h.fake.set(**fleet(four, waiting="2", kv_cache=inf_on_one))
    report = await h.cycle()
    d = decision_of(report)
    assert d.desired_replicas == 4
    assert d.reason is Reason.SCALE_DOWN_BLOCKED_MISSING_SIGNAL
    assert_hold(h, 4, 0)
    assert h.query_errors(KV, "inf") == 1
    assert h.signal_valid(KV) == 0 and h.signal_status(KV) == "inf"
    assert h.signal_valid(Q) == 1


async def test_case_02c_huge_queue_is_computed_in_float_and_clamped_to_max(
    make_harness: HarnessFactory,
) -> None:
    """Case 02c: a huge queue is computed in floating point and clamped to max, and says so."""
    case_file("02-nan-inf-overflow.md")
    four = pods(4)
    policy = case_policy(
        signals={
            "queue_depth": {"target_per_replica": 0.1},
            "kv_cache_usage": {"target_ratio": 0.8},
            "ttft_p95": {"target_seconds": 2.0},
        }
    )
    h = await make_harness(replicas=4, ready=four, policy=policy)
    # the per-pod queue query keeps the pod label; the case's one huge series is pod-0's
    h.fake.set(**fleet(four, waiting=R(sample("pod-0", "214748365")), kv_cache="0.1"))
    first = await h.cycle()
    d = decision_of(first)
    assert d.recommended_replicas == 2147483650  # ceil(214748365 / 0.1), no int32 wrap
    assert h.target_value("vllm_scaler_recommended_replicas") == 2147483650.0
    # +100 % per 60 s period from 4 gives 8; the max clamp is named as well
    assert d.desired_replicas == 8 and d.reason is Reason.STEP_LIMITED
    assert set(d.limits) >= {"step_limit", "max_replicas"}
    assert h.replicas() == 8 and len(h.patches()) == 1

    held = await h.next_cycle()  # same period: the step is used up
    assert held.decision is not None and held.decision.desired_replicas == 8
    assert held.decision.reason is Reason.STEP_LIMITED
    assert len(h.patches()) == 1

    last = await h.next_cycle()  # a new period: clamp to max 10 and say so
    d = decision_of(last)
    assert (d.current_replicas, d.desired_replicas, d.reason) == (8, 10, Reason.AT_MAX)
    assert "clamped to max_replicas 10" in d.message
    assert h.replicas() == 10 and len(h.patches()) == 2
    assert h.target_value("vllm_scaler_desired_replicas") == 10
    assert h.decisions("at_max") == 1 and h.decisions("step_limited") == 2


async def test_case_02c_literal_huge_answer_on_ttft_query_clamps(
    make_harness: HarnessFactory,
) -> None:
    """Case 02c: a literal huge TTFT answer is finite and valid, and is clamped to max."""
    case_file("02-nan-inf-overflow.md")
    four = pods(4)
    h = await make_harness(replicas=4, ready=four)
    # the case's literal {"metric":{}} answer, on the target-level (TTFT) query
    h.fake.set(**fleet(four, waiting="0", kv_cache="0.1", ttft=("214748365", "4")))
    report = await h.cycle()
    d = decision_of(report)
    assert d.driving_signal is SignalName.TTFT_P95
    # A latency ratio of 1e8 is finite and valid; one decision at most doubles the ready
    # replicas on latency (ceil(min(ratio, 2) x 4)), never wraps.
    assert d.recommended_replicas == 8
    assert d.desired_replicas == 8 and d.reason is Reason.SCALE_UP
    assert h.replicas() == 8 and len(h.patches()) == 1
    assert h.signal_valid(TTFT) == 1
    assert h.target_value("vllm_scaler_signal_value", signal=TTFT) == 214748365.0


# --- 03: an idle TTFT NaN must not block scale-down ----------------------------------------


def _idle(names: list[str], rate: str) -> dict[str, Any]:
    return serving(each(names, "0"), each(names, "0.0"), ttft_value="NaN", rate=rate)


async def test_case_03_idle_ttft_is_valid_and_target_goes_to_min(
    make_harness: HarnessFactory,
) -> None:
    """Case 03: an idle TTFT is valid, and after the window the target goes to min."""
    case_file("03-idle-ttft-nan.md")
    h = await make_harness(replicas=4, ready=pods(4))
    rs = ReplicaSetSim(h.store, h.clock)  # removes the lowest pod-deletion-cost first
    timeline: list[tuple[float, int, Reason]] = []
    for i in range(16):  # T0 .. T0+450, one cycle every 30 s
        if i:
            h.clock.advance(30)
        h.fake.set(**_idle(rs.pods(), "0"))
        report = await h.cycle()
        d = decision_of(report)
        timeline.append((h.clock.now - T0, h.replicas(), d.reason))
        assert h.signal_status(TTFT) == "idle" and h.signal_valid(TTFT) == 1
    # held by the 300 s window, then one replica per 60 s period down to min 1
    assert all(r == 4 and why is Reason.STABILIZED for t, r, why in timeline if t < 300)
    assert timeline[10] == (300, 3, Reason.STEP_LIMITED)
    assert timeline[12] == (360, 2, Reason.STEP_LIMITED)
    assert timeline[14] == (420, 1, Reason.AT_MIN)
    assert timeline[15] == (450, 1, Reason.AT_MIN)
    assert [p.status for p in h.patches()] == [200, 200, 200]
    assert h.replicas() == 1 and rs.removed == ["pod-0", "pod-1", "pod-2"]
    assert h.query_errors(TTFT, "nan") == 0 and h.query_errors(TTFT, "idle") == 0
    assert h.count("vllm_scaler_scale_actions_total", target=KEY, direction="down") == 3


async def test_case_03_counter_case_nan_with_traffic_blocks_scale_down(
    make_harness: HarnessFactory,
) -> None:
    """Case 03: a NaN TTFT while requests flow is invalid and blocks the scale-down."""
    case_file("03-idle-ttft-nan.md")
    four = pods(4)
    h = await make_harness(replicas=4, ready=four, answers=_idle(four, "3.2"))
    reasons = []
    for i in range(16):  # the same 450 s as the idle case
        report = await (h.next_cycle() if i else h.cycle())
        assert report.decision is not None
        reasons.append(report.decision.reason)
    assert set(reasons) == {Reason.SCALE_DOWN_BLOCKED_MISSING_SIGNAL}
    assert_hold(h, 4, 0)
    assert h.signal_valid(TTFT) == 0 and h.signal_status(TTFT) == "nan"
    assert h.query_errors(TTFT, "nan") == 16
    assert h.decisions("scale_down_blocked_missing_signal") == 16


# --- 04: Prometheus unreachable, then partial data after its restart ---------------------


async def test_case_04_outage_then_partial_holds_until_a_good_window(
    make_harness: HarnessFactory,
) -> None:
    """Case 04: an outage, then 1 series of 9, hold; scale-down waits a window of good data."""
    case_file("04-outage-then-partial.md")
    nine = pods(9)
    h = await make_harness(
        replicas=9,
        ready=nine,
        # the stalls below need a timeout; 1 s leaves the healthy answers of a loaded CI
        # machine room (0.2 s timed out a healthy query under load)
        timeout_seconds=1.0,
        answers=serving(each(nine, "10"), each(nine, "0.5"), ttft_value="2.0"),
    )
    last_ok = "vllm_scaler_last_successful_query_timestamp_seconds"

    t0 = await h.cycle()  # waiting sums to 90 on 9 replicas: ratio 1.0
    assert t0.decision is not None and t0.decision.reason is Reason.WITHIN_TOLERANCE
    assert h.value(last_ok, signal="waiting") == T0

    await h.prom.stop()  # t1..t3: connection refused
    for _ in range(3):
        r = await h.next_cycle()
        assert r.decision is not None and r.decision.reason is Reason.NO_VALID_SIGNALS
        assert_hold(h, 9, 0)
    for sig in SIGNALS:
        assert h.query_errors(sig, "transport") == 3
        assert h.signal_status(sig) == "transport"
    assert h.count("vllm_scaler_query_failures_total", query="waiting", reason="transport") == 3

    for kind in ("waiting", "running", "kv_cache", "ttft_rate", "ttft_buckets"):
        h.fake.set(**{kind: Reply(R(), stall=True)})
    await h.prom.start()  # t4..t6: listening again on the same port, but never answering
    for _ in range(3):
        r = await h.next_cycle()
        assert r.decision is not None and r.decision.reason is Reason.NO_VALID_SIGNALS
        assert_hold(h, 9, 0)
    for sig in SIGNALS:
        assert h.query_errors(sig, "timeout") == 3
        assert h.query_errors(sig, "transport") == 3
    assert h.value(last_ok, signal="waiting") == T0  # unchanged through the outage
    assert h.value(last_ok, signal="kv_cache") == T0

    h.fake.release.set()  # t7: back; one series of nine after the restart
    h.fake.answers.clear()
    h.fake.set(**fleet(["pod-3"], waiting="0", running="0", kv_cache="0.0"))
    r7 = await h.next_cycle()
    assert r7.decision is not None
    assert r7.decision.reason is Reason.SCALE_DOWN_BLOCKED_MISSING_SIGNAL
    assert_hold(h, 9, 0)
    assert h.signal_status(Q) == "partial" and h.query_errors(Q, "partial") == 1
    assert h.target_value("vllm_scaler_pods_missing_metrics", signal=Q) == 8
    assert h.value(last_ok, signal="waiting") == T0 + 210

    h.fake.set(**_idle(nine, "0"))  # t8..: full coverage, no load
    for _ in range(9):  # T0+240 .. T0+480: the t7 hold is still inside the 300 s window
        r = await h.next_cycle()
        assert r.decision is not None and r.decision.reason is Reason.STABILIZED
        assert_hold(h, 9, 0)
    r17 = await h.next_cycle()  # T0+510: a whole window of good samples
    assert r17.decision is not None
    assert (r17.decision.desired_replicas, r17.decision.reason) == (8, Reason.STEP_LIMITED)
    assert h.replicas() == 8 and len(h.patches()) == 1
    assert h.target_value("vllm_scaler_pods_missing_metrics", signal=Q) == 0


# --- 05: one signal unavailable means no scale-down ---------------------------------------


async def test_case_05_ttft_query_error_blocks_scale_down_not_scale_up(
    make_harness: HarnessFactory,
) -> None:
    """Case 05: a TTFT query error blocks scale-down, not scale-up on the valid signals."""
    case_file("05-one-signal-missing.md")
    five = pods(5)
    h = await make_harness(replicas=5, ready=five)
    # requests flow, so the bucket query is sent, and fails
    failing = {"ttft_rate": Ttft("1.0", "4"), "ttft_buckets": query_timed_out()}
    h.fake.set(**fleet(five, waiting="0", kv_cache="0.10", ttft=failing))
    held = await h.cycle()
    d = decision_of(held)
    assert (d.desired_replicas, d.reason) == (5, Reason.SCALE_DOWN_BLOCKED_MISSING_SIGNAL)
    assert "ttft_p95 query_error" in d.message and "query timed out" in d.message
    assert_hold(h, 5, 0)
    assert h.signal_valid(TTFT) == 0 and h.signal_status(TTFT) == "query_error"
    assert h.query_errors(TTFT, "query_error") == 1
    assert (
        h.count("vllm_scaler_query_failures_total", query="ttft_buckets", reason="query_error") == 1
    )
    assert h.signal_valid(Q) == 1 and h.signal_valid(KV) == 1

    h.fake.set(waiting=per_pod(each(five, "16")))  # waiting sums to 80
    up = await h.next_cycle()
    d = decision_of(up)
    assert (d.desired_replicas, d.reason, d.driving_signal) == (
        8,
        Reason.SCALE_UP,
        SignalName.QUEUE_DEPTH,
    )
    assert h.replicas() == 8 and len(h.patches()) == 1
    assert h.query_errors(TTFT, "query_error") == 2


# --- 07: the KV-cache gauge was renamed ------------------------------------------------------


async def test_case_07_no_kv_name_is_absent_blocks_down_allows_up(
    make_harness: HarnessFactory,
) -> None:
    """Case 07: no KV-cache name while pods are scraped is 'absent': no scale-down, scale-up ok."""
    case_file("07-renamed-kv-metric.md")
    four = pods(4)
    h = await make_harness(replicas=4, ready=four)
    waiting = dict(zip(four, ["2", "0", "1", "3"], strict=True))
    # neither vllm:kv_cache_usage_perc nor vllm:gpu_cache_usage_perc
    h.fake.set(**fleet(four, waiting=waiting, kv_cache=R(), ttft=("1.0", "4")))
    with captured_logs() as logs:
        held = await h.cycle()
    d = decision_of(held)
    assert (d.desired_replicas, d.reason) == (4, Reason.SCALE_DOWN_BLOCKED_MISSING_SIGNAL)
    assert_hold(h, 4, 0)
    assert h.signal_status(KV) == "absent" and h.signal_valid(KV) == 0
    assert h.query_errors(KV, "absent") == 1
    assert h.target_value("vllm_scaler_pods_missing_metrics", signal=KV) == 4
    errors = [e for e in logs if e["log_level"] == "error"]
    assert len(errors) == 1 and errors[0]["signal"] == KV
    assert KV_QUERY_NAMES in errors[0]["query"]  # names the query to paste into Prometheus

    h.fake.set(waiting=per_pod(each(four, "20")))  # waiting sums to 80: scale up anyway
    up = await h.next_cycle()
    assert up.decision is not None
    assert (up.decision.desired_replicas, up.decision.reason) == (8, Reason.SCALE_UP)
    assert h.replicas() == 8 and len(h.patches()) == 1
    assert h.query_errors(KV, "absent") == 2


async def test_case_07_old_kv_name_is_used_and_reported(make_harness: HarnessFactory) -> None:
    """Case 07: the pre-0.9.2 KV-cache name is read when it is the only one, and reported."""
    case_file("07-renamed-kv-metric.md")
    four = pods(4)
    h = await make_harness(replicas=4, ready=four)
    waiting = dict(zip(four, ["2", "0", "1", "3"], strict=True))
    h.fake.set(
        **fleet(
            four,
            waiting=waiting,
            kv_cache="0.9",
            ttft=("1.0", "4"),
            kv_metric="vllm:gpu_cache_usage_perc",
        )
    )
    report = await h.cycle()
    d = decision_of(report)
    # 4 x 0.9 = 3.6 against 0.8: ceil(4.5) = 5, read from the old name
    assert (d.desired_replicas, d.reason, d.driving_signal) == (
        5,
        Reason.SCALE_UP,
        SignalName.KV_CACHE_USAGE,
    )
    assert h.replicas() == 5
    assert h.signal_status(KV) == "ok"
    assert h.target_value("vllm_scaler_signal_value", signal=KV) == pytest.approx(0.9)
    assert (
        h.target_value("vllm_scaler_kv_cache_metric_info", metric="vllm:gpu_cache_usage_perc") == 1
    )
    assert report_json(report)["kv_cache_metric"] == "vllm:gpu_cache_usage_perc"


# --- 10: replicas that are still loading must not cause a cascade ------------------------


async def test_case_10_starting_pods_count_as_asked_for(make_harness: HarnessFactory) -> None:
    """Case 10: starting pods count as capacity asked for: no scale-up cascade while they load."""
    case_file("10-starting-pods-cascade.md")
    h = await make_harness(
        replicas=2,
        ready=["pod-0", "pod-1"],
        answers=serving(
            each(["pod-0", "pod-1"], "20"), each(["pod-0", "pod-1"], "0.5"), ttft_value="2.0"
        ),
    )
    t0 = await h.cycle()
    assert t0.decision is not None
    assert (t0.decision.desired_replicas, t0.decision.reason) == (4, Reason.SCALE_UP)
    assert h.replicas() == 4 and len(h.patches()) == 1

    h.add_starting(["pod-2", "pod-3"], age=0)  # the Deployment controller creates them
    h.fake.set(
        **serving(each(["pod-0", "pod-1"], "22"), each(["pod-0", "pod-1"], "0.5"), ttft_value="2.0")
    )
    with captured_logs() as logs:
        t1 = await h.next_cycle()
    d = decision_of(t1)
    assert (d.replicas.ready, d.replicas.starting) == (2, 2)
    # 44 waiting against the 4 replicas asked for: ratio 1.1, demand ceil(44/10) = 5 covered
    assert d.signals[0].value == 11.0 and d.signals[0].demand_replicas == 5
    assert (d.desired_replicas, d.reason) == (4, Reason.WAITING_FOR_STARTING)
    assert_hold(h, 4, 1)  # never 4 x 22 / 10 -> 9
    assert h.target_value("vllm_scaler_pending_replicas") == 2
    assert h.target_value("vllm_scaler_ready_replicas") == 2
    decision_logs = [e for e in logs if e["event"] == "decision"]
    assert [(e["starting"], e["ready"], e["reason"]) for e in decision_logs] == [
        (2, 2, "waiting_for_pending")
    ]


# --- 11: stale series of deleted or terminating pods --------------------------------------


@pytest.mark.parametrize(
    ("variant", "reason"),
    [
        pytest.param("terminating", Reason.WAITING_FOR_DRAIN, id="terminating pod: wait for drain"),
        pytest.param("deleted", Reason.STABILIZED, id="deleted pod: its series is not counted"),
    ],
)
async def test_case_11_stale_series_are_dropped_not_counted(
    make_harness: HarnessFactory, variant: str, reason: Reason
) -> None:
    """Case 11: series of terminating or deleted pods are dropped and counted, not read as load."""
    case_file("11-stale-series-deleted-pods.md")
    h = await make_harness(replicas=2, ready=["pod-a", "pod-b"])  # just scaled 3 -> 2
    c = "vllm-5c4d9-ccccc"  # pod-c: terminating, then gone while Prometheus still returns it
    h.add_ready([c])
    h.store.mark_pod_terminating(NS, c)
    h.fake.set(
        **fleet(
            ["pod-a", "pod-b", c],
            waiting={"pod-a": "0", "pod-b": "1", c: "30"},
            running={"pod-a": "0", "pod-b": "1", c: "1"},
            kv_cache={"pod-a": "0.1", "pod-b": "0.1", c: "0.95"},
        )
    )
    await h.cycle()  # the API lists pod-c (terminating): the memory of the target's pods has it
    before = h.count("vllm_scaler_stale_series_dropped_total", target=KEY)
    assert before == 3  # its waiting, running and KV series
    if variant == "deleted":
        h.store.delete_pod(NS, c)
    for cycle in (1, 2):
        report = await h.next_cycle()
        d = decision_of(report)
        assert d.current_replicas == 2  # from the scale subresource, not 3 series
        assert (d.desired_replicas, d.reason) == (2, reason)
        assert d.signals[0].value == 0.5  # pod-a 0 + pod-b 1 over 2 replicas
        assert_hold(h, 2, 0)
        # pod-c's waiting, running and KV series, every cycle, dropped with their reason
        assert h.count("vllm_scaler_stale_series_dropped_total", target=KEY) == before + 3 * cycle
        assert report.readings is not None
        assert {(x.pod, str(x.reason)) for x in report.readings.dropped} == {
            (c, "terminating" if variant == "terminating" else "gone")
        }
    assert h.signal_status(Q) == "ok" and h.signal_status(KV) == "ok"


# --- 12: one pod's failed scrape must not stall the loop ----------------------------------


async def test_case_12_pod_without_series_counts_as_zero_load(
    make_harness: HarnessFactory,
) -> None:
    """Case 12: a pod's failed scrape never stalls the cycle; it is zero load for a scale-up."""
    case_file("12-one-pod-scrape-fails.md")
    scraped = ["pod-0", "pod-1", "pod-2"]
    h = await make_harness(replicas=4, ready=[*scraped, "pod-3"])
    h.fake.set(
        **serving(
            {"pod-0": "25", "pod-1": "30", "pod-2": "28"}, each(scraped, "0.5"), ttft_value="1.0"
        )
    )
    report = await h.cycle()
    d = decision_of(report)
    assert report.action == "scaled"  # the cycle completed and wrote
    assert d.recommended_replicas == 9  # ceil(83 / 10)
    assert (d.desired_replicas, d.reason) == (8, Reason.STEP_LIMITED)  # 4 + 100 % per period
    assert h.replicas() == 8 and len(h.patches()) == 1
    assert h.signal_status(Q) == "partial" and h.signal_valid(Q) == 1
    assert h.target_value("vllm_scaler_pods_missing_metrics", signal=Q) == 1
    assert h.target_value("vllm_scaler_pods_missing_metrics", signal=KV) == 1
    assert h.query_errors(Q, "partial") == 1


# --- 15: tolerance boundaries ------------------------------------------------------------


def _case_15_policy(up: float, down: float) -> Any:
    return case_policy(
        max_replicas=20,  # the case expects 12 from 10 replicas
        signals={
            "queue_depth": {"target_per_replica": 4},
            "kv_cache_usage": {"target_ratio": 0.8},
            "ttft_p95": {"target_seconds": 2.0},
        },
        tolerance={"scale_up": up, "scale_down": down},
    )


def _case_15_answers(total: int) -> dict[str, Any]:
    ten = pods(10)  # KV at half its target and idle TTFT: the queue decides alone
    return serving(spread(total, ten), each(ten, "0.4"), ttft_value="NaN", rate="0")


async def test_case_15_run_1_exact_boundary_holds(make_harness: HarnessFactory) -> None:
    """Case 15: a ratio of exactly 1 + tolerance holds; above it scales up."""
    case_file("15-tolerance-boundary.md")
    h = await make_harness(replicas=10, ready=pods(10), policy=_case_15_policy(0.1, 0.1))
    seen = []
    for i, total in enumerate((41, 44, 45)):
        h.fake.set(**_case_15_answers(total))
        report = await (h.next_cycle() if i else h.cycle())
        assert report.decision is not None
        seen.append((total, h.replicas(), report.decision.reason, len(h.patches())))
    assert seen == [
        (41, 10, Reason.WITHIN_TOLERANCE, 0),
        (44, 10, Reason.WITHIN_TOLERANCE, 0),  # ratio exactly 1.10 is not above
        (45, 12, Reason.SCALE_UP, 1),
    ]
    assert h.target_value("vllm_scaler_signal_ratio", signal=Q) == pytest.approx(1.125)


@pytest.mark.parametrize(
    ("total", "replicas", "reason"),
    [
        pytest.param(41, 11, Reason.SCALE_UP, id="up tolerance 0: 1.025 scales up"),
        pytest.param(36, 10, Reason.WITHIN_TOLERANCE, id="exactly 0.90 holds"),
        pytest.param(35, 10, Reason.STABILIZED, id="0.875 asks for 9, the window holds 10"),
    ],
)
async def test_case_15_run_2_separate_up_and_down_tolerances(
    make_harness: HarnessFactory, total: int, replicas: int, reason: Reason
) -> None:
    """Case 15: the scale-up and scale-down tolerances are separate settings."""
    case_file("15-tolerance-boundary.md")
    h = await make_harness(
        replicas=10,
        ready=pods(10),
        policy=_case_15_policy(0.0, 0.1),
        answers=_case_15_answers(total),
    )
    report = await h.cycle()
    assert report.decision is not None
    assert report.decision.reason is reason
    assert h.replicas() == replicas
    assert len(h.patches()) == (1 if replicas != 10 else 0)
    assert h.target_value("vllm_scaler_tolerance_ratio", direction="up") == 0.0
    assert h.target_value("vllm_scaler_tolerance_ratio", direction="down") == 0.1


# --- 16: another writer changes replicas ----------------------------------------------------


async def _case_16_start(make_harness: HarnessFactory) -> Harness:
    three = pods(3)
    h = await make_harness(
        replicas=3,
        ready=three,
        answers=serving(each(three, "20"), each(three, "0.5"), ttft_value="2.0"),
    )
    t0 = await h.cycle()  # waiting sums to 60: we PATCH to 6
    assert t0.decision is not None and t0.decision.desired_replicas == 6
    assert h.replicas() == 6 and len(h.patches()) == 1
    six = pods(6)
    h.add_ready(six[3:])  # the Deployment controller brings up 3 more
    h.fake.set(**serving(each(six, "10"), each(six, "0.5"), ttft_value="2.0"))
    return h


async def test_case_16_outside_write_is_counted_and_reapplied_once_per_cooldown(
    make_harness: HarnessFactory,
) -> None:
    """Case 16: an outside write is counted and re-applied at most once per cooldown."""
    case_file("16-another-writer-owns-replicas.md")
    h = await _case_16_start(make_harness)
    outside = "vllm_scaler_outside_writes_total"

    h.store.external_scale(NS, NAME, 2)  # t30: someone else sets 2 (status still 6)
    t30 = await h.next_cycle()
    d = decision_of(t30)
    assert d.outside_write and d.current_replicas == 2
    assert h.count(outside, target=KEY) == 1
    # re-decided from fresh metrics (60 waiting ask for 6); our +3 of t0 is still in the
    # step-limit period, whose start is floored at 0 after the outside write: 0 + 4 allowed
    assert (d.desired_replicas, d.reason) == (4, Reason.STEP_LIMITED)
    assert h.replicas() == 4 and len(h.patches()) == 2

    t60 = await h.next_cycle()  # our own value: no outside write, on to 6
    assert t60.decision is not None and not t60.decision.outside_write
    assert h.replicas() == 6 and len(h.patches()) == 3

    patches_at: list[float] = []
    reasons = []
    warned = 0
    for _ in range(9):  # t90 .. t330: the other writer sets 2 again, and it stays
        if h.replicas() != 2 and not patches_at:
            h.store.external_scale(NS, NAME, 2)
        before = len(h.patches())
        with captured_logs() as logs:
            report = await h.next_cycle()
        warned += sum(1 for e in logs if e["event"] == "outside_write")
        assert report.decision is not None
        reasons.append(report.decision.reason)
        if len(h.patches()) > before:
            patches_at.append(h.clock.now - T0)
    # held (no fight) until the 300 s cooldown since the t30 re-apply has passed
    assert reasons[:8] == [Reason.OUTSIDE_WRITER] * 8
    assert patches_at == [330.0]
    assert h.replicas() == 6
    # one count and one warning per outside change (t30, t90), not one per cycle it stays
    assert h.count(outside, target=KEY) == 2
    assert warned == 1  # the t90 change, logged once over the 9 cycles
    assert h.decisions("outside_writer") == 8
    assert h.target_value("vllm_scaler_last_decision_reason", reason="outside_writer") == 0


async def test_case_16_outside_write_that_we_reapply_is_warned(
    make_harness: HarnessFactory,
) -> None:
    """Case 16: an outside write is logged as a warning naming what we wrote and what was found."""
    case_file("16-another-writer-owns-replicas.md")
    h = await _case_16_start(make_harness)
    h.store.external_scale(NS, NAME, 2)
    with captured_logs() as logs:
        report = await h.next_cycle()
    assert report.decision is not None and report.decision.outside_write
    warned = [e for e in logs if e["event"] == "outside_write"]
    assert warned and warned[0]["log_level"] == "warning", logs
    assert (warned[0]["written"], warned[0]["found"]) == (6, 2)
