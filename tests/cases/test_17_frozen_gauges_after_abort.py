"""Case 17 (../shared/cases) and its kind through the real code path: readings that stopped
moving are recognised as such.

The Kubernetes stand-in over HTTP with the real client, the fake Prometheus over HTTP
answering the case's ``R[...]`` (the throughput query included), the real source, actuator,
metrics and controller on one fake clock, one cycle every 30 s as in the case.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from scaler.core.reasons import Reason
from scaler.sources.prometheus import STALL_POLLS
from tests.support.controller_harness import Harness, HarnessFactory, captured_logs, decision_of
from tests.support.fakeprom import R, Reply, case_file, kv, per_pod, rates, ttft_answers

Q, KV, TTFT = "queue_depth", "kv_cache_usage", "ttft_p95"
P0, P1 = "pod-0", "pod-1"


def _idle_ttft() -> dict[str, Any]:
    """No request finished a prefill in the window: a TTFT request rate of 0 on every pod."""
    return ttft_answers("NaN", "0")


def answers(
    waiting: Mapping[str, str],
    running: Mapping[str, str],
    kv_values: Mapping[str, str],
    throughput: Mapping[str, tuple[str, str, str] | str],
) -> dict[str, Any]:
    return {
        "waiting": per_pod(waiting),
        "running": per_pod(running),
        "kv_cache": kv(kv_values),
        "throughput": rates(throughput),
        **_idle_ttft(),
    }


def case_17(pod1_waiting: str = "0") -> dict[str, Any]:
    """The case's bit-identical answers: pod-0 claims 15 waiting, 106 running and 90.4% KV
    cache while neither pod produces a token."""
    return answers(
        {P0: "15", P1: pod1_waiting},
        {P0: "106", P1: "0"},
        {P0: "0.904", P1: "0.0"},
        {P0: "0", P1: "0"},
    )


def frozen_pods(h: Harness) -> float | None:
    return h.target_value("vllm_scaler_frozen_pods")


def hung_pods(h: Harness) -> float | None:
    return h.target_value("vllm_scaler_hung_pods")


async def test_case_17_frozen_gauges_are_kept_out_of_scale_up(
    make_harness: HarnessFactory,
) -> None:
    """Case 17: values bit-identical over a few polls with zero token throughput are frozen:
    kept out of scale-up, warned about by pod name, counted per target; the 21st poll holds 2."""
    case_file("17-frozen-gauges-after-abort.md")
    h = await make_harness(replicas=2, ready=[P0, P1], answers=case_17())
    seen: list[tuple[int, Reason, float | None]] = []
    with captured_logs() as logs:
        for i in range(20):
            r = await (h.next_cycle() if i else h.cycle())
            assert r.decision is not None
            seen.append((r.decision.desired_replicas, r.decision.reason, frozen_pods(h)))
            assert h.replicas() == 2 and h.patches() == []
        first = seen[0]
    # Polls 1-2: 15 waiting on 2 replicas is a ratio of 0.75, outside the band, yet
    # ceil(15 / 10) = 2: the current replicas, said as such (not "within tolerance").
    assert seen[: STALL_POLLS - 1] == [(2, Reason.DEMAND_COVERED, 0.0)] * (STALL_POLLS - 1)
    assert first[1] is Reason.DEMAND_COVERED
    # From the third identical poll on: pod-0 is frozen, its values count as no load, and the
    # scale-down they now ask for waits, since what pod-0 really holds is unknown.
    frozen_from = [(2, Reason.SCALE_DOWN_BLOCKED_MISSING_SIGNAL, 1.0)] * (21 - STALL_POLLS)
    assert seen[STALL_POLLS - 1 :] == frozen_from
    assert h.signal_status(Q) == "frozen" and h.signal_status(KV) == "frozen"
    assert h.signal_valid(Q) == 1  # usable for scale-up on the other pods
    warnings = [e for e in logs if e["event"] == "pod_frozen"]
    assert len(warnings) == 1  # once, when pod-0 became frozen
    assert warnings[0]["pod"] == P0 and warnings[0]["log_level"] == "warning"
    assert (warnings[0]["waiting"], warnings[0]["running"], warnings[0]["kv_cache"]) == (
        15.0,
        106.0,
        0.904,
    )
    assert "unchanged for 3 polls with no token produced" in warnings[0]["message"]
    decisions = [e for e in logs if e["event"] == "decision"]
    assert "ratio 0.75" in decisions[0]["message"]
    assert "ceil(15 / 10) = 2 replicas: holding 2" in decisions[0]["message"]

    # Poll 21: the healthy pod-1 reports 8 waiting. Real demand: ceil(8 / 10) = 1; read with
    # pod-0's frozen 15 it would be ceil(23 / 10) = 3.
    h.fake.set(**case_17(pod1_waiting="8"))
    r21 = await h.next_cycle()
    d = decision_of(r21)
    queue = next(e for e in d.signals if e.name == Q)
    assert (queue.value, queue.demand_replicas) == (4.0, 1)  # pod-1's 8 over 2 replicas
    assert (d.desired_replicas, d.reason) == (2, Reason.SCALE_DOWN_BLOCKED_MISSING_SIGNAL)
    assert d.message.startswith("signals ask for 1, but scale-down needs every signal valid")
    assert "queue_depth frozen (pod pod-0 frozen: waiting 15, running 106, KV cache 0.904" in (
        d.message
    )
    assert h.replicas() == 2 and h.patches() == []
    assert h.target_value("vllm_scaler_signal_value", signal=Q) == 4.0
    assert frozen_pods(h) == 1 and hung_pods(h) == 0
    assert r21.readings is not None and set(r21.readings.stalled) == {P0}


async def test_case_17_a_queue_growing_without_tokens_is_a_hung_engine_not_load(
    make_harness: HarnessFactory,
) -> None:
    """Case 17: a queue that keeps growing while no token is produced is a hung engine: reported
    (metric, warning), left out of the load, and the fleet does not grow without bound."""
    case_file("17-frozen-gauges-after-abort.md")
    h = await make_harness(replicas=2, ready=[P0, P1])
    peak = 0
    with captured_logs() as logs:
        for i in range(20):
            queue = 15 * (i + 1)  # 15, 30, ... 300 waiting on pod-0, no token out of it
            h.fake.set(
                **answers(
                    {P0: str(queue), P1: "2"},
                    {P0: "4", P1: "6"},
                    {P0: "0.3", P1: "0.4"},
                    {P0: "0", P1: ("1.5", "900", "240")},  # pod-1 serves
                )
            )
            r = await (h.next_cycle() if i else h.cycle())
            assert r.decision is not None
            peak = max(peak, h.replicas())
    # Polls 1-2 read the queue as load (30 + 2 waiting asks for 4 on the second poll; the
    # detector needs three polls); from then on pod-0 is hung and its queue is not counted.
    assert peak == 4
    assert h.replicas() == 4  # 300 waiting at the end would ask for 30, clamped to max 10
    assert hung_pods(h) == 1 and frozen_pods(h) == 0
    assert h.signal_status(Q) == "hung"
    hung = [e for e in logs if e["event"] == "pod_hung"]
    assert [(e["pod"], e["log_level"]) for e in hung] == [(P0, "warning")]
    assert "queue 15 -> 45 over 3 polls with no token produced" in hung[0]["message"]
    assert r.decision is not None and r.decision.recommended_replicas <= 4


async def test_case_17_a_frozen_pod_that_moves_again_counts_again(
    make_harness: HarnessFactory,
) -> None:
    """Case 17: one poll with tokens flowing or values moving ends a stall; the pod counts again."""
    case_file("17-frozen-gauges-after-abort.md")
    h = await make_harness(replicas=2, ready=[P0, P1], answers=case_17())
    for i in range(STALL_POLLS):
        await (h.next_cycle() if i else h.cycle())
    assert frozen_pods(h) == 1
    # pod-0 gets requests again: its engine steps, tokens flow, and the queue is real load
    h.fake.set(
        **answers(
            {P0: "40", P1: "30"},
            {P0: "106", P1: "50"},
            {P0: "0.95", P1: "0.9"},
            {P0: ("2", "1200", "400"), P1: ("2", "1100", "380")},
        )
    )
    with captured_logs() as logs:
        r = await h.next_cycle()
    assert r.decision is not None
    assert frozen_pods(h) == 0 and h.signal_status(Q) == "ok"
    # ceil(70 / 10) = 7, limited to 2 + 4 per period
    assert (r.decision.desired_replicas, r.decision.reason) == (6, Reason.STEP_LIMITED)
    assert r.decision.recommended_replicas == 7
    ended = [e for e in logs if e["event"] == "pod_stall_ended"]
    assert [(e["pod"], e["was"]) for e in ended] == [(P0, "frozen")]


@pytest.mark.parametrize(
    ("waiting", "running", "kv_value", "throughput", "polls"),
    [
        pytest.param(
            "5", "20", "0.9", ("3", "4000", "600"), 20,
            id="busy pod with steady gauges while tokens flow",
        ),
        pytest.param("0", "0", "0.0", "0", 40, id="idle pod reporting zeros for 20 minutes"),
    ],
)  # fmt: skip
async def test_case_17_steady_busy_or_idle_pods_are_never_frozen(
    make_harness: HarnessFactory,
    waiting: str,
    running: str,
    kv_value: str,
    throughput: tuple[str, str, str] | str,
    polls: int,
) -> None:
    """Case 17: identical values alone never freeze a pod: a busy one produces tokens, an idle
    one claims no load."""
    case_file("17-frozen-gauges-after-abort.md")
    pods = [P0, P1]
    h = await make_harness(
        replicas=2,
        ready=pods,
        answers=answers(
            dict.fromkeys(pods, waiting),
            dict.fromkeys(pods, running),
            dict.fromkeys(pods, kv_value),
            dict.fromkeys(pods, throughput),
        ),
    )
    with captured_logs() as logs:
        for i in range(polls):
            r = await (h.next_cycle() if i else h.cycle())
            assert r.readings is not None and r.readings.stalled == {}
    assert frozen_pods(h) == 0 and hung_pods(h) == 0
    assert h.signal_status(Q) == "ok" and h.signal_status(KV) == "ok"
    assert not [e for e in logs if e["event"] in ("pod_frozen", "pod_hung")]


async def test_case_17_kv_cache_stuck_near_full_without_tokens_is_frozen(
    make_harness: HarnessFactory,
) -> None:
    """Case 17: a KV cache stuck at 99% with nothing running and no token is frozen, not load."""
    case_file("17-frozen-gauges-after-abort.md")
    pods = ["pod-0", "pod-1", "pod-2"]
    h = await make_harness(
        replicas=3,
        ready=pods,
        answers=answers(
            dict.fromkeys(pods, "0"),
            dict.fromkeys(pods, "0"),
            dict.fromkeys(pods, "0.99"),
            dict.fromkeys(pods, "0"),
        ),
    )
    replicas = []
    for i in range(6):
        await (h.next_cycle() if i else h.cycle())
        replicas.append(h.replicas())
    # 3 x 0.99 against 0.8 asks for 4 on the first two polls; then all three are frozen
    assert replicas[:2] == [4, 4]
    assert frozen_pods(h) == 3
    assert h.signal_status(KV) == "frozen"
    assert h.target_value("vllm_scaler_recommended_replicas") == 4  # no further growth
    assert replicas[-1] == 4


async def test_case_17_unknown_throughput_never_freezes_a_pod(
    make_harness: HarnessFactory,
) -> None:
    """Case 17: without token rates (query failing or no series) nothing is judged frozen: the
    values count as before, never as zero."""
    case_file("17-frozen-gauges-after-abort.md")
    failing = {"status": "error", "errorType": "execution", "error": "too many samples"}
    h = await make_harness(replicas=2, ready=[P0, P1], answers=case_17())
    h.fake.set(throughput=R())
    for i in range(6):
        await (h.next_cycle() if i else h.cycle())
        if i == 2:
            h.fake.set(throughput=Reply(failing, status=422))
    assert frozen_pods(h) == 0
    assert h.signal_status(Q) == "ok"
    assert h.target_value("vllm_scaler_signal_value", signal=Q) == 7.5  # 15 over 2, counted
    assert (
        h.count("vllm_scaler_query_failures_total", query="throughput", reason="query_error") == 3
    )
