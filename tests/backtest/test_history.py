"""Chunking of range queries and reading history through a fake range API (no Prometheus)."""

from __future__ import annotations

import math
from typing import Any

import pytest

from scaler.backtest.history import (
    PROMETHEUS_MAX_POINTS,
    HistoryError,
    ReplicaSource,
    StepGrid,
    chunk_grid,
    make_grid,
    read_matrix,
    read_replica_history,
    replica_queries,
)
from scaler.backtest.pipeline import run_backtest
from scaler.config.policy import Policy, TargetPolicy


def _target(kind: str = "Deployment") -> TargetPolicy:
    return TargetPolicy.model_validate(
        {
            "workload": {
                "apiVersion": "apps/v1"
                if kind != "LeaderWorkerSet"
                else "leaderworkerset.x-k8s.io/v1",
                "kind": kind,
                "namespace": "llm",
                "name": "vllm",
            }
        }
    )


def test_grid_starts_on_a_whole_second_and_ends_at_or_before_end() -> None:
    g = make_grid(100.7, 159.0, 15)
    assert (g.start, g.step, g.count, g.end) == (100.0, 15.0, 4, 145.0)
    assert g.times == [100.0, 115.0, 130.0, 145.0]
    assert g.index_of(130.0) == 2
    assert g.index_of(131.0) is None
    assert g.index_of(160.0) is None
    assert make_grid(100.7, 160.0, 15).end == 160.0


@pytest.mark.parametrize("step", [0, 0.5, 1.5, math.inf, math.nan])
def test_grid_needs_whole_second_steps(step: float) -> None:
    with pytest.raises(ValueError, match="whole number"):
        make_grid(0, 100, step)


def test_grid_rejects_end_before_start() -> None:
    with pytest.raises(ValueError, match="before"):
        make_grid(100, 50, 1)


@pytest.mark.parametrize(("count", "max_points"), [(1, 5), (5, 5), (6, 5), (11, 5), (100, 7)])
def test_chunks_cover_every_step_once(count: int, max_points: int) -> None:
    grid = StepGrid(1000.0, 15.0, count)
    chunks = chunk_grid(grid, max_points)
    covered = [t for s, e in chunks for t in StepGrid(s, 15.0, int((e - s) / 15) + 1).times]
    assert covered == grid.times
    assert all((e - s) / grid.step + 1 <= max_points for s, e in chunks)


def test_default_chunks_stay_under_prometheus_limit() -> None:
    # 7 days at 15 s: 40,321 steps, 4 requests.
    grid = make_grid(0, 7 * 86400, 15)
    chunks = chunk_grid(grid)
    assert len(chunks) == 4
    assert all((e - s) / grid.step < PROMETHEUS_MAX_POINTS for s, e in chunks)
    assert chunks[0] == (0.0, 10_999 * 15.0)
    assert chunks[1][0] == 11_000 * 15.0


class FakeRange:
    """A range API over a function of time; records each request."""

    def __init__(self, answers: dict[str, Any]) -> None:
        self.answers = answers
        self.calls: list[tuple[str, float, float, float]] = []

    def __call__(self, query: str, start: float, end: float, step: float) -> list[Any]:
        self.calls.append((query, start, end, step))
        fn = self.answers.get(query)
        if fn is None:
            return []
        out = []
        for labels, value_at in fn:
            values = []
            t = start
            while t <= end:
                v = value_at(t)
                if v is not None:
                    values.append([t, v])
                t += step
            if values:
                out.append({"metric": labels, "values": values})
        return out


def test_read_matrix_regroups_chunks_per_step() -> None:
    fake = FakeRange(
        {
            "q": [
                ({"pod": "a"}, lambda t: str(t)),
                ({"pod": "b"}, lambda t: "NaN" if t == 20 else None),
            ]
        }
    )
    grid = make_grid(0, 50, 10)
    chunks_done = []
    m = read_matrix(fake, "q", grid, max_points=2, on_chunk=lambda: chunks_done.append(1))
    assert [(s, e) for _, s, e, _ in fake.calls] == [(0, 10), (20, 30), (40, 50)]
    assert len(chunks_done) == 3
    assert sorted(m) == [0, 1, 2, 3, 4, 5]
    assert m[3] == [({"pod": "a"}, 30.0)]
    assert m[2][0] == ({"pod": "a"}, 20.0)
    assert m[2][1][0] == {"pod": "b"} and m[2][1][1] != m[2][1][1]  # NaN kept


@pytest.mark.parametrize("stamp", ["soon", None, "NaN", "+Inf", [0]])
def test_read_matrix_refuses_a_time_that_is_not_a_number(stamp: Any) -> None:
    """A malformed answer (a proxy's, a broken server's) is a HistoryError naming the pair,
    the query and the chunk, never a traceback."""

    def bad(query: str, start: float, end: float, step: float) -> list[Any]:
        return [{"metric": {}, "values": [[stamp, "1"]]}]

    with pytest.raises(HistoryError, match=r"not a \[time, value\] pair: .*; query 'q' from "):
        read_matrix(bad, "q", make_grid(0, 10, 1))


def test_read_matrix_names_query_and_chunk_on_bad_answers() -> None:
    def bad(query: str, start: float, end: float, step: float) -> list[Any]:
        return [{"metric": {}, "values": [[start, "not a number"]]}]

    with pytest.raises(HistoryError, match=r"query 'q' from 1970-01-01T00:00:00Z"):
        read_matrix(bad, "q", make_grid(0, 10, 1))


def test_replica_sources_in_order_of_preference() -> None:
    t = _target()
    ksm_spec, ksm_ready = replica_queries(t, ReplicaSource.KUBE_STATE_METRICS) or ("", "")
    own_spec, own_ready = replica_queries(t, ReplicaSource.VLLM_SCALER) or ("", "")
    pods, pods_ready = replica_queries(t, ReplicaSource.VLLM_PODS) or ("", "")
    assert ksm_spec == 'max(kube_deployment_spec_replicas{namespace="llm",deployment="vllm"})'
    assert (
        ksm_ready == 'max(kube_deployment_status_replicas_ready{namespace="llm",deployment="vllm"})'
    )
    assert own_spec == 'max(vllm_scaler_current_replicas{target="llm/Deployment/vllm"})'
    assert pods == pods_ready
    assert pods.startswith("count(count by (namespace, pod) (vllm:num_requests_running{")
    grid = make_grid(0, 30, 10)

    def one(v: str) -> list[Any]:
        return [({}, lambda t: v)]

    both = FakeRange({own_spec: one("3"), own_ready: one("2"), pods: one("4")})
    h = read_replica_history(both, t, grid=grid)
    assert h.source is ReplicaSource.VLLM_SCALER
    assert h.tried == (ReplicaSource.KUBE_STATE_METRICS, ReplicaSource.VLLM_SCALER)
    assert (h.spec, h.ready) == ([3.0] * 4, [2.0] * 4)

    ksm = FakeRange({ksm_spec: one("5"), ksm_ready: one("5"), own_spec: one("3")})
    assert read_replica_history(ksm, t, grid=grid).source is ReplicaSource.KUBE_STATE_METRICS

    only_pods = FakeRange({pods: one("4")})
    h = read_replica_history(only_pods, t, grid=grid)
    assert h.source is ReplicaSource.VLLM_PODS
    assert h.ready == h.spec == [4.0] * 4

    assert read_replica_history(FakeRange({}), t, grid=grid).source is None


def test_statefulset_and_other_kinds() -> None:
    sts = replica_queries(_target("StatefulSet"), ReplicaSource.KUBE_STATE_METRICS)
    assert sts is not None and sts[0].startswith("max(kube_statefulset_replicas{")
    assert replica_queries(_target("LeaderWorkerSet"), ReplicaSource.KUBE_STATE_METRICS) is None


class _Counted:
    """A progress hook that counts what was announced and what was done."""

    def __init__(self) -> None:
        self.total = self.done = 0

    def add_total(self, requests: int) -> None:
        self.total += requests

    def advance(self) -> None:
        self.done += 1


@pytest.mark.parametrize(
    "source",
    [
        pytest.param(ReplicaSource.KUBE_STATE_METRICS, id="first-source"),
        pytest.param(ReplicaSource.VLLM_PODS, id="last-source-one-query-for-both"),
    ],
)
def test_progress_announces_exactly_the_requests_made(source: ReplicaSource) -> None:
    """Sources without data are read once (their ready query is skipped) and the pod count
    is one query for spec and ready: the bar's total is what is read, no more."""
    t = _target()
    spec, ready = replica_queries(t, source) or ("", "")
    fake = FakeRange({spec: [({}, lambda _t: "4")], ready: [({}, lambda _t: "3")]})
    policy = Policy(targets=[t])
    progress = _Counted()
    run_backtest(
        fake, policy, policy.targets, make_grid(0, 100, 10), model_load_seconds=60,
        max_points=4, progress=progress,
    )  # fmt: skip
    assert len(fake.calls) > 0
    assert progress.done == len(fake.calls)
    assert progress.total == len(fake.calls)
