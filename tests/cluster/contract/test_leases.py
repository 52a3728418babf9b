"""coordination.k8s.io/v1 Leases as the leader election reads and writes them: get, create,
and a replace whose ``resourceVersion`` is the optimistic lock (required: a Lease allows no
unconditional update), with MicroTime times."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.cluster.contract.servers import Server

MICRO = "2026-01-02T03:04:05.123456Z"


def _leases(api: Server) -> str:
    return f"/apis/coordination.k8s.io/v1/namespaces/{api.namespace}/leases"


def lease(namespace: str, name: str = "vllm-scaler") -> dict[str, Any]:
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"holderIdentity": "pod-a", "leaseDurationSeconds": 15, "acquireTime": MICRO,
                 "renewTime": MICRO, "leaseTransitions": 0},
    }  # fmt: skip


async def test_get_create_and_replace(api: Server) -> None:
    path = f"{_leases(api)}/vllm-scaler"
    missing = await api.get(path)
    assert missing.summary() == (404, "NotFound", [])
    assert missing.message == 'leases.coordination.k8s.io "vllm-scaler" not found'
    created = await api.request("POST", _leases(api), lease(api.namespace),
                                params={"fieldManager": "vllm-scaler"})  # fmt: skip
    assert created.status == 201, created
    again = await api.request("POST", _leases(api), lease(api.namespace))
    assert again.summary() == (409, "AlreadyExists", [])
    assert again.message == 'leases.coordination.k8s.io "vllm-scaler" already exists'
    body = copy.deepcopy(created.body)
    body["spec"]["holderIdentity"] = "pod-b"
    body["spec"]["leaseTransitions"] = 1
    replaced = await api.ok("PUT", path, body, params={"fieldManager": "vllm-scaler"})
    assert replaced["spec"]["holderIdentity"] == "pod-b"
    assert replaced["spec"]["renewTime"] == MICRO
    assert replaced["metadata"]["resourceVersion"] != body["metadata"]["resourceVersion"]
    stale = await api.request("PUT", path, body)
    assert stale.summary() == (409, "Conflict", [])
    assert stale.message == (
        'Operation cannot be fulfilled on leases.coordination.k8s.io "vllm-scaler": the object '
        "has been modified; please apply your changes to the latest version and try again"
    )
    read = await api.ok("GET", path)
    assert read["spec"] == replaced["spec"]


REFUSED = [
    pytest.param("no resourceVersion", (422, "Invalid", ["metadata.resourceVersion"]),
                 id="without resourceVersion"),
    pytest.param({"renewTime": "2026-01-02T03:04:05Z"}, (400, "BadRequest", []),
                 id="renewTime not a MicroTime"),
    pytest.param({"leaseDurationSeconds": 0}, (422, "Invalid", ["spec.leaseDurationSeconds"]),
                 id="leaseDurationSeconds 0"),
    pytest.param({"leaseTransitions": -1}, (422, "Invalid", ["spec.leaseTransitions"]),
                 id="leaseTransitions -1"),
    pytest.param("another name", (400, "BadRequest", []), id="the name of another"),
    pytest.param("long field manager", (422, "Invalid", ["fieldManager"]),
                 id="fieldManager of 129 bytes"),
]  # fmt: skip


@pytest.mark.parametrize(("change", "refused"), REFUSED)
async def test_a_refused_replace(api: Server, change: Any, refused: tuple[Any, ...]) -> None:
    path = f"{_leases(api)}/vllm-scaler"
    body = await api.ok("POST", _leases(api), lease(api.namespace))
    params = {}
    if change == "no resourceVersion":
        del body["metadata"]["resourceVersion"]
    elif change == "another name":
        body["metadata"]["name"] = "other"
    elif change == "long field manager":
        params["fieldManager"] = "m" * 129
    else:
        body["spec"].update(change)
    answer = await api.request("PUT", path, body, params=params)
    assert answer.summary() == refused, answer
    if change == "no resourceVersion":
        assert answer.message == (
            'leases.coordination.k8s.io "vllm-scaler" is invalid: metadata.resourceVersion: '
            "Invalid value: 0: must be specified for an update"
        )


async def test_a_replace_of_a_missing_lease_creates_it(api: Server) -> None:
    answer = await api.request("PUT", f"{_leases(api)}/fresh", lease(api.namespace, "fresh"))
    assert answer.status == 201, answer
    assert (await api.ok("GET", f"{_leases(api)}/fresh"))["spec"]["holderIdentity"] == "pod-a"
