"""Pods as the controller reads and annotates them: listed by its scale selector (and by
the field selectors the server supports), and a ``controller.kubernetes.io/pod-deletion-cost``
merge patch, valid only as a canonical int32."""

from __future__ import annotations

import pytest

from tests.cluster.contract.servers import JSON_PATCH, MERGE, STRATEGIC, Server

COST = "controller.kubernetes.io/pod-deletion-cost"


def _pods(api: Server) -> str:
    return f"/api/v1/namespaces/{api.namespace}/pods"


async def test_pods_listed_by_a_label_selector(api: Server) -> None:
    await api.pod("b", {"app": "vllm", "track": "canary"})
    await api.pod("a", {"app": "vllm"})
    await api.pod("c", {"app": "other"})
    for selector, names in (
        ("app=vllm", ["a", "b"]),
        ("app=vllm,track!=canary", ["a"]),
        ("app in (vllm,other),!track", ["a", "c"]),
        ("", ["a", "b", "c"]),
    ):
        listing = await api.ok("GET", _pods(api), params={"labelSelector": selector})
        assert (listing["kind"], listing["apiVersion"]) == ("PodList", "v1")
        assert [p["metadata"]["name"] for p in listing["items"]] == names, selector
        assert listing["metadata"]["resourceVersion"]
    bad = await api.request("GET", _pods(api), params={"labelSelector": "app in (vllm"})
    assert bad.summary() == (400, "BadRequest", [])


async def test_what_the_controller_reads_of_a_listed_pod(api: Server) -> None:
    await api.pod("a", {"app": "vllm"}, annotations={COST: "3"}, ready=True)
    (pod,) = (await api.ok("GET", _pods(api), params={"labelSelector": "app=vllm"}))["items"]
    meta, status = pod["metadata"], pod["status"]
    assert meta["labels"]["app"] == "vllm" and meta["annotations"][COST] == "3"
    assert meta["uid"] and meta["creationTimestamp"].endswith("Z")
    assert "ownerReferences" not in meta and "deletionTimestamp" not in meta
    assert status["phase"] == "Running"
    (ready,) = [c for c in status["conditions"] if c["type"] == "Ready"]
    assert ready["status"] == "True" and ready["lastTransitionTime"].endswith("Z")


FIELD_SELECTORS = [
    pytest.param("status.phase=Running", 200, id="status.phase"),
    pytest.param("status.phase!=Failed,metadata.name=a", 200, id="status.phase and metadata.name"),
    pytest.param("spec.nodeName=", 200, id="spec.nodeName"),
    pytest.param("metadata.namespace==x", 200, id="metadata.namespace"),
    pytest.param("metadata.labels.app=vllm", 400, id="a label as a field"),
    pytest.param("spec.containers=x", 400, id="a field not selectable"),
    pytest.param("status.phase", 400, id="no operator"),
]  # fmt: skip


@pytest.mark.parametrize(("selector", "status"), FIELD_SELECTORS)
async def test_pod_field_selectors(api: Server, selector: str, status: int) -> None:
    answer = await api.request("GET", _pods(api), params={"fieldSelector": selector})
    assert answer.status == status, answer
    if status == 400:
        assert answer.reason == "BadRequest"
        field = selector.split("=")[0].rstrip("!")
        assert answer.message in (
            f"field label not supported: {field}",
            f"invalid selector: '{selector}'; can't understand '{selector}'",
        ), answer.message


async def test_field_selectors_filter(api: Server) -> None:
    await api.pod("a", {"app": "vllm"}, ready=True)
    await api.pod("b", {"app": "vllm"}, ready=True)
    for selector, names in (
        ("metadata.name=a", ["a"]),
        ("metadata.name!=a", ["b"]),
        ("status.phase=Running", ["a", "b"]),
        ("status.phase=Pending", []),
    ):
        listing = await api.ok("GET", _pods(api), params={"fieldSelector": selector})
        assert [p["metadata"]["name"] for p in listing["items"]] == names, selector


COSTS = [
    *(pytest.param(v, 200, id=repr(v)) for v in ("5", "-3", "0", "-0", "-007", "2147483647",
                                                  "-2147483648")),
    *(pytest.param(v, 422, id=repr(v)) for v in ("+5", "007", "00", "", " 5", "5 ", "1e3",
                                                  "2147483648", "-2147483649", "abc")),
]  # fmt: skip


@pytest.mark.parametrize(("cost", "status"), COSTS)
async def test_a_pod_deletion_cost(api: Server, cost: str, status: int) -> None:
    await api.pod("a", {"app": "vllm"})
    body = {"metadata": {"annotations": {COST: cost}}}
    answer = await api.request("PATCH", f"{_pods(api)}/a", body, content_type=MERGE,
                               params={"fieldManager": "vllm-scaler"})  # fmt: skip
    assert answer.status == status, answer
    if status == 422:
        field = f"metadata.annotations[{COST}]"
        assert answer.summary() == (422, "Invalid", [field])
        assert answer.message == (
            f'Pod "a" is invalid: {field}: Invalid value: "{cost}": must be a 32bit integer'
        )
    else:
        assert answer.body["metadata"]["annotations"][COST] == cost


async def test_other_pod_patches(api: Server) -> None:
    await api.pod("a", {"app": "vllm"})
    path = f"{_pods(api)}/a"
    strategic = await api.ok("PATCH", path, {"metadata": {"annotations": {"x": "1"}}},
                             content_type=STRATEGIC)  # fmt: skip
    assert strategic["metadata"]["annotations"]["x"] == "1"
    added = await api.ok("PATCH", path, [{"op": "add", "path": "/metadata/labels/y", "value": "2"}],
                         content_type=JSON_PATCH)  # fmt: skip
    assert added["metadata"]["labels"]["y"] == "2"
    for body, content_type, refused in (
        ({"metadata": {"resourceVersion": "1"}}, MERGE, (409, "Conflict", [])),
        ({"metadata": {"labels": {"n": 5}}}, MERGE, (422, "Invalid", ["patch"])),
        ({"spec": {"containers": [{"name": "vllm", "image": "x"}], "hostNetwork": True}}, MERGE,
         (422, "Invalid", ["spec"])),
        ([{"op": "replace", "path": "/metadata/nothing/z", "value": "3"}], JSON_PATCH,
         (422, "Invalid", [])),
    ):  # fmt: skip
        answer = await api.request("PATCH", path, body, content_type=content_type)
        assert answer.summary() == refused, (body, answer)
    missing = await api.request("PATCH", f"{_pods(api)}/nope", {"metadata": {}}, content_type=MERGE)
    assert missing.summary() == (404, "NotFound", [])
    assert missing.message == 'pods "nope" not found'


async def test_a_pod_delete(api: Server) -> None:
    missing = await api.request("DELETE", f"{_pods(api)}/nope")
    assert missing.summary() == (404, "NotFound", [])
    assert missing.message == 'pods "nope" not found'
    await api.pod("a", {"app": "vllm"}, ready=True)
    deleted = await api.ok("DELETE", f"{_pods(api)}/a")
    assert deleted["metadata"]["deletionTimestamp"]
    assert deleted["metadata"]["deletionGracePeriodSeconds"] == 30
