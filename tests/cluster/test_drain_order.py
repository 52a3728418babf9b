"""Drain-aware scale-down on the real ReplicaSet controller: the pods vllm-scaler ranks to go
by ``controller.kubernetes.io/pod-deletion-cost`` (the idlest) are the ones the ReplicaSet
removes; and where the ranking is ignored (the controller manager's ``PodDeletionCost``
feature gate off), the controller says so, naming the pods that survived, in a warning and a
metric.

Four pods, two on each node: the two idle ones Ready for an hour (a fleet that has been up;
their Ready condition's time is set so), the two busy ones just started. Without the
ranking the ReplicaSet removes, among pods as doubled up as each other, the ones Ready for
the shortest time first (compared on a logarithmic scale since 1.22, so the hour makes the
order certain): the busy ones.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterator

import pytest

from scaler.sim.controlplane import ControlPlane
from tests.cluster.podmetrics import Load, PodMetrics
from tests.cluster.scene import Scene
from tests.cluster.workloads import deployment, policy, policy_values

COST = "controller.kubernetes.io/pod-deletion-cost"


def _ready_an_hour_ago(scene: Scene, pod: str) -> None:
    since = datetime.datetime.now(datetime.UTC) - datetime.timedelta(hours=1)
    scene.kube.request(
        "PATCH",
        f"/api/v1/namespaces/{scene.namespace}/pods/{pod}/status",
        body={
            "status": {
                "conditions": [
                    {
                        "type": "Ready",
                        "status": "True",
                        "lastTransitionTime": since.strftime("%Y-%m-%dT%H:%M:%SZ"),
                    }
                ]
            }
        },
        content_type="application/strategic-merge-patch+json",
    )


async def _old_idle_new_busy(scene: Scene) -> tuple[list[str], list[str], PodMetrics]:
    """Two idle pods Ready for an hour, then two busy ones, one of each on each node."""
    scene.kube.apply([deployment(scene.namespace, replicas=2, ready_delay_seconds=1, spread=True)])
    old, metrics = await scene.serve(2, Load(waiting=0, running=6))
    for pod in old:
        _ready_an_hour_ago(scene, pod)
        metrics.set_load(pod, Load(waiting=0, running=0))
    scene.set_replicas(4)
    new = sorted(set(scene.wait_ready(4)) - set(old))
    metrics.wait_served(set(old) | set(new))
    await scene.scraped(4)
    return old, new, metrics


async def test_the_pods_ranked_to_go_are_the_ones_the_replicaset_removes(scene: Scene) -> None:
    old, new, _ = await _old_idle_new_busy(scene)
    install = scene.install_scaler(policy_values(policy(scene.namespace, min_replicas=2)))
    proc = install.start(scene.prometheus.url)
    scene.wait_replicas(2)
    assert scene.wait_ready(2) == new  # the idle (old) ones went
    chosen = proc.wait_event("scale_down_pods_chosen", timeout=5)
    assert sorted(chosen["remove"]) == old, chosen
    # the ranking the ReplicaSet read: the busy pods above the idle ones
    costs = {
        p["metadata"]["name"]: int(p["metadata"]["annotations"][COST])
        for p in scene.kube.pods(scene.namespace)
    }
    assert all(costs[n] >= 2 for n in new), costs
    assert proc.events("scale_down_order_ignored") == []
    assert proc.metric("vllm_scaler_scale_down_order_ignored_total") is None


@pytest.fixture
def deletion_cost_off(control_plane: ControlPlane) -> Iterator[ControlPlane]:
    control_plane.restart_controller_manager({"PodDeletionCost": False})
    try:
        yield control_plane
    finally:
        control_plane.restart_controller_manager({})


async def test_an_ignored_ranking_is_reported_naming_the_pods_that_survived(
    deletion_cost_off: ControlPlane, scene: Scene
) -> None:
    old, new, _ = await _old_idle_new_busy(scene)
    install = scene.install_scaler(policy_values(policy(scene.namespace, min_replicas=2)))
    proc = install.start(scene.prometheus.url)
    scene.wait_replicas(2)
    assert scene.wait_ready(2) == old  # the feature off: the newest (busy) pods went
    warning = proc.wait_event("scale_down_order_ignored", timeout=20)
    assert warning["survived"] == old and warning["removed"] == new, warning
    key = f"{scene.namespace}/Deployment/vllm"
    assert proc.metric("vllm_scaler_scale_down_order_ignored_total", target=key) == 1
    survivors = sorted(
        s["pod"] for s in proc.samples("vllm_scaler_scale_down_survivor") if s["target"] == key
    )
    assert survivors == old
