"""A fleet that follows a real cluster's pods (``vllm-scaler sim --kube real``): a replica per
pod the ReplicaSet made, serving once the API says its pod is Ready, draining once its pod is
being deleted, and handing the pod back for deletion when its requests are done. The cluster
side runs in tests/cluster/test_demo_real.py; here the API's view is given by hand."""

from __future__ import annotations

import pytest

from scaler.sim.engine import ReplicaModel, SimRequest
from scaler.sim.fleet import Fleet, FleetConfig, ObservedPod, SimPod
from scaler.sim.kube_real import ClusterPods

CONFIG = FleetConfig(model=ReplicaModel(model_load_seconds=5.0), initial_replicas=1,
                     termination_grace_seconds=30)  # fmt: skip


def _fleet() -> tuple[Fleet, ClusterPods]:
    store = ClusterPods()
    return Fleet(store, CONFIG, now=0.0, follow=True), store


def _serving(output_tokens: int) -> tuple[Fleet, ClusterPods, SimPod, SimRequest]:
    """A fleet with one Ready pod ``vllm-a`` serving one request."""
    fleet, store = _fleet()
    fleet.observe([ObservedPod("vllm-a", ready=True, terminating=False)])
    fleet.step(0.0)
    (pod,) = fleet.pods.values()
    request = SimRequest(0, 0.0, prompt_tokens=100, output_tokens=output_tokens)
    pod.engine.submit(request, 0.0)
    return fleet, store, pod, request


def test_a_replica_per_pod_ready_when_the_api_says_so_not_after_the_model_load() -> None:
    fleet, _ = _fleet()
    assert fleet.pods == {}  # the ReplicaSet makes the pods, not the fleet
    fleet.observe([ObservedPod("vllm-a", ready=False, terminating=False, node="kwok-0")])
    fleet.step(1.0)
    (pod,) = fleet.pods.values()
    assert (pod.name, pod.node, pod.ready) == ("vllm-a", "kwok-0", False)
    fleet.step(100.0)  # far past the model load: still not Ready, kwok has not said so
    assert not pod.ready
    fleet.observe([ObservedPod("vllm-a", ready=True, terminating=False, node="kwok-0")])
    changes = fleet.step(101.0)
    assert pod.ready and pod.ready_at == 101.0
    assert changes.ready == [pod]


def test_a_pod_being_deleted_drains_then_goes_back_to_the_api() -> None:
    fleet, store, pod, request = _serving(output_tokens=20)
    fleet.observe([ObservedPod("vllm-a", ready=True, terminating=True)])
    fleet.step(0.01)
    assert pod.terminating_since == 0.01 and not pod.ready
    assert store.take_deletions() == []  # its request is still running
    t = 0.01
    while pod in fleet.pods.values():
        t += 0.5
        assert t < CONFIG.termination_grace_seconds, "never drained"
        fleet.step(t)
    assert request.done and not request.cut
    assert store.take_deletions() == ["vllm-a"]  # the kubelet's part: the pod goes
    # the API still lists it until the deletion lands: it is not taken for a new pod
    fleet.observe([ObservedPod("vllm-a", ready=True, terminating=True)])
    fleet.step(t + 1)
    assert fleet.pods == {}


def test_a_pod_gone_from_the_api_is_gone_with_its_requests() -> None:
    fleet, store, pod, request = _serving(output_tokens=2000)
    fleet.observe([])  # deleted by someone else, its grace period over
    changes = fleet.step(0.5)
    assert changes.gone == [pod] and fleet.pods == {}
    assert request.cut
    assert store.take_deletions() == []  # nothing to delete: the API has it gone


def test_the_fleet_creates_no_pod_of_its_own() -> None:
    with pytest.raises(RuntimeError, match="the ReplicaSet does"):
        ClusterPods().add_pod("llm", "vllm-x", {}, created_at=0.0)
