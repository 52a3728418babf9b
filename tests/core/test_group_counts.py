"""ReplicaCounts of replicas that are groups of pods (a LeaderWorkerSet's), each pod judged
as a single-pod replica is: finished, waiting for a node, loading since its scheduling or its
last container restart. A group is one replica: ready when all its pods are and it is whole."""

from __future__ import annotations

from typing import Any

from scaler.core.observation import PodInfo, ReplicaCounts, WorkloadSnapshot

TIMEOUT = 600.0
WAITING = "Unschedulable: 0/4 nodes are available: 4 Insufficient nvidia.com/gpu."


def leader(group: int, **kwargs: Any) -> PodInfo:
    fields: dict[str, Any] = {"ready": True, "terminating": False, "age_seconds": 3600.0}
    return PodInfo(f"lws-{group}", group=str(group), **{**fields, **kwargs})


def worker(group: int, **kwargs: Any) -> PodInfo:
    fields: dict[str, Any] = {"ready": True, "terminating": False, "age_seconds": 3600.0}
    return PodInfo(f"lws-{group}-1", group=str(group), serves=False, **{**fields, **kwargs})


def counts(*pods: PodInfo, replicas: int = 2) -> ReplicaCounts:
    snap = WorkloadSnapshot("llm", replicas, replicas, "app=lws", "1", pods, group_size=2)
    return snap.counts(TIMEOUT)


def classes(c: ReplicaCounts) -> tuple[int, int, int, int, int, int]:
    return (c.ready, c.starting, c.stuck, c.unschedulable, c.terminating, c.finished)


def test_a_group_whose_worker_waits_for_a_node_is_waiting_then_stuck() -> None:
    young = worker(1, ready=False, age_seconds=120.0, phase="Pending", unschedulable=WAITING)
    assert classes(counts(leader(0), worker(0), leader(1), young)) == (1, 0, 0, 1, 0, 0)
    old = worker(1, ready=False, age_seconds=700.0, phase="Pending", unschedulable=WAITING)
    assert classes(counts(leader(0), worker(0), leader(1), old)) == (1, 0, 1, 0, 0, 0)


def test_a_group_loads_from_its_newest_start_not_its_pods_creation() -> None:
    # the worker got its node 100 s ago after waiting 500 s: loading, not stuck at 600
    late = worker(1, ready=False, age_seconds=650.0, scheduled_seconds=100.0)
    assert classes(counts(leader(0), worker(0), leader(1), late)) == (1, 1, 0, 0, 0, 0)
    # an hour-old leader whose vLLM container restarted 60 s ago loads the model again
    restarted = leader(1, ready=False, restarted_seconds=60.0)
    assert classes(counts(leader(0), worker(0), restarted, worker(1))) == (1, 1, 0, 0, 0, 0)
    # past the timeout since that start: stuck
    long_ago = leader(1, ready=False, restarted_seconds=900.0)
    assert classes(counts(leader(0), worker(0), long_ago, worker(1))) == (1, 0, 1, 0, 0, 0)


def test_a_finished_pod_is_never_part_of_a_ready_group() -> None:
    # an evicted worker whose conditions still say Ready: its group is not whole
    evicted = worker(1, phase="Failed")
    c = counts(leader(0), worker(0), leader(1), evicted)
    assert (c.ready, c.finished) == (1, 0)
    snap = WorkloadSnapshot(
        "llm", 2, 2, "app=lws", "1", (leader(0), worker(0), leader(1), evicted), group_size=2
    )
    assert snap.ready_pod_names == frozenset({"lws-0"})
    # a group all of whose pods finished is no replica: finished, and asked for again
    gone = counts(leader(0), worker(0), leader(1, phase="Failed"), worker(1, phase="Failed"))
    assert classes(gone) == (1, 1, 0, 0, 0, 1)


def test_single_pod_replicas_keep_their_own_rules() -> None:
    pods = (
        PodInfo("a", True, False, 3600.0),
        PodInfo("b", False, False, 3600.0, phase="Failed"),
        PodInfo("c", False, False, 120.0, phase="Pending", unschedulable=WAITING),
        PodInfo("d", False, False, 3600.0, restarted_seconds=30.0),
        PodInfo("e", True, True, 3600.0),
    )
    snap = WorkloadSnapshot("llm", 3, 3, "app=vllm", "1", pods)
    assert classes(snap.counts(TIMEOUT)) == (1, 1, 0, 1, 1, 1)
