"""What the backtest says when history lacks vLLM's throughput counters, and how its table
shows the signals (a range-query stand-in: no Prometheus)."""

from __future__ import annotations

from typing import Any

from scaler.backtest.history import make_grid
from scaler.backtest.pipeline import run_backtest
from scaler.backtest.report import format_text, to_json
from scaler.config.policy import parse_policy
from scaler.core.signals import SignalStatus
from tests.support.policies import case_target_doc

START, STEPS = 1_000_000.0, 6
PODS = ("vllm-5c4d9-aaaa0", "vllm-5c4d9-bbbb0")


def _policy(**signals: Any) -> Any:
    # in weighted tokens: the figures below are token rates (the replay's unit is the policy's)
    signals.setdefault("capacity", {"unit": "weighted_tokens"})
    target = case_target_doc(signals={"queue_depth": {"target_per_replica": 4}, **signals})
    return parse_policy({"rate_window_seconds": 60, "targets": [target]})


def _history(counters: bool) -> Any:
    """Two pods waiting 10 requests each for the whole range; the throughput counters' rates
    only when ``counters``; kube-state-metrics says 2 and 3 replicas in turn."""

    def values(v: float) -> list[list[Any]]:
        return [[START + 15 * i, str(v)] for i in range(STEPS)]

    def query(q: str, start: float, end: float, step: float) -> list[dict[str, Any]]:
        if q.startswith("max(kube_deployment"):
            # 2 and 3 replicas in turn: every step is a row of the table
            spec = [[START + 15 * i, str(2 + i % 2)] for i in range(STEPS)]
            return [{"metric": {}, "values": spec}]
        if "scaler_selector" not in q:
            return []
        out = []
        for pod in PODS:
            labels = {"namespace": "llm", "pod": pod, "scaler_selector": "s0"}
            if "vllm:num_requests_waiting" in q and q.startswith("label_replace(sum"):
                out.append({"metric": labels, "values": values(10)})
            elif "vllm:num_requests_running" in q and "rate(" not in q:
                out.append({"metric": labels, "values": values(5)})
            elif "vllm:prompt_tokens_total" in q and counters:
                for m, v in (("vllm:request_success_total", 1.0),
                             ("vllm:prompt_tokens_total", 900.0),
                             ("vllm:generation_tokens_total", 100.0)):  # fmt: skip
                    out.append({"metric": {**labels, "scaler_metric": m}, "values": values(v)})
        return out

    return query


def _run(counters: bool, **signals: Any) -> Any:
    policy = _policy(**signals)
    grid = make_grid(START, START + 15 * (STEPS - 1), 15)
    return run_backtest(_history(counters), policy, policy.targets, grid, model_load_seconds=60)


def test_missing_counters_are_said_once_naming_the_target_and_the_metrics() -> None:
    (bt,) = _run(False)
    assert bt.notes == (
        "llm/Deployment/vllm: no vllm:request_success_total / vllm:prompt_tokens_total / "
        "vllm:generation_tokens_total series in the history of its pods (vLLM's throughput "
        "counters): the capacity signal reads no demand at any step and decides as the "
        "controller does without it",
    )
    # as the controller: no estimate, no seed, so the capacity signal is learning and holds
    # nothing back; queue depth decides (20 waiting for 4 per replica: 5)
    assert {st.capacity.capacity_tokens_per_second for st in bt.result.steps} == {None}
    assert max(st.policy_replicas for st in bt.result.steps) == 5
    # the same history with the counters: the demand is read, and nothing is said
    (with_counters,) = _run(True)
    assert with_counters.notes == ()
    c = with_counters.result.steps[-1].capacity
    assert c.demand_tokens_per_second == 2 * (900 + 16 * 100)
    # the capacity signal off in the policy and its shadow: nothing to say
    (off,) = _run(False, capacity={"enabled": False})
    assert off.notes == () and off.result.steps[-1].capacity is None


def test_the_table_shows_queue_depth_per_replica_and_keeps_its_columns() -> None:
    (bt,) = _run(True)
    text = format_text([bt], step_seconds=15)
    lines = text.splitlines()
    header = next(line for line in lines if line.lstrip().startswith("time"))
    width = max(len(str(st.reason)) for st in bt.result.steps)
    signals_at = header.index("signals")
    rows = [line for line in lines if line[2:3].isdigit()]
    assert len(rows) == STEPS
    # a reason longer than the header's word (the replicas added are still loading)
    assert "waiting_for_pending" in {str(st.reason) for st in bt.result.steps}
    for row in rows:
        # the signals start in the same column on every row, whatever the reason
        assert row[signals_at - 1] == " " and row[signals_at] != " ", row
        assert len(row[:signals_at].split()[-1]) <= width
    # 20 waiting over the replay's 2 replicas at the first step: 10 per replica, labelled
    assert "queue_depth=10.00/replica" in rows[0]
    assert "demand=5k tok/s capacity=learning" in rows[0]
    doc = to_json([bt], start=START, end=START, step_seconds=15, model_load_seconds=60, plot=None)
    first = doc["targets"][0]["steps"][0]
    assert first["signals"]["queue_depth"] == {
        "status": str(SignalStatus.OK), "value": 20.0, "per_replica": 10.0
    }  # fmt: skip
    # the unit in the keys, the policy's (weighted tokens here), never a misread number
    assert first["capacity"]["unit"] == "weighted_tokens_per_second"
    assert first["capacity"]["demand_weighted_tokens_per_second"] == 5000.0
    assert "demand_tokens_per_second" not in first["capacity"]
