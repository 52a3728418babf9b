"""KubernetesActuator against the stand-in API server, through a real kubernetes-asyncio client."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes_asyncio.client import ApiClient
from kubernetes_asyncio.client.exceptions import ApiException

from scaler.actuators.kubernetes import (
    ApiFailure,
    KubeApiError,
    KubeConfigError,
    KubernetesActuator,
    ScaleOutcome,
    build_api_client,
    classify_error,
)
from scaler.config.policy import WorkloadRef
from scaler.config.secrets import register_secret
from scaler.core.observation import PodInfo, WorkloadSnapshot
from scaler.sim.kubeapi import KubeApiServer, KubeStore, write_kubeconfig
from tests.support.clock import FakeClock
from tests.support.controller_harness import captured_logs

TOKEN = "t0ken"
T0 = 1_700_000_000.0
LABELS = {"app": "vllm"}
REF = WorkloadRef(api_version="apps/v1", kind="Deployment", namespace="llm", name="vllm")
LWS_REF = WorkloadRef(
    api_version="leaderworkerset.x-k8s.io/v1", kind="LeaderWorkerSet", namespace="llm", name="lws"
)
SCALE_PATH = "/apis/apps/v1/namespaces/llm/deployments/vllm/scale"


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(T0)


@pytest.fixture
def store(clock: FakeClock) -> KubeStore:
    s = KubeStore(clock)
    s.add_deployment("llm", "vllm", 3, LABELS)
    s.register_kind("leaderworkerset.x-k8s.io", "v1", "LeaderWorkerSet", "leaderworkersets")
    s.add_workload(
        "leaderworkerset.x-k8s.io",
        "leaderworkersets",
        "llm",
        "lws",
        replicas=2,
        labels={"leaderworkerset.sigs.k8s.io/name": "lws"},
    )
    return s


@pytest.fixture
async def server(store: KubeStore) -> AsyncIterator[KubeApiServer]:
    async with KubeApiServer(store, token=TOKEN) as srv:
        yield srv


async def _client(server: KubeApiServer, tmp_path: Path, token: str = TOKEN) -> ApiClient:
    path = write_kubeconfig(tmp_path / f"kubeconfig-{token}", server_url=server.url, token=token)
    return await build_api_client(kubeconfig=path, in_cluster=False)


@pytest.fixture
async def api(server: KubeApiServer, tmp_path: Path) -> AsyncIterator[ApiClient]:
    client = await _client(server, tmp_path)
    yield client
    await client.close()


@pytest.fixture
def actuator(api: ApiClient, clock: FakeClock) -> KubernetesActuator:
    return KubernetesActuator(api, clock=clock)


def _methods(server: KubeApiServer) -> list[tuple[str, str]]:
    return [(r.method, r.path) for r in server.requests]


# ------------------------------------------------------------------ read


async def test_read_snapshot_classifies_pods(
    store: KubeStore, clock: FakeClock, actuator: KubernetesActuator
) -> None:
    store.add_pod("llm", "vllm-a", LABELS, ready=True, created_at=T0 - 900)
    store.add_pod("llm", "vllm-b", LABELS, created_at=T0 - 120)  # loading the model
    store.add_pod("llm", "vllm-c", LABELS, created_at=T0 - 700)  # Pending for 700 s: stuck
    store.add_pod("llm", "vllm-d", LABELS, ready=True, created_at=T0 - 3000)
    store.mark_pod_terminating("llm", "vllm-d")
    store.add_pod("llm", "other", {"app": "other"}, ready=True)
    clock.now = T0 + 30

    snap = await actuator.read(REF)

    dep = store.get_workload("llm", "vllm")
    assert snap == WorkloadSnapshot(
        namespace="llm",
        spec_replicas=3,
        status_replicas=3,  # vllm-a, -b, -c; the terminating pod no longer counts
        selector="app=vllm",
        resource_version=dep["metadata"]["resourceVersion"],
        pods=(
            PodInfo(
                "vllm-a",
                ready=True,
                terminating=False,
                age_seconds=930.0,
                phase="Running",
                ready_seconds=930.0,
            ),  # since the Ready condition's lastTransitionTime
            PodInfo("vllm-b", ready=False, terminating=False, age_seconds=150.0, phase="Pending"),
            PodInfo("vllm-c", ready=False, terminating=False, age_seconds=730.0, phase="Pending"),
            PodInfo(
                "vllm-d",
                ready=True,
                terminating=True,
                age_seconds=3030.0,
                phase="Running",
                ready_seconds=3030.0,
            ),
        ),
        # bare pods: no controller to follow, the selector's verdict stands
        unowned=tuple(
            (p, "no controller ownerReference") for p in ("vllm-a", "vllm-b", "vllm-c", "vllm-d")
        ),
    )
    counts = snap.counts(model_load_timeout_seconds=600)
    assert (counts.current, counts.ready, counts.starting, counts.stuck, counts.terminating) == (
        3,
        1,
        1,
        1,
        1,
    )


async def test_read_the_ready_transition_time(
    store: KubeStore, clock: FakeClock, actuator: KubernetesActuator
) -> None:
    """ready_seconds is the time since the Ready condition's lastTransitionTime: since the pod
    became Ready (model loaded), not since it was created; a probe that stays Ready does not
    move it (the kubelet only moves it on a change of status)."""
    store.add_pod("llm", "vllm-a", LABELS, created_at=T0 - 300)
    clock.now = T0 - 170  # loaded after 130 s
    store.set_pod_ready("llm", "vllm-a")
    clock.now = T0 - 100
    store.set_pod_ready("llm", "vllm-a")  # still Ready: the transition time stays
    clock.now = T0
    (pod,) = (await actuator.read(REF)).pods
    assert (pod.ready, pod.age_seconds, pod.ready_seconds) == (True, 300.0, 170.0)


async def test_read_custom_kind(store: KubeStore, actuator: KubernetesActuator) -> None:
    store.add_pod("llm", "lws-0", {"leaderworkerset.sigs.k8s.io/name": "lws"}, ready=True)
    snap = await actuator.read(LWS_REF)
    assert (snap.spec_replicas, snap.status_replicas) == (2, 1)
    assert snap.selector == "leaderworkerset.sigs.k8s.io/name=lws"
    assert snap.ready_pod_names == frozenset({"lws-0"})


async def test_read_zero_replicas_omitted_spec(
    store: KubeStore, actuator: KubernetesActuator
) -> None:
    store.external_scale("llm", "vllm", 0)
    assert (await actuator.read(REF)).spec_replicas == 0


async def test_read_failures_raise_classified(
    server: KubeApiServer, actuator: KubernetesActuator
) -> None:
    missing = REF.model_copy(update={"name": "nope"})
    with pytest.raises(KubeApiError) as info:
        await actuator.read(missing)
    assert info.value.outcome is ApiFailure.NOT_FOUND
    assert info.value.http_status == 404
    assert info.value.message == 'deployments.apps "nope" not found'
    server.store.inject_fault("GET", "/pods$", 500)
    with pytest.raises(KubeApiError) as info:
        await actuator.read(REF)
    assert info.value.outcome is ApiFailure.SERVER_ERROR


# ------------------------------------------------------------------ scale


async def test_scale_patches_spec_replicas(
    server: KubeApiServer, store: KubeStore, actuator: KubernetesActuator
) -> None:
    snap = await actuator.read(REF)
    server.requests.clear()

    result = await actuator.scale(REF, 5, current=snap)

    assert result.outcome is ScaleOutcome.SCALED and result.ok
    assert (result.replicas_before, result.replicas_requested, result.replicas_after) == (3, 5, 5)
    assert store.get_spec_replicas("llm", "vllm") == 5
    new_rv = store.get_workload("llm", "vllm")["metadata"]["resourceVersion"]
    assert result.resource_version == new_rv
    assert int(new_rv) > int(snap.resource_version)
    assert result.requests == 1
    [req] = server.requests
    assert (req.method, req.path, req.status) == ("PATCH", SCALE_PATH, 200)
    assert req.content_type == "application/merge-patch+json"
    assert req.query == {"fieldManager": "vllm-scaler"}


async def test_unchanged_sends_nothing(server: KubeApiServer, actuator: KubernetesActuator) -> None:
    snap = await actuator.read(REF)
    server.requests.clear()
    result = await actuator.scale(REF, 3, current=snap)
    assert result.outcome is ScaleOutcome.UNCHANGED and result.ok
    assert result.requests == 0
    assert server.requests == []


async def test_conflict_rereads_and_retries_once(
    server: KubeApiServer, store: KubeStore, actuator: KubernetesActuator
) -> None:
    snap = await actuator.read(REF)
    store.external_scale("llm", "vllm", 4)  # another writer: our resourceVersion is stale
    server.requests.clear()

    with captured_logs() as logs:
        result = await actuator.scale(REF, 6, current=snap)

    assert result.outcome is ScaleOutcome.SCALED
    assert (result.replicas_before, result.replicas_after) == (4, 6)
    [reread] = [e for e in logs if e["event"] == "scale_conflict_reread"]
    rv = snap.resource_version
    assert reread["message"] == (
        f"the scale write got 409 Conflict: llm/Deployment/vllm changed after it was read at "
        f"resourceVersion {rv} (any write to it does that, its controller's status updates as "
        "pods start or become ready included: expected now and then); re-reading its scale "
        "subresource and retrying once"
    )
    assert store.get_spec_replicas("llm", "vllm") == 6
    assert [(r.method, r.status) for r in server.requests] == [
        ("PATCH", 409),
        ("GET", 200),
        ("PATCH", 200),
    ]
    assert result.requests == 3


async def test_conflict_resolved_by_other_writer_is_unchanged(
    server: KubeApiServer, store: KubeStore, actuator: KubernetesActuator
) -> None:
    snap = await actuator.read(REF)
    store.external_scale("llm", "vllm", 6)
    result = await actuator.scale(REF, 6, current=snap)
    assert result.outcome is ScaleOutcome.UNCHANGED
    assert [r.method for r in server.requests][-2:] == ["PATCH", "GET"]


async def test_conflict_twice_gives_up(
    server: KubeApiServer, store: KubeStore, actuator: KubernetesActuator
) -> None:
    snap = await actuator.read(REF)
    store.inject_fault("PATCH", "/scale$", 409, times=2)
    server.requests.clear()
    result = await actuator.scale(REF, 5, current=snap)
    assert result.outcome is ApiFailure.STALE and not result.ok
    assert result.http_status == 409
    assert "still conflicting" in result.message
    assert [(r.method, r.status) for r in server.requests] == [
        ("PATCH", 409),
        ("GET", 200),
        ("PATCH", 409),
    ]
    assert store.get_spec_replicas("llm", "vllm") == 3


class _LeadsFor:
    """A write guard that allows the first ``n`` writes, then refuses (leadership lost)."""

    def __init__(self, n: int) -> None:
        self.left = n
        self.asked = 0

    def __call__(self) -> bool:
        self.asked += 1
        self.left -= 1
        return self.left >= 0


async def test_guard_is_asked_before_each_patch_and_stops_the_retry(
    server: KubeApiServer, store: KubeStore, actuator: KubernetesActuator
) -> None:
    """The retry after a 409 is a second write: it is fenced like the first one."""
    snap = await actuator.read(REF)
    store.external_scale("llm", "vllm", 4)  # our resourceVersion is stale: 409, re-read
    server.requests.clear()
    guard = _LeadsFor(1)
    result = await actuator.scale(REF, 6, current=snap, guard=guard)
    assert result.outcome is ScaleOutcome.NOT_LEADER and result.ok
    assert "no longer leads" in result.message and result.requests == 2
    assert [(r.method, r.status) for r in server.requests] == [("PATCH", 409), ("GET", 200)]
    assert guard.asked == 2 and store.get_spec_replicas("llm", "vllm") == 4


async def test_guard_refusing_sends_no_patch(
    server: KubeApiServer, store: KubeStore, actuator: KubernetesActuator
) -> None:
    snap = await actuator.read(REF)
    server.requests.clear()
    result = await actuator.scale(REF, 6, current=snap, guard=lambda: False)
    assert result.outcome is ScaleOutcome.NOT_LEADER and result.requests == 0
    assert server.requests == [] and store.get_spec_replicas("llm", "vllm") == 3


async def test_deletion_costs_stop_at_the_first_refused_pod(
    server: KubeApiServer, store: KubeStore, clock: FakeClock, actuator: KubernetesActuator
) -> None:
    for name in ("vllm-a", "vllm-b", "vllm-c"):
        store.add_pod("llm", name, LABELS, ready=True, created_at=clock.now - 60)
    store.inject_fault("PATCH", "/pods/vllm-a$", 403)
    server.requests.clear()
    costs = {"vllm-a": 0, "vllm-b": 1, "vllm-c": 2}
    result = await actuator.set_deletion_costs(
        "llm", costs, current={"vllm-c": None}, guard=_LeadsFor(2)
    )
    assert result.failed == {"vllm-a": ApiFailure.FORBIDDEN}
    assert result.patched == ("vllm-b",) and result.fenced
    assert [(r.method, r.path.rsplit("/", 1)[1], r.status) for r in server.requests] == [
        ("PATCH", "vllm-a", 403),
        ("PATCH", "vllm-b", 200),
    ]


@pytest.mark.parametrize(
    ("status", "retry_after", "outcome"),
    [
        pytest.param(403, None, ApiFailure.FORBIDDEN, id="403 is forbidden"),
        pytest.param(401, None, ApiFailure.UNAUTHORIZED, id="401 is unauthorized"),
        pytest.param(404, None, ApiFailure.NOT_FOUND, id="404 is not found"),
        pytest.param(429, 7, ApiFailure.THROTTLED, id="429 with Retry-After is throttled"),
        pytest.param(500, None, ApiFailure.SERVER_ERROR, id="500 is a server error"),
        pytest.param(503, 2, ApiFailure.SERVER_ERROR, id="503 with Retry-After is a server error"),
        pytest.param(422, None, ApiFailure.INVALID, id="422 is invalid"),
        pytest.param(400, None, ApiFailure.INVALID, id="400 is invalid"),
    ],
)
async def test_failure_outcomes(
    server: KubeApiServer,
    store: KubeStore,
    actuator: KubernetesActuator,
    status: int,
    retry_after: int | None,
    outcome: ScaleOutcome,
) -> None:
    snap = await actuator.read(REF)
    store.inject_fault("PATCH", "/scale$", status, retry_after=retry_after)
    result = await actuator.scale(REF, 5, current=snap)
    assert result.outcome is outcome
    assert result.http_status == status
    assert result.retry_after_seconds == (None if retry_after is None else float(retry_after))
    assert result.requests == 1
    assert result.replicas_after is None
    assert store.get_spec_replicas("llm", "vllm") == 3


async def test_missing_workload_is_not_found(
    store: KubeStore, actuator: KubernetesActuator
) -> None:
    snap = await actuator.read(REF)
    ghost = REF.model_copy(update={"name": "ghost"})
    result = await actuator.scale(ghost, 5, current=snap)
    assert result.outcome is ApiFailure.NOT_FOUND
    assert 'deployments.apps "ghost" not found' in result.message


async def test_real_server_invalid_replicas_outcome(actuator: KubernetesActuator) -> None:
    snap = await actuator.read(REF)
    with pytest.raises(ValueError, match="replicas must be >= 0"):
        await actuator.scale(REF, -1, current=snap)


async def test_wrong_token_is_unauthorized_not_forbidden(
    server: KubeApiServer, clock: FakeClock, tmp_path: Path
) -> None:
    api = await _client(server, tmp_path, token="wrong")
    try:
        act = KubernetesActuator(api, clock=clock)
        snap = WorkloadSnapshot("llm", 3, 3, "app=vllm", "1")
        result = await act.scale(REF, 4, current=snap)
        assert (result.outcome, result.http_status) == (ApiFailure.UNAUTHORIZED, 401)
        assert "did not accept the credentials" in result.message
        with pytest.raises(KubeApiError) as info:
            await act.read(REF)
        assert info.value.outcome is ApiFailure.UNAUTHORIZED
    finally:
        await api.close()


async def test_connection_refused_is_transport(
    server: KubeApiServer, store: KubeStore, actuator: KubernetesActuator
) -> None:
    snap = await actuator.read(REF)
    await server.stop()
    result = await actuator.scale(REF, 5, current=snap)
    assert result.outcome is ApiFailure.TRANSPORT
    assert result.http_status is None
    assert "cannot reach the API server" in result.message
    with pytest.raises(KubeApiError) as info:
        await actuator.read(REF)
    assert info.value.outcome is ApiFailure.TRANSPORT
    assert await actuator.emit_event(REF, reason="Scaled", message="x") is False
    assert store.get_spec_replicas("llm", "vllm") == 3


async def test_scale_custom_kind(store: KubeStore, actuator: KubernetesActuator) -> None:
    snap = await actuator.read(LWS_REF)
    result = await actuator.scale(LWS_REF, 4, current=snap)
    assert result.outcome is ScaleOutcome.SCALED
    assert (
        store.get_spec_replicas(
            "llm", "lws", group="leaderworkerset.x-k8s.io", plural="leaderworkersets"
        )
        == 4
    )


# ------------------------------------------------------------------ events


async def test_emit_event(store: KubeStore, clock: FakeClock, actuator: KubernetesActuator) -> None:
    await actuator.read(REF)  # learns the uid
    clock.now = T0 + 61
    ok = await actuator.emit_event(REF, reason="ScaledUp", message="3 -> 5: queue depth 42")
    assert ok is True
    [ev] = store.events("llm")
    uid = store.get_workload("llm", "vllm")["metadata"]["uid"]
    assert ev["involvedObject"] == {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "name": "vllm",
        "namespace": "llm",
        "uid": uid,
    }
    assert (ev["reason"], ev["message"], ev["type"]) == (
        "ScaledUp",
        "3 -> 5: queue depth 42",
        "Normal",
    )
    assert ev["source"] == {"component": "vllm-scaler"}
    assert ev["reportingComponent"] == "vllm-scaler"
    assert ev["firstTimestamp"] == ev["lastTimestamp"] == "2023-11-14T22:14:21Z"
    assert ev["count"] == 1
    assert ev["metadata"]["name"].startswith("vllm.")


async def test_an_event_message_carries_no_secret(
    store: KubeStore, actuator: KubernetesActuator
) -> None:
    """A FailedRescale Event quotes the API server's answer, which may echo the request's
    token (some proxies do); an Event is an output too, read by anyone who may list them."""
    register_secret("evt-echoed-token-55Qx")
    message = "403 Forbidden: denied for Authorization=Bearer evt-echoed-token-55Qx"
    assert await actuator.emit_event(REF, reason="FailedRescale", message=message) is True
    [ev] = store.events("llm")
    assert ev["message"] == "403 Forbidden: denied for Authorization=Bearer ***"


async def test_emit_event_failure_is_swallowed(
    store: KubeStore, actuator: KubernetesActuator
) -> None:
    store.inject_fault("POST", "/events$", 500)
    assert await actuator.emit_event(REF, reason="ScaledUp", message="m", type="Warning") is False
    assert store.events() == []
    with pytest.raises(ValueError, match="Normal or Warning"):
        await actuator.emit_event(REF, reason="r", message="m", type="Error")


# ------------------------------------------------------------------ dry run


async def test_dry_run_sends_only_gets(
    server: KubeApiServer, store: KubeStore, api: ApiClient, clock: FakeClock
) -> None:
    act = KubernetesActuator(api, clock=clock, dry_run=True)
    snap = await act.read(REF)
    result = await act.scale(REF, 7, current=snap)
    assert result.outcome is ScaleOutcome.DRY_RUN and result.ok
    assert result.requests == 0
    assert "would scale" in result.message
    assert await act.emit_event(REF, reason="ScaledUp", message="m") is False
    assert {r.method for r in server.requests} == {"GET"}
    assert len(server.requests) == 2  # the scale and the pod list
    assert store.get_spec_replicas("llm", "vllm") == 3
    assert store.events() == []


# ------------------------------------------------------------------ config and mapping


async def test_build_api_client_follows_kubeconfig_env(
    server: KubeApiServer, tmp_path: Path, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write_kubeconfig(tmp_path / "cfg", server_url=server.url, token=TOKEN)
    monkeypatch.setenv("KUBECONFIG", f"{tmp_path / 'absent'}:{path}")
    api = await build_api_client(kubeconfig=None, in_cluster=False)
    try:
        snap = await KubernetesActuator(api, clock=clock).read(REF)
        assert snap.spec_replicas == 3
    finally:
        await api.close()
    with pytest.raises(KubeConfigError, match="nope"):
        await build_api_client(kubeconfig=tmp_path / "nope", in_cluster=False)
    with pytest.raises(KubeConfigError, match="context"):
        await build_api_client(kubeconfig=path, in_cluster=False, context="missing")


def _any(x: object) -> Any:
    return x


def test_classify_error_mapping() -> None:
    class Resp:
        def __init__(self, status: int, body: bytes, headers: dict[str, str]) -> None:
            self.status, self.reason, self.data, self._h = status, "x", body, headers

        def getheaders(self) -> dict[str, str]:
            return self._h

    exc = ApiException(
        http_resp=_any(
            Resp(429, b'{"message": "slow down"}', {"Retry-After": "Tue, 14 Nov 2023 22:13:50 GMT"})
        )
    )
    err = classify_error(exc, now=T0)
    assert err is not None
    assert (err.outcome, err.message, err.retry_after_seconds) == (
        ApiFailure.THROTTLED,
        "slow down",
        30.0,
    )
    err = classify_error(ApiException(http_resp=_any(Resp(415, b"not json", {}))), now=T0)
    assert err is not None and err.outcome is ApiFailure.INVALID
    assert classify_error(TimeoutError()) is not None
    assert classify_error(KeyError("bug")) is None
    assert classify_error(ApiException(status=0, reason="cannot prepare")) is None


async def test_missing_kubeconfig_file_is_named_without_library_noise(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with pytest.raises(KubeConfigError) as err:
        await build_api_client(kubeconfig=tmp_path / "nonexistent", in_cluster=False)
    assert str(err.value) == f"kubeconfig {tmp_path / 'nonexistent'}: no such file"
    assert "Config not found" not in caplog.text  # the library was never asked


async def test_no_kubeconfig_and_not_in_a_cluster_says_both(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    with pytest.raises(KubeConfigError) as err:
        await build_api_client(kubeconfig=None, in_cluster=False)
    assert str(err.value) == (
        f"no kubeconfig ({tmp_path}/.kube/config does not exist, $KUBECONFIG is not set) and "
        "not in a cluster (KUBERNETES_SERVICE_HOST is not set)"
    )
    monkeypatch.setenv("KUBECONFIG", f"{tmp_path}/a:{tmp_path}/b")
    with pytest.raises(KubeConfigError) as err:
        await build_api_client(kubeconfig=None, in_cluster=False)
    assert (
        str(err.value) == f"kubeconfig from $KUBECONFIG ({tmp_path}/a:{tmp_path}/b): no such file"
    )
    with pytest.raises(KubeConfigError) as err:
        await build_api_client(kubeconfig=None, in_cluster=True)
    assert "KUBERNETES_SERVICE_HOST is not set (not running in a pod)" in str(err.value)


def _kubeconfig_with_server(path: Path, server: str, user: dict[str, str]) -> Path:
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "prod", "cluster": {"server": server}}],
        "users": [{"name": "ops", "user": user}],
        "contexts": [{"name": "ops@prod", "context": {"cluster": "prod", "user": "ops"}}],
        "current-context": "ops@prod",
    }
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    return path


USERINFO_EXPECTED = (
    "holds user-info; expected a URL without credentials: they belong in the kubeconfig's "
    "user entry, not in the server URL"
)


@pytest.mark.parametrize(
    ("server", "user", "shown"),
    [
        pytest.param(
            "https://admin:pw-S3CRET@127.0.0.1:6443",
            {"token": "tok-abcdef"},
            "https://admin:***@127.0.0.1:6443",
            id="userinfo-and-token",
        ),
        pytest.param(
            "https://admin:pw-S3CRET@127.0.0.1:6443/",
            {},
            "https://admin:***@127.0.0.1:6443",
            id="userinfo-only",
        ),
        pytest.param(
            "https://pw-S3CRET@127.0.0.1:6443",
            {"token": "tok-abcdef"},
            "https://***@127.0.0.1:6443",
            id="user-name-only",
        ),
    ],
)
async def test_a_server_url_with_userinfo_is_refused_naming_the_field_never_the_password(
    tmp_path: Path, server: str, user: dict[str, str], shown: str
) -> None:
    """aiohttp would fail every request with a token ("Cannot combine AUTHORIZATION header
    with ... credentials encoded in URL"), or send the URL's user-info as Basic without one;
    kubeconfig credentials belong in the user entry."""
    path = _kubeconfig_with_server(tmp_path / "kc", server, user)
    with pytest.raises(KubeConfigError) as err:
        await build_api_client(kubeconfig=path, in_cluster=False)
    assert str(err.value) == (
        f"kubeconfig {path}: cluster 'prod' (context 'ops@prod'): server: value {shown!r} "
        + USERINFO_EXPECTED
    )
    assert "S3CRET" not in str(err.value)
    with pytest.raises(KubeConfigError) as err:  # a context asked for is the one named
        await build_api_client(kubeconfig=path, in_cluster=False, context="ops@prod")
    assert "cluster 'prod' (context 'ops@prod'): server: " in str(err.value)


async def test_kubeconfig_list_skips_missing_files(
    server: KubeApiServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write_kubeconfig(tmp_path / "kubeconfig", server_url=server.url, token=TOKEN)
    monkeypatch.setenv("KUBECONFIG", f"{tmp_path}/missing:{path}")
    api = await build_api_client(kubeconfig=None, in_cluster=False)
    try:
        actuator = KubernetesActuator(api, clock=lambda: 0.0)
        snap = await actuator.read(REF)
    finally:
        await api.close()
    assert snap.namespace == "llm"
