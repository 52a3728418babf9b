"""The VLLMAutoscaler resource on a real API server: the chart's CRD (crds/, generated from
the policy's models) installed, bad specs refused by ``kubectl apply`` naming the field and
what was expected (one case per CEL rule, and the schema's own bounds), and the controller,
run as the chart's ServiceAccount, taking a resource's create, change and delete without a
restart, with its status, conditions, printer columns and Events as ``kubectl`` shows them."""

from __future__ import annotations

import copy
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from scaler.config.policy import parse_policy
from scaler.config.resource import resource_of, target_of
from scaler.controller.status import REFUSED_REASONS, camel_reason
from scaler.core.capacity import SEED_WEIGHT, seeded_estimate
from scaler.sim.controlplane import Cluster
from tests.cluster.podmetrics import Load
from tests.cluster.scene import Scene
from tests.cluster.workloads import crd_installed, deployment, policy, policy_values

ROOT = Path(__file__).resolve().parents[2]
CRD_FILE = ROOT / "deploy" / "helm" / "vllm-scaler" / "crds" / "vllmautoscalers.yaml"
#: A file to save kubectl's output of a resource during a scale-up in (for the docs and a
#: review), when set.
SHOWN = os.environ.get("VLLM_SCALER_TEST_KUBECTL_OUTPUT", "")

Doc = dict[str, Any]


@pytest.fixture(scope="module")
def vllm_crd(kube: Cluster) -> Iterator[Doc]:
    """The chart's CRD, installed and Established for the module."""
    (crd,) = [d for d in yaml.safe_load_all(CRD_FILE.read_text(encoding="utf-8")) if d]
    with crd_installed(kube, crd):
        yield crd


def spec(**fields: Any) -> Doc:
    """The spec of tests.cluster.workloads.policy's target (queue depth alone, fast windows),
    as ``vllm-scaler as-resources`` writes it, with ``fields`` merged in (None: left out)."""
    (target,) = parse_policy(policy("any")).targets
    return _merged(resource_of(target)["spec"], fields)


def _merged(base: Doc, over: Doc) -> Doc:
    out = copy.deepcopy(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merged(out[key], value)
        elif value is None:
            out.pop(key, None)
        else:
            out[key] = value
    return out


def resource(namespace: str, name: str, body: Doc) -> Doc:
    return {
        "apiVersion": "autoscaling.vllm-scaler.io/v1alpha1",
        "kind": "VLLMAutoscaler",
        "metadata": {"name": name, "namespace": namespace},
        "spec": body,
    }


def kubectl_apply(kube: Cluster, doc: Doc) -> tuple[int, str]:
    done = kube.kubectl("apply", "-f", "-", input=yaml.safe_dump(doc), check=False)
    return done.returncode, done.stderr


# One case per CEL rule of the CRD (scaler/config/crd.py), and a few of the schema's own.
REFUSED = [
    pytest.param(
        {"minReplicas": 4, "maxReplicas": 2},
        "spec.maxReplicas: Invalid value",
        "expected a number >= minReplicas",
        id="maxReplicas below minReplicas",
    ),
    pytest.param(
        {"signals": {"queueDepth": {"enabled": False}}},
        "spec.signals: Invalid value",
        "expected at least one signal enabled",
        id="every signal off",
    ),
    pytest.param(
        {"signals": {"capacity": {"enabled": True}}},
        "spec.signals.capacity.enabled: Invalid value",
        "while ttftP95 is disabled",
        id="capacity without TTFT",
    ),
    pytest.param(
        {"scaleDown": {"shortenWindowOnSteadyFall": True}},
        "spec.scaleDown.shortenWindowOnSteadyFall: Invalid value",
        "while the capacity signal is off",
        id="shortened window without capacity",
    ),
    pytest.param(
        {
            "signals": {
                "ttftP95": {"enabled": True},
                "capacity": {"minTokensPerSecond": 500, "maxTokensPerSecond": 100},
            }
        },
        "spec.signals.capacity.maxTokensPerSecond: Invalid value",
        "expected a number >= minTokensPerSecond",
        id="capacity bounds",
    ),
    pytest.param(
        {"signals": {"ttftP95": {"enabled": True}, "capacity": {"seedPromptTokensPerSecond": 9}}},
        "spec.signals.capacity.seedGenerationTokensPerSecond: Invalid value",
        "together",
        id="seed half given",
    ),
    pytest.param(
        {
            "signals": {"ttftP95": {"enabled": True, "quantile": 0.95}},
            "shadow": {"signals": {"ttftP95": {"quantile": 0.9}}},
        },
        "spec.shadow.signals.ttftP95.quantile: Invalid value",
        "expected the active policy's quantile",
        id="shadow quantile",
    ),
    pytest.param(
        {"signals": {"itlP95": {"enabled": True}}},
        "spec.signals.itlP95.targetSeconds: Required value",
        "expected the model's ITL p95 target",
        id="ITL without its target",
    ),
    pytest.param(
        {
            "signals": {"itlP95": {"enabled": True, "targetSeconds": 0.05}},
            "shadow": {
                "signals": {"itlP95": {"enabled": True, "targetSeconds": 0.05, "quantile": 0.5}}
            },
        },
        "spec.shadow.signals.itlP95.quantile: Invalid value",
        "both decide on the same ITL reading",
        id="shadow ITL quantile",
    ),
    pytest.param(
        {"shadow": {"minReplicas": 3, "maxReplicas": 2}},
        "spec.shadow.maxReplicas: Invalid value",
        "expected a number >= minReplicas",
        id="shadow bounds",
    ),
    pytest.param(
        {"replicaGroups": {"servingPods": "leaders"}},
        "spec.replicaGroups.groupLabel: Required value",
        "expected the pod label that names each pod's group for kind Deployment",
        id="groups without a label",
    ),
    pytest.param(
        {"scaleTargetRef": {"apiVersion": "v1", "kind": "ReplicationController"}},
        "spec.scaleTargetRef.apiVersion: Invalid value",
        "expected group/version of a named API group",
        id="core group",
    ),
    pytest.param(
        {"scaleTargetRef": {"kind": "InferencePool"}},
        "spec.scaleTargetRef.kind: Invalid value",
        "or plural set to the resource name",
        id="unknown kind without plural",
    ),
    pytest.param(
        {"scaleTargetRef": {"apiVersion": "apps/v2"}},
        "spec.scaleTargetRef.apiVersion: Invalid value",
        "expected apps/v1 for kind Deployment",
        id="kind of another version",
    ),
    pytest.param(
        {"scaleUp": {"maxPercentPerPeriod": 0.5}},
        "spec.scaleUp.maxPercentPerPeriod: Invalid value",
        "a percent, not a 0-1 ratio",
        id="percent as a ratio",
    ),
    pytest.param(
        {"signals": {"kvCacheUsage": {"enabled": True, "targetRatio": 70}}},
        "spec.signals.kvCacheUsage.targetRatio: Invalid value",
        "a 0-1 ratio, not a percent",
        id="ratio as a percent",
    ),
    pytest.param(
        {"minReplicas": 0},
        "spec.minReplicas: Invalid value: 0",
        "should be greater than or equal to 1",
        id="schema minimum",
    ),
    pytest.param(
        {"maxReplica": 3},
        'unknown field "spec.maxReplica"',
        "",
        id="unknown field",
    ),
    pytest.param(
        {"behavior": {"scaleDown": {"stabilizationWindowSeconds": 60}}},
        "spec.behavior: Forbidden",
        "the HPA's behavior.scaleUp and behavior.scaleDown are spec.scaleUp and spec.scaleDown "
        "here",
        id="an HPA behavior block",
    ),
]


@pytest.mark.parametrize(("over", "field", "expected"), REFUSED)
def test_kubectl_apply_refuses_a_bad_spec_naming_the_field(
    kube: Cluster, vllm_crd: Doc, namespace: str, over: Doc, field: str, expected: str
) -> None:
    code, err = kubectl_apply(kube, resource(namespace, "bad", spec(**over)))
    if SHOWN:
        with open(f"{SHOWN}.refused", "a", encoding="utf-8") as shown:
            shown.write(err)
    assert code != 0, "applied"
    assert field in err and expected in err, err
    # the valid spec beside it is accepted: the case's field is what is refused
    code, err = kubectl_apply(kube, resource(namespace, "good", spec()))
    assert code == 0, err


def resource_path(namespace: str, name: str) -> str:
    return (
        f"/apis/autoscaling.vllm-scaler.io/v1alpha1/namespaces/{namespace}/vllmautoscalers/{name}"
    )


def conditions(obj: Doc) -> dict[str, tuple[str, str]]:
    """type -> (status, reason) of a resource's status conditions."""
    return {
        c["type"]: (c["status"], c["reason"])
        for c in (obj.get("status") or {}).get("conditions") or []
    }


def wait_status(kube: Cluster, namespace: str, name: str, check: Any, what: str) -> Doc:
    """The resource once ``check(obj)`` holds (polled)."""

    def read() -> Doc | None:
        obj: Doc = kube.get(resource_path(namespace, name))
        return obj if check(obj) else None

    return kube.wait_for(read, timeout=60, what=f"{namespace}/{name}: {what}")


def wait_condition(
    kube: Cluster, namespace: str, name: str, kind: str, status: str = "", reason: str = ""
) -> Doc:
    """The resource once its condition ``kind`` has ``status`` and ``reason`` (either left
    empty: any)."""

    def holds(obj: Doc) -> bool:
        got = conditions(obj).get(kind)
        return got is not None and status in ("", got[0]) and reason in ("", got[1])

    return wait_status(kube, namespace, name, holds, f"{kind} {status} {reason}")


def wait_reason(kube: Cluster, namespace: str, name: str, reason: str) -> Doc:
    """The resource once its status says ``reason``."""
    return wait_status(
        kube, namespace, name, lambda o: (o.get("status") or {}).get("reason") == reason, reason
    )


def cycles(proc: Any) -> float:
    return proc.metric("vllm_scaler_cycles_total") or 0.0


async def test_a_resource_created_changed_and_deleted_takes_effect_without_a_restart(
    scene: Scene, vllm_crd: Doc
) -> None:
    kube, ns = scene.kube, scene.namespace
    kube.apply([deployment(ns, replicas=1, ready_delay_seconds=4)])
    (first,), metrics = await scene.serve(1, Load(waiting=14, running=20))  # 14: 4 replicas
    metrics.set_load(None, Load(waiting=0, running=1))  # the new pods: idle
    metrics.set_load(first, Load(waiting=14, running=20))
    # the policy file names no target: the resources are the controller's only targets
    install = scene.install_scaler(policy_values({"rate_window_seconds": 8, "targets": []}))
    proc = install.start(scene.prometheus.url)
    started = proc.wait_event("started", timeout=30)
    assert started["resources"]["served"] is True, started
    kube.wait_for(lambda: cycles(proc) >= 2, timeout=30, what="two cycles")
    assert scene.spec_replicas() == 1  # no resource yet: nothing is scaled

    # created: scaled up by the next cycles
    kube.apply([resource(ns, "vllm", spec())])
    scene.wait_replicas(4)
    up = wait_status(
        kube,
        ns,
        "vllm",
        lambda o: (
            (o.get("status") or {}).get("lastScaleTime")
            and conditions(o).get("AbleToScale", ("", ""))[1] == "SucceededRescale"
        ),
        "the scale-up in its status",
    )
    status = up["status"]
    assert status["observedGeneration"] == up["metadata"]["generation"] == 1
    assert (status["currentReplicas"], status["desiredReplicas"]) == (1, 4), status
    assert status["reason"] == "scale_up", status
    assert status["drivingSignal"]["name"] == "queue_depth", status
    assert status["drivingSignal"]["target"] == 4.0, status
    got = conditions(up)
    assert got["ScalingActive"] == ("True", "ScaleUp"), got
    assert got["ScalingLimited"] == ("False", "DesiredWithinRange"), got
    table = kube.kubectl("get", "vllmautoscalers", "-n", ns).stdout
    described = kube.kubectl("describe", "vllmautoscaler", "vllm", "-n", ns).stdout
    if SHOWN:
        Path(SHOWN).write_text(
            f"$ kubectl get vllmautoscalers -n {ns}\n{table}\n"
            f"$ kubectl describe vllmautoscaler vllm -n {ns}\n{described}",
            encoding="utf-8",
        )
    header, row = table.splitlines()[:2]
    assert header.split() == ["NAME", "TARGET", "MIN", "MAX", "CURRENT", "DESIRED", "REASON", "AGE"]
    # live values: the scale-up itself, or (a cycle later) the 4 replicas starting
    assert row.split()[:4] == ["vllm", "vllm", "1", "6"], table
    current, desired, reason = row.split()[4:7]
    assert (current, desired) in (("1", "4"), ("4", "4")), table
    assert reason == "scale_up" if current == "1" else reason != "scale_up", table
    assert "Last Scale Time:" in described and "Observed Generation:  1" in described
    assert "Normal  SuccessfulRescale" in described, described  # its Events
    # Events on the resource, as the HPA's are on the HPA
    rescaled = kube.wait_for(
        lambda: [
            e
            for e in scene.events("SuccessfulRescale")
            if e["involvedObject"]["kind"] == "VLLMAutoscaler"
        ],
        timeout=30,
        what="a SuccessfulRescale Event on the resource",
    )
    assert rescaled[0]["involvedObject"]["name"] == "vllm"
    assert rescaled[0]["involvedObject"]["uid"] == up["metadata"]["uid"]

    # changed: maxReplicas 2 is the bound the next cycles keep
    kube.request(
        "PATCH",
        resource_path(ns, "vllm"),
        body={"spec": {"maxReplicas": 2}},
        content_type="application/merge-patch+json",
    )
    scene.wait_replicas(2)
    limited = wait_status(
        kube,
        ns,
        "vllm",
        lambda o: (
            (o.get("status") or {}).get("observedGeneration") == 2
            and conditions(o).get("ScalingLimited") == ("True", "MaxReplicas")
        ),
        "limited by the new maxReplicas",
    )
    assert limited["status"]["desiredReplicas"] == 2, limited["status"]

    # a second resource on the same workload: refused with a condition, as the HPA does
    kube.apply([resource(ns, "second", spec(minReplicas=3, maxReplicas=3))])
    second = wait_status(
        kube,
        ns,
        "second",
        lambda o: conditions(o).get("ScalingActive") == ("False", "AmbiguousTarget"),
        "refused as a second autoscaler of the workload",
    )
    assert f"VLLMAutoscaler {ns}/vllm (created first)" in second["status"]["message"]
    assert conditions(second)["AbleToScale"] == ("False", "AmbiguousTarget")
    assert [e["involvedObject"]["name"] for e in scene.events("AmbiguousTarget")] == ["second"]

    # a resource whose workload does not exist says so and touches nothing else
    missing = spec(scaleTargetRef={"name": "absent"})
    kube.apply([resource(ns, "absent", missing)])
    absent = wait_status(
        kube,
        ns,
        "absent",
        lambda o: (o.get("status") or {}).get("reason") == "target_not_found",
        "its target not found",
    )
    assert conditions(absent)["AbleToScale"] == ("False", "FailedGetScale")

    # deleted: scaling stops, the replicas stay (the queue is gone, nothing scales down)
    kube.request("DELETE", resource_path(ns, "second"))
    kube.request("DELETE", resource_path(ns, "vllm"))
    proc.wait_event("target_gone", timeout=30, where=lambda d: d["target"].endswith("/vllm"))
    metrics.set_load(first, Load())
    now = cycles(proc)
    kube.wait_for(lambda: cycles(proc) >= now + 5, timeout=30, what="five more cycles")
    assert scene.spec_replicas() == 2
    assert proc.proc.poll() is None  # never restarted


async def test_recommend_reads_the_resources_and_writes_nothing(
    scene: Scene, vllm_crd: Doc
) -> None:
    """``recommend --once`` lists the resources (read verbs only) and recommends for them
    as for the policy file's targets; the chart's RBAC grants the resources' reads and
    status writes, nothing more."""
    kube, ns = scene.kube, scene.namespace
    kube.apply([deployment(ns, replicas=2)])
    await scene.serve(2, Load(waiting=10, running=20))
    kube.apply([resource(ns, "vllm", spec(maxReplicas=8))])
    install = scene.install_scaler(policy_values({"rate_window_seconds": 8, "targets": []}))
    proc = install.start(
        scene.prometheus.url,
        # this namespace's only: other tests' resources may be listed cluster-wide
        command=(
            *("recommend", "--once", "--output", "json"),
            *("--watch-resources", "--resource-namespaces", ns),
        ),
        name="recommend",
        env={"VLLM_SCALER_LOG_LEVEL": "warning"},
    )
    assert proc.proc.wait(timeout=60) == 0, proc.tail()
    lines = proc.log_path.read_text().splitlines()  # the JSON array among the log lines
    start = lines.index("[")
    (target,) = json.loads("\n".join(lines[start : lines.index("]", start) + 1]))
    assert target["target"] == f"{ns}/Deployment/vllm"
    assert target["resource"] == f"{ns}/vllm"
    assert (target["current_replicas"], target["desired_replicas"]) == (2, 5), target
    assert scene.spec_replicas() == 2  # a recommendation writes nothing, not even a status
    assert "status" not in kube.get(resource_path(ns, "vllm"))
    sa = f"system:serviceaccount:{install.namespace}:{install.service_account}"
    kind = "vllmautoscalers.autoscaling.vllm-scaler.io"

    def can(verb: str, *sub: str) -> str:
        done = kube.kubectl("auth", "can-i", verb, kind, *sub, "-n", ns, "--as", sa, check=False)
        return done.stdout.strip()

    assert [can("list"), can("watch"), can("patch", "--subresource=status")] == ["yes"] * 3
    assert [can("patch"), can("update"), can("delete"), can("create")] == ["no"] * 4


async def test_status_through_a_hold_and_a_failover(scene: Scene, vllm_crd: Doc) -> None:
    """Two replicas on a real Lease: only the leader writes the status; after SIGTERM the new
    leader loads the decision state from the Lease (the 600 s scale-down window holds the
    replicas), keeps the last scale time the status says, and says the hold."""
    kube, ns = scene.kube, scene.namespace
    kube.apply([deployment(ns, replicas=2, ready_delay_seconds=1)])
    _, metrics = await scene.serve(2, Load(waiting=6, running=10))  # 12 waiting: 3
    kube.apply(
        [
            resource(
                ns,
                "vllm",
                spec(maxReplicas=3, scaleDown={"stabilizationWindowSeconds": 600}),
            )
        ]
    )
    install = scene.install_scaler(policy_values({"rate_window_seconds": 8, "targets": []}))
    a = install.start(scene.prometheus.url, name="a")
    kube.wait_for(lambda: a.metric("vllm_scaler_leader") == 1, timeout=30, what="a to lead")
    b = install.start(scene.prometheus.url, name="b")
    b.wait_event("started", timeout=30)
    scene.wait_replicas(3)
    up = wait_status(
        kube,
        ns,
        "vllm",
        lambda o: (
            (o.get("status") or {}).get("lastScaleTime")
            and (o.get("status") or {}).get("currentReplicas") == 3
        ),
        "the scale-up done",
    )
    scaled_at = up["status"]["lastScaleTime"]
    kube.wait_for(lambda: cycles(b) >= 3, timeout=30, what="b's cycles")
    assert (b.metric("vllm_scaler_status_writes_total", outcome="written") or 0) == 0  # a leads

    assert a.terminate() == 0
    kube.wait_for(lambda: b.metric("vllm_scaler_leader") == 1, timeout=10, what="b to lead")
    b.wait_event("state_loaded", timeout=10)
    metrics.set_load(None, Load())  # the load goes: the window carried over holds
    held = wait_status(
        kube,
        ns,
        "vllm",
        lambda o: (o.get("status") or {}).get("reason") == "stabilized",
        "the hold in the status, written by b",
    )
    status = held["status"]
    assert (status["currentReplicas"], status["desiredReplicas"]) == (3, 3), status
    assert status["lastScaleTime"] == scaled_at  # from the status a wrote
    assert conditions(held)["AbleToScale"] == ("True", "Stabilized"), conditions(held)
    assert conditions(held)["ScalingLimited"] == ("False", "DesiredWithinRange")
    assert (b.metric("vllm_scaler_status_writes_total", outcome="written") or 0) >= 1
    assert scene.spec_replicas() == 3


async def test_a_target_deleted_under_its_resource_stops_scaling_and_resumes(
    scene: Scene, vllm_crd: Doc
) -> None:
    """The workload deleted under a scaling resource: nothing is written (there is nothing to
    write to), the status says why (``FailedGetScale``, ``TargetNotFound``) and keeps the
    replicas last seen, a Warning Event says it once; the workload created again is scaled
    again by the same process."""
    kube, ns = scene.kube, scene.namespace
    kube.apply([deployment(ns, replicas=1)])
    _, metrics = await scene.serve(1, Load(waiting=10, running=20))  # 10 waiting: 3
    kube.apply([resource(ns, "vllm", spec())])
    install = scene.install_scaler(policy_values({"rate_window_seconds": 8, "targets": []}))
    proc = install.start(scene.prometheus.url)
    scene.wait_replicas(3)
    wait_status(
        kube,
        ns,
        "vllm",
        lambda o: (o.get("status") or {}).get("currentReplicas") == 3,
        "the 3 replicas seen",
    )

    kube.request("DELETE", f"/apis/apps/v1/namespaces/{ns}/deployments/vllm")
    gone = wait_reason(kube, ns, "vllm", "target_not_found")
    status = gone["status"]
    assert status["reason"] in REFUSED_REASONS
    assert conditions(gone)["AbleToScale"] == ("False", "FailedGetScale")
    assert conditions(gone)["ScalingActive"] == ("False", camel_reason("target_not_found"))
    assert conditions(gone)["ScalingActive"][1] == "TargetNotFound"
    assert status["currentReplicas"] == 3, status  # the replicas last seen
    assert "desiredReplicas" not in status, status  # nothing decided
    now = cycles(proc)
    kube.wait_for(lambda: cycles(proc) >= now + 3, timeout=30, what="three more cycles")
    (warned,) = [
        e for e in scene.events("FailedGetScale") if e["involvedObject"]["kind"] == "VLLMAutoscaler"
    ]
    assert warned["type"] == "Warning" and warned["involvedObject"]["name"] == "vllm"
    assert warned.get("count", 1) == 1, warned  # said once, not every cycle
    assert not kube.exists(scene.scale_path())  # nothing created it again
    assert proc.proc.poll() is None

    # the workload back (1 replica, the same queue): scaled again, the status says so
    kube.apply([deployment(ns, replicas=1)])
    metrics.set_load(None, Load(waiting=10, running=20))
    scene.wait_replicas(3)
    back = wait_condition(kube, ns, "vllm", "AbleToScale", "True")  # able to scale again
    assert back["status"]["reason"] not in REFUSED_REASONS, back["status"]
    assert conditions(back)["ScalingActive"][0] == "True", conditions(back)
    assert proc.proc.poll() is None  # never restarted


async def test_status_values_capacity_model_load_and_shadow(scene: Scene, vllm_crd: Doc) -> None:
    """The values of a status beside the replicas: the capacity estimate with its unit (a
    seeded one, in seconds of replica work per second), the model load time learned from the
    start of a replica (kwok makes it Ready after 4 s) and the shadow's recommendation."""
    kube, ns = scene.kube, scene.namespace
    kube.apply([deployment(ns, replicas=1, ready_delay_seconds=4)])
    # TTFT on reads the token counters too: the pods generate tokens (no frozen engine)
    busy = Load(waiting=14, running=20, generated_per_scrape=20)
    (first,), metrics = await scene.serve(1, busy)
    metrics.set_load(None, Load(waiting=0, running=1, generated_per_scrape=1))  # the new pod
    metrics.set_load(first, busy)
    steps = {"stabilizationWindowSeconds": 0, "maxReplicasPerPeriod": 4}
    steps |= {"maxPercentPerPeriod": 100, "periodSeconds": 10}
    body = spec(
        minReplicas=2,
        maxReplicas=2,
        signals={
            "ttftP95": {"enabled": True, "targetSeconds": 2.0},
            "capacity": {
                "enabled": True,
                "seedPromptTokensPerSecond": 4000,
                "seedGenerationTokensPerSecond": 400,
                "seedRequestsPerSecond": 2,
            },
        },
        shadow={
            "minReplicas": 1,
            "maxReplicas": 5,
            "signals": {
                "queueDepth": {"targetPerReplica": 2},
                "kvCacheUsage": {"enabled": False},
                "ttftP95": {"enabled": False},
            },
            "scaleUp": steps,
        },
    )
    doc = resource(ns, "vllm", body)
    target = target_of(doc)
    seed = seeded_estimate(target)
    assert seed is not None
    kube.apply([doc])
    install = scene.install_scaler(policy_values({"rate_window_seconds": 8, "targets": []}))
    install.start(scene.prometheus.url)
    scene.wait_replicas(2)  # minReplicas: the capacity signal sizes the small backlog as 1
    scene.wait_ready(2)
    # 2 replicas, the second one started under the controller's eyes (its model load learned)
    got = wait_status(
        kube,
        ns,
        "vllm",
        lambda o: (
            (o.get("status") or {}).get("currentReplicas") == 2
            and "modelLoadSeconds" in (o.get("status") or {})
        ),
        "the second replica's start learned",
    )
    status = got["status"]
    assert 3.0 <= status["modelLoadSeconds"] <= 15.0, status  # 4 s in kwok, to the second
    assert status["capacity"] == {
        "learned": True,
        "perReplica": pytest.approx(seed.tokens_per_second),
        "unit": "work_seconds_per_second",
        "samples": SEED_WEIGHT,
    }, status
    assert conditions(got)["CapacityLearned"] == ("True", "Learned"), conditions(got)
    # the capacity signal's value and target per replica, in the same unit
    (signal,) = [s for s in status["signals"] if s["name"] == "capacity"]
    assert signal["unit"] == "work_seconds_per_second_per_replica", signal
    utilization = target.signals.capacity.target_utilization
    assert signal["target"] == pytest.approx(seed.tokens_per_second * utilization, rel=1e-3)
    # the shadow: 14 waiting at 2 per replica is 7, from 2 by up to 4 per period: 6; its max 5
    assert status["shadow"] == {"desiredReplicas": 5, "reason": "at_max"}, status
    assert scene.spec_replicas() == 2  # the shadow writes nothing
