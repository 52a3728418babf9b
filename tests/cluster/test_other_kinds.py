"""Targets other than a Deployment on a real API server: a StatefulSet (the real StatefulSet
controller, which removes the highest ordinal and ignores pod-deletion-cost), and a
LeaderWorkerSet through its CRD's scale subresource.

No LeaderWorkerSet controller runs here: the test plays the part of it the scale needs,
as the LWS controller does, keeping one leader StatefulSet (owned by the LeaderWorkerSet, so
that its pods are the target's) with replicas equal to the
LeaderWorkerSet's and writing the LeaderWorkerSet's ``status.replicas`` and
``status.hpaPodSelector`` (the leader pods' selector) from it. The CRD is a minimal one
with the group, names and scale subresource paths of the LeaderWorkerSet project's.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from scaler.sim.controlplane import Cluster
from scaler.sim.controlplane.cluster import ClusterError
from tests.cluster.podmetrics import Load
from tests.cluster.scene import Scene
from tests.cluster.workloads import crd_installed, pod_template, policy, policy_values, statefulset

LWS_CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "leaderworkersets.leaderworkerset.x-k8s.io"},
    "spec": {
        "group": "leaderworkerset.x-k8s.io",
        "names": {
            "kind": "LeaderWorkerSet",
            "listKind": "LeaderWorkerSetList",
            "plural": "leaderworkersets",
            "singular": "leaderworkerset",
            "shortNames": ["lws"],
        },
        "scope": "Namespaced",
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "subresources": {
                    "status": {},
                    "scale": {
                        "specReplicasPath": ".spec.replicas",
                        "statusReplicasPath": ".status.replicas",
                        "labelSelectorPath": ".status.hpaPodSelector",
                    },
                },
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {
                            "spec": {
                                "type": "object",
                                "x-kubernetes-preserve-unknown-fields": True,
                                "properties": {
                                    "replicas": {"type": "integer", "format": "int32", "default": 1}
                                },
                            },
                            "status": {
                                "type": "object",
                                "properties": {
                                    "replicas": {"type": "integer", "format": "int32"},
                                    "readyReplicas": {"type": "integer", "format": "int32"},
                                    "hpaPodSelector": {"type": "string"},
                                },
                            },
                        },
                    }
                },
            }
        ],
    },
}

LWS_NAME = "leaderworkerset.sigs.k8s.io/name"
WORKER_INDEX = "leaderworkerset.sigs.k8s.io/worker-index"


async def test_a_statefulset_scales_by_its_highest_ordinals(scene: Scene) -> None:
    scene.kube.apply([statefulset(scene.namespace, replicas=1)])
    _, metrics = await scene.serve(1, Load(waiting=4, running=8))
    metrics.set_load("vllm-0", Load(waiting=12, running=8))  # 12 waiting: 3 replicas
    install = scene.install_scaler(
        policy_values(policy(scene.namespace, kind="StatefulSet", max_replicas=3))
    )
    proc = install.start(scene.prometheus.url)
    scene.wait_replicas(3, resource="statefulsets")
    assert scene.wait_ready(3) == ["vllm-0", "vllm-1", "vllm-2"]
    metrics.set_load(None, Load())
    metrics.set_load("vllm-0", Load())
    scene.wait_replicas(1, resource="statefulsets")
    assert scene.wait_ready(1) == ["vllm-0"]
    unsupported = proc.wait_event("pod_deletion_cost_unsupported", timeout=5)
    assert unsupported["kind"] == "StatefulSet"


@pytest.fixture
def lws_crd(kube: Cluster) -> Iterator[None]:
    with crd_installed(kube, LWS_CRD):
        yield


def _play_lws_controller(kube: Cluster, namespace: str, name: str) -> int:
    """One pass of the LWS controller's part the scale needs; the LWS's spec.replicas."""
    base = f"/apis/leaderworkerset.x-k8s.io/v1/namespaces/{namespace}/leaderworkersets/{name}"
    lws = kube.get(base)
    replicas = int(lws["spec"].get("replicas", 1))
    kube.request(
        "PATCH",
        f"/apis/apps/v1/namespaces/{namespace}/statefulsets/{name}/scale",
        body={"spec": {"replicas": replicas}},
        content_type="application/merge-patch+json",
    )
    sts = kube.get(f"/apis/apps/v1/namespaces/{namespace}/statefulsets/{name}")
    kube.request(
        "PATCH",
        f"{base}/status",
        body={
            "status": {
                "replicas": int(sts.get("status", {}).get("replicas", 0)),
                "readyReplicas": int(sts.get("status", {}).get("readyReplicas", 0)),
                "hpaPodSelector": f"{LWS_NAME}={name},{WORKER_INDEX}=0",
            }
        },
        content_type="application/merge-patch+json",
    )
    return replicas


async def test_a_leaderworkerset_scales_through_its_crds_scale_subresource(
    lws_crd: None, scene: Scene
) -> None:
    kube, ns = scene.kube, scene.namespace
    labels = {LWS_NAME: "vllm", WORKER_INDEX: "0"}
    leaders = statefulset(ns, replicas=1)
    leaders["spec"]["selector"] = {"matchLabels": labels}
    leaders["spec"]["template"] = pod_template(labels)
    lws = {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": {"name": "vllm", "namespace": ns},
        "spec": {"replicas": 1, "leaderWorkerTemplate": {"size": 1}},
    }
    kube.apply([lws])
    # The LWS controller owns its leader StatefulSet: the pods' owner chain leads to the LWS.
    uid = kube.get(f"/apis/leaderworkerset.x-k8s.io/v1/namespaces/{ns}/leaderworkersets/vllm")[
        "metadata"
    ]["uid"]
    leaders["metadata"]["ownerReferences"] = [
        {
            "apiVersion": "leaderworkerset.x-k8s.io/v1",
            "kind": "LeaderWorkerSet",
            "name": "vllm",
            "uid": uid,
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    kube.apply([leaders])
    _play_lws_controller(kube, ns, "vllm")
    scene.wait_ready(1)
    _play_lws_controller(kube, ns, "vllm")
    scale = kube.get(
        f"/apis/leaderworkerset.x-k8s.io/v1/namespaces/{ns}/leaderworkersets/vllm/scale"
    )
    assert scale["status"]["selector"] == f"{LWS_NAME}=vllm,{WORKER_INDEX}=0", scale
    await scene.serve(1, Load(waiting=8, running=8))  # 8 waiting: 2 groups
    install = scene.install_scaler(
        policy_values(
            policy(
                ns,
                kind="LeaderWorkerSet",
                api_version="leaderworkerset.x-k8s.io/v1",
                max_replicas=4,
            )
        )
    )
    proc = install.start(scene.prometheus.url)
    try:
        kube.wait_for(
            lambda: _play_lws_controller(kube, ns, "vllm") == 2,
            timeout=60,
            what="the LeaderWorkerSet scaled to 2 groups",
        )
    except ClusterError as exc:
        raise AssertionError(f"{exc}; the controller's log tail:\n{proc.tail()}") from exc
    scene.wait_ready(2)
    up = proc.wait_event("decision", timeout=10, where=lambda d: d.get("action") == "scaled")
    assert up["target"] == f"{ns}/LeaderWorkerSet/vllm" and up["desired"] == 2, up
