"""A target without replica history is left out and named; the others are replayed (a
range-query stand-in: no Prometheus)."""

from __future__ import annotations

from typing import Any

import pytest

from scaler.backtest.history import make_grid
from scaler.backtest.pipeline import NoReplicaHistoryError, run_backtest
from scaler.config.policy import parse_policy
from tests.backtest.test_capacity_notes import START, STEPS, _history
from tests.support.policies import case_target_doc

OTHER = {"apiVersion": "apps/v1", "kind": "Deployment", "namespace": "llm", "name": "other"}


def _two_targets() -> Any:
    signals = {"queue_depth": {"target_per_replica": 4}}
    return parse_policy(
        {
            "rate_window_seconds": 60,
            "targets": [
                case_target_doc(workload=OTHER, signals=signals),
                case_target_doc(signals=signals),
            ],
        }
    )


def _only_vllm_has_replicas(q: str, start: float, end: float, step: float) -> list[Any]:
    """kube-state-metrics knows the Deployment vllm only; no pod is named like other's."""
    if q.startswith("max(") and 'deployment="other"' in q:
        return []
    if q.startswith("max(vllm_scaler_") or q.startswith("count("):
        return []
    answer: list[Any] = _history(False)(q, start, end, step)
    return answer


def test_a_target_without_replica_history_touches_that_target_only() -> None:
    policy = _two_targets()
    grid = make_grid(START, START + 15 * (STEPS - 1), 15)
    failed: list[NoReplicaHistoryError] = []
    results = run_backtest(
        _only_vllm_has_replicas,
        policy,
        policy.targets,
        grid,
        model_load_seconds=60,
        on_no_history=failed.append,
    )
    assert [bt.result.target for bt in results] == ["llm/Deployment/vllm"]
    assert [e.key for e in failed] == ["llm/Deployment/other"]
    assert str(failed[0]).startswith("llm/Deployment/other: no replica history from ")
    # 20 waiting for 4 per replica: the target with history is replayed as alone
    assert results[0].result.steps[-1].policy_replicas == 5


def test_without_a_handler_the_first_target_without_history_raises() -> None:
    policy = _two_targets()
    grid = make_grid(START, START + 15 * (STEPS - 1), 15)
    with pytest.raises(NoReplicaHistoryError, match="llm/Deployment/other: no replica history"):
        run_backtest(_only_vllm_has_replicas, policy, policy.targets, grid, model_load_seconds=60)
