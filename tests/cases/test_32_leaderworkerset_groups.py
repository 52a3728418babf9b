"""Case 32 and its kind through the real code path: a scale target whose replica is a group of
pods (a LeaderWorkerSet), where every pod of a group may serve.

The Kubernetes stand-in over HTTP with the real client holds the LeaderWorkerSet as its
controller builds it: the leader StatefulSet (owned by the LeaderWorkerSet) and its leader
pods, each leader pod owning its group's worker StatefulSet and its workers, the pods labelled
with the set's name, group index and worker index; its ``/scale`` counts groups and selects the
leaders only (``status.hpaPodSelector``). The fake Prometheus over HTTP answers every pod's
engine. What a cluster-tier variant needs from a real server: LeaderWorkerSet's CRD
(``leaderworkerset.x-k8s.io/v1``) with its scale subresource (``labelSelectorPath:
.status.hpaPodSelector``) and the LeaderWorkerSet controller creating the StatefulSets and
pods with their ownerReferences, or those objects created as it would.
"""

from __future__ import annotations

from typing import Any

import pytest

from scaler.config.policy import parse_policy
from scaler.controller.report import TargetReport
from scaler.core.reasons import Reason
from scaler.sim.kubeapi import KubeStore, owner_reference
from tests.support.controller_harness import Harness, HarnessFactory, decision_of
from tests.support.fakeprom import case_file, kv, per_pod, rates, ttft_answers
from tests.support.policies import case_target_doc

CASE = "32-leaderworkerset-groups.md"
GROUP, PLURAL = "leaderworkerset.x-k8s.io", "leaderworkersets"
KEY = "llm/LeaderWorkerSet/vllm-dp"
NAME_LABEL = "leaderworkerset.sigs.k8s.io/name"
LEADERS = ["vllm-dp-0", "vllm-dp-1"]
WORKERS = ["vllm-dp-0-1", "vllm-dp-1-1"]


def _policy(**groups: Any) -> Any:
    target = case_target_doc(
        workload={"apiVersion": f"{GROUP}/v1", "kind": "LeaderWorkerSet", "namespace": "llm",
                  "name": "vllm-dp"},
        **({"replica_groups": groups} if groups else {}),
    )  # fmt: skip
    return parse_policy({"targets": [target]})


def _labels(group: int, worker: int) -> dict[str, str]:
    return {
        NAME_LABEL: "vllm-dp",
        "leaderworkerset.sigs.k8s.io/group-index": str(group),
        "leaderworkerset.sigs.k8s.io/worker-index": str(worker),
    }


def _lws(store: KubeStore, now: float, *, groups: int = 2, worker_ready: bool = True) -> None:
    """A LeaderWorkerSet of ``groups`` groups of 2 pods (a leader and one worker)."""
    store.register_kind(GROUP, "v1", "LeaderWorkerSet", PLURAL)
    lws = store.add_workload(GROUP, PLURAL, "llm", "vllm-dp", replicas=groups,
                             labels={NAME_LABEL: "vllm-dp"})  # fmt: skip
    store.set_workload_spec(
        "llm", "vllm-dp", {"leaderWorkerTemplate": {"size": 2}}, group=GROUP, plural=PLURAL
    )
    store.set_scale_selector(
        "llm", "vllm-dp", f"{NAME_LABEL}=vllm-dp,leaderworkerset.sigs.k8s.io/worker-index=0",
        group=GROUP, plural=PLURAL,
    )  # fmt: skip
    leaders = store.add_workload(
        "apps", "statefulsets", "llm", "vllm-dp", replicas=groups,
        labels={NAME_LABEL: "vllm-dp", "leaderworkerset.sigs.k8s.io/worker-index": "0"},
        owner=owner_reference(lws),
    )  # fmt: skip
    for g in range(groups):
        leader = store.add_pod("llm", f"vllm-dp-{g}", _labels(g, 0), ready=True,
                               created_at=now - 3600, owner=owner_reference(leaders))  # fmt: skip
        workers = store.add_workload(
            "apps", "statefulsets", "llm", f"vllm-dp-{g}", replicas=1, labels=_labels(g, 1),
            owner=owner_reference(leader),
        )  # fmt: skip
        ready = worker_ready or g == 0
        store.add_pod("llm", f"vllm-dp-{g}-1", _labels(g, 1), ready=ready,
                      created_at=now - (3600 if ready else 60),
                      owner=owner_reference(workers))  # fmt: skip


def _answers() -> dict[str, Any]:
    """Every pod runs an engine: each leader 5 waiting, each worker 15 (40 in all)."""
    waiting = {**dict.fromkeys(LEADERS, "5"), **dict.fromkeys(WORKERS, "15")}
    every = list(waiting)
    return {
        "waiting": per_pod(waiting),
        "running": per_pod(dict.fromkeys(every, "4")),
        "kv_cache": kv({**dict.fromkeys(LEADERS, "0.5"), **dict.fromkeys(WORKERS, "0.7")}),
        "throughput": rates(dict.fromkeys(every, ("1", "300", "60"))),
        **ttft_answers("NaN", "0"),
    }


async def _cycle(h: Harness) -> TargetReport:
    (report,) = await h.controller.run_cycle()
    return report


async def _harness(make_harness: HarnessFactory, policy: Any, **fleet: Any) -> Harness:
    h = await make_harness(replicas=1, policy=policy, answers=_answers())
    _lws(h.store, h.clock.now, **fleet)
    return h


def _value(r: TargetReport, signal: str) -> float | None:
    assert r.decision is not None
    return next(e.value for e in r.decision.signals if e.name == signal)


async def test_case_32_demand_is_read_from_every_pod_and_sized_in_groups(
    make_harness: HarnessFactory,
) -> None:
    """Case 32: 40 waiting over the 4 pods of 2 groups at 10 per group gives 4 groups, not the
    1 that the leaders' 10 would; the KV cache is each group's mean (0.6), not a sum of pods."""
    case_file(CASE)
    h = await _harness(make_harness, _policy())
    r = await _cycle(h)
    d = decision_of(r)
    assert (d.replicas.ready, d.replicas.starting) == (2, 0)  # groups, not pods
    assert _value(r, "queue_depth") == 20.0  # 40 waiting over 2 groups
    assert _value(r, "kv_cache_usage") == pytest.approx(0.6)  # (0.5 + 0.7) / 2 per group
    assert (d.reason, d.desired_replicas) == (Reason.SCALE_UP, 4)
    assert h.store.get_spec_replicas("llm", "vllm-dp", group=GROUP, plural=PLURAL) == 4
    assert h.value("vllm_scaler_ready_replicas", target=KEY) == 2
    assert h.value("vllm_scaler_foreign_pods", target=KEY) == 0


async def test_case_32_leaders_only_for_the_tensor_parallel_layout(
    make_harness: HarnessFactory,
) -> None:
    """Case 32: a target that says its leaders serve (multi-node tensor parallel) reads them
    alone: 10 waiting over 2 groups, no scale-up."""
    case_file(CASE)
    h = await _harness(make_harness, _policy(serving_pods="leaders"))
    r = await _cycle(h)
    assert r.decision is not None
    assert _value(r, "queue_depth") == 5.0  # the leaders' 10 over 2 groups
    assert r.decision.desired_replicas == 2 and h.patches() == []
    assert h.value("vllm_scaler_stale_series_dropped_total", target=KEY) is None  # workers


async def test_case_32_a_group_is_ready_when_all_its_pods_are(
    make_harness: HarnessFactory,
) -> None:
    """Case 32: a group whose worker is still loading is starting, not ready: it is counted as
    capacity asked for, and its pods' series are not demand of the ready groups."""
    case_file(CASE)
    h = await _harness(make_harness, _policy(), worker_ready=False)
    r = await _cycle(h)
    d = decision_of(r)
    assert (d.replicas.ready, d.replicas.starting, d.replicas.stuck) == (1, 1, 0)
    assert _value(r, "queue_depth") == 10.0  # group 0's 5 + 15 over the 2 groups asked for
    assert d.desired_replicas == 2  # 20 waiting at 10 a group: the 2 asked for cover it
    h.store.mark_pod_terminating("llm", "vllm-dp-1-1")
    h.clock.advance(30)
    d2 = (await _cycle(h)).decision
    assert d2 is not None
    assert (d2.replicas.ready, d2.replicas.terminating) == (1, 1)  # the group drains
