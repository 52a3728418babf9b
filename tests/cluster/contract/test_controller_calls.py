"""The controller's own calls, through its actuator and Lease client (kubernetes-asyncio, as
``run`` builds them), on both servers: what each call returns is the same."""

from __future__ import annotations

from scaler.actuators.errors import ApiFailure, KubeApiError
from scaler.actuators.kubernetes import ScaleOutcome
from scaler.config.policy import WorkloadRef
from tests.cluster.contract.servers import PODCLIQUE, SCALING_GROUP, Server
from tests.cluster.contract.test_leases import lease


def _ref(api: Server, name: str = "vllm", **kw: str) -> WorkloadRef:
    doc = {"apiVersion": "apps/v1", "kind": "Deployment", "namespace": api.namespace,
           "name": name, **kw}  # fmt: skip
    return WorkloadRef.model_validate(doc)


async def test_read_a_deployment_its_pods_and_their_owners(api: Server) -> None:
    pods = await api.deployment("vllm", replicas=2)
    await api.pod("stray", {"app": "vllm"}, ready=True)  # no controller: its owner is unknown
    async with api.actuator() as actuator:
        snap = await actuator.read(_ref(api))
    assert (snap.spec_replicas, snap.status_replicas, snap.selector) == (2, 2, "app=vllm")
    assert sorted(p.name for p in snap.pods) == sorted([*pods, "stray"])
    assert all(p.ready and p.phase == "Running" and not p.terminating for p in snap.pods)
    assert all(p.ready_seconds is not None and p.ready_seconds < 300 for p in snap.pods)
    assert snap.foreign == ()
    assert snap.unowned == (("stray", "no controller ownerReference"),)


async def test_scale_through_the_scale_subresource(api: Server) -> None:
    await api.deployment("vllm")
    await api.custom(SCALING_GROUP, "decode", replicas=1, selector="app=decode")
    async with api.actuator(field_manager="vllm-scaler") as actuator:
        before = await actuator.read(_ref(api))
        up = await actuator.scale(_ref(api), 2, current=before)
        assert (up.outcome, up.replicas_after, up.requests) == (ScaleOutcome.SCALED, 2, 1)
        # another writer in between (on a kind no controller writes the status of): the
        # stale write is re-read and sent once more
        ref = _ref(api, "decode", apiVersion="grove.io/v1alpha1",
                   kind="PodCliqueScalingGroup", plural="podcliquescalinggroups")  # fmt: skip
        current = await actuator.read(ref)
        await api.touch(SCALING_GROUP, "decode")
        down = await actuator.scale(ref, 3, current=current)
        assert (down.outcome, down.replicas_after, down.requests) == (ScaleOutcome.SCALED, 3, 3)
        missing = await actuator.scale(_ref(api, "nope"), 5, current=current)
        assert (missing.outcome, missing.http_status) == (ApiFailure.NOT_FOUND, 404)
        assert missing.message.endswith('deployments.apps "nope" not found')


async def test_pod_deletion_costs(api: Server) -> None:
    pods = await api.deployment("vllm", replicas=2)
    async with api.actuator() as actuator:
        done = await actuator.set_deletion_costs(
            api.namespace, {pods[0]: -5, pods[1]: 7, "gone": 1}, current={pods[1]: "7"}
        )
        snap = await actuator.read(_ref(api))
    assert done.patched == (pods[0],)  # pods[1] already holds its cost
    assert dict(done.failed) == {"gone": ApiFailure.NOT_FOUND}
    costs = {p.name: p.deletion_cost for p in snap.pods}
    assert costs == {pods[0]: "-5", pods[1]: None}


async def test_events_the_other_autoscalers_and_the_annotations(api: Server) -> None:
    ns = api.namespace
    await api.deployment("vllm")
    await api.annotate("vllm", {"vllm-scaler.io/paused": "true"})
    ref = _ref(api)
    async with api.actuator() as actuator:
        await actuator.read(ref)  # the uid of involvedObject
        assert await actuator.emit_event(ref, reason="SuccessfulRescale", message="New size: 2")
        assert await actuator.emit_event(ref, reason="Odd", message="x", type="Warning")
        assert await actuator.list_scale_owners(ns) == []  # no HPA, no KEDA CRD
        annotations = await actuator.read_annotations(ref)
    assert annotations["vllm-scaler.io/paused"] == "true"
    events = (await api.ok("GET", f"/api/v1/namespaces/{ns}/events"))["items"]
    assert sorted((e["reason"], e["type"]) for e in events) == [
        ("Odd", "Warning"),
        ("SuccessfulRescale", "Normal"),
    ]
    dep = await api.ok("GET", f"/apis/apps/v1/namespaces/{ns}/deployments/vllm")
    assert {e["involvedObject"]["uid"] for e in events} == {dep["metadata"]["uid"]}


async def test_a_custom_kind_without_a_selector_lists_no_pods(api: Server) -> None:
    await api.custom(PODCLIQUE, "decode", replicas=3)
    await api.pod("decode-0", {"app": "decode"})
    ref = _ref(api, "decode", apiVersion="grove.io/v1alpha1", kind="PodClique",
               plural="podcliques")  # fmt: skip
    async with api.actuator() as actuator:
        snap = await actuator.read(ref)
    assert (snap.spec_replicas, snap.selector, snap.pods) == (3, "", ())


async def test_the_lease_client(api: Server) -> None:
    ns = api.namespace
    async with api.leases() as leases:
        assert await leases.get(ns, "vllm-scaler") is None
        created = await leases.create(ns, lease(ns))
        try:
            await leases.create(ns, lease(ns))
        except KubeApiError as err:
            assert (err.outcome, err.http_status) == (ApiFailure.STALE, 409)
        else:
            raise AssertionError("a second create succeeded")
        created["spec"]["holderIdentity"] = "pod-b"
        renewed = await leases.replace(ns, "vllm-scaler", created)
        assert renewed["spec"]["holderIdentity"] == "pod-b"
        try:
            await leases.replace(ns, "vllm-scaler", created)  # its resourceVersion is stale
        except KubeApiError as err:
            assert (err.outcome, err.http_status) == (ApiFailure.STALE, 409)
        else:
            raise AssertionError("a stale replace succeeded")
        assert (await leases.get(ns, "vllm-scaler") or {})["spec"]["holderIdentity"] == "pod-b"
