"""The simulated fleet's removal order held to the real ReplicaSet controller's.

Eleven pods, placed by hand on the two kwok nodes (six on one, four on the other, one
unassigned), with deletion costs, Ready times an hour to 100 s ago and restart counts, are
adopted by a ReplicaSet, which is then scaled down in three steps. Before each step the
ranking of :mod:`scaler.sim.ranking` (what the simulated fleet and the tests' ReplicaSet
remove by) is computed from the pods as the API holds them; the pods the real
kube-controller-manager removes are those. The scenario is built so that every rule decides
a step: unassigned, Pending and not-Ready pods first; then the lowest cost; then the pods of
the fuller node; then the shortest Ready on the logarithmic scale; then the most restarts.

The ReplicaSet's controller is a ConfigMap: the controller counts a pod's node-mates among
the pods of every ReplicaSet of the same controller (none without one), and no Deployment
may own pods it did not create.
"""

from __future__ import annotations

import copy
import time
from datetime import UTC, datetime
from typing import Any

from scaler.sim.controlplane import POD_PLACEMENT, READY_DELAY_ANNOTATION, Cluster
from scaler.sim.ranking import pod_facts, removal_order

LABELS = {"app": "ranked"}
COST = "controller.kubernetes.io/pod-deletion-cost"

Doc = dict[str, Any]

#: name -> (node: "a", "b" or "" unassigned; state; cost; seconds Ready; restarts)
PODS: dict[str, tuple[str, str, int, float, int]] = {
    "unassigned": ("", "pending", 0, 0, 0),
    "pending": ("a", "pending", 0, 0, 0),
    "not-ready": ("b", "not-ready", 0, 0, 0),
    "a-old": ("a", "ready", 0, 3600, 0),
    "a-mid": ("a", "ready", 0, 110, 0),
    "a-costly": ("a", "ready", 5, 100, 0),
    "a-new": ("a", "ready", 0, 400, 0),
    "a-cheap": ("a", "ready", -2, 3600, 0),
    "b-old": ("b", "ready", 0, 1800, 0),
    "b-restarted": ("b", "ready", 0, 100, 3),
    "b-calm": ("b", "ready", 0, 100, 0),
}
#: what each step removes (11 -> 8 -> 5 -> 2)
STEPS = [
    (8, {"unassigned", "pending", "not-ready"}),
    (5, {"a-cheap", "a-mid", "a-new"}),
    (2, {"b-restarted", "b-calm", "b-old"}),
]


def _rfc3339(epoch: float) -> str:
    return datetime.fromtimestamp(int(epoch), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _pod(name: str, node: str, state: str, cost: int) -> Doc:
    spec: Doc = {
        **copy.deepcopy(POD_PLACEMENT),
        "terminationGracePeriodSeconds": 1,
        "containers": [{"name": "vllm", "image": "vllm/vllm-openai:kwok"}],
    }
    if node:
        spec["nodeName"] = node
    else:  # no node matches: it stays unscheduled
        spec["nodeSelector"] = {"type": "no-such-node"}
    delay = "3600s" if state == "pending" else "0s"
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": dict(LABELS),
                     "annotations": {READY_DELAY_ANNOTATION: delay, COST: str(cost)}},
        "spec": spec,
    }  # fmt: skip


def _set_status(
    kube: Cluster, ns: str, name: str, ready: bool, since: float, restarts: int
) -> None:
    path = f"/api/v1/namespaces/{ns}/pods/{name}"
    pod = kube.get(path)
    status = pod["status"]
    for c in status["conditions"]:
        if c["type"] in ("Ready", "ContainersReady"):
            c["status"] = "True" if ready else "False"
            c["lastTransitionTime"] = _rfc3339(since)
    for c in status.get("containerStatuses") or []:
        c["restartCount"] = restarts
        c["ready"] = ready
    kube.request("PUT", f"{path}/status", body=pod)


def _ranked(kube: Cluster, ns: str) -> list[Doc]:
    pods = kube.get(f"/api/v1/namespaces/{ns}/pods", labelSelector="app=ranked")["items"]
    return [p for p in pods if not p["metadata"].get("deletionTimestamp")]


def test_the_sims_removal_order_is_the_replicasets(kube: Cluster, namespace: str) -> None:
    ns = namespace
    nodes = sorted(
        n["metadata"]["name"] for n in kube.get("/api/v1/nodes", labelSelector="type=kwok")["items"]
    )[:2]
    on = {"a": nodes[0], "b": nodes[1], "": ""}
    for name, (node, state, cost, _, _) in PODS.items():
        kube.request(
            "POST", f"/api/v1/namespaces/{ns}/pods", body=_pod(name, on[node], state, cost)
        )

    def started() -> bool:
        phases = {p["metadata"]["name"]: p["status"].get("phase") for p in _ranked(kube, ns)}
        return all(
            phases.get(n) == ("Pending" if state == "pending" else "Running")
            for n, (_, state, _, _, _) in PODS.items()
        )

    kube.wait_for(started, timeout=60, what="the pods Running, the pending ones Pending")
    now = time.time()
    for name, (_, state, _, age, restarts) in PODS.items():
        if state != "pending":
            _set_status(kube, ns, name, state == "ready", now - age, restarts)
    owner = kube.request("POST", f"/api/v1/namespaces/{ns}/configmaps",
                         body={"metadata": {"name": "ranked-owner"}})  # fmt: skip
    ref = {"apiVersion": "v1", "kind": "ConfigMap", "name": "ranked-owner",
           "uid": owner["metadata"]["uid"], "controller": True}  # fmt: skip
    template = {"metadata": {"labels": dict(LABELS)},
                "spec": _pod("x", "", "ready", 0)["spec"]}  # fmt: skip
    kube.request(
        "POST",
        f"/apis/apps/v1/namespaces/{ns}/replicasets",
        body={
            "metadata": {"name": "ranked", "ownerReferences": [ref]},
            "spec": {
                "replicas": len(PODS),
                "selector": {"matchLabels": dict(LABELS)},
                "template": template,
            },
        },
    )
    kube.wait_for(
        lambda: (
            all(p["metadata"].get("ownerReferences") for p in _ranked(kube, ns))
            and len(_ranked(kube, ns)) == len(PODS)
        ),
        timeout=30,
        what="the ReplicaSet to adopt the pods",
    )
    for replicas, removed in STEPS:
        before = _ranked(kube, ns)
        order = removal_order([pod_facts(p) for p in before], now=time.time())
        predicted = {f.name for f in order[: len(before) - replicas]}
        assert predicted == removed  # the sim's ranking, on the pods as the API holds them
        kube.request(
            "PATCH",
            f"/apis/apps/v1/namespaces/{ns}/replicasets/ranked/scale",
            body={"spec": {"replicas": replicas}},
            content_type="application/merge-patch+json",
        )
        kube.wait_for(
            lambda r=replicas: len(_ranked(kube, ns)) == r,  # type: ignore[misc]
            timeout=30,
            what=f"{replicas} pods left",
        )
        left = {p["metadata"]["name"] for p in _ranked(kube, ns)}
        assert {p["metadata"]["name"] for p in before} - left == predicted
