"""The manifests in deploy/: built with kustomize, validated offline against the Kubernetes
OpenAPI schemas (kubernetes-validate), hardened, and RBAC that grants exactly the API calls the
controller makes (recorded against the Kubernetes API stand-in), cluster-wide or in the
policy's namespaces only."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import pytest
import yaml

from scaler.actuators.kubernetes import build_api_client
from scaler.actuators.lease import LeaseClient
from scaler.config.policy import WorkloadRef
from scaler.controller.leader import LeaderElectionConfig, LeaderElector
from tests.deploy.rbac_calls import PATH as _PATH
from tests.deploy.rbac_calls import allowed as _allowed
from tests.deploy.rbac_calls import call as _call
from tests.deploy.rbac_calls import namespace as _namespace
from tests.deploy.render import DEPLOY, files, helm_render, kustomize, one, validate
from tests.support.controller_harness import case_policy, open_harness
from tests.support.fakeprom import kv, per_pod, ttft_answers


@pytest.fixture(scope="module")
def base() -> list[dict[str, Any]]:
    return kustomize(DEPLOY / "base")


@pytest.fixture(scope="module")
def recommend_only() -> list[dict[str, Any]]:
    return kustomize(DEPLOY / "overlays" / "recommend-only")


def test_base_and_overlay_validate_against_openapi(base, recommend_only) -> None:
    validate(base)
    validate(recommend_only)
    kinds = sorted(d["kind"] for d in base)
    # Three ConfigMaps: the policy and the two dashboards.
    assert kinds == sorted(
        [
            "CustomResourceDefinition", "Namespace", "ServiceAccount", "ClusterRole",
            "ClusterRoleBinding", "Role",
            "RoleBinding", "ConfigMap", "Deployment", "PodDisruptionBudget", "Service",
            "ServiceMonitor", "PrometheusRule", "ConfigMap", "ConfigMap",
        ]
    )  # fmt: skip


def test_base_runs_two_replicas_with_leader_election(base) -> None:
    dep = next(d for d in base if d["kind"] == "Deployment")
    assert dep["spec"]["replicas"] == 2
    env = {e["name"]: e for e in dep["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["VLLM_SCALER_LEADER_ELECTION"]["value"] == "true"
    assert env["POD_NAMESPACE"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.namespace"
    assert env["POD_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
    from scaler.config.settings import Settings

    s = Settings(  # the manifest's timings are valid settings
        lease_duration_seconds=float(env["VLLM_SCALER_LEASE_DURATION_SECONDS"]["value"]),
        lease_renew_deadline_seconds=float(
            env["VLLM_SCALER_LEASE_RENEW_DEADLINE_SECONDS"]["value"]
        ),
        lease_retry_period_seconds=float(env["VLLM_SCALER_LEASE_RETRY_PERIOD_SECONDS"]["value"]),
    )
    assert s.lease_renew_deadline_seconds < s.lease_duration_seconds
    # The Lease Role is namespaced: bound in the controller's namespace only.
    role = next(d for d in base if d["kind"] == "Role")
    binding = next(d for d in base if d["kind"] == "RoleBinding")
    assert role["metadata"]["namespace"] == binding["metadata"]["namespace"] == "vllm-scaler"
    assert binding["roleRef"]["name"] == role["metadata"]["name"]


def test_example_vllm_deployment_validates_and_drains() -> None:
    docs = files(DEPLOY / "examples" / "vllm-deployment.yaml")
    validate(docs)
    pod = next(d for d in docs if d["kind"] == "Deployment")["spec"]["template"]["spec"]
    assert pod["terminationGracePeriodSeconds"] >= 60
    container = pod["containers"][0]
    assert container["lifecycle"]["preStop"]["exec"]["command"]
    startup = container["startupProbe"]
    assert startup["periodSeconds"] * startup["failureThreshold"] >= 300
    # the scrape: a PodMonitor on the Deployment's pods, at a port the container names
    deployment = next(d for d in docs if d["kind"] == "Deployment")
    monitor = one(docs, "PodMonitor")
    assert monitor["metadata"]["namespace"] == deployment["metadata"]["namespace"]
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert monitor["spec"]["selector"]["matchLabels"].items() <= labels.items()
    (endpoint,) = monitor["spec"]["podMetricsEndpoints"]
    assert endpoint["port"] in {p["name"] for p in container["ports"]}
    assert endpoint["path"] == "/metrics"


def test_controller_pod_is_hardened(base) -> None:
    dep = next(d for d in base if d["kind"] == "Deployment")
    pod = dep["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    c = pod["containers"][0]
    sc = c["securityContext"]
    assert sc["readOnlyRootFilesystem"] is True
    assert sc["allowPrivilegeEscalation"] is False
    assert sc["capabilities"]["drop"] == ["ALL"]
    assert c["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert c["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert c["resources"]["requests"] and c["resources"]["limits"]["memory"]
    # The policy ConfigMap the Deployment mounts exists and holds a valid policy.
    cm_name = pod["volumes"][0]["configMap"]["name"]
    cm = one(base, "ConfigMap", cm_name)
    from scaler.config.policy import parse_policy

    assert parse_policy(yaml.safe_load(cm["data"]["policy.yaml"])).targets


def test_recommend_only_runs_dry_and_grants_no_write(recommend_only) -> None:
    dep = next(d for d in recommend_only if d["kind"] == "Deployment")
    assert dep["spec"]["template"]["spec"]["containers"][0]["args"] == ["run", "--dry-run"]
    role = next(d for d in recommend_only if d["kind"] == "ClusterRole")
    verbs = {v for rule in role["rules"] for v in rule["verbs"]}
    assert verbs <= {"get", "list", "watch"}
    # no Lease permissions either: a dry run takes no part in leader election
    assert not [d for d in recommend_only if d["kind"] in ("Role", "RoleBinding")]
    assert dep["spec"]["replicas"] == 1


# --- RBAC against the calls the controller really makes ------------------------------------


def _allowed_by_name(rules: list[dict[str, Any]], method: str, path: str) -> bool:
    """As the API server's RBAC authorizes the request: a rule with resourceNames matches
    only requests naming one of them in the path (never a create, whose name is in the
    body)."""
    m = _PATH.match(path)
    assert m, path
    group, resource, verb = _call(method, path)
    return any(
        group in r["apiGroups"]
        and resource in r["resources"]
        and verb in r["verbs"]
        and (
            "resourceNames" not in r or (m["name"] is not None and m["name"] in r["resourceNames"])
        )
        for r in rules
    )


def _check_rules(rules: list[dict[str, Any]], calls: set[tuple[str, str, str]]) -> None:
    """Every call is allowed; nothing is granted beyond the calls (each kind's scale
    subresource takes the calls that apps/v1's take)."""
    for call in calls:
        assert _allowed(rules, call), f"RBAC does not allow {call}"
    scale_verbs = {v for _, r, v in calls if r.endswith("/scale")}
    for rule in rules:
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                for verb in rule["verbs"]:
                    if resource.endswith("/scale"):
                        assert verb in scale_verbs, (group, resource, verb)
                    else:
                        assert (group, resource, verb) in calls, (group, resource, verb)


async def test_rbac_grants_exactly_the_calls_the_controller_makes(base, tmp_path) -> None:
    """The real controller (leader, with a scale-down that marks pods), the leader elector and
    every workload kind run against the stand-in; the recorded calls must equal the grants:
    the ClusterRole for the workloads' namespaces, the Role for the Lease's."""
    names = ["vllm-abc-x1", "vllm-abc-x2", "vllm-abc-x3"]
    policy = case_policy(
        scale_down={
            "stabilization_window_seconds": 0,
            "max_replicas_per_period": 1,
            "period_seconds": 60,
        }
    )
    async with open_harness(tmp_path, policy=policy, replicas=3, ready=names) as h:
        store = h.store
        store.register_kind("leaderworkerset.x-k8s.io", "v1", "LeaderWorkerSet", "leaderworkersets")
        store.register_kind("argoproj.io", "v1alpha1", "Rollout", "rollouts")
        store.add_statefulset("llm", "big", 1, {"app": "big"})
        store.add_workload("apps", "replicasets", "llm", "rs", replicas=1, labels={"app": "rs"})
        store.add_workload(
            "leaderworkerset.x-k8s.io", "leaderworkersets", "llm", "lws", replicas=1,
            labels={"app": "lws"},
        )  # fmt: skip
        store.add_workload("argoproj.io", "rollouts", "llm", "ro", replicas=1, labels={"app": "ro"})
        store.add_scaled_object("other", "so", target_name="x")  # the KEDA CRD exists
        h.fake.set(
            waiting=per_pod(dict.fromkeys(names, "0")),
            running=per_pod(dict(zip(names, ["2", "0", "1"], strict=True))),
            kv_cache=kv(dict.fromkeys(names, "0.1")),
            **ttft_answers("NaN", "0"),
        )
        api = await build_api_client(kubeconfig=h.kubeconfig, in_cluster=False)
        try:
            elector = LeaderElector(
                LeaderElectionConfig(namespace="vllm-scaler", name="vllm-scaler", identity="a"),
                LeaseClient(api, clock=h.clock),
                clock=h.clock,
            )
            h.controller.leader = elector
            assert await elector.try_acquire_or_renew()  # creates the Lease
            report = await h.cycle()  # scale-down 3 -> 2 asked: pods marked first
            assert report.action == "pods_ranked", report
            assert await elector.try_acquire_or_renew()  # renews it
            h.clock.advance(2)
            report = await h.cycle()  # the ranking read back: scale patched, event
            assert report.action == "scaled", report
            act = h.actuator
            for api_version, kind, name in (
                ("apps/v1", "StatefulSet", "big"),
                ("apps/v1", "ReplicaSet", "rs"),
                ("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet", "lws"),
                ("argoproj.io/v1alpha1", "Rollout", "ro"),
            ):
                ref = WorkloadRef.model_validate(
                    {"apiVersion": api_version, "kind": kind, "namespace": "llm", "name": name}
                )
                snap = await act.read(ref)
                await act.read_annotations(ref)
                assert (await act.scale(ref, 2, current=snap)).ok
                assert await act.emit_event(ref, reason="SuccessfulRescale", message="test")
            assert await elector.release()
        finally:
            await api.close()
        recorded = [r for r in h.kube.requests if r.path.startswith("/api")]
    assert any(r.method == "PATCH" and "/pods/" in r.path for r in recorded)
    calls: dict[str, set[tuple[str, str, str]]] = defaultdict(set)
    for r in recorded:
        calls[_namespace(r.path)].add(_call(r.method, r.path))
    lease_calls = calls.pop("vllm-scaler")
    assert lease_calls == {
        ("coordination.k8s.io", "leases", v) for v in ("get", "create", "update")
    }
    lease_requests = [(r.method, r.path) for r in recorded if _namespace(r.path) == "vllm-scaler"]
    # The Lease Role names its Lease: reading and changing another release's is refused.
    for docs in (base, helm_render()):
        lease_rules = one(docs, "Role", "vllm-scaler-leader-election")["rules"]
        for method, path in lease_requests:
            assert _allowed_by_name(lease_rules, method, path), (method, path)
        other = "/apis/coordination.k8s.io/v1/namespaces/vllm-scaler/leases/other-release"
        assert not _allowed_by_name(lease_rules, "GET", other)
        assert not _allowed_by_name(lease_rules, "PUT", other)
        named = [r for r in lease_rules if "resourceNames" in r]
        assert named == [
            {
                "apiGroups": ["coordination.k8s.io"],
                "resources": ["leases"],
                "resourceNames": ["vllm-scaler"],
                "verbs": ["get", "update"],
            }
        ]
    # Every call on the targets is in the policy's namespace.
    assert set(calls) == {t.workload.namespace for t in policy.targets} == {"llm"}
    # The VLLMAutoscalers' watch and status writes are not served by the stand-in: the cluster
    # tier makes them on the real API server as the chart's ServiceAccount
    # (tests/cluster/test_custom_resource.py, which also asks `kubectl auth can-i`).
    group = "autoscaling.vllm-scaler.io"
    for made in calls.values():
        made |= {(group, "vllmautoscalers", v) for v in ("list", "watch")}
        made.add((group, "vllmautoscalers/status", "patch"))
    target_calls = set().union(*calls.values())

    # Cluster scope: the kustomize base and the chart's defaults.
    for docs in (base, helm_render()):
        _check_rules(one(docs, "ClusterRole")["rules"], target_calls)
        _check_rules(one(docs, "Role", "vllm-scaler-leader-election")["rules"], lease_calls)

    # Namespace scope: Roles in exactly the policy's namespaces and nothing cluster-wide; the
    # chart rendered with this run's policy, the overlay generated from deploy/base/policy.yaml
    # (whose targets are in the same namespace).
    base_policy = yaml.safe_load((DEPLOY / "base" / "policy.yaml").read_text())
    assert {t["workload"]["namespace"] for t in base_policy["targets"]} == set(calls)
    raw_policy = policy.model_dump(mode="json", by_alias=True, exclude_unset=True)
    chart = helm_render({"rbac": {"scope": "namespaces"}, "policy": raw_policy})
    overlay = kustomize(DEPLOY / "overlays" / "namespaced")
    for docs in (chart, overlay):
        validate(docs)
        assert not [d for d in docs if d["kind"] in ("ClusterRole", "ClusterRoleBinding")]
        roles = {
            d["metadata"]["namespace"]: d
            for d in docs
            if d["kind"] == "Role" and d["metadata"]["name"] == "vllm-scaler"
        }
        assert set(roles) == set(calls)
        for ns, role in roles.items():
            _check_rules(role["rules"], calls[ns])
            binding = one([d for d in docs if d["metadata"].get("namespace") == ns], "RoleBinding")
            assert binding["roleRef"] == {
                "apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "vllm-scaler"
            }  # fmt: skip
            assert binding["subjects"] == [
                {"kind": "ServiceAccount", "name": "vllm-scaler", "namespace": "vllm-scaler"}
            ]
        _check_rules(one(docs, "Role", "vllm-scaler-leader-election")["rules"], lease_calls)


def test_namespaced_roles_cover_every_namespace_of_the_policy_and_no_other() -> None:
    """Three targets in two namespaces: two Roles, two RoleBindings, nothing cluster-wide."""
    target = {"min_replicas": 1, "max_replicas": 2}
    policy = {
        "targets": [
            {"workload": {"apiVersion": "apps/v1", "kind": kind, "namespace": ns, "name": name},
             **target}
            for kind, ns, name in (
                ("Deployment", "team-b", "a"), ("StatefulSet", "team-a", "b"),
                ("Deployment", "team-b", "c"),
            )
        ]
    }  # fmt: skip
    docs = helm_render({"rbac": {"scope": "namespaces"}, "policy": policy})
    workload_roles = [
        (d["kind"], d["metadata"]["namespace"])
        for d in docs
        if d["kind"] in ("Role", "RoleBinding") and d["metadata"]["name"] == "vllm-scaler"
    ]
    assert sorted(workload_roles) == [
        ("Role", "team-a"), ("Role", "team-b"), ("RoleBinding", "team-a"),
        ("RoleBinding", "team-b"),
    ]  # fmt: skip
    assert not [d for d in docs if d["kind"].startswith("Cluster")]
