"""``vllm-scaler sim --kube real``: the simulated fleet on the real control plane. The pods are
the real ReplicaSet's, each simulated replica serves once kwok makes its pod Ready (the model
load is kwok's delay), and a removed pod drains and is gone when its requests are done."""

from __future__ import annotations

import asyncio
import io
import time
from collections.abc import AsyncIterator
from datetime import datetime
from pathlib import Path

import pytest

from scaler.sim.controlplane import Cluster
from scaler.sim.demo import DemoOptions, run_demo
from scaler.sim.engine import ReplicaModel, SimRequest
from scaler.sim.fleet import FleetConfig
from scaler.sim.kube_real import RealKubeCluster
from scaler.sim.report import RunSummary
from scaler.sim.trace import load_trace

MODEL_LOAD = 3.0


def _when(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


@pytest.fixture
async def real(kube: Cluster, tmp_path: Path) -> AsyncIterator[RealKubeCluster]:
    config = FleetConfig(model=ReplicaModel(model_load_seconds=MODEL_LOAD), initial_replicas=1,
                         termination_grace_seconds=120)  # fmt: skip
    cluster = RealKubeCluster(tmp_path / "real", config, cluster=kube)
    await cluster.start()
    try:
        yield cluster
    finally:
        await cluster.stop()


async def _steps_until(real: RealKubeCluster, check: object, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not check():  # type: ignore[operator]
        state = {n: (p.ready, p.terminating_since, p.engine.in_flight)
                 for n, p in real.fleet.pods.items()}  # fmt: skip
        assert time.monotonic() < deadline, f"timed out: {state}, API {sorted(real.store.pods)}"
        real.fleet.step(time.time())
        await asyncio.sleep(0.05)


async def test_replicas_follow_the_replicasets_pods_and_kwoks_ready(
    real: RealKubeCluster, kube: Cluster
) -> None:
    fleet = real.fleet
    (first,) = fleet.pods.values()
    assert first.ready  # up at the start
    path = "/apis/apps/v1/namespaces/llm/deployments/vllm/scale"
    kube.request("PATCH", path, body={"spec": {"replicas": 2}},
                 content_type="application/merge-patch+json")  # fmt: skip
    await _steps_until(real, lambda: len(fleet.pods) == 2, timeout=30)
    (new,) = [p for p in fleet.pods.values() if p is not first]
    assert not new.ready  # its pod exists; kwok has not made it Ready yet
    await _steps_until(real, lambda: new.ready, timeout=30)
    api_pod = kube.get(f"/api/v1/namespaces/llm/pods/{new.name}")
    (ready,) = [c for c in api_pod["status"]["conditions"] if c["type"] == "Ready"]
    created = _when(api_pod["metadata"]["creationTimestamp"])
    became_ready = _when(ready["lastTransitionTime"])
    assert became_ready - created >= MODEL_LOAD - 1  # kwok's delay: the model load
    assert new.ready_at is not None and new.ready_at >= became_ready  # served once Ready
    assert [c.new_replicas for _, c in fleet.scale_changes] == [2]
    # the first pod costs more to remove (as the controller would rank it): the ReplicaSet
    # removes the newcomer, which drains its request and goes
    kube.request(
        "PATCH", f"/api/v1/namespaces/llm/pods/{first.name}",
        body={"metadata": {"annotations": {"controller.kubernetes.io/pod-deletion-cost": "10"}}},
        content_type="application/merge-patch+json",
    )  # fmt: skip
    request = SimRequest(0, time.time(), prompt_tokens=200, output_tokens=50)
    new.engine.submit(request, time.time())
    kube.request("PATCH", path, body={"spec": {"replicas": 1}},
                 content_type="application/merge-patch+json")  # fmt: skip
    await _steps_until(real, lambda: new in fleet.gone, timeout=30)
    assert request.done and not request.cut
    # drained: deleted by the fleet when its request was done, long before its grace (120 s)
    await _steps_until(real, lambda: new.name not in real.store.pods, timeout=10)
    assert list(fleet.pods) == [first.name]
    assert not kube.exists(f"/api/v1/namespaces/llm/pods/{new.name}")


async def test_a_short_real_mode_demo(kube: Cluster, tmp_path: Path) -> None:
    trace_file = tmp_path / "trace.csv"
    rows = "".join(f"{t * 0.25:.2f},3000,150\n" for t in range(100))  # 4 long prompts/s, 25 s
    trace_file.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n" + rows, encoding="utf-8")
    trace = load_trace(trace_file)
    summaries: list[RunSummary] = []
    out = io.StringIO()
    code = await run_demo(
        DemoOptions(
            trace=trace, workdir=tmp_path / "demo", model_load_seconds=MODEL_LOAD,
            tail_seconds=15, control_interval_seconds=1, initial_replicas=1, plot=False,
            kube="real", kube_cluster=kube,
        ),
        out,
        report=lambda summary, _: summaries.append(summary),
    )  # fmt: skip
    text = out.getvalue()
    assert code == 0, text
    assert "kube-apiserver v1.37.2" in text and "kwok makes each Ready" in text
    (summary,) = summaries
    ups = [e for e in summary.scale_events if e[2] > e[1]]
    assert ups, text  # the load asked for more replicas: the real Deployment was scaled
    assert summary.failed_cycles == 0, text
    assert summary.served == len(trace.requests), text  # the tail leaves time for all
