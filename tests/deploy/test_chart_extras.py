"""The chart's escape hatches under its strict schema (extraArgs, extraVolumes and
extraVolumeMounts, extraObjects, podLabels and podAnnotations, the ServiceMonitor's
relabelings) and its NetworkPolicy: rendered by Helm's engine, valid against the Kubernetes
schemas, refused where they would undo what the chart sets."""

from __future__ import annotations

from typing import Any

import pytest

from scaler.config.cli_options import option_names
from tests.deploy.render import CHART, Doc, helm_lint, helm_refusal, helm_render, one, validate

API_SERVER = {"cidrs": ["10.0.0.1/32", "10.0.0.2/32"]}


def _pod(docs: list[Doc]) -> dict[str, Any]:
    spec: dict[str, Any] = one(docs, "Deployment")["spec"]["template"]
    return spec


def test_extra_args_volumes_labels_and_annotations_reach_the_pod() -> None:
    values: dict[str, Any] = {
        "extraArgs": ["--metrics-address=0.0.0.0"],
        "extraVolumes": [{"name": "corp-ca", "configMap": {"name": "corp-ca"}}],
        "extraVolumeMounts": [{"name": "corp-ca", "mountPath": "/etc/corp-ca", "readOnly": True}],
        "podLabels": {"team": "ml"},
        "podAnnotations": {"sidecar.istio.io/inject": "false"},
    }
    report = helm_lint(values)
    assert report["errors"] == [], report
    docs = helm_render(values)
    validate(docs)
    template = _pod(docs)
    container: dict[str, Any] = template["spec"]["containers"][0]
    assert container["args"] == ["run", "--metrics-address=0.0.0.0"]
    assert container["volumeMounts"][-1] == values["extraVolumeMounts"][0]
    assert template["spec"]["volumes"][-1] == values["extraVolumes"][0]
    assert template["metadata"]["labels"]["team"] == "ml"
    assert template["metadata"]["annotations"]["sidecar.istio.io/inject"] == "false"
    assert "checksum/policy" in template["metadata"]["annotations"]
    dry = _pod(helm_render({"recommendOnly": True, "extraArgs": ["--once"]}))
    assert dry["spec"]["containers"][0]["args"] == ["run", "--dry-run", "--once"]


def test_extra_objects_are_rendered_with_the_release_values() -> None:
    values = {
        "extraObjects": [
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "{{ .Release.Name }}-extra"},
                "data": {"namespace": "{{ .Release.Namespace }}"},
            },
            "apiVersion: v1\nkind: Secret\nmetadata:\n  name: prom-token\n"
            "stringData:\n  token: '{{ .Values.controlIntervalSeconds }}'\n",
        ]
    }
    docs = helm_render(values)
    validate(docs)
    cm = one(docs, "ConfigMap", "vllm-scaler-extra")
    assert cm["data"] == {"namespace": "vllm-scaler"}
    assert one(docs, "Secret", "prom-token")["stringData"] == {"token": "15"}
    assert not [d for d in helm_render() if d["kind"] == "Secret"]


def test_servicemonitor_relabelings() -> None:
    relabel = [{"sourceLabels": ["__meta_kubernetes_pod_node_name"], "targetLabel": "node"}]
    drop = [{"sourceLabels": ["__name__"], "regex": "python_gc_.*", "action": "drop"}]
    sm = one(
        helm_render({"serviceMonitor": {"relabelings": relabel, "metricRelabelings": drop}}),
        "ServiceMonitor",
    )
    (endpoint,) = sm["spec"]["endpoints"]
    assert endpoint["relabelings"] == relabel
    assert endpoint["metricRelabelings"] == drop
    (plain,) = one(helm_render(), "ServiceMonitor")["spec"]["endpoints"]
    assert "relabelings" not in plain and "metricRelabelings" not in plain


def test_every_option_of_a_setting_the_chart_sets_is_refused_in_extra_args() -> None:
    """The chart's list of refused options is exactly the options of the settings it sets as
    variables (each a name of scaler.config.cli_options), and each is refused."""
    helm = pytest.importorskip("helm_python")
    text = (CHART / "templates" / "_helpers.tpl").read_text()
    block = text.split('define "vllm-scaler.chartOptions" -}}\n', 1)[1].split("{{- end }}")[0]
    listed = {line.split(":", 1)[0] for line in block.splitlines() if line.strip()}
    env = one(helm_render(), "Deployment")["spec"]["template"]["spec"]["containers"][0]["env"]
    fields = [
        e["name"].removeprefix("VLLM_SCALER_").lower()
        for e in env
        if e["name"].startswith("VLLM_SCALER_")
    ]
    fields += ["prometheus_bearer_token_file", "prometheus_ca_file"]  # set when given
    fields += ["prometheus_client_cert_file", "prometheus_client_key_file", "prometheus_headers"]
    fields += ["prometheus_cloud_auth", "prometheus_aws_region", "prometheus_aws_service"]
    fields += ["prometheus_cloud_auth_scope"]
    fields += ["resource_namespaces"]  # set with rbac.scope=namespaces
    wanted = {"--dry-run"}
    for field in fields:
        for names in option_names(field):
            wanted.update(n for n in names.split("/"))
    assert listed == wanted
    for option in sorted(listed):
        with pytest.raises(helm.HelmError) as err:
            helm_render({"extraArgs": [f"{option}=x"]})
        assert f"extraArgs[0]: {option} sets what the chart sets from " in str(err.value)


@pytest.mark.parametrize(
    ("values", "message"),
    [
        pytest.param(
            {"extraVolumes": [{"name": "tmp", "emptyDir": {}}]},
            "extraVolumes[0].name tmp is a volume of the chart's",
            id="volume-name",
        ),
        pytest.param(
            {"extraVolumeMounts": [{"name": "x", "mountPath": "/etc/vllm-scaler/"}]},
            "extraVolumeMounts[0].mountPath /etc/vllm-scaler/ is where the chart mounts its own",
            id="mount-path",
        ),
        pytest.param(
            {"podLabels": {"app.kubernetes.io/instance": "other"}},
            "podLabels.app.kubernetes.io/instance: a label of the Deployment's selector",
            id="selector-label",
        ),
        pytest.param(
            {"podAnnotations": {"checksum/policy": "x"}},
            "podAnnotations.checksum/policy: set by the chart",
            id="checksum",
        ),
        pytest.param(
            {"networkPolicy": {"enabled": True}},
            "networkPolicy.apiServer.cidrs: empty, and the API server's addresses cannot be "
            "looked up here",
            id="netpol-no-api-server",
        ),
        pytest.param(
            {
                "networkPolicy": {"enabled": True, "apiServer": API_SERVER},
                "prometheus": {"urlSecret": {"name": "prom-url"}},
            },
            "networkPolicy.prometheus.ports: empty with prometheus.urlSecret",
            id="netpol-url-in-secret",
        ),
    ],
)
def test_extras_that_would_undo_the_chart_are_refused(values: dict[str, Any], message: str) -> None:
    assert message in helm_refusal(values)


@pytest.mark.parametrize(
    ("values", "message"),
    [
        pytest.param({"extraArgs": "--once"}, "at '/extraArgs': got string, want array", id="a"),
        pytest.param(
            {"extraVolumeMounts": [{"name": "x", "mountPath": "etc"}]},
            "at '/extraVolumeMounts/0/mountPath': 'etc' does not match pattern",
            id="relative-mount",
        ),
        pytest.param(
            {"networkPolicy": {"enabeld": True}},
            "additional properties 'enabeld' not allowed",
            id="netpol-typo",
        ),
        pytest.param(
            {"networkPolicy": {"apiServer": {"cidrs": ["10.0.0.1"]}}},
            "at '/networkPolicy/apiServer/cidrs/0': '10.0.0.1' does not match pattern",
            id="cidr",
        ),
        pytest.param(
            {"serviceMonitor": {"relabelings": {"a": "b"}}},
            "at '/serviceMonitor/relabelings': got object, want array",
            id="relabelings",
        ),
    ],
)
def test_extras_out_of_the_schema_fail_before_rendering(
    values: dict[str, Any], message: str
) -> None:
    assert message in helm_refusal(values, by_schema=True)


def _netpol(values: dict[str, Any]) -> dict[str, Any]:
    docs = helm_render(values)
    validate(docs)
    spec: dict[str, Any] = one(docs, "NetworkPolicy")["spec"]
    return spec


def test_no_network_policy_by_default() -> None:
    assert not [d for d in helm_render() if d["kind"] == "NetworkPolicy"]


def test_the_network_policy_allows_exactly_the_controller_s_traffic() -> None:
    """Selects the controller's pods; in: the metrics port only; out: the API server's
    addresses on 443/6443, Prometheus on the port of prometheus.url, DNS on 53 UDP and TCP:
    nothing else."""
    docs = helm_render({"networkPolicy": {"enabled": True, "apiServer": API_SERVER}})
    validate(docs)
    spec = one(docs, "NetworkPolicy")["spec"]
    dep = one(docs, "Deployment")
    assert spec["podSelector"] == dep["spec"]["selector"]
    assert spec["policyTypes"] == ["Ingress", "Egress"]
    port = dep["spec"]["template"]["spec"]["containers"][0]["ports"][0]
    assert port["name"] == "metrics"
    assert spec["ingress"] == [{"ports": [{"port": "metrics", "protocol": "TCP"}]}]
    api, prometheus, dns = spec["egress"]
    assert api == {
        "to": [{"ipBlock": {"cidr": "10.0.0.1/32"}}, {"ipBlock": {"cidr": "10.0.0.2/32"}}],
        "ports": [{"port": 443, "protocol": "TCP"}, {"port": 6443, "protocol": "TCP"}],
    }
    # the default URL is http://prometheus-operated.monitoring.svc:9090
    assert prometheus["ports"] == [{"port": 9090, "protocol": "TCP"}]
    assert prometheus["to"][0]["namespaceSelector"] == {
        "matchLabels": {"kubernetes.io/metadata.name": "monitoring"}
    }
    assert dns["ports"] == [{"port": 53, "protocol": "UDP"}, {"port": 53, "protocol": "TCP"}]
    assert dns["to"][0]["podSelector"] == {"matchLabels": {"k8s-app": "kube-dns"}}


@pytest.mark.parametrize(
    ("url", "ports"),
    [
        ("https://aps-workspaces.us-east-1.amazonaws.com/workspaces/ws-1", [443]),
        ("http://thanos-query.monitoring:10902", [10902]),
        ("http://vmselect.monitoring/select/0/prometheus", [80]),
    ],
)
def test_the_prometheus_port_follows_the_url(url: str, ports: list[int]) -> None:
    spec = _netpol(
        {"networkPolicy": {"enabled": True, "apiServer": API_SERVER}, "prometheus": {"url": url}}
    )
    assert [p["port"] for p in spec["egress"][1]["ports"]] == ports


def test_network_policy_peers_ports_and_extra_rules_are_values() -> None:
    managed = [{"ipBlock": {"cidr": "0.0.0.0/0", "except": ["10.0.0.0/8"]}}]
    metadata = {"to": [{"ipBlock": {"cidr": "169.254.169.254/32"}}], "ports": [{"port": 80}]}
    scraper = [{"namespaceSelector": {"matchLabels": {"name": "monitoring"}}}]
    spec = _netpol(
        {
            "networkPolicy": {
                "enabled": True,
                "apiServer": {**API_SERVER, "ports": [6443]},
                "metricsFrom": scraper,
                "prometheus": {"to": managed, "ports": [443]},
                "extraEgress": [metadata],
            },
            "prometheus": {"urlSecret": {"name": "prom-url"}},
        }
    )
    assert spec["ingress"][0]["from"] == scraper
    assert spec["egress"][0]["ports"] == [{"port": 6443, "protocol": "TCP"}]
    assert spec["egress"][1] == {"to": managed, "ports": [{"port": 443, "protocol": "TCP"}]}
    assert spec["egress"][3] == metadata
