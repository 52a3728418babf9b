"""The ``autoscaling/v1 Scale`` subresource, as the controller reads and writes it: its shape
(``spec.replicas`` left out at 0, ``status.selector`` formatted from the selector), a merge
patch with a ``resourceVersion`` precondition, and every way such a write is refused."""

from __future__ import annotations

from typing import Any

import pytest

from tests.cluster.contract.servers import (
    JSON,
    MERGE,
    PODCLIQUE,
    SCALING_GROUP,
    STRATEGIC,
    Server,
)


def _scale(api: Server, name: str = "vllm") -> str:
    return f"/apis/apps/v1/namespaces/{api.namespace}/deployments/{name}/scale"


async def test_the_scale_of_a_deployment(api: Server) -> None:
    await api.deployment("vllm", replicas=0, labels={"role": "server", "app": "vllm"})
    scale = await api.ok("GET", _scale(api))
    dep = await api.ok("GET", f"/apis/apps/v1/namespaces/{api.namespace}/deployments/vllm")
    assert (scale["kind"], scale["apiVersion"]) == ("Scale", "autoscaling/v1")
    assert scale["spec"] == {}  # replicas 0: omitempty
    assert scale["status"] == {"replicas": 0, "selector": "app=vllm,role=server"}
    meta = scale["metadata"]
    assert (meta["name"], meta["namespace"]) == ("vllm", api.namespace)
    assert meta["uid"] == dep["metadata"]["uid"]
    assert meta["creationTimestamp"] == dep["metadata"]["creationTimestamp"]
    # the Deployment's own (its controller writes its status in its own time)
    assert meta["resourceVersion"].isdigit()


async def test_a_merge_patch_and_one_with_a_stale_resource_version(api: Server) -> None:
    await api.deployment("vllm")
    written = await api.ok("PATCH", _scale(api), {"spec": {"replicas": 2}}, content_type=MERGE,
                           params={"fieldManager": "vllm-scaler"})  # fmt: skip
    assert written["spec"] == {"replicas": 2}
    stale = {"metadata": {"resourceVersion": "1"}, "spec": {"replicas": 3}}
    answer = await api.request("PATCH", _scale(api), stale, content_type=MERGE)
    assert answer.summary() == (409, "Conflict", [])
    assert answer.message == (
        'Operation cannot be fulfilled on deployments.apps "vllm": the object has been '
        "modified; please apply your changes to the latest version and try again"
    )
    assert answer.body["details"] == {"name": "vllm", "group": "apps", "kind": "deployments"}
    assert (await api.ok("GET", _scale(api)))["spec"] == {"replicas": 2}


REFUSED = [
    pytest.param({"spec": {"replicas": -1}}, MERGE, {}, (422, "Invalid", ["spec.replicas"]),
                 id="replicas -1"),
    pytest.param({"spec": {"replicas": "two"}}, MERGE, {}, (422, "Invalid", ["patch"]),
                 id="replicas not an integer"),
    pytest.param({"spec": {"replicas": 1.5}}, MERGE, {}, (422, "Invalid", ["patch"]),
                 id="replicas a fraction"),
    pytest.param({"metadata": {"resourceVersion": "abc"}, "spec": {"replicas": 1}}, MERGE, {},
                 (500, None, []), id="resourceVersion not a number"),
    pytest.param({"spec": {"replicas": 1}}, MERGE, {"fieldManager": "m" * 129},
                 (422, "Invalid", ["fieldManager"]), id="fieldManager of 129 bytes"),
    pytest.param({"spec": {"replicas": 1}}, MERGE, {"dryRun": "x"},
                 (422, "Invalid", ["dryRun"]), id="dryRun x"),
    pytest.param({"spec": {"replicas": 1}}, JSON, {}, (415, "UnsupportedMediaType", []),
                 id="content type application/json"),
    pytest.param("{not json", MERGE, {}, (400, "BadRequest", []), id="a body that is no JSON"),
]  # fmt: skip


@pytest.mark.parametrize(("body", "content_type", "params", "refused"), REFUSED)
async def test_a_refused_scale_patch(
    api: Server, body: Any, content_type: str, params: dict[str, str], refused: tuple[Any, ...]
) -> None:
    await api.deployment("vllm")
    answer = await api.request("PATCH", _scale(api), body, content_type=content_type,
                               params=params)  # fmt: skip
    assert answer.summary() == refused, answer
    assert (await api.ok("GET", _scale(api)))["spec"] == {}  # nothing written


async def test_the_refusals_say_what_was_wrong(api: Server) -> None:
    await api.deployment("vllm")
    cases: list[tuple[Any, dict[str, str], str]] = [
        ({"spec": {"replicas": -1}}, {},
         'Scale.autoscaling "vllm" is invalid: spec.replicas: Invalid value: -1: must be '
         "greater than or equal to 0"),
        ({"metadata": {"resourceVersion": "abc"}}, {},
         'strconv.ParseUint: parsing "abc": invalid syntax'),
        ({"spec": {"replicas": 1}}, {"fieldManager": "m" * 129},
         'PatchOptions.meta.k8s.io "" is invalid: fieldManager: Too long: may not be more '
         "than 128 bytes"),
        ({"spec": {"replicas": 1}}, {"dryRun": "x"},
         'PatchOptions.meta.k8s.io "" is invalid: dryRun: Unsupported value: ["x"]: '
         'supported values: "All"'),
    ]  # fmt: skip
    for body, params, message in cases:
        answer = await api.request("PATCH", _scale(api), body, content_type=MERGE, params=params)
        assert answer.message == message, body


async def test_a_field_manager_of_128_bytes_and_a_dry_run(api: Server) -> None:
    await api.deployment("vllm")
    ok = await api.ok("PATCH", _scale(api), {"spec": {"replicas": 1}}, content_type=MERGE,
                      params={"fieldManager": "m" * 128})  # fmt: skip
    assert ok["spec"] == {"replicas": 1}
    dry = await api.ok("PATCH", _scale(api), {"spec": {"replicas": 3}}, content_type=MERGE,
                       params={"dryRun": "All"})  # fmt: skip
    assert dry["spec"] == {"replicas": 3}
    assert (await api.ok("GET", _scale(api)))["spec"] == {"replicas": 1}


async def test_other_writes_of_a_deployments_scale(api: Server) -> None:
    await api.deployment("vllm")
    strategic = await api.ok("PATCH", _scale(api), {"spec": {"replicas": 2}},
                             content_type=STRATEGIC)  # fmt: skip
    assert strategic["spec"] == {"replicas": 2}
    put = {"apiVersion": "autoscaling/v1", "kind": "Scale",
           "metadata": {"name": "vllm", "namespace": api.namespace},
           "spec": {"replicas": 3}}  # fmt: skip
    assert (await api.ok("PUT", _scale(api), put))["spec"] == {"replicas": 3}  # no RV: allowed
    post = await api.request("POST", _scale(api), put)
    assert post.summary() == (405, "MethodNotAllowed", [])


def _custom_scale(api: Server, plural: str, name: str = "decode") -> str:
    return f"/apis/grove.io/v1alpha1/namespaces/{api.namespace}/{plural}/{name}/scale"


async def test_the_scale_of_a_custom_kind_and_its_selector(api: Server) -> None:
    await api.custom(PODCLIQUE, "decode", replicas=3)
    await api.custom(SCALING_GROUP, "unset", replicas=2)
    await api.custom(SCALING_GROUP, "set", replicas=2, selector="app=decode")
    without_path = await api.ok("GET", _custom_scale(api, PODCLIQUE.plural))
    assert without_path["spec"] == {"replicas": 3}
    assert "selector" not in without_path["status"]
    unset = await api.ok("GET", _custom_scale(api, SCALING_GROUP.plural, "unset"))
    assert "selector" not in unset["status"]
    written = await api.ok("GET", _custom_scale(api, SCALING_GROUP.plural, "set"))
    assert written["status"]["selector"] == "app=decode"
    obj = await api.ok("GET", SCALING_GROUP.path(api.namespace, "set"))
    assert written["metadata"]["uid"] == obj["metadata"]["uid"]


async def test_the_writes_of_a_custom_kinds_scale(api: Server) -> None:
    await api.custom(SCALING_GROUP, "decode", replicas=2, selector="app=decode")
    path = _custom_scale(api, SCALING_GROUP.plural)
    read = await api.ok("GET", path)
    body = {"metadata": {"resourceVersion": read["metadata"]["resourceVersion"]},
            "spec": {"replicas": 4}}  # fmt: skip
    assert (await api.ok("PATCH", path, body, content_type=MERGE))["spec"] == {"replicas": 4}
    stale = await api.request("PATCH", path, body, content_type=MERGE)
    assert stale.summary() == (409, "Conflict", [])
    # a write that changes nothing keeps the resourceVersion (no controller writes here)
    before = (await api.ok("GET", path))["metadata"]["resourceVersion"]
    again = await api.ok("PATCH", path, {"spec": {"replicas": 4}}, content_type=MERGE)
    assert again["metadata"]["resourceVersion"] == before
    strategic = await api.request("PATCH", path, {"spec": {"replicas": 1}},
                                  content_type=STRATEGIC)  # fmt: skip
    assert strategic.summary() == (415, "UnsupportedMediaType", [])
    assert strategic.message == (
        "the body of the request was in an unknown format - accepted media types include: "
        "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml"
    )
    negative = await api.request("PATCH", path, {"spec": {"replicas": -1}}, content_type=MERGE)
    assert negative.summary() == (422, "Invalid", [".spec.replicas"])
    assert negative.message == (
        'PodCliqueScalingGroup.grove.io "decode" is invalid: .spec.replicas: Invalid value: '
        "-1: should be a non-negative integer"
    )
    put = {"apiVersion": "autoscaling/v1", "kind": "Scale",
           "metadata": {"name": "decode"}, "spec": {"replicas": 1}}  # fmt: skip
    assert (await api.ok("PUT", path, put))["spec"] == {"replicas": 1}  # no RV: allowed
    obj = await api.ok("GET", SCALING_GROUP.path(api.namespace, "decode"))
    assert obj["spec"]["replicas"] == 1
