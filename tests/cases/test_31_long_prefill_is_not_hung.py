"""Case 31 and its kind through the real code path: progress that the token counters do not show
yet (a chunked prefill of a very long prompt) is a working engine, not a hung one.

The Kubernetes stand-in over HTTP with the real client, the fake Prometheus over HTTP
answering the case's ``R[...]`` (the throughput query included), the real source, actuator,
metrics and controller on one fake clock, one cycle every 30 s as in the case.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from scaler.core.reasons import Reason
from tests.support.controller_harness import Harness, HarnessFactory, captured_logs
from tests.support.fakeprom import case_file, kv, per_pod, rates, ttft_answers

P0, P1 = "pod-0", "pod-1"
CASE = "31-long-prefill-is-not-hung.md"
WAITING = ("3", "6", "12", "25", "40", "60")


def _poll(h: Harness, waiting: str, running: str, kv_cache: str) -> None:
    """pod-0 prefills with no token counted yet; pod-1 is idle."""
    h.fake.set(
        waiting=per_pod({P0: waiting, P1: "0"}),
        running=per_pod({P0: running, P1: "0"}),
        kv_cache=kv({P0: kv_cache, P1: "0.0"}),
        throughput=rates({P0: "0", P1: "0"}),
        **ttft_answers("NaN", "0"),  # no first token in the window: TTFT reads idle
    )


async def _run(
    make_harness: HarnessFactory, running: Sequence[str], kv_cache: Sequence[str]
) -> tuple[Harness, list[dict[str, object]]]:
    h = await make_harness(replicas=2, ready=[P0, P1])
    with captured_logs() as logs:
        for i, (w, r, k) in enumerate(zip(WAITING, running, kv_cache, strict=True)):
            _poll(h, w, r, k)
            report = await (h.next_cycle() if i else h.cycle())
            assert report.decision is not None
    return h, [dict(e) for e in logs]


@pytest.mark.parametrize(
    ("running", "kv_cache"),
    [
        pytest.param(("1",) * 6, ("0.30", "0.36", "0.42", "0.48", "0.54", "0.60"), id="the case"),
        # a neighbour: the batch changes while no prompt finishes (requests admitted, KV freed
        # by a preemption): the engine steps
        pytest.param(("1", "2", "2", "3", "3", "4"), ("0.5",) * 6, id="running moves, KV flat"),
        pytest.param(("2",) * 6, ("0.9", "0.8", "0.85", "0.7", "0.75", "0.6"), id="KV falls"),
    ],
)
async def test_case_31_a_long_prefill_is_a_working_engine_its_queue_is_demand(
    make_harness: HarnessFactory, running: Sequence[str], kv_cache: Sequence[str]
) -> None:
    """Case 31: zero token rates while the KV cache (or the running batch) moves are steps of a
    working engine: the queue counts as demand and the target scales up; no hung warning."""
    case_file(CASE)
    h, logs = await _run(make_harness, running, kv_cache)
    assert [e for e in logs if e["event"] in ("pod_hung", "pod_frozen")] == []
    assert h.target_value("vllm_scaler_hung_pods") == 0
    assert h.target_value("vllm_scaler_frozen_pods") == 0
    assert h.signal_status("queue_depth") == "ok"
    decisions = [e for e in logs if e["event"] == "decision"]
    # 25 waiting asks for 3, 40 for 4, 60 for 6: up within the step limit (+4 or +100%/60 s)
    assert [(e["current"], e["desired"]) for e in decisions] == [
        (2, 2),
        (2, 2),
        (2, 2),
        (2, 3),
        (3, 4),
        (4, 6),
    ]
    assert h.replicas() == 6
    # the last poll: 60 waiting over the 4 replicas it found
    assert h.target_value("vllm_scaler_signal_value", signal="queue_depth") == 15


async def test_case_31_a_pod_frozen_but_for_its_growing_queue_is_still_hung(
    make_harness: HarnessFactory,
) -> None:
    """Case 31's counter-case (case 17): gauges and counters all frozen while requests keep
    arriving is still a hung engine: reported, and its queue is not load."""
    case_file(CASE)
    h, logs = await _run(make_harness, ("1",) * 6, ("0.30",) * 6)
    hung = [e for e in logs if e["event"] == "pod_hung"]
    assert [(e["pod"], e["log_level"]) for e in hung] == [(P0, "warning")]
    assert h.target_value("vllm_scaler_hung_pods") == 1
    assert h.signal_status("queue_depth") == "hung"
    decisions = [e for e in logs if e["event"] == "decision"]
    # the third poll judges pod-0 hung: its queue is not demand from then on
    assert decisions[2]["reason"] == str(Reason.SCALE_DOWN_BLOCKED_MISSING_SIGNAL)
    assert h.replicas() == 2


async def test_case_31_each_pod_is_judged_on_its_own_steps(make_harness: HarnessFactory) -> None:
    """Blast radius: one pod's steps say nothing of another's: beside the prefilling pod-0,
    pod-1 with every gauge bit-identical and no token (case 17) is frozen, pod-0 is not."""
    case_file(CASE)
    h = await make_harness(replicas=2, ready=[P0, P1])
    kv_rising = ("0.30", "0.36", "0.42", "0.48", "0.54", "0.60")
    for i, (w, k) in enumerate(zip(WAITING, kv_rising, strict=True)):
        h.fake.set(
            waiting=per_pod({P0: w, P1: "15"}),
            running=per_pod({P0: "1", P1: "106"}),
            kv_cache=kv({P0: k, P1: "0.904"}),
            throughput=rates({P0: "0", P1: "0"}),
            **ttft_answers("NaN", "0"),
        )
        report = await (h.next_cycle() if i else h.cycle())
    assert report.readings is not None
    assert {p: str(s.kind) for p, s in report.readings.stalled.items()} == {P1: "frozen"}
    assert h.target_value("vllm_scaler_frozen_pods") == 1
    assert h.target_value("vllm_scaler_hung_pods") == 0
