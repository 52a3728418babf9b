"""core/v1 Events as the controller writes them, and the server's (legacy) validation of an
Event: ``involvedObject.namespace`` must be the Event's own (unless both are ``default``),
an Event with an ``eventTime`` needs ``action``, ``reason``, ``reportingComponent`` and
``reportingInstance``; ``message`` and ``reason`` are not required without one."""

from __future__ import annotations

from typing import Any

import pytest

from tests.cluster.contract.servers import MERGE, Server


def event(namespace: str, **changes: Any) -> dict[str, Any]:
    """An Event as the controller's ``emit_event`` sends it; ``changes`` set (None: remove)."""
    body: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"generateName": "vllm.", "namespace": namespace},
        "involvedObject": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "vllm",
                           "namespace": namespace},
        "reason": "SuccessfulRescale",
        "message": "New size: 3; reason: queue_depth above target",
        "type": "Normal",
        "source": {"component": "vllm-scaler"},
        "reportingComponent": "vllm-scaler",
        "reportingInstance": "vllm-scaler-7d9f-abcde",
        "firstTimestamp": "2026-01-02T03:04:05Z",
        "lastTimestamp": "2026-01-02T03:04:05Z",
        "count": 1,
    }  # fmt: skip
    for key, value in changes.items():
        if value is None:
            body.pop(key, None)
        else:
            body[key] = value
    return body


def _events(namespace: str) -> str:
    return f"/api/v1/namespaces/{namespace}/events"


async def test_the_controllers_event_is_created_and_listed(api: Server) -> None:
    ns = api.namespace
    created = await api.request("POST", _events(ns), event(ns),
                                params={"fieldManager": "vllm-scaler"})  # fmt: skip
    assert created.status == 201, created
    name = created.body["metadata"]["name"]
    assert name.startswith("vllm.") and len(name) == len("vllm.") + 5
    assert created.body["metadata"]["generateName"] == "vllm."
    selectors = ("involvedObject.name=vllm", "reason=SuccessfulRescale",
                 "involvedObject.kind=Deployment,type=Normal", "source=vllm-scaler")  # fmt: skip
    for selector in selectors:
        listing = await api.ok("GET", _events(ns), params={"fieldSelector": selector})
        assert [e["metadata"]["name"] for e in listing["items"]] == [name], selector
    none = await api.ok("GET", _events(ns), params={"fieldSelector": "reason=Other"})
    assert none["items"] == []
    unsupported = await api.request("GET", _events(ns), params={"fieldSelector": "message=x"})
    assert unsupported.summary() == (400, "BadRequest", [])
    assert unsupported.message == "field label not supported: message"


MICRO = "2026-01-02T03:04:05.000000Z"
CREATED = [
    pytest.param({}, id="as the controller sends it"),
    pytest.param({"message": None}, id="without message"),
    pytest.param({"reason": None}, id="without reason"),
    pytest.param({"type": "Unusual"}, id="another type"),
    pytest.param({"message": "m" * 2000}, id="a message of 2000 bytes"),
    pytest.param({"eventTime": MICRO, "action": "Scale"}, id="eventTime and action"),
]
REFUSED = [
    pytest.param({"involvedObject": {"kind": "Deployment", "name": "vllm"}},
                 (422, "Invalid", ["involvedObject.namespace"]),
                 id="without involvedObject.namespace"),
    pytest.param({"involvedObject": {"kind": "Deployment", "name": "vllm", "namespace": "other"}},
                 (422, "Invalid", ["involvedObject.namespace"]),
                 id="involvedObject in another namespace"),
    pytest.param({"involvedObject": None}, (422, "Invalid", ["involvedObject.namespace"]),
                 id="without involvedObject"),
    pytest.param({"eventTime": MICRO}, (422, "Invalid", ["action"]),
                 id="eventTime without action"),
    pytest.param({"eventTime": MICRO, "action": "Scale", "reason": None},
                 (422, "Invalid", ["reason"]), id="eventTime without reason"),
    pytest.param({"eventTime": MICRO, "action": "Scale", "reportingInstance": None},
                 (422, "Invalid", ["reportingInstance"]), id="eventTime without reportingInstance"),
    pytest.param({"eventTime": MICRO, "action": "Scale", "message": "m" * 1025},
                 (422, "Invalid", ["message"]), id="eventTime and a message over 1024 bytes"),
    pytest.param({"eventTime": "2026-01-02T03:04:05Z", "action": "Scale"},
                 (400, "BadRequest", []), id="eventTime not a MicroTime"),
    pytest.param({"metadata": {}}, (422, "Invalid", ["metadata.name"]),
                 id="without name or generateName"),
    pytest.param({"kind": "Pod"}, (400, "BadRequest", []), id="another kind"),
]  # fmt: skip


@pytest.mark.parametrize("changes", CREATED)
async def test_an_event_the_server_creates(api: Server, changes: dict[str, Any]) -> None:
    answer = await api.request("POST", _events(api.namespace), event(api.namespace, **changes))
    assert answer.status == 201, answer


@pytest.mark.parametrize(("changes", "refused"), REFUSED)
async def test_an_event_the_server_refuses(
    api: Server, changes: dict[str, Any], refused: tuple[Any, ...]
) -> None:
    answer = await api.request("POST", _events(api.namespace), event(api.namespace, **changes))
    assert answer.summary() == refused, answer
    listing = await api.ok("GET", _events(api.namespace))
    assert listing["items"] == []


async def test_the_event_refusals_say_what_was_wrong(api: Server) -> None:
    ns = api.namespace
    wrong = await api.request(
        "POST", _events(ns), event(ns, involvedObject={"kind": "Deployment", "name": "vllm"})
    )
    name = wrong.body["details"]["name"]
    assert name.startswith("vllm.")
    assert wrong.message == (
        f'Event "{name}" is invalid: involvedObject.namespace: Invalid value: "": does not '
        "match event.namespace"
    )
    action = await api.request("POST", _events(ns), event(ns, eventTime=MICRO))
    assert action.message.endswith("is invalid: action: Required value")


async def test_an_event_in_default_may_leave_out_the_namespace(api: Server) -> None:
    body = event("default", involvedObject={"kind": "Node", "name": "n1"})
    answer = await api.request("POST", _events("default"), body, params={"dryRun": "All"})
    assert answer.status == 201, answer


async def test_the_write_options_of_an_event(api: Server) -> None:
    ns = api.namespace
    long = await api.request("POST", _events(ns), event(ns), params={"fieldManager": "m" * 129})
    assert long.summary() == (422, "Invalid", ["fieldManager"])
    assert long.message == (
        'CreateOptions.meta.k8s.io "" is invalid: fieldManager: Too long: may not be more '
        "than 128 bytes"
    )
    dry = await api.request("POST", _events(ns), event(ns), params={"dryRun": "x"})
    assert dry.summary() == (422, "Invalid", ["dryRun"])
    dry_run = await api.request("POST", _events(ns), event(ns), params={"dryRun": "All"})
    assert dry_run.status == 201
    assert (await api.ok("GET", _events(ns)))["items"] == []
    media = await api.request("POST", _events(ns), event(ns), content_type=MERGE)
    assert media.summary() == (415, "UnsupportedMediaType", [])
