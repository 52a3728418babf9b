"""Another autoscaler on the same workload, on a real API server: an autoscaling/v2
HorizontalPodAutoscaler (with the real HPA controller running), and a KEDA ScaledObject (its
CRD installed: a minimal one with the fields KEDA's own CRD has for ``scaleTargetRef``). In
both cases vllm-scaler writes nothing: reason ``conflict``, the conflict gauge naming the
owner, and a Warning Event ``ConflictingAutoscaler`` as ``kubectl get events`` shows it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from scaler.sim.controlplane import Cluster
from tests.cluster.podmetrics import Load
from tests.cluster.scene import Scene
from tests.cluster.workloads import crd_installed, deployment, policy, policy_values

# The KEDA ScaledObject kind: group, version, names and the scale target's fields as KEDA
# v2 defines them (keda.sh/v1alpha1; spec.scaleTargetRef.name required, kind and
# apiVersion defaulting to apps/v1 Deployment; spec.triggers required).
SCALED_OBJECT_CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "scaledobjects.keda.sh"},
    "spec": {
        "group": "keda.sh",
        "names": {
            "kind": "ScaledObject",
            "listKind": "ScaledObjectList",
            "plural": "scaledobjects",
            "singular": "scaledobject",
            "shortNames": ["so"],
        },
        "scope": "Namespaced",
        "versions": [
            {
                "name": "v1alpha1",
                "served": True,
                "storage": True,
                "subresources": {"status": {}},
                "additionalPrinterColumns": [
                    {
                        "name": "ScaleTargetName",
                        "type": "string",
                        "jsonPath": ".spec.scaleTargetRef.name",
                    },
                    {"name": "Min", "type": "integer", "jsonPath": ".spec.minReplicaCount"},
                    {"name": "Max", "type": "integer", "jsonPath": ".spec.maxReplicaCount"},
                ],
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "required": ["spec"],
                        "properties": {
                            "spec": {
                                "type": "object",
                                "required": ["scaleTargetRef", "triggers"],
                                "properties": {
                                    "scaleTargetRef": {
                                        "type": "object",
                                        "required": ["name"],
                                        "properties": {
                                            "apiVersion": {"type": "string"},
                                            "kind": {"type": "string"},
                                            "name": {"type": "string"},
                                            "envSourceContainerName": {"type": "string"},
                                        },
                                    },
                                    "minReplicaCount": {"type": "integer", "format": "int32"},
                                    "maxReplicaCount": {"type": "integer", "format": "int32"},
                                    "pollingInterval": {"type": "integer", "format": "int32"},
                                    "cooldownPeriod": {"type": "integer", "format": "int32"},
                                    "triggers": {
                                        "type": "array",
                                        "items": {
                                            "type": "object",
                                            "required": ["type", "metadata"],
                                            "properties": {
                                                "type": {"type": "string"},
                                                "name": {"type": "string"},
                                                "metadata": {
                                                    "type": "object",
                                                    "additionalProperties": {"type": "string"},
                                                },
                                            },
                                        },
                                    },
                                },
                            },
                            "status": {
                                "type": "object",
                                "x-kubernetes-preserve-unknown-fields": True,
                            },
                        },
                    }
                },
            }
        ],
    },
}


@pytest.fixture
def keda_crd(kube: Cluster) -> Iterator[None]:
    with crd_installed(kube, SCALED_OBJECT_CRD):
        yield


def _hpa(namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "vllm-cpu", "namespace": namespace},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "vllm"},
            "minReplicas": 1,
            "maxReplicas": 10,
            "metrics": [
                {
                    "type": "Resource",
                    "resource": {
                        "name": "cpu",
                        "target": {"type": "Utilization", "averageUtilization": 80},
                    },
                }
            ],
        },
    }


def _scaled_object(namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "keda.sh/v1alpha1",
        "kind": "ScaledObject",
        "metadata": {"name": "vllm-queue", "namespace": namespace},
        "spec": {
            "scaleTargetRef": {"name": "vllm"},  # KEDA's defaults: apps/v1 Deployment
            "minReplicaCount": 1,
            "maxReplicaCount": 8,
            "triggers": [
                {
                    "type": "prometheus",
                    "metadata": {
                        "serverAddress": "http://prometheus:9090",
                        "query": "sum(vllm:num_requests_waiting)",
                        "threshold": "4",
                    },
                }
            ],
        },
    }


async def _assert_conflict(scene: Scene, owner: str) -> None:
    await scene.serve(2, Load(waiting=10, running=20))
    install = scene.install_scaler(policy_values(policy(scene.namespace, max_replicas=8)))
    proc = install.start(scene.prometheus.url)
    key = f"{scene.namespace}/Deployment/vllm"
    decision = proc.wait_event("decision", timeout=30, where=lambda d: d["reason"] == "conflict")
    assert decision["desired"] == 2 and decision["action"] == "none", decision
    assert "recommending 5 without writing" in decision["message"], decision
    assert proc.metric("vllm_scaler_conflict", target=key, owner=owner) == 1
    (event,) = scene.events("ConflictingAutoscaler")
    kind, name = owner.split("/")
    assert event["type"] == "Warning", event
    assert event["message"].startswith(
        f"{kind} {scene.namespace}/{name} also targets this Deployment; vllm-scaler will not "
        "write spec.replicas while it exists (recommends 5, current 2)"
    ), event
    assert event["involvedObject"]["kind"] == "Deployment"
    assert event["involvedObject"]["name"] == "vllm"
    table = scene.kube.kubectl("get", "events", "-n", scene.namespace).stdout
    assert "ConflictingAutoscaler" in table and "deployment/vllm" in table, table
    assert scene.spec_replicas() == 2  # 20 waiting asked for 5: nothing written


async def test_a_real_hpa_on_the_workload_is_a_conflict(scene: Scene) -> None:
    scene.kube.apply(
        [deployment(scene.namespace, replicas=2, ready_delay_seconds=1), _hpa(scene.namespace)]
    )
    await _assert_conflict(scene, "HorizontalPodAutoscaler/vllm-cpu")


async def test_a_keda_scaled_object_on_the_workload_is_a_conflict(
    keda_crd: None, scene: Scene
) -> None:
    scene.kube.apply(
        [
            deployment(scene.namespace, replicas=2, ready_delay_seconds=1),
            _scaled_object(scene.namespace),
        ]
    )
    listed = scene.kube.kubectl("get", "scaledobjects", "-n", scene.namespace).stdout
    assert "vllm-queue" in listed and "SCALETARGETNAME" in listed, listed
    await _assert_conflict(scene, "ScaledObject/vllm-queue")
