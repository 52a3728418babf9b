"""Two controller replicas with leader election on a real Lease (coordination.k8s.io/v1,
authorized by the chart's leader-election Role): one writes, the other waits; after SIGTERM
the other takes over at once (the Lease is released), after SIGKILL once the Lease expires;
the decision state the leader kept on the Lease is loaded by the new one."""

from __future__ import annotations

import json
import time
from typing import Any

from scaler.sim.controlplane import Cluster
from tests.cluster.chart import Install, ScalerProcess
from tests.cluster.podmetrics import Load
from tests.cluster.scene import Scene
from tests.cluster.workloads import deployment, policy, policy_values

STATE = "vllm-scaler.io/state"


def _lease(kube: Cluster, install: Install) -> Any:
    return kube.get(
        f"/apis/coordination.k8s.io/v1/namespaces/{install.namespace}/leases/{install.release}"
    )


def _holder(kube: Cluster, install: Install) -> str | None:
    holder: str | None = (_lease(kube, install).get("spec") or {}).get("holderIdentity")
    return holder


def _annotations(kube: Cluster, install: Install) -> dict[str, str]:
    found: dict[str, str] = _lease(kube, install)["metadata"].get("annotations") or {}
    return found


def _leading(proc: ScalerProcess) -> bool:
    return proc.metric("vllm_scaler_leader") == 1


async def test_one_leader_writes_and_the_other_takes_over_after_sigterm_and_sigkill(
    scene: Scene,
) -> None:
    kube = scene.kube
    kube.apply([deployment(scene.namespace, replicas=2, ready_delay_seconds=1)])
    _, metrics = await scene.serve(2, Load(waiting=6, running=10))  # 12 waiting: 3
    # a long scale-down window: state that matters across a takeover
    install = scene.install_scaler(
        policy_values(policy(scene.namespace, max_replicas=3, down_window_seconds=600))
    )
    a = install.start(scene.prometheus.url, name="a")
    kube.wait_for(lambda: _leading(a), timeout=30, what="a to lead")
    b = install.start(scene.prometheus.url, name="b")
    b.wait_event("started", timeout=30)
    scene.wait_replicas(3)
    assert _holder(kube, install) == f"{install.release}-a"
    assert b.metric("vllm_scaler_leader") == 0
    kube.wait_for(
        lambda: STATE in _annotations(kube, install), timeout=20, what="the state on the Lease"
    )
    state = json.loads(_annotations(kube, install)[STATE])
    key = f"{scene.namespace}/Deployment/vllm"
    assert key in state["targets"]

    # SIGTERM: a releases the Lease; b takes over within a retry period or two
    stopped = time.monotonic()
    assert a.terminate() == 0
    kube.wait_for(lambda: _leading(b), timeout=10, what="b to lead after SIGTERM")
    graceful = time.monotonic() - stopped
    loaded = b.wait_event("state_loaded", timeout=10)
    assert key in loaded["targets"], loaded
    assert _holder(kube, install) == f"{install.release}-b"
    # the load goes: the 600 s window carried over holds the scale-down
    metrics.set_load(None, Load())
    held = b.wait_event("decision", timeout=20, where=lambda d: d.get("reason") == "stabilized")
    assert held["desired"] == 3, held
    assert scene.spec_replicas() == 3

    # SIGKILL: no release; c takes over once the Lease (4 s) has not been renewed
    c = install.start(scene.prometheus.url, name="c")
    c.wait_event("started", timeout=30)
    killed = time.monotonic()
    b.kill()
    kube.wait_for(lambda: _leading(c), timeout=30, what="c to lead after SIGKILL")
    crash = time.monotonic() - killed
    # a release hands over within a retry period (1 s); a crash only once the Lease has not
    # been renewed for its duration (4 s) on c's clock
    assert graceful < crash, (graceful, crash)
    assert c.wait_event("state_loaded", timeout=10)
    assert scene.spec_replicas() == 3
