"""The Kubernetes API stand-in: conventions, selectors, patches, faults, and the real client."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from kubernetes_asyncio import client, config

from scaler.sim.kubeapi import (
    KubeApiServer,
    KubeStore,
    ScaleChange,
    SelectorError,
    parse_label_selector,
    write_kubeconfig,
)
from tests.support.clock import FakeClock

TOKEN = "s3cret"
T0 = 1_700_000_000.0
LWS = ("leaderworkerset.x-k8s.io", "v1", "LeaderWorkerSet", "leaderworkersets")
SCALE = "/apis/apps/v1/namespaces/llm/deployments/vllm/scale"
LWS_SCALE = "/apis/leaderworkerset.x-k8s.io/v1/namespaces/llm/leaderworkersets/lws/scale"


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(T0)


@pytest.fixture
def store(clock: FakeClock) -> KubeStore:
    s = KubeStore(clock)
    s.add_deployment("llm", "vllm", 2, {"app": "vllm", "role": "server"})
    s.register_kind(*LWS)
    s.add_workload(LWS[0], LWS[3], "llm", "lws", replicas=1, labels={"app": "lws"})
    return s


@pytest.fixture
async def server(store: KubeStore) -> AsyncIterator[KubeApiServer]:
    async with KubeApiServer(store, token=TOKEN) as srv:
        yield srv


@pytest.fixture
async def http(server: KubeApiServer) -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(
        base_url=server.url, headers={"Authorization": f"Bearer {TOKEN}"}
    ) as session:
        yield session


async def call(
    http: aiohttp.ClientSession,
    method: str,
    path: str,
    body: Any = None,
    content_type: str = "application/json",
    **kw: Any,
) -> tuple[int, dict[str, Any], aiohttp.ClientResponse]:
    data = None if body is None or isinstance(body, str) else json.dumps(body)
    if isinstance(body, str):
        data = body
    headers = {"Content-Type": content_type} if data is not None else {}
    async with http.request(method, path, data=data, headers=headers, **kw) as resp:
        if resp.content_type == "text/plain":  # the router's 404 of a path nothing serves
            return resp.status, {"text": await resp.text()}, resp
        return resp.status, await resp.json(), resp


# ------------------------------------------------------------------ label selectors

LABELS = {"app": "vllm", "tier": "gpu", "zone": "a", "n": "5"}

SELECTOR_TABLE = [
    pytest.param("", True, id="empty selector matches everything"),
    pytest.param("app=vllm", True, id="equality matches"),
    pytest.param("app==vllm", True, id="double equals is equality"),
    pytest.param("app = vllm", True, id="spaces around the operator are ignored"),
    pytest.param("app=other", False, id="equality with another value fails"),
    pytest.param("app!=other", True, id="inequality with another value holds"),
    pytest.param("app!=vllm", False, id="inequality with the value fails"),
    pytest.param("missing!=x", True, id="inequality matches an absent key"),
    pytest.param("app in (vllm,sglang)", True, id="in: the value is in the set"),
    pytest.param("app in (sglang)", False, id="in: the value is not in the set"),
    pytest.param("app notin (sglang)", True, id="notin: the value is outside the set"),
    pytest.param("app notin (vllm, sglang)", False, id="notin: the value is in the set"),
    pytest.param("missing notin (x)", True, id="notin matches an absent key"),
    pytest.param("missing in (x)", False, id="in never matches an absent key"),
    pytest.param("tier", True, id="a bare key exists"),
    pytest.param("missing", False, id="a bare absent key fails"),
    pytest.param("!missing", True, id="not-exists on an absent key holds"),
    pytest.param("!tier", False, id="not-exists on a present key fails"),
    pytest.param("app=vllm,tier=gpu,!missing", True, id="all requirements hold"),
    pytest.param("app=vllm,tier=cpu", False, id="one requirement of two fails"),
    pytest.param(
        "app in (vllm),zone notin (b,c),tier", True, id="set-based and exists requirements mixed"
    ),
    pytest.param("n>4", True, id="greater than on an integer value"),
    pytest.param("n<5", False, id="less than is strict"),
    pytest.param("example.com/role", False, id="an absent prefixed key fails"),
]


@pytest.mark.parametrize(("selector", "expected"), SELECTOR_TABLE)
def test_label_selector_grammar(selector: str, expected: bool) -> None:
    assert parse_label_selector(selector).matches(LABELS) is expected


@pytest.mark.parametrize(
    "bad",
    [
        pytest.param("app=", id="'app=' is valid upstream: it selects the empty value"),
        pytest.param("=vllm", id="no key"),
        pytest.param("app in ()", id="empty value set"),
        pytest.param("app in vllm", id="set without parentheses"),
        pytest.param("app in (a", id="unclosed set"),
        pytest.param("app,,tier", id="empty requirement between commas"),
        pytest.param("app=a b", id="space inside a value"),
        pytest.param("-bad=x", id="key starting with a dash"),
        pytest.param("app=-x-", id="value starting and ending with a dash"),
        pytest.param("app=vllm,", id="trailing comma"),
        pytest.param("!", id="not-exists without a key"),
        pytest.param("a b", id="two keys without a comma"),
        pytest.param("n>x", id="greater than a non-integer"),
        pytest.param("app notin", id="notin without a set"),
    ],
)
def test_bad_label_selectors_raise(bad: str) -> None:
    if bad == "app=":  # 'app=' is valid upstream: it selects the empty value
        assert parse_label_selector(bad).matches({"app": ""})
        return
    with pytest.raises(SelectorError):
        parse_label_selector(bad)


async def test_list_pods_by_selector_over_http(
    store: KubeStore, http: aiohttp.ClientSession
) -> None:
    store.add_pod("llm", "a", {"app": "vllm", "tier": "gpu"})
    store.add_pod("llm", "b", {"app": "vllm", "tier": "cpu"})
    store.add_pod("llm", "c", {"app": "other"})
    store.add_pod("other-ns", "d", {"app": "vllm"})
    cases = {
        "app=vllm": ["a", "b"],
        "app=vllm,tier!=cpu": ["a"],
        "tier in (cpu,gpu)": ["a", "b"],
        "!tier": ["c"],
        "": ["a", "b", "c"],
    }
    for selector, names in cases.items():
        status, body, _ = await call(
            http, "GET", "/api/v1/namespaces/llm/pods", params={"labelSelector": selector}
        )
        assert status == 200
        assert body["kind"] == "PodList" and body["apiVersion"] == "v1"
        assert [p["metadata"]["name"] for p in body["items"]] == names, selector
        assert body["metadata"]["resourceVersion"] == store.resource_version
    status, body, _ = await call(
        http, "GET", "/api/v1/namespaces/llm/pods", params={"labelSelector": "app in ()"}
    )
    assert status == 400
    assert body["kind"] == "Status" and body["reason"] == "BadRequest" and body["code"] == 400
    assert "values set can't be empty" in body["message"]
    status, body, _ = await call(
        http, "GET", "/api/v1/namespaces/llm/pods", params={"fieldSelector": "metadata.name=b"}
    )
    assert [p["metadata"]["name"] for p in body["items"]] == ["b"]


# ------------------------------------------------------------------ conventions


async def test_auth(server: KubeApiServer) -> None:
    """A token not ours is 401; no token is anonymous: the version is public, anything else
    is refused by RBAC (the contract suite holds both to kube-apiserver's answers)."""
    async with aiohttp.ClientSession(base_url=server.url) as anon:
        for headers in ({"Authorization": "Bearer wrong"}, {"Authorization": TOKEN}):
            async with anon.get("/version", headers=headers) as resp:
                assert resp.status == 401
                assert await resp.json() == {
                    "kind": "Status",
                    "apiVersion": "v1",
                    "metadata": {},
                    "status": "Failure",
                    "message": "Unauthorized",
                    "reason": "Unauthorized",
                    "code": 401,
                }
        async with anon.get("/version") as resp:
            assert resp.status == 200
        async with anon.get("/api/v1/namespaces/llm/pods") as resp:
            body = await resp.json()
            assert (resp.status, body["reason"], body["details"]) == (
                403,
                "Forbidden",
                {"kind": "pods"},
            )
    assert [r.status for r in server.requests] == [401, 401, 200, 403]


async def test_not_found_is_an_exact_status(http: aiohttp.ClientSession) -> None:
    status, body, _ = await call(http, "GET", "/apis/apps/v1/namespaces/llm/deployments/x")
    assert status == 404
    assert body == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": 'deployments.apps "x" not found',
        "reason": "NotFound",
        "details": {"name": "x", "group": "apps", "kind": "deployments"},
        "code": 404,
    }
    status, body, _ = await call(http, "GET", "/api/v1/namespaces/llm/pods/nope")
    assert (status, body["message"], body["details"]) == (
        404,
        'pods "nope" not found',
        {"name": "nope", "kind": "pods"},
    )
    status, body, _ = await call(http, "GET", "/apis/apps/v1/namespaces/llm/replicasets/x/scale")
    assert (status, body["reason"]) == (404, "NotFound")
    status, body, _ = await call(http, "GET", "/apis/apps/v2/namespaces/llm/deployments/vllm")
    assert status == 404
    status, body, _ = await call(http, "GET", "/no/such/path")
    assert (status, body) == (404, {"text": "404 page not found\n"})


async def test_method_not_allowed(http: aiohttp.ClientSession) -> None:
    for method, path in [
        ("DELETE", SCALE),
        ("POST", "/api/v1/namespaces/llm/pods"),
        ("PUT", "/apis/apps/v1/namespaces/llm/deployments/vllm"),
    ]:
        status, body, _ = await call(http, method, path)
        assert (status, body["kind"], body["reason"], body["code"]) == (
            405,
            "Status",
            "MethodNotAllowed",
            405,
        ), (method, path)


async def test_get_scale_and_object(store: KubeStore, http: aiohttp.ClientSession) -> None:
    status, dep, _ = await call(http, "GET", "/apis/apps/v1/namespaces/llm/deployments/vllm")
    assert status == 200
    assert (dep["kind"], dep["apiVersion"]) == ("Deployment", "apps/v1")
    assert dep["metadata"]["creationTimestamp"] == "2023-11-14T22:13:20Z"
    assert dep["metadata"]["generation"] == 1
    status, scale, _ = await call(http, "GET", SCALE)
    assert status == 200
    assert scale == {
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {
            "name": "vllm",
            "namespace": "llm",
            "uid": dep["metadata"]["uid"],
            "resourceVersion": dep["metadata"]["resourceVersion"],
            "creationTimestamp": "2023-11-14T22:13:20Z",
        },
        "spec": {"replicas": 2},
        "status": {"replicas": 0, "selector": "app=vllm,role=server"},
    }
    store.add_statefulset("llm", "ss", 0, {"app": "ss"})
    status, scale, _ = await call(http, "GET", "/apis/apps/v1/namespaces/llm/statefulsets/ss/scale")
    assert scale["spec"] == {}  # replicas 0 is omitted (omitempty), as upstream


async def test_status_is_computed_from_pods(store: KubeStore, clock: FakeClock) -> None:
    labels = {"app": "vllm", "role": "server"}
    rv0 = store.get_workload("llm", "vllm")["metadata"]["resourceVersion"]
    store.add_pod("llm", "p1", labels, ready=True)
    store.add_pod("llm", "p2", labels)
    store.add_pod("llm", "p3", {"app": "vllm"})  # not selected: lacks role
    dep = store.get_workload("llm", "vllm")
    assert dep["status"]["replicas"] == 2 and dep["status"]["readyReplicas"] == 1
    assert int(dep["metadata"]["resourceVersion"]) > int(rv0)
    rv1 = dep["metadata"]["resourceVersion"]
    store.set_pod_ready("llm", "p2")
    assert store.get_workload("llm", "vllm")["status"]["readyReplicas"] == 2
    clock.advance(5)
    store.mark_pod_terminating("llm", "p1", grace_period_seconds=30)
    pod = store.get_pod("llm", "p1")
    assert pod["metadata"]["deletionTimestamp"] == "2023-11-14T22:13:55Z"
    assert pod["metadata"]["deletionGracePeriodSeconds"] == 30
    dep = store.get_workload("llm", "vllm")
    assert dep["status"]["replicas"] == 1
    assert int(dep["metadata"]["resourceVersion"]) > int(rv1)
    rv2 = store.get_workload("llm", "vllm")["metadata"]["resourceVersion"]
    assert int(store.touch_workload("llm", "vllm")) > int(rv2)  # another writer, same spec
    store.delete_pod("llm", "p1")
    assert [p["metadata"]["name"] for p in store.list_pods("llm", "app=vllm")] == ["p2", "p3"]
    assert store.get_spec_replicas("llm", "vllm") == 2


# ------------------------------------------------------------------ writes


async def test_merge_patch_scales_and_bumps_resource_version(
    store: KubeStore, http: aiohttp.ClientSession
) -> None:
    changes: list[ScaleChange] = []
    store.on_scale_change(changes.append)
    _, before, _ = await call(http, "GET", SCALE)
    rv = before["metadata"]["resourceVersion"]
    status, after, _ = await call(
        http,
        "PATCH",
        SCALE,
        {"metadata": {"resourceVersion": rv}, "spec": {"replicas": 5}},
        "application/merge-patch+json",
    )
    assert status == 200
    assert (after["kind"], after["apiVersion"]) == ("Scale", "autoscaling/v1")
    assert after["spec"] == {"replicas": 5}
    assert int(after["metadata"]["resourceVersion"]) > int(rv)
    assert store.get_spec_replicas("llm", "vllm") == 5
    assert store.get_workload("llm", "vllm")["metadata"]["generation"] == 2
    assert changes == [
        ScaleChange(
            "apps", "deployments", "llm", "vllm", 2, 5, after["metadata"]["resourceVersion"], "api"
        )
    ]
    # The same value again is a no-op: no new resourceVersion, no callback.
    status, again, _ = await call(
        http, "PATCH", SCALE, {"spec": {"replicas": 5}}, "application/merge-patch+json"
    )
    assert status == 200
    assert again["metadata"]["resourceVersion"] == after["metadata"]["resourceVersion"]
    assert len(changes) == 1


async def test_stale_resource_version_conflicts(
    store: KubeStore, http: aiohttp.ClientSession
) -> None:
    _, scale, _ = await call(http, "GET", SCALE)
    store.external_scale("llm", "vllm", 3)
    status, body, _ = await call(
        http,
        "PATCH",
        SCALE,
        {
            "metadata": {"resourceVersion": scale["metadata"]["resourceVersion"]},
            "spec": {"replicas": 4},
        },
        "application/merge-patch+json",
    )
    assert status == 409
    assert body == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": 'Operation cannot be fulfilled on deployments.apps "vllm": the object has '
        "been modified; please apply your changes to the latest version and try again",
        "reason": "Conflict",
        "details": {"name": "vllm", "group": "apps", "kind": "deployments"},
        "code": 409,
    }
    assert store.get_spec_replicas("llm", "vllm") == 3


@pytest.mark.parametrize(
    ("path", "content_type", "body", "status"),
    [
        pytest.param(
            SCALE, "application/merge-patch+json", {"spec": {"replicas": 4}}, 200, id="merge patch"
        ),
        pytest.param(
            SCALE,
            "application/merge-patch+json; charset=utf-8",
            {"spec": {"replicas": 4}},
            200,
            id="merge patch with a charset parameter",
        ),
        pytest.param(
            SCALE,
            "application/strategic-merge-patch+json",
            {"spec": {"replicas": 4}},
            200,
            id="strategic merge patch on a built-in kind",
        ),
        pytest.param(
            SCALE,
            "application/json-patch+json",
            [{"op": "replace", "path": "/spec/replicas", "value": 4}],
            200,
            id="JSON patch replace",
        ),
        pytest.param(
            SCALE,
            "application/json-patch+json",
            [{"op": "test", "path": "/spec/replicas", "value": 9}],
            422,
            id="JSON patch whose test fails is 422",
        ),
        pytest.param(
            SCALE,
            "application/json-patch+json",
            {"not": "a list"},
            400,
            id="JSON patch that is not a list is 400",
        ),
        pytest.param(
            SCALE,
            "application/json",
            {"spec": {"replicas": 4}},
            415,
            id="plain application/json is 415",
        ),
        pytest.param(SCALE, "text/plain", "replicas=4", 415, id="text/plain is 415"),
        pytest.param(
            LWS_SCALE,
            "application/merge-patch+json",
            {"spec": {"replicas": 4}},
            200,
            id="merge patch on a custom resource",
        ),
        pytest.param(
            LWS_SCALE,
            "application/strategic-merge-patch+json",
            {"spec": {"replicas": 4}},
            415,
            id="strategic merge on a custom resource is 415 as for CRDs",
        ),
        pytest.param(
            SCALE, "application/merge-patch+json", "{not json", 400, id="malformed JSON is 400"
        ),
        pytest.param(
            SCALE,
            "application/merge-patch+json",
            {"spec": {"replicas": "4"}},
            422,
            id="replicas as a string is 422 (the patched object does not decode)",
        ),
    ],
)
async def test_patch_content_types(
    http: aiohttp.ClientSession, path: str, content_type: str, body: Any, status: int
) -> None:
    got, answer, _ = await call(http, "PATCH", path, body, content_type)
    assert got == status, answer
    if status == 200:
        assert answer["spec"]["replicas"] == 4
    else:
        assert answer["kind"] == "Status" and answer["code"] == status
    if status == 415:
        assert answer["reason"] == "UnsupportedMediaType"
        if content_type.endswith("patch+json"):  # a patch type the kind does not take
            assert "application/merge-patch+json" in answer["message"]
        else:  # no patch type at all
            assert answer["message"] == "415: Unsupported Media Type"


async def test_server_side_apply_is_not_served(
    store: KubeStore, http: aiohttp.ClientSession
) -> None:
    """Field ownership is not modelled: an apply patch is refused saying so (and where it is
    checked: on a real kube-apiserver)."""
    doc = "apiVersion: autoscaling/v1\nkind: Scale\nspec:\n  replicas: 6\n"
    status, body, _ = await call(
        http, "PATCH", SCALE, doc, "application/apply-patch+yaml", params={"fieldManager": "me"}
    )
    assert (status, body["reason"]) == (415, "UnsupportedMediaType")
    assert "field ownership is checked on a real kube-apiserver" in body["message"]
    assert store.get_spec_replicas("llm", "vllm") == 2


async def test_negative_replicas_are_invalid(http: aiohttp.ClientSession) -> None:
    status, body, _ = await call(
        http, "PATCH", SCALE, {"spec": {"replicas": -1}}, "application/merge-patch+json"
    )
    assert status == 422
    assert body["reason"] == "Invalid"
    assert body["message"] == (
        'Scale.autoscaling "vllm" is invalid: spec.replicas: Invalid value: -1: '
        "must be greater than or equal to 0"
    )
    assert body["details"]["causes"] == [
        {
            "reason": "FieldValueInvalid",
            "message": "Invalid value: -1: must be greater than or equal to 0",
            "field": "spec.replicas",
        }
    ]


async def test_put_scale(store: KubeStore, http: aiohttp.ClientSession) -> None:
    base = {"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": {"name": "vllm"}}
    # apps kinds allow an unconditional update (no resourceVersion).
    status, body, _ = await call(http, "PUT", SCALE, {**base, "spec": {"replicas": 3}})
    assert (status, body["spec"]) == (200, {"replicas": 3})
    rv = body["metadata"]["resourceVersion"]
    status, body, _ = await call(
        http,
        "PUT",
        SCALE,
        {**base, "metadata": {"name": "vllm", "resourceVersion": "1"}, "spec": {"replicas": 4}},
    )
    assert (status, body["reason"]) == (409, "Conflict")
    status, body, _ = await call(
        http,
        "PUT",
        SCALE,
        {**base, "metadata": {"name": "vllm", "resourceVersion": rv}, "spec": {"replicas": 4}},
    )
    assert (status, body["spec"]) == (200, {"replicas": 4})
    status, body, _ = await call(
        http, "PUT", SCALE, {**base, "metadata": {"name": "other"}, "spec": {"replicas": 1}}
    )
    assert (status, body["reason"]) == (400, "BadRequest")
    # A custom kind's scale takes an unconditional update too (as a CRD's does).
    status, body, _ = await call(
        http, "PUT", LWS_SCALE, {**base, "metadata": {"name": "lws"}, "spec": {"replicas": 2}}
    )
    assert (status, body["spec"]) == (200, {"replicas": 2})
    # A body without spec.replicas means 0 (omitempty), as upstream.
    status, body, _ = await call(http, "PUT", SCALE, {**base, "spec": {}})
    assert (status, body["spec"], store.get_spec_replicas("llm", "vllm")) == (200, {}, 0)


async def test_dry_run_stores_nothing(store: KubeStore, http: aiohttp.ClientSession) -> None:
    status, body, _ = await call(
        http,
        "PATCH",
        SCALE,
        {"spec": {"replicas": 7}},
        "application/merge-patch+json",
        params={"dryRun": "All"},
    )
    assert (status, body["spec"]) == (200, {"replicas": 7})
    assert store.get_spec_replicas("llm", "vllm") == 2


# ------------------------------------------------------------------ events


def _event(**over: Any) -> dict[str, Any]:
    ev: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"generateName": "vllm.", "namespace": "llm"},
        "involvedObject": {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "name": "vllm",
            "namespace": "llm",
        },
        "reason": "Scaled",
        "message": "scaled from 2 to 3",
        "type": "Normal",
    }
    ev.update(over)
    return ev


async def test_events_create_validate_list(store: KubeStore, http: aiohttp.ClientSession) -> None:
    status, created, _ = await call(http, "POST", "/api/v1/namespaces/llm/events", _event())
    assert status == 201
    assert (created["kind"], created["apiVersion"]) == ("Event", "v1")
    assert created["metadata"]["name"].startswith("vllm.")
    assert created["metadata"]["creationTimestamp"] == "2023-11-14T22:13:20Z"
    for bad, code, field in [
        (_event(eventTime="2023-11-14T22:13:20.000000Z", action="Scale", reason="",
                reportingComponent="vllm-scaler", reportingInstance="pod-a"), 422, "reason"),
        (_event(eventTime="2023-11-14T22:13:20.000000Z", reportingComponent="vllm-scaler",
                reportingInstance="pod-a"), 422, "action"),
        (_event(involvedObject=None), 422, "involvedObject.namespace"),
    ]:  # fmt: skip
        status, body, _ = await call(http, "POST", "/api/v1/namespaces/llm/events", bad)
        assert (status, body["reason"]) == (code, "Invalid")
        assert [c["field"] for c in body["details"]["causes"]] == [field]
    status, body, _ = await call(
        http,
        "POST",
        "/api/v1/namespaces/llm/events",
        _event(metadata={"generateName": "x.", "namespace": "elsewhere"}),
    )
    assert (status, body["reason"]) == (400, "BadRequest")
    status, listing, _ = await call(http, "GET", "/api/v1/namespaces/llm/events")
    assert listing["kind"] == "EventList"
    assert [e["reason"] for e in listing["items"]] == ["Scaled"]
    assert [e["metadata"]["name"] for e in store.events("llm")] == [created["metadata"]["name"]]
    assert store.events("other") == []


# ------------------------------------------------------------------ faults


async def test_fault_injection(server: KubeApiServer, http: aiohttp.ClientSession) -> None:
    server.store.inject_fault("GET", r"/scale$", 429, times=2, retry_after=7)
    for _ in range(2):
        status, body, resp = await call(http, "GET", SCALE)
        assert status == 429
        assert resp.headers["Retry-After"] == "7"
        assert body["reason"] == "TooManyRequests"
        assert body["details"] == {"retryAfterSeconds": 7}
    status, _, _ = await call(http, "GET", SCALE)
    assert status == 200
    server.store.inject_fault("*", "deployments", 403, body_reason="Forbidden")
    status, body, _ = await call(http, "GET", SCALE)
    assert (status, body["reason"], body["code"]) == (403, "Forbidden", 403)
    assert [r.status for r in server.requests] == [429, 429, 200, 403]


# ------------------------------------------------------------------ the real client


async def test_real_client_through_kubeconfig(
    server: KubeApiServer, store: KubeStore, tmp_path: Path
) -> None:
    path = write_kubeconfig(
        tmp_path / "kubeconfig", server_url=server.url, token=TOKEN, namespace="llm"
    )
    assert path.stat().st_mode & 0o777 == 0o600
    api = await config.new_client_from_config(config_file=str(path), persist_config=False)
    try:
        version = await client.VersionApi(api).get_code()
        assert version.git_version.startswith("v1.37")
        dep = await client.AppsV1Api(api).read_namespaced_deployment("vllm", "llm")
        assert dep.spec.replicas == 2
        assert dep.spec.selector.match_labels == {"app": "vllm", "role": "server"}
        scale = await client.CustomObjectsApi(api).get_namespaced_custom_object_scale(
            *LWS[:2], "llm", LWS[3], "lws"
        )
        assert scale["spec"]["replicas"] == 1 and scale["status"]["selector"] == "app=lws"
        # Left to itself the client labels a dict patch body application/json-patch+json,
        # which a real server rejects (a JSON patch must be a list); the actuator forces
        # application/merge-patch+json.
        with pytest.raises(client.ApiException) as info:
            await client.CustomObjectsApi(api).patch_namespaced_custom_object_scale(
                "apps", "v1", "llm", "deployments", "vllm", {"spec": {"replicas": 3}}
            )
        assert info.value.status == 400
        assert server.requests[-1].content_type == "application/json-patch+json"
        store.add_pod("llm", "p", {"app": "lws"}, ready=True)
        pods = await client.CoreV1Api(api).list_namespaced_pod("llm", label_selector="app=lws")
        assert [p.metadata.name for p in pods.items] == ["p"]
        assert pods.items[0].status.conditions[0].status == "True"
    finally:
        await api.close()
