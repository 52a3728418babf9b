"""The test workloads: vLLM Deployments and StatefulSets whose pods run on the kwok nodes,
and the policies that target them."""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Iterator
from typing import Any

import yaml

from scaler.sim.controlplane import POD_PLACEMENT, READY_DELAY_ANNOTATION, Cluster

Doc = dict[str, Any]

#: what no registry is asked for: kwok runs no container
IMAGE = "vllm/vllm-openai:kwok"


def pod_template(labels: dict[str, str], *, ready_delay_seconds: float | None = None) -> Doc:
    """A vLLM pod template for the kwok nodes; ``ready_delay_seconds``: its model load."""
    annotations = {}
    if ready_delay_seconds is not None:
        annotations[READY_DELAY_ANNOTATION] = f"{ready_delay_seconds:g}s"
    return {
        "metadata": {"labels": dict(labels), "annotations": annotations},
        "spec": {
            **copy.deepcopy(POD_PLACEMENT),
            "terminationGracePeriodSeconds": 30,
            "containers": [{"name": "vllm", "image": IMAGE, "ports": [{"containerPort": 8000}]}],
        },
    }


def deployment(
    namespace: str,
    name: str = "vllm",
    *,
    replicas: int = 1,
    ready_delay_seconds: float | None = None,
    max_surge: int | str = "25%",
    max_unavailable: int | str = "25%",
    spread: bool = False,
) -> Doc:
    """A vLLM Deployment on the kwok nodes; ``spread``: at most one pod more on one node
    than on another (a hard topology spread over hostnames)."""
    labels = {"app": name}
    template = pod_template(labels, ready_delay_seconds=ready_delay_seconds)
    if spread:
        template["spec"]["topologySpreadConstraints"] = [
            {
                "maxSkew": 1,
                "topologyKey": "kubernetes.io/hostname",
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": labels},
            }
        ]
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "strategy": {
                "type": "RollingUpdate",
                "rollingUpdate": {"maxSurge": max_surge, "maxUnavailable": max_unavailable},
            },
            "template": template,
        },
    }


def statefulset(namespace: str, name: str = "vllm", *, replicas: int = 1) -> Doc:
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "replicas": replicas,
            "serviceName": name,
            "podManagementPolicy": "Parallel",
            "selector": {"matchLabels": labels},
            "template": pod_template(labels),
        },
    }


def policy(
    namespace: str,
    name: str = "vllm",
    *,
    kind: str = "Deployment",
    api_version: str = "apps/v1",
    min_replicas: int = 1,
    max_replicas: int = 6,
    waiting_per_replica: int = 4,
    down_window_seconds: float = 0,
    model_load_timeout_seconds: float = 60,
    extra_targets: list[Doc] | None = None,
) -> Doc:
    """A policy on queue depth alone (``waiting_per_replica`` requests waiting per replica),
    fast windows: each target scales up and down by up to 4 replicas per 10 s."""

    def target(ns: str, n: str) -> Doc:
        return {
            "workload": {"apiVersion": api_version, "kind": kind, "namespace": ns, "name": n},
            "min_replicas": min_replicas,
            "max_replicas": max_replicas,
            "signals": {
                "queue_depth": {"target_per_replica": waiting_per_replica},
                "kv_cache_usage": {"enabled": False},
                "ttft_p95": {"enabled": False},
            },
            "scale_up": {
                "stabilization_window_seconds": 0,
                "max_replicas_per_period": 4,
                "max_percent_per_period": 100,
                "period_seconds": 10,
            },
            "scale_down": {
                "stabilization_window_seconds": down_window_seconds,
                "max_replicas_per_period": 4,
                "max_percent_per_period": 100,
                "period_seconds": 10,
            },
            "model_load_timeout_seconds": model_load_timeout_seconds,
        }

    return {
        "rate_window_seconds": 8,
        "targets": [target(namespace, name), *(extra_targets or [])],
    }


def policy_values(doc: Doc, **values: Any) -> dict[str, Any]:
    """Chart values running ``doc`` every second, with short Lease timings."""
    return {
        "policy": yaml.safe_dump(doc, sort_keys=False),
        "controlIntervalSeconds": 1,
        "leaderElection": {
            "leaseDurationSeconds": 4,
            "renewDeadlineSeconds": 3,
            "retryPeriodSeconds": 1,
        },
        **values,
    }


@contextlib.contextmanager
def crd_installed(kube: Cluster, crd: Doc) -> Iterator[None]:
    """``crd`` applied and Established for the block, deleted after it (its objects with it)."""
    name = crd["metadata"]["name"]
    kube.apply([crd])
    kube.kubectl("wait", "--for=condition=Established", f"crd/{name}", "--timeout=30s")
    try:
        yield
    finally:
        kube.request(
            "DELETE",
            f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}",
            ok=(200, 202, 404),
        )
