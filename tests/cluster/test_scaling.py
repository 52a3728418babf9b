"""The controller against a real API server: ``recommend --once`` and ``run`` scaling a real
Deployment through its ``/scale`` subresource, with the real Deployment and ReplicaSet
controllers creating the pods and kwok making them Ready after their model load.

The controller runs as the chart's Deployment would run it, authenticated by the chart's
ServiceAccount's token, so the chart's RBAC authorizes every call; its metrics come from a
real Prometheus scraping each kwok pod's vLLM exposition under the pod's name.
"""

from __future__ import annotations

import json

from tests.cluster.podmetrics import Load
from tests.cluster.scene import Scene
from tests.cluster.workloads import deployment, policy, policy_values


async def test_recommend_once_reads_the_real_scale_and_writes_nothing(scene: Scene) -> None:
    scene.kube.apply([deployment(scene.namespace, replicas=2)])
    await scene.serve(2, Load(waiting=10, running=20))
    install = scene.install_scaler(policy_values(policy(scene.namespace, max_replicas=8)))
    proc = install.start(
        scene.prometheus.url,
        command=("recommend", "--once", "--output", "json"),
        name="recommend",
        env={"VLLM_SCALER_LOG_LEVEL": "warning"},
    )
    assert proc.proc.wait(timeout=60) == 0, proc.tail()
    lines = proc.log_path.read_text().splitlines()  # the JSON array among the log lines
    start = lines.index("[")
    (target,) = json.loads("\n".join(lines[start : lines.index("]", start) + 1]))
    assert target["target"] == f"{scene.namespace}/Deployment/vllm"
    assert target["current_replicas"] == 2
    assert target["desired_replicas"] == 5, target  # 20 waiting, 4 per replica
    assert scene.spec_replicas() == 2  # a recommendation writes nothing
    assert scene.events("SuccessfulRescale") == []


async def test_run_scales_up_through_scale_then_down_as_the_load_goes(scene: Scene) -> None:
    scene.kube.apply([deployment(scene.namespace, replicas=1, ready_delay_seconds=4)])
    (first,), metrics = await scene.serve(1, Load(waiting=14, running=20))  # 14: 4 replicas
    metrics.set_load(None, Load(waiting=0, running=1))  # the new pods: idle
    metrics.set_load(first, Load(waiting=14, running=20))
    install = scene.install_scaler(policy_values(policy(scene.namespace, max_replicas=6)))
    proc = install.start(scene.prometheus.url)
    scene.wait_replicas(4)
    up = proc.wait_event("decision", timeout=10, where=lambda d: d.get("action") == "scaled")
    assert up["desired"] == 4 and up["current"] == 1, up
    # the new pods load their model (4 s): counted as starting, not scaled up again
    starting = proc.wait_event("decision", timeout=30, where=lambda d: d.get("starting", 0) > 0)
    assert starting["desired"] == 4, starting
    pods = scene.wait_ready(4)
    assert scene.spec_replicas() == 4
    # the queue drains: back to the minimum
    metrics.set_load(first, Load())
    scene.wait_replicas(1)
    assert set(scene.wait_ready(1)) <= set(pods)
    messages = [
        e["message"]
        for e in scene.events("SuccessfulRescale")
        if e["involvedObject"]["kind"] == "Deployment"
    ]
    assert any(m.startswith("New size: 4; reason:") for m in messages), messages
    assert any(m.startswith("New size: 1; reason:") for m in messages), messages
    table = scene.kube.kubectl("get", "events", "-n", scene.namespace).stdout
    assert "SuccessfulRescale" in table and "deployment/vllm" in table, table
