"""What the controller reads besides the scale and the pods: a pod's owners up its
controller ``ownerReferences`` (ReplicaSet, then Deployment), the other autoscalers of a
namespace (autoscaling/v2 HPAs; KEDA's ScaledObjects, 404 without their CRD), and a
workload's own object (its annotations)."""

from __future__ import annotations

from tests.cluster.contract.servers import Server


def _controller(meta: dict[str, object]) -> dict[str, object]:
    refs = meta.get("ownerReferences") or []
    assert isinstance(refs, list)
    (ref,) = [r for r in refs if r.get("controller")]
    return dict(ref)


async def test_a_pod_is_owned_through_its_replicaset_up_to_the_deployment(api: Server) -> None:
    ns = api.namespace
    (pod_name,) = await api.deployment("vllm", replicas=1)
    dep = await api.ok("GET", f"/apis/apps/v1/namespaces/{ns}/deployments/vllm")
    pod = await api.ok("GET", f"/api/v1/namespaces/{ns}/pods/{pod_name}")
    rs_ref = _controller(pod["metadata"])
    assert (rs_ref["apiVersion"], rs_ref["kind"]) == ("apps/v1", "ReplicaSet")
    assert str(rs_ref["name"]).startswith("vllm-") and rs_ref["blockOwnerDeletion"] is True
    assert pod["metadata"]["labels"]["pod-template-hash"] == str(rs_ref["name"])[len("vllm-") :]
    rs = await api.ok("GET", f"/apis/apps/v1/namespaces/{ns}/replicasets/{rs_ref['name']}")
    assert rs["metadata"]["uid"] == rs_ref["uid"]
    dep_ref = _controller(rs["metadata"])
    assert (dep_ref["kind"], dep_ref["name"], dep_ref["uid"]) == (
        "Deployment",
        "vllm",
        dep["metadata"]["uid"],
    )
    assert "ownerReferences" not in dep["metadata"]


async def test_the_hpas_of_a_namespace(api: Server) -> None:
    path = f"/apis/autoscaling/v2/namespaces/{api.namespace}/horizontalpodautoscalers"
    empty = await api.ok("GET", path)
    assert (empty["kind"], empty["items"]) == ("HorizontalPodAutoscalerList", [])
    hpa = {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "vllm-cpu"},
        "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "vllm"},
                 "minReplicas": 1, "maxReplicas": 4},
    }  # fmt: skip
    assert (await api.request("POST", path, hpa)).status == 201
    (item,) = (await api.ok("GET", path))["items"]
    assert item["metadata"]["name"] == "vllm-cpu"
    assert item["spec"]["scaleTargetRef"] == hpa["spec"]["scaleTargetRef"]  # type: ignore[index]


async def test_scaled_objects_without_the_keda_crd(api: Server) -> None:
    answer = await api.get(f"/apis/keda.sh/v1alpha1/namespaces/{api.namespace}/scaledobjects")
    assert (answer.status, answer.body) == (404, "404 page not found\n")


async def test_a_workloads_own_object_and_its_annotations(api: Server) -> None:
    ns = api.namespace
    await api.deployment("vllm")
    path = f"/apis/apps/v1/namespaces/{ns}/deployments/vllm"
    await api.annotate("vllm", {"vllm-scaler.io/paused": "true"})
    read = await api.ok("GET", path)
    assert read["metadata"]["annotations"]["vllm-scaler.io/paused"] == "true"
    assert read["spec"]["selector"] == {"matchLabels": {"app": "vllm"}}
