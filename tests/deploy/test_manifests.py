"""The manifests in deploy/: built with kustomize, validated offline against the Kubernetes
OpenAPI schemas (kubernetes-validate), hardened, and RBAC that grants exactly the API calls the
controller makes (recorded against the Kubernetes API stand-in)."""

from __future__ import annotations

import re
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from scaler.actuators.kubernetes import KubernetesActuator, build_api_client
from scaler.config.policy import WorkloadRef
from scaler.sim.kubeapi import KubeApiServer, KubeStore, write_kubeconfig

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
K8S_VERSION = "1.32.0"
# Custom resources whose schemas kubernetes-validate does not ship.
CRD_KINDS = {"ServiceMonitor", "PrometheusRule"}


def _kustomize(path: Path) -> list[dict[str, Any]]:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl (with its built-in kustomize) is not installed")
    out = subprocess.run(
        [kubectl, "kustomize", str(path)], check=True, capture_output=True, text=True
    ).stdout
    return [d for d in yaml.safe_load_all(out) if d]


def _files(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


@pytest.fixture(scope="module")
def base() -> list[dict[str, Any]]:
    return _kustomize(DEPLOY / "base")


@pytest.fixture(scope="module")
def recommend_only() -> list[dict[str, Any]]:
    return _kustomize(DEPLOY / "overlays" / "recommend-only")


def _validate(docs: list[dict[str, Any]]) -> None:
    for doc in docs:
        if doc["kind"] in CRD_KINDS:
            assert doc["apiVersion"] == "monitoring.coreos.com/v1"
            assert doc["metadata"]["name"] and doc["spec"]
            continue
        kubernetes_validate.validate(doc, K8S_VERSION, strict=True)


def test_base_and_overlay_validate_against_openapi(base, recommend_only) -> None:
    _validate(base)
    _validate(recommend_only)
    kinds = sorted(d["kind"] for d in base)
    assert kinds == sorted(
        [
            "Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "ConfigMap",
            "Deployment", "PodDisruptionBudget", "Service", "ServiceMonitor",
        ]
    )  # fmt: skip


def test_example_vllm_deployment_validates_and_drains() -> None:
    docs = _files(DEPLOY / "examples" / "vllm-deployment.yaml")
    _validate(docs)
    pod = next(d for d in docs if d["kind"] == "Deployment")["spec"]["template"]["spec"]
    assert pod["terminationGracePeriodSeconds"] >= 60
    container = pod["containers"][0]
    assert container["lifecycle"]["preStop"]["exec"]["command"]
    startup = container["startupProbe"]
    assert startup["periodSeconds"] * startup["failureThreshold"] >= 300


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
    cm = next(d for d in base if d["kind"] == "ConfigMap")
    assert cm["metadata"]["name"] == cm_name
    from scaler.config.policy import parse_policy

    assert parse_policy(yaml.safe_load(cm["data"]["policy.yaml"])).targets


def test_recommend_only_runs_dry_and_grants_no_write(recommend_only) -> None:
    dep = next(d for d in recommend_only if d["kind"] == "Deployment")
    assert dep["spec"]["template"]["spec"]["containers"][0]["args"] == ["run", "--dry-run"]
    role = next(d for d in recommend_only if d["kind"] == "ClusterRole")
    verbs = {v for rule in role["rules"] for v in rule["verbs"]}
    assert verbs <= {"get", "list", "watch"}


# --- RBAC against the calls the controller really makes ------------------------------------

_PATH = re.compile(
    r"^/(?:api/(?P<core>v1)|apis/(?P<group>[^/]+)/(?P<version>[^/]+))"
    r"/namespaces/[^/]+/(?P<resource>[^/]+)(?:/(?P<name>[^/]+)(?:/(?P<sub>[^/]+))?)?$"
)
_VERB = {"GET": "get", "PATCH": "patch", "PUT": "update", "POST": "create", "DELETE": "delete"}


def _call(method: str, path: str) -> tuple[str, str, str]:
    m = _PATH.match(path)
    assert m, path
    group = "" if m["core"] else m["group"]
    resource = m["resource"] + (f"/{m['sub']}" if m["sub"] else "")
    verb = _VERB[method]
    if method == "GET" and not m["name"]:
        verb = "list"
    return group, resource, verb


def _allowed(rules: list[dict[str, Any]], call: tuple[str, str, str]) -> bool:
    group, resource, verb = call
    return any(
        group in r["apiGroups"] and resource in r["resources"] and verb in r["verbs"] for r in rules
    )


async def test_rbac_grants_exactly_the_calls_the_controller_makes(base, tmp_path) -> None:
    store = KubeStore(now=time.time)
    store.add_deployment("llm", "vllm", 1, {"app": "vllm"})
    store.add_statefulset("llm", "big", 1, {"app": "big"})
    store.add_pod("llm", "vllm-abc-x1", {"app": "vllm"}, ready=True)
    async with KubeApiServer(store, token="t") as server:
        api = await build_api_client(
            kubeconfig=write_kubeconfig(tmp_path / "kc", server_url=server.url, token="t"),
            in_cluster=False,
        )
        try:
            act = KubernetesActuator(api, clock=time.time)
            for kind, name in (("Deployment", "vllm"), ("StatefulSet", "big")):
                ref = WorkloadRef.model_validate(
                    {"apiVersion": "apps/v1", "kind": kind, "namespace": "llm", "name": name}
                )
                snap = await act.read(ref)
                assert (await act.scale(ref, 2, current=snap)).ok
                assert await act.emit_event(ref, reason="SuccessfulRescale", message="test")
        finally:
            await api.close()
        calls = {_call(r.method, r.path) for r in server.requests if r.path.startswith("/api")}
    rules = next(d for d in base if d["kind"] == "ClusterRole")["rules"]
    for call in calls:
        assert _allowed(rules, call), f"RBAC does not allow {call}"
    # Nothing granted beyond what is called; every kind's scale subresource takes the calls
    # that apps/v1's take.
    scale_verbs = {v for _, r, v in calls if r.endswith("/scale")}
    for rule in rules:
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                for verb in rule["verbs"]:
                    if resource.endswith("/scale"):
                        assert verb in scale_verbs, (group, resource, verb)
                    else:
                        assert (group, resource, verb) in calls, (group, resource, verb)
