"""Case 28 and its kind through the real code path: two targets whose selectors pick the same
pods (a selector is not ownership).

The Kubernetes stand-in over HTTP with the real client holds the Deployments, the ReplicaSets
(or StatefulSet) they own and the pods with their ``ownerReferences``, as the workload
controllers stamp them; the fake Prometheus over HTTP answers every vLLM pod of the namespace,
as the namespace selector does. The real source, actuator, metrics and controller run on one
fake clock. What a cluster-tier variant needs from a real server: a Deployment's ReplicaSet
and pods created by the controller-manager (ownerReferences through the ReplicaSet), a
canary Deployment whose selector is a superset of the main one's labels, and RBAC ``get`` on
``apps`` ReplicaSets (already granted for the workloads' annotations).
"""

from __future__ import annotations

from typing import Any

import pytest

from scaler.config.policy import parse_policy
from scaler.controller.report import TargetReport
from scaler.core.reasons import Reason
from scaler.sim.kubeapi import KubeStore, owner_reference
from tests.support.controller_harness import Harness, HarnessFactory, captured_logs
from tests.support.fakeprom import case_file, kv, per_pod, rates, ttft_answers
from tests.support.policies import case_target_doc

CASE = "28-overlapping-selectors.md"
MAIN, CANARY = "llm/Deployment/vllm", "llm/Deployment/vllm-canary"
MAIN_PODS = ["vllm-5d8f7c9b4-x2k9p", "vllm-5d8f7c9b4-q4m7z"]
CANARY_PODS = ["vllm-canary-6c4d9f8b7-a1b2c", "vllm-canary-6c4d9f8b7-d3e4f"]
CANARY_LABELS = {"app": "vllm", "track": "canary"}


def _policy() -> Any:
    canary = case_target_doc(
        workload={"apiVersion": "apps/v1", "kind": "Deployment", "namespace": "llm",
                  "name": "vllm-canary"},
    )  # fmt: skip
    return parse_policy({"targets": [case_target_doc(), canary]})


def _fleet(store: KubeStore, now: float, *, owned: bool, canary_kind: str = "Deployment") -> None:
    """The case's objects: ``vllm`` (its ReplicaSet and 2 pods; the harness made the
    Deployment) and the canary (its ReplicaSet, or its own StatefulSet pods, and 2 pods),
    each pod owned through its controllers when ``owned``, bare pods otherwise."""
    main = store.get_workload("llm", "vllm")
    main_rs = store.add_workload(
        "apps", "replicasets", "llm", "vllm-5d8f7c9b4", replicas=2, labels={"app": "vllm"},
        owner=owner_reference(main),
    )  # fmt: skip
    if canary_kind == "Deployment":
        canary = store.add_deployment("llm", "vllm-canary", 2, CANARY_LABELS)
        parent = store.add_workload(
            "apps", "replicasets", "llm", "vllm-canary-6c4d9f8b7", replicas=2,
            labels=CANARY_LABELS, owner=owner_reference(canary),
        )  # fmt: skip
    else:  # a neighbour: the canary's pods owned by a StatefulSet directly
        parent = store.add_statefulset("llm", "vllm-canary", 2, CANARY_LABELS)
    for name in MAIN_PODS:
        owner = owner_reference(main_rs) if owned else None
        store.add_pod("llm", name, {"app": "vllm"}, ready=True, created_at=now - 3600, owner=owner)
    for name in CANARY_PODS:
        owner = owner_reference(parent) if owned else None
        store.add_pod("llm", name, CANARY_LABELS, ready=True, created_at=now - 3600, owner=owner)


def _answers() -> dict[str, Any]:
    """The main pods idle, the canary's with 30 waiting each."""
    waiting = {**dict.fromkeys(MAIN_PODS, "0"), **dict.fromkeys(CANARY_PODS, "30")}
    every = list(waiting)
    return {
        "waiting": per_pod(waiting),
        "running": per_pod(dict.fromkeys(every, "1")),
        "kv_cache": kv(dict.fromkeys(every, "0.3")),
        "throughput": rates(dict.fromkeys(every, ("0.5", "200", "40"))),
        **ttft_answers("NaN", "0"),
    }


async def _cycle(h: Harness) -> dict[str, TargetReport]:
    return {r.target: r for r in await h.controller.run_cycle()}


@pytest.mark.parametrize("canary_kind", ["Deployment", "StatefulSet"])
async def test_case_28_each_pod_counts_for_the_workload_that_owns_it(
    make_harness: HarnessFactory, canary_kind: str
) -> None:
    """Case 28: the canary's 60 waiting requests buy replicas for the canary only (its pods'
    ownerReferences lead to it); ``vllm`` reads its own 2 idle pods and holds 2."""
    case_file(CASE)
    policy = _policy()
    if canary_kind == "StatefulSet":
        doc = case_target_doc()
        canary = case_target_doc(
            workload={"apiVersion": "apps/v1", "kind": "StatefulSet", "namespace": "llm",
                      "name": "vllm-canary"},
        )  # fmt: skip
        policy = parse_policy({"targets": [doc, canary]})
    h = await make_harness(replicas=2, policy=policy, answers=_answers())
    _fleet(h.store, h.clock.now, owned=True, canary_kind=canary_kind)
    with captured_logs() as logs:
        reports = await _cycle(h)
    canary_key = f"llm/{canary_kind}/vllm-canary"
    main, canary = reports[MAIN].decision, reports[canary_key].decision
    assert main is not None and canary is not None
    queue = next(e for e in main.signals if e.name == "queue_depth")
    assert queue.value == 0.0  # its own pods' queue, not the canary's 60
    assert (main.desired_replicas, main.replicas.ready) == (2, 2)
    assert h.replicas() == 2
    assert canary.reason is Reason.SCALE_UP and canary.desired_replicas == 6  # 60 / 10
    assert h.value("vllm_scaler_foreign_pods", target=MAIN) == 2
    assert h.value("vllm_scaler_foreign_pods", target=canary_key) == 0
    assert h.value("vllm_scaler_shared_pods", target=MAIN) == 0
    said = [e for e in logs if e["event"] == "selector_picks_other_workloads_pods"]
    assert [(e["target"], e["owners"]) for e in said] == [
        (MAIN, [f"{canary_kind} llm/vllm-canary"])
    ]
    with captured_logs() as logs:
        await _cycle(h)
    assert [e for e in logs if e["event"] == "selector_picks_other_workloads_pods"] == []


@pytest.mark.parametrize("why", ["bare pods", "ReplicaSet read refused"])
async def test_case_28_shared_pods_whose_owner_cannot_be_told_count_for_neither(
    make_harness: HarnessFactory, why: str
) -> None:
    """Case 28: where ownership cannot be told (bare pods; the ReplicaSets cannot be read),
    neither target counts the pods both select: both report the overlap (reason, metric, a
    warning and an Event once), nothing scales on the canary's queue, nothing scales down."""
    case_file(CASE)
    h = await make_harness(replicas=2, policy=_policy(), answers=_answers())
    _fleet(h.store, h.clock.now, owned=why != "bare pods")
    if why != "bare pods":
        h.store.inject_fault("GET", r"/apis/apps/v1/namespaces/llm/replicasets/", 403, times=100)
    with captured_logs() as logs:
        reports = await _cycle(h)
    main, canary = reports[MAIN].decision, reports[CANARY].decision
    assert main is not None and canary is not None
    assert (main.desired_replicas, main.reason) == (2, Reason.AMBIGUOUS_SELECTOR)
    assert (canary.desired_replicas, canary.reason) == (2, Reason.AMBIGUOUS_SELECTOR)
    assert "also picked by the selector of llm/Deployment/vllm" in canary.message
    queue = next(e for e in main.signals if e.name == "queue_depth")
    assert queue.value == 0.0  # the shared pods' 60 waiting count for neither
    assert h.writes() and not h.patches()  # Events only: no scale written
    for key in (MAIN, CANARY):
        assert h.value("vllm_scaler_shared_pods", target=key) == 2
    warned = [e for e in logs if e["event"] == "ambiguous_selector"]
    assert sorted(e["target"] for e in warned) == [MAIN, CANARY]
    events = [r for r in h.kube.requests if r.method == "POST" and r.path.endswith("/events")]
    assert len(events) == 2
    with captured_logs() as logs:
        again = await _cycle(h)
    assert again[MAIN].decision is not None
    assert again[MAIN].decision.reason is Reason.AMBIGUOUS_SELECTOR
    assert [e for e in logs if e["event"] == "ambiguous_selector"] == []  # once per change
