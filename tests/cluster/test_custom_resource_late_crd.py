"""The VLLMAutoscaler CRD installed after the controller started, on a real API server.

The controller starts on a cluster without the CRD (the API answers 404): it scales the
policy file's targets and looks for the CRD again every ``resource_crd_retry_seconds``
(60 s by default; 1 s here, so that the test waits for the look, not for wall time). Once the
CRD is installed a resource applied to it is scaled by the same process, without a restart.
"""

from __future__ import annotations

import yaml

from scaler.config.resource import GROUP, PLURAL
from tests.cluster.podmetrics import Load
from tests.cluster.scene import Scene
from tests.cluster.test_custom_resource import CRD_FILE, resource, spec, wait_condition
from tests.cluster.workloads import crd_installed, deployment, policy_values

CRD_NAME = f"{PLURAL}.{GROUP}"
CRD_PATH = f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{CRD_NAME}"
RETRY_SECONDS = 1


def _absent(scene: Scene) -> None:
    """The CRD not installed (another module's may still be going: wait until it is gone)."""
    kube = scene.kube
    kube.request("DELETE", CRD_PATH, ok=(200, 202, 404))
    kube.wait_for(
        lambda: not kube.exists(CRD_PATH),
        timeout=60,
        what="the VLLMAutoscaler CRD deleted",
    )


async def test_a_crd_installed_after_the_controller_started_is_picked_up(scene: Scene) -> None:
    kube, ns = scene.kube, scene.namespace
    _absent(scene)
    kube.apply([deployment(ns, replicas=1)])
    await scene.serve(1, Load(waiting=10, running=20))  # 10 waiting, 4 per replica: 3
    install = scene.install_scaler(policy_values({"rate_window_seconds": 8, "targets": []}))
    proc = install.start(
        scene.prometheus.url,
        env={"VLLM_SCALER_RESOURCE_CRD_RETRY_SECONDS": str(RETRY_SECONDS)},
    )
    started = proc.wait_event("started", timeout=30)
    assert started["resources"]["served"] is False, started
    assert started["resources"]["found"] == 0
    (absent,) = proc.events("resource_kind_not_served")
    assert f"every {RETRY_SECONDS} s" in absent["message"], absent
    before = proc.metric("vllm_scaler_cycles_total") or 0.0
    kube.wait_for(
        lambda: (proc.metric("vllm_scaler_cycles_total") or 0.0) >= before + 2,
        timeout=30,
        what="two cycles without the CRD",
    )
    assert scene.spec_replicas() == 1

    (crd,) = [d for d in yaml.safe_load_all(CRD_FILE.read_text(encoding="utf-8")) if d]
    with crd_installed(kube, crd):
        proc.wait_event("resource_kind_served", timeout=30)
        kube.apply([resource(ns, "vllm", spec())])
        scene.wait_replicas(3)
        up = wait_condition(kube, ns, "vllm", "AbleToScale", reason="SucceededRescale")
        assert (up["status"]["currentReplicas"], up["status"]["desiredReplicas"]) == (1, 3)
        assert up["status"]["reason"] == "scale_up"
        assert proc.proc.poll() is None  # the same process: never restarted
        assert [e["event"] for e in proc.events("started")] == ["started"]
