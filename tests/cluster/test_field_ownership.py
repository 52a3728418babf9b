"""Field ownership on the real server (the API stand-in keeps no managed fields, and serves no
server-side apply): the controller's scale writes own ``spec.replicas`` under its field
manager, so that ``kubectl get -o yaml --show-managed-fields`` names it, and a GitOps tool
applying the Deployment with ``spec.replicas`` meets a conflict naming vllm-scaler instead of
silently taking the replicas back (unless it forces, or leaves the field out, as the
runbook advises: docs/runbooks.md)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from scaler.sim.controlplane import Cluster
from tests.cluster.workloads import deployment

APPLY = "application/apply-patch+yaml"


def _managers(kube: Cluster, ns: str) -> dict[str, list[dict[str, Any]]]:
    dep = kube.get(f"/apis/apps/v1/namespaces/{ns}/deployments/vllm")
    found: dict[str, list[dict[str, Any]]] = {}
    for entry in dep["metadata"]["managedFields"]:
        found.setdefault(entry["manager"], []).append(entry)
    return found


@pytest.fixture
def applied(kube: Cluster, namespace: str) -> str:
    """The Deployment as a GitOps tool applies it (field manager ``gitops``), 0 replicas."""
    doc = deployment(namespace, replicas=0)
    kube.request(
        "PATCH",
        f"/apis/apps/v1/namespaces/{namespace}/deployments/vllm",
        body=doc,
        content_type=APPLY,
        params={"fieldManager": "gitops"},
    )
    return namespace


def _scale_write(kube: Cluster, ns: str, replicas: int) -> None:
    """The controller's scale write: a merge patch of ``/scale`` as field manager vllm-scaler."""
    kube.request(
        "PATCH",
        f"/apis/apps/v1/namespaces/{ns}/deployments/vllm/scale",
        body={"spec": {"replicas": replicas}},
        content_type="application/merge-patch+json",
        params={"fieldManager": "vllm-scaler"},
    )


def test_the_controllers_scale_write_owns_spec_replicas(kube: Cluster, applied: str) -> None:
    ns = applied
    _scale_write(kube, ns, 2)
    managers = _managers(kube, ns)
    (ours,) = managers["vllm-scaler"]
    assert (ours["operation"], ours["subresource"]) == ("Update", "scale")
    assert ours["fieldsV1"] == {"f:spec": {"f:replicas": {}}}
    # the applier no longer owns the field it gave up to the scale write
    gitops = [e for e in managers["gitops"] if e["operation"] == "Apply"]
    assert all("f:replicas" not in e["fieldsV1"].get("f:spec", {}) for e in gitops)


def test_an_apply_of_spec_replicas_meets_a_conflict_naming_the_controller(
    kube: Cluster, applied: str
) -> None:
    ns = applied
    path = f"/apis/apps/v1/namespaces/{ns}/deployments/vllm"
    _scale_write(kube, ns, 3)
    again = deployment(ns, replicas=1)
    resp = kube.http.patch(
        path,
        content=json.dumps(again).encode(),
        headers={"Content-Type": APPLY},
        params={"fieldManager": "gitops"},
    )
    assert resp.status_code == 409, resp.text
    body = resp.json()
    assert body["reason"] == "Conflict"
    assert 'conflict with "vllm-scaler"' in body["message"] and ".spec.replicas" in body["message"]
    assert kube.get(f"{path}/scale")["spec"]["replicas"] == 3
    # without spec.replicas (what the runbook advises for a target of vllm-scaler) it applies
    del again["spec"]["replicas"]
    again["metadata"]["labels"] = {"team": "llm"}
    kube.request("PATCH", path, body=again, content_type=APPLY, params={"fieldManager": "gitops"})
    assert kube.get(f"{path}/scale")["spec"]["replicas"] == 3
