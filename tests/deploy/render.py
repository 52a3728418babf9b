"""Rendering the deploy/ manifests for the tests: the Helm chart with Helm's own engine
(helm-python-sdk), the kustomizations with kubectl's kustomize, and one normal form in which
the two can be compared."""

from __future__ import annotations

import copy
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
CHART = DEPLOY / "helm" / "vllm-scaler"
RELEASE = NAMESPACE = "vllm-scaler"
K8S_VERSION = "1.32.0"
# Custom resources whose schemas kubernetes-validate does not ship.
CRD_KINDS = {"ServiceMonitor", "PodMonitor", "PrometheusRule"}
# Helm's bookkeeping labels, which a kustomize build does not have.
HELM_LABELS = ("helm.sh/chart", "app.kubernetes.io/managed-by", "app.kubernetes.io/version")
_HASH_SUFFIX = re.compile(r"-[a-z0-9]{10}$")

Doc = dict[str, Any]


def helm_render(values: dict[str, Any] | None = None, *, include_crds: bool = False) -> list[Doc]:
    """The chart's objects for ``values`` (release and namespace ``vllm-scaler``); with
    ``include_crds`` the chart's crds/ first, as ``helm template --include-crds`` adds them."""
    helm = pytest.importorskip("helm_python", reason="helm-python-sdk (dev extra) is missing")
    helm.disable_logging()
    with helm.Chart.load(CHART) as chart:
        out = chart.render(values or {}, name=RELEASE, namespace=NAMESPACE)
        crds = chart.crds if include_crds else []
    docs: list[Doc] = []
    for crd in crds:
        docs.extend(d for d in yaml.safe_load_all(crd["data"]) if d)
    for path in sorted(out):
        if path.endswith(".yaml"):
            docs.extend(d for d in yaml.safe_load_all(out[path]) if d)
    return docs


def helm_lint(values: dict[str, Any] | None = None) -> dict[str, Any]:
    """``helm lint --strict`` of the chart with ``values``."""
    helm = pytest.importorskip("helm_python", reason="helm-python-sdk (dev extra) is missing")
    helm.disable_logging()
    report: dict[str, Any] = helm.lint(
        CHART, values or {}, strict=True, namespace=NAMESPACE, kube_version="v" + K8S_VERSION
    )
    return report


def kustomize(path: Path) -> list[Doc]:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl (with its built-in kustomize) is not installed")
    out = subprocess.run(
        [kubectl, "kustomize", str(path)], check=True, capture_output=True, text=True
    ).stdout
    return [d for d in yaml.safe_load_all(out) if d]


def files(path: Path) -> list[Doc]:
    return [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d]


def validate(docs: list[Doc]) -> None:
    """Every object against the Kubernetes OpenAPI schema, strictly (unknown fields fail);
    the Prometheus Operator's kinds by shape."""
    for doc in docs:
        if doc["kind"] in CRD_KINDS:
            assert doc["apiVersion"] == "monitoring.coreos.com/v1"
            assert doc["metadata"]["name"] and doc["spec"]
            continue
        kubernetes_validate.validate(doc, K8S_VERSION, strict=True)


def one(docs: list[Doc], kind: str, name: str | None = None) -> Doc:
    found = [d for d in docs if d["kind"] == kind and name in (None, d["metadata"]["name"])]
    assert len(found) == 1, (kind, name, [d["metadata"]["name"] for d in found])
    return found[0]


def normal_form(docs: list[Doc]) -> dict[tuple[str, str, str], Doc]:
    """Objects keyed by (kind, namespace, name), without what legitimately differs between a
    Helm release and a kustomize build: Helm's labels, the policy checksum annotation, the
    generated ConfigMap's hash suffix, and the policy file's formatting."""
    result: dict[tuple[str, str, str], Doc] = {}
    for original in docs:
        doc = copy.deepcopy(original)
        meta = doc["metadata"]
        for key in HELM_LABELS:
            meta.get("labels", {}).pop(key, None)
        if doc["kind"] == "ConfigMap" and "policy.yaml" in doc.get("data", {}):
            meta["name"] = _HASH_SUFFIX.sub("", meta["name"])
            doc["data"]["policy.yaml"] = yaml.safe_load(doc["data"]["policy.yaml"])
        if doc["kind"] == "Deployment":
            template = doc["spec"]["template"]["metadata"]
            template.get("annotations", {}).pop("checksum/policy", None)
            if not template.get("annotations"):
                template.pop("annotations", None)
            for volume in doc["spec"]["template"]["spec"]["volumes"]:
                if "configMap" in volume:
                    cm = volume["configMap"]
                    cm["name"] = _HASH_SUFFIX.sub("", cm["name"])
        result[(doc["kind"], meta.get("namespace", ""), meta["name"])] = doc
    return result


def helm_refusal(values: dict[str, Any], *, by_schema: bool = False) -> str:
    """The message with which Helm refuses ``values``: the values schema's (before anything
    renders) with ``by_schema``, else a template's ``fail``."""
    helm = pytest.importorskip("helm_python", reason="helm-python-sdk (dev extra) is missing")
    error = helm.HelmValuesError if by_schema else helm.HelmError
    with pytest.raises(error) as err:
        helm_render(values)
    return str(err.value)
