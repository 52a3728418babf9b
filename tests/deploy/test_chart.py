"""The Helm chart deploy/helm/vllm-scaler: rendered and linted by Helm's own engine for its
defaults and variants, every object valid against the Kubernetes schemas, the same objects as
the kustomize base and overlays, and the files rendered from it up to date."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from scaler.config.policy import parse_policy
from scaler.config.secrets import CREDENTIAL_HEADER
from scaler.config.settings import unknown_env_vars
from tests.deploy.render import (
    CHART,
    CRD_KINDS,
    DEPLOY,
    ROOT,
    Doc,
    files,
    helm_lint,
    helm_render,
    kustomize,
    normal_form,
    one,
    validate,
)

#: The chart's values for a cluster without the Prometheus Operator's CRDs (the kustomize
#: component deploy/components/no-prometheus-operator).
NO_OPERATOR = {"serviceMonitor": {"enabled": False}, "prometheusRule": {"enabled": False}}

TWO_NAMESPACES = {
    "targets": [
        {
            "workload": {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "namespace": ns,
                "name": name,
            },
            "min_replicas": 1,
            "max_replicas": 4,
        }
        for ns, name in (("team-b", "llama"), ("team-a", "qwen"), ("team-b", "mistral"))
    ]
}

AUTH = {
    "prometheus": {
        "url": "https://prometheus.example.svc:9091",
        "bearerTokenSecret": {"name": "prom-token", "key": "token"},
        "tls": {
            "caConfigMap": {"name": "kube-root-ca.crt", "key": "ca.crt"},
            "clientCertSecret": {"name": "prom-client"},
        },
        "headers": {"X-Scope-OrgID": "team-a"},
    }
}

VARIANTS = [
    pytest.param({}, id="defaults"),
    pytest.param({"recommendOnly": True}, id="recommend-only"),
    pytest.param({"rbac": {"scope": "namespaces"}, "policy": TWO_NAMESPACES}, id="rbac-namespaces"),
    pytest.param(AUTH, id="prometheus-auth"),
    pytest.param(
        {
            "prometheus": {
                "headersSecret": {"name": "tenant", "key": "headers"},
                "tls": {"caSecret": {"name": "prom-ca"}},
            }
        },
        id="headers-and-ca-from-secrets",
    ),
    pytest.param(
        {
            "image": {"digest": "sha256:" + "ab" * 32},
            "podAntiAffinity": "hard",
            "topologySpreadConstraints": [],
            "nodeSelector": {"pool": "cpu"},
            "tolerations": [{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}],
            "priorityClassName": "system-cluster-critical",
            "extraEnv": [{"name": "VLLM_SCALER_METRICS_ADDRESS", "value": "0.0.0.0"}],
        },
        id="scheduling-and-digest",
    ),
    pytest.param(
        {
            "serviceMonitor": {"enabled": False},
            "prometheusRule": {"enabled": False},
            "dashboards": {"enabled": False},
            "podDisruptionBudget": {"enabled": False},
            "leaderElection": {"enabled": False},
            "replicas": 1,
        },
        id="minimal",
    ),
    pytest.param({"policy": (DEPLOY / "base" / "policy.yaml").read_text()}, id="policy-as-text"),
    pytest.param(
        {
            "networkPolicy": {"enabled": True, "apiServer": {"cidrs": ["10.0.0.1/32"]}},
            "extraArgs": ["--once"],
            "extraVolumes": [{"name": "ca", "configMap": {"name": "ca"}}],
            "extraVolumeMounts": [{"name": "ca", "mountPath": "/etc/ca"}],
            "extraObjects": [
                {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "metadata": {"name": "x", "namespace": "{{ .Release.Namespace }}"},
                }
            ],
            "serviceMonitor": {"relabelings": [{"targetLabel": "cluster", "replacement": "a"}]},
        },
        id="extras-and-network-policy",
    ),
    pytest.param(
        {
            "prometheus": {
                "url": "https://aps-workspaces.us-east-1.amazonaws.com/workspaces/ws-1",
                "cloudAuth": {
                    "provider": "aws-sigv4",
                    "aws": {
                        "roleArn": "arn:aws:iam::123456789012:role/scaler",
                        "region": "us-east-1",
                    },
                },
            }
        },
        id="aws-sigv4",
    ),
]


def _env(docs: list[Doc]) -> dict[str, dict[str, Any]]:
    dep = one(docs, "Deployment")
    return {e["name"]: e for e in dep["spec"]["template"]["spec"]["containers"][0]["env"]}


@pytest.mark.parametrize("values", VARIANTS)
def test_renders_lints_and_validates(values: dict[str, Any], monkeypatch) -> None:
    report = helm_lint(values)
    assert report["errors"] == [], report
    assert [m for m in report["messages"] if m["severity"] >= 2] == [], report
    docs = helm_render(values)
    validate(docs)
    # Every object is namespaced to the release, but the cluster-wide RBAC and the Roles in
    # the targets' namespaces.
    for d in docs:
        if d["kind"] in ("ClusterRole", "ClusterRoleBinding"):
            assert "namespace" not in d["metadata"]
        elif d["kind"] not in ("Role", "RoleBinding") or "leader" in d["metadata"]["name"]:
            assert d["metadata"]["namespace"] == "vllm-scaler", d["metadata"]
    # The policy mounted is a valid policy.
    cm = one(docs, "ConfigMap", "vllm-scaler-policy")
    assert parse_policy(yaml.safe_load(cm["data"]["policy.yaml"])).targets
    # Every environment variable is a setting the controller knows.
    for name, e in _env(docs).items():
        monkeypatch.setenv(name, e.get("value", "from-a-secret"))
    assert unknown_env_vars() == []


@pytest.mark.parametrize(
    ("values", "kustomization"),
    [
        pytest.param({}, DEPLOY / "base", id="defaults-and-base"),
        pytest.param(
            {"recommendOnly": True, "replicas": 1},
            DEPLOY / "overlays" / "recommend-only",
            id="recommend-only",
        ),
        pytest.param(
            {"rbac": {"scope": "namespaces"}}, DEPLOY / "overlays" / "namespaced", id="namespaced"
        ),
        pytest.param(
            NO_OPERATOR, DEPLOY / "overlays" / "no-prometheus-operator", id="no-prometheus-operator"
        ),
    ],
)
def test_chart_and_kustomize_produce_the_same_objects(
    values: dict[str, Any], kustomization: Path
) -> None:
    """Object by object, the dashboards' ConfigMaps included, but for the Namespace
    (kustomize only: Helm creates it with --create-namespace) and the CRD (Helm installs its
    crds/ before the templates; tests/deploy/test_crd.py keeps both copies equal)."""
    chart = normal_form(helm_render(values))
    skipped = ("Namespace", "CustomResourceDefinition")
    built = normal_form([d for d in kustomize(kustomization) if d["kind"] not in skipped])
    assert chart.keys() == built.keys()
    dashboards = [k for k in built if k[0] == "ConfigMap" and k[2].startswith("vllm-scaler-dash")]
    assert sorted(dashboards) == [
        ("ConfigMap", "vllm-scaler", "vllm-scaler-dashboard-vllm-fleet"),
        ("ConfigMap", "vllm-scaler", "vllm-scaler-dashboard-vllm-scaler-decisions"),
    ]
    for key in chart:
        assert chart[key] == built[key], key


@pytest.mark.parametrize(
    ("values", "overlay"),
    [
        pytest.param({"recommendOnly": True, "replicas": 1}, "recommend-only", id="recommend-only"),
        pytest.param({"rbac": {"scope": "namespaces"}}, "namespaced", id="namespaced"),
    ],
)
def test_the_component_without_the_operators_kinds_composes_with_each_overlay(
    values: dict[str, Any], overlay: str, tmp_path: Path
) -> None:
    """An overlay plus components/no-prometheus-operator, as a user's kustomization writes
    them: the chart's objects with the ServiceMonitor and the PrometheusRule turned off, and
    no kind a cluster without the Operator's CRDs refuses."""
    here = Path(os.path.relpath(DEPLOY, tmp_path))
    (tmp_path / "kustomization.yaml").write_text(
        yaml.safe_dump(
            {
                "resources": [str(here / "overlays" / overlay)],
                "components": [str(here / "components" / "no-prometheus-operator")],
            }
        )
    )
    docs = kustomize(tmp_path)
    assert not {d["kind"] for d in docs} & CRD_KINDS
    validate(docs)
    chart = normal_form(helm_render({**values, **NO_OPERATOR}))
    # the chart installs its CRD from crds/, not from the templates rendered here
    skipped = ("Namespace", "CustomResourceDefinition")
    built = normal_form([d for d in docs if d["kind"] not in skipped])
    assert chart.keys() == built.keys()
    for key in chart:
        assert chart[key] == built[key], key


def test_files_rendered_from_the_chart_are_up_to_date() -> None:
    out = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "render-manifests.py"), "--check"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    # nothing but the verdict: not Helm's Go engine's log lines (found symbolic link...)
    assert (out.stdout, out.stderr) == ("", "")


def test_render_manifests_runs_from_a_python_without_the_dev_extra() -> None:
    """The shebang's python3 is the system's: the script runs again with the project's venv."""
    venv_python = ROOT / ".venv" / "bin" / "python"
    if not venv_python.exists():
        pytest.skip("no .venv (./scripts/setup.sh --dev makes it)")
    base = Path(sys.base_prefix) / "bin" / "python3"
    out = subprocess.run(
        # -S: no site-packages, so helm-python-sdk cannot be imported, as on a fresh machine
        [str(base), "-S", str(ROOT / "scripts" / "render-manifests.py"), "--check"],
        capture_output=True,
        text=True,
        check=False,
        cwd="/",
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "Error" not in out.stderr


def _labels(doc: Doc) -> dict[str, str]:
    labels: dict[str, str] = doc["metadata"].get("labels", {})
    return labels


def test_prometheusrule_holds_exactly_the_plain_rules_file() -> None:
    plain = yaml.safe_load((DEPLOY / "rules" / "vllm-scaler.rules.yaml").read_text())["groups"]
    chart = one(helm_render(), "PrometheusRule")
    base = one(kustomize(DEPLOY / "base"), "PrometheusRule")
    assert chart["spec"]["groups"] == plain
    assert base["spec"]["groups"] == plain
    assert base["metadata"]["namespace"] == "vllm-scaler"
    # A mirror of the runbooks moves every runbook_url, nothing else.
    mirror = "https://wiki.example.com/vllm-scaler/runbooks"
    moved = one(helm_render({"prometheusRule": {"runbookBaseUrl": mirror + "/"}}), "PrometheusRule")
    urls = [
        r["annotations"]["runbook_url"]
        for g in moved["spec"]["groups"]
        for r in g["rules"]
        if "alert" in r
    ]
    assert urls and all(u.startswith(mirror + "#vllmscaler") for u in urls), urls


def test_the_ttft_recording_rule_can_be_left_out() -> None:
    def groups(values: dict[str, Any]) -> list[str]:
        rule = one(helm_render(values), "PrometheusRule")
        return [g["name"] for g in rule["spec"]["groups"]]

    assert groups({}) == ["vllm-scaler-recording", "vllm-scaler"]
    assert groups({"prometheusRule": {"recordingRules": False}}) == ["vllm-scaler"]


def test_monitoring_labels_and_interval_are_configurable() -> None:
    docs = helm_render(
        {
            "serviceMonitor": {
                "labels": {"release": "kps"},
                "interval": "30s",
                "scrapeTimeout": "10s",
            },
            "prometheusRule": {"labels": {"release": "kps", "team": "ml"}},
        }
    )
    sm = one(docs, "ServiceMonitor")
    assert sm["metadata"]["labels"]["release"] == "kps"
    assert sm["spec"]["endpoints"] == [
        {"port": "metrics", "path": "/metrics", "interval": "30s", "scrapeTimeout": "10s"}
    ]
    service = one(docs, "Service")
    assert sm["spec"]["selector"]["matchLabels"] == service["spec"]["selector"]
    rule = one(docs, "PrometheusRule")
    assert rule["metadata"]["labels"]["release"] == "kps"
    assert rule["metadata"]["labels"]["team"] == "ml"
    off = helm_render({"serviceMonitor": {"enabled": False}, "prometheusRule": {"enabled": False}})
    assert not CRD_KINDS & {d["kind"] for d in off}


# A ConfigMap's data (keys and values) holds at most 1 MiB (the API server's validation);
# kubectl's client-side apply copies the whole object into the annotation
# kubectl.kubernetes.io/last-applied-configuration, and an object's annotations hold at most
# 256 KiB together.
CONFIGMAP_DATA_LIMIT_BYTES = 1024 * 1024
ANNOTATIONS_LIMIT_BYTES = 256 * 1024


def _last_applied_bytes(doc: Doc) -> int:
    """The size of the last-applied annotation kubectl writes for ``doc``: its compact JSON,
    with encoding/json's escapes of <, > and &."""
    text = json.dumps(doc, separators=(",", ":"), ensure_ascii=False)
    for char in "<>&":
        text = text.replace(char, f"\\u{ord(char):04x}")
    return len(text.encode())


@pytest.mark.parametrize("source", ["chart", "base"])
def test_dashboards_are_configmaps_for_grafanas_sidecar(source: str) -> None:
    """The chart's defaults and the kustomize base ship each committed dashboard as a
    ConfigMap labelled for Grafana's sidecar, small enough for client-side apply."""
    docs = helm_render() if source == "chart" else kustomize(DEPLOY / "base")
    maps = [d for d in docs if _labels(d).get("grafana_dashboard") == "1"]
    committed = sorted((ROOT / "dashboards").glob("*.json"))
    assert len(maps) == len(committed) >= 2
    validate(maps)
    for cm, path in zip(sorted(maps, key=lambda d: d["metadata"]["name"]), committed, strict=True):
        assert cm["metadata"]["name"] == "vllm-scaler-dashboard-" + path.stem
        assert cm["metadata"]["namespace"] == "vllm-scaler"
        assert "annotations" not in cm["metadata"]  # the chart's default: none
        ((key, text),) = cm["data"].items()
        assert key == path.name
        dashboard = json.loads(text)
        # The committed dashboard, with the import input replaced by the datasource's uid.
        expected = json.loads(path.read_text().replace("${DS_PROMETHEUS}", "prometheus"))
        assert dashboard == expected
        assert "${DS_PROMETHEUS}" not in text
        assert len(key.encode()) + len(text.encode()) < CONFIGMAP_DATA_LIMIT_BYTES / 4
        assert _last_applied_bytes(cm) < ANNOTATIONS_LIMIT_BYTES / 2


def test_dashboards_folder_annotation_and_namespace() -> None:
    docs = helm_render(
        {"dashboards": {"annotations": {"grafana_folder": "vLLM"}, "namespace": "monitoring"}}
    )
    maps = [d for d in docs if _labels(d).get("grafana_dashboard") == "1"]
    assert len(maps) >= 2
    for cm in maps:
        assert cm["metadata"]["annotations"] == {"grafana_folder": "vLLM"}
        assert cm["metadata"]["namespace"] == "monitoring"
    off = helm_render({"dashboards": {"enabled": False}})
    assert not [d for d in off if _labels(d).get("grafana_dashboard")]


def test_prometheus_auth_is_mounted_as_files() -> None:
    docs = helm_render(AUTH)
    env = _env(docs)
    pod = one(docs, "Deployment")["spec"]["template"]["spec"]
    mounts = {m["name"]: m["mountPath"] for m in pod["containers"][0]["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    token = env["VLLM_SCALER_PROMETHEUS_BEARER_TOKEN_FILE"]["value"]
    assert token == mounts["prometheus-token"] + "/token"
    assert volumes["prometheus-token"]["secret"]["secretName"] == "prom-token"
    assert env["VLLM_SCALER_PROMETHEUS_CA_FILE"]["value"] == mounts["prometheus-ca"] + "/ca.crt"
    assert volumes["prometheus-ca"]["configMap"]["name"] == "kube-root-ca.crt"
    assert env["VLLM_SCALER_PROMETHEUS_CLIENT_CERT_FILE"]["value"].startswith(
        mounts["prometheus-client"]
    )
    assert volumes["prometheus-client"]["secret"]["secretName"] == "prom-client"
    assert json.loads(env["VLLM_SCALER_PROMETHEUS_HEADERS"]["value"]) == {"X-Scope-OrgID": "team-a"}
    secret_headers = _env(helm_render({"prometheus": {"headersSecret": {"name": "tenant"}}}))
    assert secret_headers["VLLM_SCALER_PROMETHEUS_HEADERS"]["valueFrom"]["secretKeyRef"] == {
        "name": "tenant",
        "key": "headers",
    }


def test_two_replicas_spread_over_nodes_and_zones_with_a_disruption_budget() -> None:
    docs = helm_render()
    dep = one(docs, "Deployment")
    pod = dep["spec"]["template"]["spec"]
    selector = dep["spec"]["selector"]["matchLabels"]
    assert dep["spec"]["replicas"] == 2
    term = pod["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert term[0]["podAffinityTerm"]["labelSelector"]["matchLabels"] == selector
    assert term[0]["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"
    (spread,) = pod["topologySpreadConstraints"]
    assert spread["labelSelector"]["matchLabels"] == selector
    pdb = one(docs, "PodDisruptionBudget")
    assert pdb["spec"] == {"maxUnavailable": 1, "selector": {"matchLabels": selector}}
    hard = one(helm_render({"podAntiAffinity": "hard"}), "Deployment")
    affinity = hard["spec"]["template"]["spec"]["affinity"]["podAntiAffinity"]
    assert affinity["requiredDuringSchedulingIgnoredDuringExecution"][0]["labelSelector"] == {
        "matchLabels": selector
    }
    own = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["cpu"]}]}
                ]
            }
        }
    }
    merged = one(helm_render({"affinity": own}), "Deployment")["spec"]["template"]["spec"]
    assert set(merged["affinity"]) == {"nodeAffinity", "podAntiAffinity"}


def test_recommend_only_never_writes() -> None:
    docs = helm_render({"recommendOnly": True})
    dep = one(docs, "Deployment")
    assert dep["spec"]["replicas"] == 2  # replicas as given: every one read-only
    assert dep["spec"]["template"]["spec"]["containers"][0]["args"] == ["run", "--dry-run"]
    verbs = {v for rule in one(docs, "ClusterRole")["rules"] for v in rule["verbs"]}
    assert verbs <= {"get", "list", "watch"}
    assert not [d for d in docs if d["kind"] in ("Role", "RoleBinding")]
    assert _env(docs)["VLLM_SCALER_LEADER_ELECTION"]["value"] == "false"


def test_image_by_tag_or_digest() -> None:
    def image(values: dict[str, Any]) -> str:
        dep = one(helm_render(values), "Deployment")
        return str(dep["spec"]["template"]["spec"]["containers"][0]["image"])

    assert image({}) == "ghcr.io/vllm-scaler/vllm-scaler:0.1.0"
    assert image({"image": {"tag": "0.2.0"}}) == "ghcr.io/vllm-scaler/vllm-scaler:0.2.0"
    digest = "sha256:" + "0f" * 32
    assert image({"image": {"digest": digest}}) == f"ghcr.io/vllm-scaler/vllm-scaler@{digest}"


def _rendered_policy(values: dict[str, Any]) -> Any:
    cm = one(helm_render(values), "ConfigMap", "vllm-scaler-policy")
    return yaml.safe_load(cm["data"]["policy.yaml"])


def test_a_policy_mapping_replaces_the_example_and_is_never_merged_with_it() -> None:
    example = yaml.safe_load((CHART / "files" / "example-policy.yaml").read_text())
    assert _rendered_policy({}) == example  # nothing given: the example
    # A mapping without rate_window_seconds keeps the controller's default, not the example's.
    assert _rendered_policy({"policy": TWO_NAMESPACES}) == TWO_NAMESPACES
    helm = pytest.importorskip("helm_python")
    with pytest.raises(helm.HelmError) as err:  # no targets: refused, not the example's
        helm_render({"policy": {"rate_window_seconds": 30}})
    assert "policy: no 'targets' (it has rate_window_seconds)" in str(err.value)


def test_a_changed_policy_rolls_the_pods() -> None:
    def checksum(values: dict[str, Any]) -> str:
        dep = one(helm_render(values), "Deployment")
        return str(dep["spec"]["template"]["metadata"]["annotations"]["checksum/policy"])

    assert checksum({}) != checksum({"policy": TWO_NAMESPACES})


@pytest.mark.parametrize(
    ("values", "message"),
    [
        pytest.param(
            {"prometheus": {"tls": {"caSecret": {"name": "a"}, "caConfigMap": {"name": "b"}}}},
            "prometheus.tls: set caSecret or caConfigMap, not both",
            id="two-cas",
        ),
        pytest.param(
            {"prometheus": {"headers": {"a": "b"}, "headersSecret": {"name": "h"}}},
            "prometheus: set headers or headersSecret, not both",
            id="two-headers",
        ),
        pytest.param(
            {"rbac": {"scope": "namespaces"}, "policy": {"targets": []}},
            "policy.targets: empty",
            id="namespaces-without-targets",
        ),
        pytest.param(
            {
                "rbac": {"scope": "namespaces"},
                "policy": {
                    "targets": [
                        {"workload": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "x"}}
                    ]
                },
            },
            "policy.targets[0].workload.namespace: missing",
            id="target-no-namespace",
        ),
        pytest.param(
            {"policy": "targets: [\n"},
            "policy: not a YAML mapping: error converting YAML to JSON: yaml: line 1: did not "
            "find expected node content",
            id="policy-not-yaml",
        ),
        pytest.param(
            {"policy": "- a\n"},
            "policy: not a YAML mapping: error unmarshaling JSON",
            id="policy-a-list",
        ),
        pytest.param(
            {"policy": ""},
            "policy: empty; expected the policy file, a mapping with 'targets' "
            "(--set-file policy=my-policy.yaml)",
            id="policy-empty",
        ),
        pytest.param(
            {"policy": "rate_window_seconds: 60\n"},
            "policy: no 'targets' (it has rate_window_seconds); expected a mapping with "
            "'targets', the list of targets",
            id="policy-without-targets",
        ),
        pytest.param(
            {"policy": "targets: 3\n"},
            "policy.targets: value 3: expected a list of targets",
            id="targets-not-a-list",
        ),
        pytest.param(
            {"policy": "targets: [vllm]\n"},
            "policy.targets[0]: value \"vllm\": expected a mapping with 'namespace' and "
            "'scaleTargetRef' (or 'workload')",
            id="target-not-a-mapping",
        ),
        pytest.param(
            {"policy": "targets: [{min_replicas: 2}]\n"},
            "policy.targets[0]: no workload; expected namespace and scaleTargetRef (a mapping "
            "with apiVersion, kind and name), or workload (a mapping with apiVersion, kind, "
            "namespace and name)",
            id="target-without-workload",
        ),
        pytest.param(
            {"policy": "targets: [{workload: vllm}]\n"},
            'policy.targets[0].workload: value "vllm": expected a mapping with apiVersion, '
            "kind, namespace and name",
            id="workload-not-a-mapping",
        ),
        pytest.param(
            {"leaderElection": {"renewDeadlineSeconds": 20}},
            "leaderElection: retryPeriodSeconds 2, renewDeadlineSeconds 20, leaseDurationSeconds "
            "15: expected retryPeriodSeconds < renewDeadlineSeconds < leaseDurationSeconds",
            id="lease-timings",
        ),
        pytest.param(
            {"serviceAccount": {"create": False}},
            "serviceAccount.name is required",
            id="no-service-account",
        ),
        pytest.param(
            {"leaderElection": {"enabled": False}},
            "leaderElection.enabled: false with replicas 2: every replica would scale the "
            "targets, 2 writers; expected replicas: 1 (or leaderElection.enabled: true, or "
            "recommendOnly: true, where nothing writes)",
            id="two-writers",
        ),
        pytest.param(
            {"prometheus": {"url": "http://admin:HelmPassw0rd@prom:9090"}},
            "prometheus.url: holds user-info (a user name or token, with or without a password), "
            "which would be stored in plain text in the "
            "Deployment: put the URL in a Secret and set prometheus.urlSecret",
            id="password-in-url",
        ),
        *(
            pytest.param(
                {"prometheus": {"headers": {"X-Scope-OrgID": "a", name: "Bearer HelmPassw0rd"}}},
                f"prometheus.headers: {name} is a credential header (a name holding auth, "
                "cookie, token, key, secret, password, credential or session), which would be "
                "stored in plain text in the Deployment: put the headers in a Secret and set "
                "prometheus.headersSecret (name, key); plain headers are for tenant ids such as "
                "X-Scope-OrgID or THANOS-TENANT",
                id=f"credential-header-{name}",
            )
            for name in (
                "Authorization",
                "proxy-authorization",
                "Cookie",
                "X-Api-Key",
                "X-Auth-Token",
                "PRIVATE-TOKEN",
                "X-Secret",
                "X-Password",
            )
        ),
        pytest.param(
            {
                "extraEnv": [
                    {"name": "VLLM_SCALER_METRICS_ADDRESS", "value": "0.0.0.0"},
                    {"name": "VLLM_SCALER_PROMETHEUS_URL", "value": "http://u:HelmPassw0rd@p:9090"},
                ]
            },
            "extraEnv[1].name VLLM_SCALER_PROMETHEUS_URL is set by the chart from prometheus.url "
            "(or prometheus.urlSecret): set that instead",
            id="extra-env-prometheus-url",
        ),
        pytest.param(
            {"extraEnv": [{"name": "VLLM_SCALER_CONTROL_INTERVAL_SECONDS", "value": "30"}]},
            "extraEnv[0].name VLLM_SCALER_CONTROL_INTERVAL_SECONDS is set by the chart from "
            "controlIntervalSeconds: set that instead",
            id="extra-env-duplicate",
        ),
        pytest.param(
            {"extraEnv": [{"name": "POD_NAME", "value": "x"}]},
            "extraEnv[0].name POD_NAME is set by the chart for the pod itself: leave it out",
            id="extra-env-pod-name",
        ),
        pytest.param(
            {"extraEnv": [{"name": "HTTPS_PROXY", "value": "http://proxy:HelmPassw0rd@px:3128"}]},
            "extraEnv[0].value (HTTPS_PROXY): holds a URL with user-info (a user name or token, "
            "with or without a password), which would be stored in plain text in the "
            "Deployment: use valueFrom.secretKeyRef",
            id="extra-env-url-with-user-info",
        ),
        pytest.param(
            {"prometheusRule": {"alertLabels": {"namespace": "x"}}},
            "prometheusRule.alertLabels.namespace: set by each alert itself",
            id="alert-label-namespace",
        ),
        pytest.param(
            {"prometheusRule": {"alertLabels": {"severity": "page"}}},
            "prometheusRule.alertLabels.severity: set by each alert itself",
            id="alert-label-severity",
        ),
        pytest.param(
            {"prometheus": {"url": "http://HelmPassw0rd@prom:9090"}},
            "prometheus.url: holds user-info (a user name or token, with or without a password), "
            "which would be stored in plain text in the "
            "Deployment: put the URL in a Secret and set prometheus.urlSecret",
            id="token-in-url",
        ),
    ],
)
def test_invalid_values_fail_naming_the_value(values: dict[str, Any], message: str) -> None:
    helm = pytest.importorskip("helm_python")
    with pytest.raises(helm.HelmError) as err:
        helm_render(values)
    assert message in str(err.value)
    assert "HelmPassw0rd" not in str(err.value)


def test_namespaced_overlay_roles_follow_the_base_policy() -> None:
    policy = yaml.safe_load((DEPLOY / "base" / "policy.yaml").read_text())
    wanted = {t["workload"]["namespace"] for t in policy["targets"]}
    generated = files(DEPLOY / "overlays" / "namespaced" / "rbac.yaml")
    assert {d["metadata"]["namespace"] for d in generated if d["kind"] == "Role"} == wanted


@pytest.mark.parametrize(
    ("values", "messages"),
    [
        pytest.param({"replicas": 0}, ["at '/replicas': minimum: got 0, want 1"], id="replicas"),
        pytest.param({"replica": 2}, ["additional properties 'replica' not allowed"], id="typo"),
        pytest.param(
            {"metricsPort": 70000},
            ["at '/metricsPort': maximum: got 70,000, want 65,535"],
            id="port",
        ),
        pytest.param(
            {"controlIntervalSeconds": "15s"},
            ["at '/controlIntervalSeconds': got string, want number"],
            id="interval-type",
        ),
        pytest.param(
            {"rbac": {"scope": "namespace"}},
            ["at '/rbac/scope': value must be one of 'cluster', 'namespaces'"],
            id="rbac-scope",
        ),
        pytest.param(
            {"podAntiAffinity": "maybe"},
            ["at '/podAntiAffinity': value must be one of 'soft', 'hard', 'none'"],
            id="anti-affinity",
        ),
        pytest.param(
            {"logLevel": "loud"},
            ["at '/logLevel': value must be one of 'debug', 'info', 'warning', 'error'"],
            id="log-level",
        ),
        pytest.param(
            {"prometheus": {"url": "prometheus:9090", "timeoutSeconds": -1}},
            [
                "at '/prometheus/url': 'prometheus:9090' does not match pattern",
                "at '/prometheus/timeoutSeconds': exclusiveMinimum: got -1, want 0",
            ],
            id="prometheus",
        ),
        pytest.param(
            {"serviceMonitor": {"interval": "15"}},
            ["at '/serviceMonitor/interval': '15' does not match pattern"],
            id="scrape-interval",
        ),
        *(
            pytest.param(
                {"leaderElection": {"leaseName": name}},
                [f"at '/leaderElection/leaseName': '{name}' does not match pattern"],
                id=f"lease-name-{name}",
            )
            for name in ("Bad_Name", "a..b", "a.-b")
        ),
    ],
)
def test_values_out_of_range_fail_before_rendering(
    values: dict[str, Any], messages: list[str]
) -> None:
    """values.schema.json: Helm refuses the values (install, template, lint) naming the
    value's path, what it got and what it wants."""
    helm = pytest.importorskip("helm_python")
    with pytest.raises(helm.HelmValuesError) as err:
        helm_render(values)
    for message in messages:
        assert message in str(err.value)
    report = helm_lint(values)
    assert report["errors"], report


def test_the_schema_covers_every_value_of_values_yaml() -> None:
    """Every top-level value (and every key of the chart's own sections) is in the schema,
    so that a value added to values.yaml without it fails here, not in a user's install."""
    chart = DEPLOY / "helm" / "vllm-scaler"
    schema = json.loads((chart / "values.schema.json").read_text())
    values = yaml.safe_load((chart / "values.yaml").read_text())
    assert set(values) <= set(schema["properties"])
    for key, section in schema["properties"].items():
        if section.get("additionalProperties") is False:
            assert set(values[key]) <= set(section["properties"]), key


def test_tenant_headers_stay_plain_env_values() -> None:
    headers = {"X-Scope-OrgID": "team-a", "THANOS-TENANT": "t", "X-Grafana-Org-Id": "1"}
    env = _env(helm_render({"prometheus": {"headers": headers}}))
    assert json.loads(env["VLLM_SCALER_PROMETHEUS_HEADERS"]["value"]) == headers


def test_a_url_with_a_password_comes_from_a_secret_never_the_env_value() -> None:
    from_secret = _env(
        helm_render({"prometheus": {"urlSecret": {"name": "prom-url"}, "url": "http://x:9090"}})
    )
    assert from_secret["VLLM_SCALER_PROMETHEUS_URL"] == {
        "name": "VLLM_SCALER_PROMETHEUS_URL",
        "valueFrom": {"secretKeyRef": {"name": "prom-url", "key": "url"}},
    }
    # an "@" past the authority (path or query) is not user-info
    url = "http://prom:9090/tenant@a/?q=b@c"
    plain = _env(helm_render({"prometheus": {"url": url}}))
    assert plain["VLLM_SCALER_PROMETHEUS_URL"]["value"] == url


def test_without_leader_election_one_replica_writes() -> None:
    """leaderElection.enabled false: one replica (more is refused, see above); recommend-only
    runs the replicas asked for, never silently fewer, none of which writes."""
    docs = helm_render({"leaderElection": {"enabled": False}, "replicas": 1})
    assert one(docs, "Deployment")["spec"]["replicas"] == 1
    assert _env(docs)["VLLM_SCALER_LEADER_ELECTION"]["value"] == "false"
    for values in (
        {"recommendOnly": True, "replicas": 3},
        {"leaderElection": {"enabled": False}, "recommendOnly": True, "replicas": 3},
    ):
        docs = helm_render(values)
        dep = one(docs, "Deployment")
        assert dep["spec"]["replicas"] == 3
        assert dep["spec"]["template"]["spec"]["containers"][0]["args"] == ["run", "--dry-run"]
        assert _env(docs)["VLLM_SCALER_LEADER_ELECTION"]["value"] == "false"


def test_every_variable_the_chart_sets_is_refused_in_extra_env() -> None:
    """The chart's list of the variables it sets (which extraEnv may not set) is exactly the
    names its Deployment can have, with every Prometheus option on."""
    helm = pytest.importorskip("helm_python")
    full = {
        "prometheus": {
            "urlSecret": {"name": "u"},
            "bearerTokenSecret": {"name": "t"},
            "tls": {"caSecret": {"name": "c"}, "clientCertSecret": {"name": "m"}},
            "headers": {"X-Scope-OrgID": "a"},
        }
    }
    names = list(_env(helm_render(full)))
    for name in names:
        with pytest.raises(helm.HelmError) as err:
            helm_render({**full, "extraEnv": [{"name": name, "value": "x"}]})
        assert f"extraEnv[0].name {name} is set by the chart " in str(err.value), name
    # the others pass, once each
    env = _env(helm_render({"extraEnv": [{"name": "VLLM_SCALER_METRICS_ADDRESS", "value": "a"}]}))
    assert env["VLLM_SCALER_METRICS_ADDRESS"] == {
        "name": "VLLM_SCALER_METRICS_ADDRESS",
        "value": "a",
    }


def _render_release(release: str, values: dict[str, Any] | None = None) -> list[Doc]:
    helm = pytest.importorskip("helm_python")
    helm.disable_logging()
    with helm.Chart.load(CHART) as chart:
        out = chart.render(values or {}, name=release, namespace="vllm-scaler")
    return [
        d
        for path in sorted(out)
        if path.endswith(".yaml")
        for d in yaml.safe_load_all(out[path])
        if d
    ]


def _lease_of(docs: list[Doc]) -> tuple[str, list[str]]:
    role = next(
        d
        for d in docs
        if d["kind"] == "Role" and d["metadata"]["name"].endswith("-leader-election")
    )
    (named,) = [r for r in role["rules"] if "resourceNames" in r]
    return _env(docs)["VLLM_SCALER_LEASE_NAME"]["value"], named["resourceNames"]


def test_each_release_has_its_own_lease() -> None:
    """Two releases in one namespace never share a Lease: by default it is the release's full
    name, and its Role reads and updates that Lease only."""
    assert _lease_of(_render_release("scaler-a")) == (
        "scaler-a-vllm-scaler",
        ["scaler-a-vllm-scaler"],
    )
    assert _lease_of(_render_release("scaler-b")) == (
        "scaler-b-vllm-scaler",
        ["scaler-b-vllm-scaler"],
    )
    assert _lease_of(helm_render()) == ("vllm-scaler", ["vllm-scaler"])
    assert _lease_of(helm_render({"leaderElection": {"leaseName": "team.lease"}})) == (
        "team.lease",
        ["team.lease"],
    )


LONG_FULLNAME = "a-very-long-release-name-for-the-vllm-scaler-in-team-ml-prod-1"


@pytest.mark.parametrize(
    "values",
    [
        pytest.param({"fullnameOverride": LONG_FULLNAME}, id="cluster"),
        pytest.param(
            {"fullnameOverride": LONG_FULLNAME, "rbac": {"scope": "namespaces"}},
            id="namespaces",
        ),
    ],
)
def test_a_long_full_name_keeps_names_valid_and_unique(values: dict[str, Any]) -> None:
    """A full name near 63 characters: each suffixed name (the Service, the policy, the Lease
    Role, every dashboard) is cut at the full name, never at the suffix, so that names stay
    within a DNS label and different from each other."""
    assert len(LONG_FULLNAME) == 62
    docs = helm_render(values)
    validate(docs)
    names = [(d["kind"], d["metadata"].get("namespace", ""), d["metadata"]["name"]) for d in docs]
    assert len(set(names)) == len(names), sorted(names)
    for _, _, name in names:
        assert len(name) <= 63, name
        assert not name.endswith("-"), name
    dashboards = sorted(n for k, _, n in names if k == "ConfigMap" and "-dashboard-" in n)
    assert sorted(n.split("-dashboard-")[1] for n in dashboards) == [
        "vllm-fleet",
        "vllm-scaler-decisions",
    ]
    service = one(docs, "Service")["metadata"]["name"]
    assert service == LONG_FULLNAME[:55].rstrip("-") + "-metrics"
    dep = one(docs, "Deployment")
    assert dep["metadata"]["name"] == LONG_FULLNAME
    volume = dep["spec"]["template"]["spec"]["volumes"][0]["configMap"]["name"]
    assert (
        volume
        == one(docs, "ConfigMap", volume)["metadata"]["name"]
        == LONG_FULLNAME[:56].rstrip("-") + "-policy"
    )
    role = one(docs, "Role", LONG_FULLNAME[:47].rstrip("-") + "-leader-election")
    binding = one(docs, "RoleBinding", role["metadata"]["name"])
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    # the Lease keeps the full name: a DNS subdomain may be 253 characters
    assert _lease_of(docs)[0] == LONG_FULLNAME


def _mebibytes(quantity: str) -> float:
    units = {"Ki": 1 / 1024, "Mi": 1, "Gi": 1024}
    return float(quantity[:-2]) * units[quantity[-2:]]


def test_memory_covers_the_measured_resident_set() -> None:
    """values.yaml's measurement: 105 MiB resident for `vllm-scaler run` with one target
    against the simulated fleet, near 230 MiB for 1,000 targets (bench-scale's growth). The
    request holds the first with headroom, the limit the second with margin; the kustomize
    base says the same (test_chart_and_kustomize_produce_the_same_objects)."""
    resources = one(helm_render(), "Deployment")["spec"]["template"]["spec"]["containers"][0][
        "resources"
    ]
    assert _mebibytes(resources["requests"]["memory"]) >= 105 * 1.2
    assert _mebibytes(resources["limits"]["memory"]) >= 230 * 1.5


def test_the_chart_refuses_the_headers_the_controller_names_as_credentials() -> None:
    """One rule for a credential header's name: the chart's refusal in plain ``headers`` and
    the controller's start-up line (``CREDENTIAL_HEADER``)."""
    template = (CHART / "templates" / "deployment.yaml").read_text()
    chart = re.search(r'regexMatch "\(([^)]*)\)" \(lower \$name\)', template)
    assert chart is not None
    assert set(chart.group(1).split("|")) == set(CREDENTIAL_HEADER.pattern.split("|"))
