"""The stand-in's plain objects (Leases, HPAs, ScaledObjects), pod patches and workload
annotations: the same strictness as the scale subresource (Status bodies, 404/409/415/422)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from scaler.sim.kubeapi import KubeApiServer, KubeStore
from tests.kube.test_kubeapi import T0, TOKEN, call
from tests.support.clock import FakeClock

LEASES = "/apis/coordination.k8s.io/v1/namespaces/ctl/leases"
POD = "/api/v1/namespaces/llm/pods/vllm-a"
MICRO = "2024-06-10T06:13:20.000000Z"


@pytest.fixture
def store() -> KubeStore:
    s = KubeStore(FakeClock(T0))
    s.add_deployment("llm", "vllm", 2, {"app": "vllm"})
    s.add_pod("llm", "vllm-a", {"app": "vllm"}, ready=True)
    return s


@pytest.fixture
async def server(store: KubeStore) -> AsyncIterator[KubeApiServer]:
    async with KubeApiServer(store, token=TOKEN) as srv:
        yield srv


@pytest.fixture
async def http(server: KubeApiServer) -> AsyncIterator[Any]:
    import aiohttp

    async with aiohttp.ClientSession(
        base_url=server.url, headers={"Authorization": f"Bearer {TOKEN}"}
    ) as session:
        yield session


def lease(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": "vllm-scaler"},
        "spec": {"holderIdentity": "a", "leaseDurationSeconds": 15, "renewTime": MICRO, **spec},
    }


async def test_lease_create_get_update_with_optimistic_locking(http: Any) -> None:
    status, created, _ = await call(http, "POST", LEASES, lease())
    assert status == 201 and created["metadata"]["resourceVersion"]
    status, body, _ = await call(http, "POST", LEASES, lease())
    assert (status, body["reason"]) == (409, "AlreadyExists")
    status, got, _ = await call(http, "GET", f"{LEASES}/vllm-scaler")
    assert status == 200 and got["spec"]["holderIdentity"] == "a"
    rv = got["metadata"]["resourceVersion"]
    got["spec"]["holderIdentity"] = "b"
    status, updated, _ = await call(http, "PUT", f"{LEASES}/vllm-scaler", got)
    assert status == 200 and updated["metadata"]["resourceVersion"] != rv
    status, body, _ = await call(http, "PUT", f"{LEASES}/vllm-scaler", got)  # stale rv
    assert (status, body["reason"], body["kind"]) == (409, "Conflict", "Status")
    assert "the object has been modified" in body["message"]
    # a no-op update keeps the resourceVersion
    status, same, _ = await call(http, "PUT", f"{LEASES}/vllm-scaler", updated)
    assert same["metadata"]["resourceVersion"] == updated["metadata"]["resourceVersion"]
    status, listed, _ = await call(http, "GET", LEASES)
    assert status == 200 and listed["kind"] == "LeaseList" and len(listed["items"]) == 1
    # merge patch with a resourceVersion precondition
    patch = {"metadata": {"resourceVersion": rv, "annotations": {"k": "v"}}}
    status, body, _ = await call(
        http, "PATCH", f"{LEASES}/vllm-scaler", patch, "application/merge-patch+json"
    )
    assert status == 409
    patch["metadata"]["resourceVersion"] = same["metadata"]["resourceVersion"]
    status, body, _ = await call(
        http, "PATCH", f"{LEASES}/vllm-scaler", patch, "application/merge-patch+json"
    )
    assert status == 200 and body["metadata"]["annotations"] == {"k": "v"}
    status, _, _ = await call(http, "PATCH", f"{LEASES}/vllm-scaler", patch, "text/plain")
    assert status == 415


@pytest.mark.parametrize(
    ("body", "status", "reason"),
    [
        pytest.param(
            lease(renewTime="2024-06-10T06:13:20Z"),
            400,
            "BadRequest",
            id="renewTime not a MicroTime is 400",
        ),
        pytest.param(
            lease(leaseDurationSeconds=0), 422, "Invalid", id="leaseDurationSeconds 0 is 422"
        ),
        pytest.param(
            lease(leaseTransitions=-1), 422, "Invalid", id="negative leaseTransitions is 422"
        ),
        pytest.param(
            {**lease(), "kind": "ConfigMap"},
            400,
            "BadRequest",
            id="another kind in the body is 400",
        ),
        pytest.param(
            {**lease(), "metadata": {"name": "Bad_Name"}},
            422,
            "Invalid",
            id="name not a DNS subdomain is 422",
        ),
        pytest.param(
            {**lease(), "metadata": {"name": "x", "annotations": {"n": 1}}},
            400,
            "BadRequest",
            id="annotation value not a string is 400",
        ),
    ],
)
async def test_lease_validation(http: Any, body: dict[str, Any], status: int, reason: str) -> None:
    got, answer, _ = await call(http, "POST", LEASES, body)
    assert (got, answer["reason"], answer["kind"]) == (status, reason, "Status")


@pytest.mark.parametrize(
    ("namespace", "name", "field"),
    [
        pytest.param("ctl", "a" * 254, "metadata.name", id="name-254-characters"),
        pytest.param("ctl", "a..b", "metadata.name", id="name-empty-segment"),
        pytest.param("Bad_NS", "vllm-scaler", "metadata.namespace", id="namespace-characters"),
        pytest.param("n" * 64, "vllm-scaler", "metadata.namespace", id="namespace-64-characters"),
    ],
)
async def test_an_invalid_lease_name_or_namespace_is_422_invalid(
    http: Any, namespace: str, name: str, field: str
) -> None:
    """As kube-apiserver: a Status with reason Invalid and the field in its causes."""
    url = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"
    got, answer, _ = await call(http, "POST", url, {**lease(), "metadata": {"name": name}})
    assert (got, answer["kind"], answer["status"], answer["reason"]) == (
        422,
        "Status",
        "Failure",
        "Invalid",
    )
    assert [c["field"] for c in answer["details"]["causes"]] == [field]


async def test_hpas_and_scaled_objects(store: KubeStore, http: Any) -> None:
    keda = "/apis/keda.sh/v1alpha1/namespaces/llm/scaledobjects"
    status, body, _ = await call(http, "GET", keda)
    assert (status, body) == (404, {"text": "404 page not found\n"})  # no KEDA CRD yet
    store.add_hpa("llm", "h", target_name="vllm")
    store.add_scaled_object("llm", "s", target_name="vllm")
    status, hpas, _ = await call(
        http, "GET", "/apis/autoscaling/v2/namespaces/llm/horizontalpodautoscalers"
    )
    assert status == 200
    assert [i["spec"]["scaleTargetRef"] for i in hpas["items"]] == [
        {"kind": "Deployment", "name": "vllm", "apiVersion": "apps/v1"}
    ]
    status, sos, _ = await call(http, "GET", keda)
    assert status == 200 and sos["items"][0]["spec"]["scaleTargetRef"] == {"name": "vllm"}
    status, one, _ = await call(http, "GET", f"{keda}/s")
    assert status == 200 and one["kind"] == "ScaledObject"
    status, _, _ = await call(
        http, "PATCH", f"{keda}/s", {"spec": {}}, "application/strategic-merge-patch+json"
    )
    assert status == 415  # custom resources take no strategic merge
    status, _, _ = await call(http, "GET", "/apis/apps/v1/namespaces/llm/deployments")
    assert status == 405


async def test_pod_patch_annotations_only(store: KubeStore, http: Any) -> None:
    cost = "controller.kubernetes.io/pod-deletion-cost"
    status, pod, _ = await call(
        http, "PATCH", POD, {"metadata": {"annotations": {cost: "-5"}}},
        "application/merge-patch+json",
    )  # fmt: skip
    assert status == 200 and pod["metadata"]["annotations"] == {cost: "-5"}
    assert store.get_pod("llm", "vllm-a")["metadata"]["annotations"] == {cost: "-5"}
    for bad, want in (
        ({"metadata": {"annotations": {cost: "cheap"}}}, 422),
        ({"metadata": {"annotations": {cost: 5}}}, 422),  # the patched pod does not decode
        ({"spec": {"containers": []}}, 422),
        ({"metadata": {"resourceVersion": "1", "labels": {"x": "y"}}}, 409),
    ):
        status, body, _ = await call(http, "PATCH", POD, bad, "application/merge-patch+json")
        assert (status, body["kind"]) == (want, "Status"), bad
    status, _, _ = await call(http, "PATCH", POD, {}, "application/apply-patch+yaml")
    assert status == 415
    # strategic merge on a map is a merge; null removes
    status, pod, _ = await call(
        http, "PATCH", POD, {"metadata": {"annotations": {cost: None}}},
        "application/strategic-merge-patch+json",
    )  # fmt: skip
    assert status == 200 and "annotations" not in pod["metadata"]


async def test_workload_get_carries_annotations(store: KubeStore, http: Any) -> None:
    store.set_workload_annotations("llm", "vllm", {"vllm-scaler.io/paused": "true"})
    status, dep, _ = await call(http, "GET", "/apis/apps/v1/namespaces/llm/deployments/vllm")
    assert status == 200
    assert dep["metadata"]["annotations"] == {"vllm-scaler.io/paused": "true"}
    store.set_workload_annotations("llm", "vllm", {"vllm-scaler.io/paused": None})
    _, dep, _ = await call(http, "GET", "/apis/apps/v1/namespaces/llm/deployments/vllm")
    assert "annotations" not in dep["metadata"]
