"""scripts/render-chart.py: the chart rendered with the values options of `helm template`
(release name, -n, -f, --set, --set-file, --create-namespace) for `kubectl apply -f -`, where
the helm command line is not installed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.deploy.render import ROOT, helm_render

pytest.importorskip("helm_python", reason="helm-python-sdk (dev extra) is missing")

SCRIPT = ROOT / "scripts" / "render-chart.py"
POLICY = """\
targets:
  - workload: {apiVersion: apps/v1, kind: Deployment, namespace: llm, name: vllm-qwen}
"""


def _run(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, check=False, cwd=cwd
    )


def _docs(text: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(text) if d]


def test_it_renders_the_chart_with_the_users_values_into_objects_kubectl_applies(
    tmp_path: Path,
) -> None:
    policy = tmp_path / "my-policy.yaml"
    policy.write_text(POLICY)
    values = tmp_path / "values.yaml"
    values.write_text("replicas: 3\nserviceMonitor:\n  enabled: false\n")
    out = _run(
        "scaler-a",
        "-n",
        "autoscaling",
        "--create-namespace",
        "-f",
        str(values),
        "--set",
        "prometheus.url=http://prom.monitoring.svc:9090,replicas=4",
        "--set-file",
        f"policy={policy}",
        cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr
    assert out.stderr == ""  # not Helm's Go engine's log lines
    docs = _docs(out.stdout)
    kinds = [d["kind"] for d in docs]
    # the Namespace first, as kubectl must create it before what lives in it
    assert kinds[0] == "Namespace" and docs[0]["metadata"]["name"] == "autoscaling"
    assert sorted(set(kinds)) == [
        "ClusterRole",
        "ClusterRoleBinding",
        "ConfigMap",
        "Deployment",
        "Namespace",
        "PodDisruptionBudget",
        "PrometheusRule",
        "Role",
        "RoleBinding",
        "Service",
        "ServiceAccount",
    ]  # no ServiceMonitor: the values file turned it off
    assert kinds.index("ServiceAccount") < kinds.index("Deployment")
    for doc in docs[1:]:
        if doc["kind"] not in ("ClusterRole", "ClusterRoleBinding"):
            assert doc["metadata"]["namespace"] == "autoscaling", doc["metadata"]
    deployment = next(d for d in docs if d["kind"] == "Deployment")
    assert deployment["metadata"]["name"] == "scaler-a-vllm-scaler"
    assert deployment["spec"]["replicas"] == 4  # --set wins over -f, as with helm
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["VLLM_SCALER_PROMETHEUS_URL"] == "http://prom.monitoring.svc:9090"
    policy_map = next(d for d in docs if "policy.yaml" in d.get("data", {}))
    assert policy_map["data"]["policy.yaml"] == POLICY


def test_its_objects_are_those_helms_engine_renders_for_the_same_values() -> None:
    out = _run("vllm-scaler", "-n", "vllm-scaler")
    assert out.returncode == 0, out.stderr
    rendered = sorted(_docs(out.stdout), key=lambda d: (d["kind"], d["metadata"]["name"]))
    expected = sorted(helm_render(), key=lambda d: (d["kind"], d["metadata"]["name"]))
    assert rendered == expected


def test_include_crds_adds_the_crds_helm_adds_first_and_without_it_none() -> None:
    # helm template leaves crds/ out unless --include-crds; kubectl apply of a render without
    # it then refuses the example VLLMAutoscaler ("no matches for kind")
    without = _docs(_run("vllm-scaler", "-n", "vllm-scaler").stdout)
    assert "CustomResourceDefinition" not in [d["kind"] for d in without]
    out = _run("vllm-scaler", "-n", "vllm-scaler", "--create-namespace", "--include-crds")
    assert out.returncode == 0, out.stderr
    docs = _docs(out.stdout)
    assert [d["kind"] for d in docs[:2]] == ["Namespace", "CustomResourceDefinition"]
    assert "# Source: vllm-scaler/crds/vllmautoscalers.yaml\n" in out.stdout
    crd = docs[1]
    assert crd["metadata"]["name"] == "vllmautoscalers.autoscaling.vllm-scaler.io"
    key = lambda d: (d["kind"], d["metadata"]["name"])  # noqa: E731
    expected = sorted(helm_render(include_crds=True), key=key)
    assert sorted(docs[1:], key=key) == expected
    only = _run("--include-crds", "--show-only", "crds/vllmautoscalers.yaml")
    assert only.returncode == 0, only.stderr
    assert _docs(only.stdout) == [crd]
    not_asked = _run("--show-only", "crds/vllmautoscalers.yaml")
    assert not_asked.returncode == 1 and "no template" in not_asked.stderr


def test_bad_values_fail_naming_the_value_and_render_nothing(tmp_path: Path) -> None:
    out = _run("--set", "replicas=0")
    assert out.returncode == 1
    assert out.stdout == ""
    assert "'/replicas': minimum: got 0, want 1" in out.stderr
    assert "INFO" not in out.stderr
    missing = _run("--set-file", f"policy={tmp_path / 'absent.yaml'}")
    assert missing.returncode == 1 and "--set-file policy=" in missing.stderr
    assert "no such file" in missing.stderr
