"""Case 29 and its kind through the real code path: an answer the backend flags as possibly
incomplete never counts as full coverage.

The Kubernetes stand-in over HTTP with the real client, the fake Prometheus over HTTP
answering every query with ``status: success`` and the backend's ``warnings`` (Thanos' partial
response; VictoriaMetrics cluster's ``isPartial``), the real source, actuator, metrics and
controller on one fake clock, one cycle every 30 s as in the case.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from scaler.core.reasons import Reason
from tests.support.controller_harness import Harness, HarnessFactory, captured_logs
from tests.support.fakeprom import R, case_file, kv, per_pod, pods, rates, sample

CASE = "29-partial-response-warnings.md"
THANOS = (
    "No StoreAPIs matched for this query",
    "receive: fetching series from store 10.0.3.7:10901: rpc error: code = Unavailable",
)
FOUR = pods(4)
QUERIES = ("waiting", "running", "kv_cache", "ttft_rate", "throughput")


def _with(answer: dict[str, Any], *, warnings: tuple[str, ...] = (), vm: bool = False) -> Any:
    body = copy.deepcopy(answer)
    if warnings:
        body["warnings"] = list(warnings)
    if vm:
        body["isPartial"] = True
    return body


def _answers(
    waiting: dict[str, str], *, warnings: tuple[str, ...] = (), vm: bool = False
) -> dict[str, Any]:
    """The case: queue depth and KV have all 4 pods, the TTFT answer 2 of them (idle), every
    answer carrying the backend's warnings."""
    ttft = R(*(sample(p, "0") for p in FOUR[:2]))
    plain = {
        "waiting": per_pod(waiting),
        "running": per_pod(dict.fromkeys(FOUR, "0")),
        "kv_cache": kv(dict.fromkeys(FOUR, "0.0")),
        "ttft_rate": ttft,
        "throughput": rates(dict.fromkeys(FOUR, "0")),
    }
    return {k: _with(v, warnings=warnings, vm=vm) for k, v in plain.items()}


def _idle(**flags: Any) -> dict[str, Any]:
    return _answers(dict.fromkeys(FOUR, "0"), **flags)


async def _cycles(h: Harness, n: int) -> list[tuple[int, Reason]]:
    seen = []
    for _ in range(n):
        r = await h.next_cycle()
        assert r.decision is not None
        seen.append((r.decision.desired_replicas, r.decision.reason))
    return seen


@pytest.mark.parametrize(
    "flags",
    [
        pytest.param({"warnings": THANOS}, id="Thanos partial response"),
        pytest.param({"vm": True}, id="VictoriaMetrics isPartial"),
    ],
)
async def test_case_29_a_partial_answer_never_allows_a_scale_down(
    make_harness: HarnessFactory, flags: dict[str, Any]
) -> None:
    """Case 29: 16 cycles of idle pods read from partial answers hold 4 (the reason names the
    partial answer), the warnings are logged once per query and counted per query and cycle;
    once the answers are complete, the scale-down comes after a whole window."""
    case_file(CASE)
    h = await make_harness(replicas=4, ready=FOUR, answers=_idle(**flags))
    with captured_logs() as logs:
        first = await h.cycle()
        seen = [(first.decision.desired_replicas, first.decision.reason)] if first.decision else []
        seen += await _cycles(h, 15)
    assert seen == [(4, Reason.SCALE_DOWN_BLOCKED_MISSING_SIGNAL)] * 16
    assert h.replicas() == 4 and h.patches() == []
    assert first.decision is not None
    assert "the waiting answer is partial (" in first.decision.message
    said = THANOS[0] if "warnings" in flags else "isPartial: true"
    assert said in first.decision.message
    for signal in ("queue_depth", "kv_cache_usage", "ttft_p95"):
        assert h.signal_status(signal) == "partial"
    for query in QUERIES:
        assert h.count("vllm_scaler_partial_answers_total", query=query) == 16
    warned = [e for e in logs if e["event"] == "query_partial_answer"]
    assert sorted(e["query"] for e in warned) == sorted(QUERIES)  # once per query
    assert all(e["log_level"] == "warning" for e in warned)

    # complete answers again: said once, and a scale-down only a whole window (300 s) later
    h.fake.set(**_idle())
    with captured_logs() as logs:
        after = await _cycles(h, 12)
    complete = [e["query"] for e in logs if e["event"] == "query_answer_complete"]
    assert sorted(complete) == sorted(QUERIES)
    # the window holds 4 until the last partial hold is 300 s old; then one replica a minute
    assert after[:9] == [(4, Reason.STABILIZED)] * 9
    assert after[9] == (3, Reason.STEP_LIMITED)


async def test_case_29_a_partial_answer_that_already_shows_the_demand_may_scale_up(
    make_harness: HarnessFactory,
) -> None:
    """Case 29: a scale-up that the partial answer already asks for goes ahead (what is missing
    can only add demand): 80 waiting on 4 replicas goes to 8."""
    case_file(CASE)
    h = await make_harness(
        replicas=4, ready=FOUR, answers=_answers(dict.fromkeys(FOUR, "20"), warnings=THANOS)
    )
    r = await h.cycle()
    assert r.decision is not None
    assert (r.decision.desired_replicas, r.decision.reason) == (8, Reason.SCALE_UP)
    assert h.replicas() == 8
    assert h.signal_status("queue_depth") == "partial"


async def test_case_29_evaluation_notes_are_not_partial_answers(
    make_harness: HarnessFactory,
) -> None:
    """Prometheus' own evaluation notes (``PromQL info: ...``) say how a value was computed, not
    that data is missing: the answer counts as complete and the idle target scales down."""
    case_file(CASE)
    note = ('PromQL info: metric might not be a counter, name does not end in _total/_sum/'
            '_count/_bucket: "vllm:num_requests_waiting"')  # fmt: skip
    h = await make_harness(replicas=4, ready=FOUR, answers=_idle(warnings=(note,)))
    with captured_logs() as logs:
        await h.cycle()
        seen = await _cycles(h, 10)
    assert seen[-1] == (3, Reason.STEP_LIMITED)  # idle: 1 asked, one replica a minute
    assert [e for e in logs if e["event"] == "query_partial_answer"] == []
    assert h.count("vllm_scaler_partial_answers_total", query="waiting") == 0


async def test_case_29_a_partial_answer_touches_only_the_signals_read_from_it(
    make_harness: HarnessFactory,
) -> None:
    """Blast radius: the backend says which answer is partial, not which series it lacks, so
    every signal read from that answer is partial and only those: a partial TTFT answer
    leaves the queue and KV cache complete (and names itself in TTFT's detail)."""
    case_file(CASE)
    answers = _idle()
    answers["ttft_rate"] = _with(answers["ttft_rate"], warnings=THANOS)
    h = await make_harness(replicas=4, ready=FOUR, answers=answers)
    r = await h.cycle()
    assert r.decision is not None
    assert h.signal_status("queue_depth") == "ok" and h.signal_status("kv_cache_usage") == "ok"
    assert h.signal_status("ttft_p95") == "partial"
    ttft = next(e for e in r.decision.signals if e.name == "ttft_p95")
    assert ttft.detail.startswith("the ttft_rate answer is partial (2 warnings: ")
    assert h.count("vllm_scaler_partial_answers_total", query="waiting") == 0
    assert h.count("vllm_scaler_partial_answers_total", query="ttft_rate") == 1
