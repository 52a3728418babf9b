"""The chart's RBAC under the real authorizer, and scaling during a rolling update.

``rbac.scope=namespaces``: the chart renders Roles in exactly the namespaces of the policy's
targets. A target in another namespace (the policy grew, the RBAC did not follow) is refused
by the server: logged as ``target_read_failed`` with ``outcome=forbidden`` and counted,
while the covered target is scaled. The ServiceAccount can do nothing cluster-wide.

A rolling update (``maxSurge`` 1, ``maxUnavailable`` 0) while the load asks for more
replicas: the surge pods are not taken for pods draining, the scale-up is written during the
rollout, and the rollout completes at the new size.
"""

from __future__ import annotations

import json

from tests.cluster.podmetrics import Load
from tests.cluster.scene import Scene
from tests.cluster.workloads import deployment, policy, policy_values


async def test_namespaced_rbac_refuses_a_target_outside_the_policy_it_was_rendered_for(
    scene: Scene,
) -> None:
    kube, ns = scene.kube, scene.namespace
    other = f"{ns}-other"
    kube.create_namespace(other)
    try:
        kube.apply([deployment(ns, replicas=1, ready_delay_seconds=1)])
        kube.apply([deployment(other, replicas=1, ready_delay_seconds=1)])
        await scene.serve(1, Load(waiting=8, running=8))
        rendered_for = policy(ns, max_replicas=2)
        install = scene.install_scaler(policy_values(rendered_for, rbac={"scope": "namespaces"}))
        kinds = sorted({d["kind"] for d in install.docs})
        assert "ClusterRole" not in kinds and "Role" in kinds, kinds
        grown = policy(ns, max_replicas=2)
        grown["targets"].append(policy(other, max_replicas=2)["targets"][0])
        proc = install.start(scene.prometheus.url, policy=json.dumps(grown))
        failed = proc.wait_event(
            "target_read_failed", timeout=30, where=lambda d: d["target"].startswith(other)
        )
        assert failed["outcome"] == "forbidden", failed
        scene.wait_replicas(2)
        key = f"{other}/Deployment/vllm"
        errors = proc.metric(
            "vllm_scaler_target_read_errors_total", target=key, outcome="forbidden"
        )
        assert errors is not None and errors >= 1
        assert (
            kube.get(f"/apis/apps/v1/namespaces/{other}/deployments/vllm/scale")["spec"]["replicas"]
            == 1
        )
        # nothing cluster-wide, nothing outside the rendered namespaces
        sa = install.kubeconfig()
        for args, allowed in (
            (("patch", "deployments", "--subresource=scale", "-n", ns), "yes"),
            (("patch", "pods", "-n", ns), "yes"),
            (("patch", "deployments", "--subresource=scale", "-n", other), "no"),
            (("list", "pods", "-n", "kube-system"), "no"),
            (("patch", "deployments", "-n", ns), "no"),  # the scale only
            (("list", "nodes"), "no"),
        ):
            answer = kube.kubectl("auth", "can-i", *args, kubeconfig=sa, check=False).stdout
            assert answer.strip() == allowed, (args, answer)
    finally:
        kube.delete_namespace(other)


async def test_a_rolling_update_during_a_scale_up_completes_at_the_new_size(
    scene: Scene,
) -> None:
    kube, ns = scene.kube, scene.namespace
    kube.apply([deployment(ns, replicas=2, ready_delay_seconds=3, max_surge=1, max_unavailable=0)])
    _, metrics = await scene.serve(2, Load(waiting=2, running=8))  # 4 waiting: 1 (min 2)
    install = scene.install_scaler(policy_values(policy(ns, min_replicas=2, max_replicas=4)))
    proc = install.start(scene.prometheus.url)
    proc.wait_event("decision", timeout=30)
    # a new template: the rollout starts, one surge pod at a time
    kube.request(
        "PATCH",
        f"/apis/apps/v1/namespaces/{ns}/deployments/vllm",
        body={"spec": {"template": {"metadata": {"annotations": {"rollout": "2"}}}}},
        content_type="application/merge-patch+json",
    )
    metrics.set_load(None, Load(waiting=6, running=8))  # 6 waiting per pod: more than 4
    kube.wait_for(lambda: scene.spec_replicas() >= 3, timeout=60, what="a scale-up")
    kube.kubectl("rollout", "status", "deployment/vllm", "-n", ns, "--timeout=120s")
    final = scene.spec_replicas()
    assert final >= 3
    ready = scene.wait_ready(final)
    deployed = kube.get(f"/apis/apps/v1/namespaces/{ns}/deployments/vllm")
    assert deployed["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "2"
    assert all(
        (p["metadata"].get("annotations") or {}).get("rollout") == "2"
        for p in kube.pods(ns)
        if p["metadata"]["name"] in ready
    )
    # no decision took surge pods for draining ones: no scale-down was asked for
    downs = [d for d in proc.events("decision") if d["desired"] < d["current"]]
    assert downs == [], downs[:3]
