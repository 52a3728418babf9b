"""Whether a scale-down removed the pods ranked to go (pod-deletion-cost honoured), judged
once the workload controller has carried it out (scaler.controller.removal).

A ReplicaSet controller with the PodDeletionCost feature gate off (or older than 1.22)
removes by its other rules (not ready first, then the newest): the pods ranked to go survive
and busier ones go instead. The real case is in tests/cluster/test_drain_order.py.
"""

from __future__ import annotations

from scaler.controller.removal import IgnoredOrder, pending_removal
from scaler.core.drain import plan_removal
from scaler.core.observation import PodInfo, WorkloadSnapshot


def _snap(
    spec: int,
    ready: list[str],
    *,
    terminating: tuple[str, ...] = (),
    not_ready: tuple[str, ...] = (),
) -> WorkloadSnapshot:
    pods = [PodInfo(n, ready=True, terminating=n in terminating, age_seconds=60) for n in ready]
    pods += [PodInfo(n, ready=False, terminating=False, age_seconds=5) for n in not_ready]
    return WorkloadSnapshot(
        namespace="llm",
        spec_replicas=spec,
        status_replicas=len(pods),
        selector="app=vllm",
        resource_version="1",
        pods=tuple(pods),
    )


LOAD = {"a": 0.0, "b": 1.0, "c": 9.0, "d": 12.0}


def test_the_pods_ranked_to_go_are_the_ones_removed() -> None:
    before = _snap(4, ["a", "b", "c", "d"])
    pending = pending_removal(before, plan_removal(before.pods, LOAD, 2), 2, now=100.0)
    after = _snap(2, ["a", "b", "c", "d"], terminating=("a", "b"))
    assert pending.removing(after, 101.0) == 0
    assert pending.order_ignored(after) is None


def test_other_pods_removed_name_the_survivors_and_the_removed() -> None:
    before = _snap(4, ["a", "b", "c", "d"])
    pending = pending_removal(before, plan_removal(before.pods, LOAD, 2), 2, now=100.0)
    after = _snap(2, ["a", "b"])  # c and d, the busiest, are gone
    assert pending.removing(after, 101.0) == 0
    assert pending.order_ignored(after) == IgnoredOrder(survived=("a", "b"), removed=("c", "d"))


def test_one_chosen_pod_kept_is_named_alone() -> None:
    before = _snap(4, ["a", "b", "c", "d"])
    pending = pending_removal(before, plan_removal(before.pods, LOAD, 2), 2, now=100.0)
    after = _snap(2, ["b", "c", "d"], terminating=("a", "d"))
    assert pending.order_ignored(after) == IgnoredOrder(survived=("b",), removed=("d",))


def test_a_not_ready_pod_going_first_is_the_replicasets_rule() -> None:
    before = _snap(4, ["a", "b", "c"], not_ready=("new",))
    pending = pending_removal(before, plan_removal(before.pods, LOAD, 1), 1, now=100.0)
    after = _snap(3, ["a", "b", "c"])  # the not-ready pod went instead of a
    assert pending.removing(after, 101.0) == 0
    assert pending.order_ignored(after) is None


def test_kinds_without_a_ranking_are_never_judged() -> None:
    before = _snap(3, ["s-0", "s-1", "s-2"])
    pending = pending_removal(before, None, 1, now=100.0)
    assert pending.order_ignored(_snap(2, ["s-1", "s-2"])) is None
