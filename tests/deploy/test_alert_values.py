"""The alerts' values: each alert of the chart (one file of files/alerts/) has its enabled,
severity, for: duration and thresholds in values.yaml and the strict schema, each value
reaches the rendered rule, and the rule file deploy/rules/ is the chart with its defaults."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.deploy.render import CHART, DEPLOY, Doc, helm_refusal, helm_render, one

ALERTS = CHART / "files" / "alerts"
VALUES = yaml.safe_load((CHART / "values.yaml").read_text(encoding="utf-8"))
DEFAULTS: dict[str, dict[str, Any]] = VALUES["prometheusRule"]["alerts"]
# Placeholders the chart fills from the release, not from an alert's values (resource and
# listedResource: the templates that name a target's VLLMAutoscaler).
OWN = {"job", "namespace", "resource", "listedResource"}


def _placeholders(name: str) -> set[str]:
    return set(re.findall(r"\$\{([A-Za-z]+)\}", (ALERTS / f"{name}.yaml").read_text()))


def _alerts(docs: list[Doc]) -> dict[str, dict[str, Any]]:
    rule = one(docs, "PrometheusRule")
    groups = {g["name"]: g for g in rule["spec"]["groups"]}
    if "vllm-scaler" not in groups:
        return {}
    return {r["alert"]: r for r in groups["vllm-scaler"]["rules"]}


def test_each_alert_file_has_its_values_and_schema_and_uses_every_value() -> None:
    files = sorted(p.stem for p in ALERTS.glob("*.yaml"))
    assert files == sorted(DEFAULTS), "files/alerts/ and prometheusRule.alerts differ"
    schema = json.loads((CHART / "values.schema.json").read_text())
    alerts_schema = schema["properties"]["prometheusRule"]["properties"]["alerts"]
    assert alerts_schema["additionalProperties"] is False
    assert sorted(alerts_schema["properties"]) == files
    for name in files:
        values = DEFAULTS[name]
        assert set(values) >= {"enabled", "severity", "for"}, name
        # every threshold is a placeholder of the file, every placeholder a value (for: is
        # the rule's own field, and may be named in its text too)
        thresholds = set(values) - {"enabled", "severity", "for"}
        assert thresholds <= _placeholders(name) - OWN <= thresholds | {"for"}, name
        entry = alerts_schema["properties"][name]
        assert entry["additionalProperties"] is False
        assert set(entry["properties"]) == set(values), name


def _sentinel(value: Any) -> Any:
    """A value unlike any default: a duration for a duration, a number for a number."""
    return "7m13s" if isinstance(value, str) else 0.4321


def test_every_value_of_an_alert_reaches_its_rule() -> None:
    """Each threshold and for: duration, set to a value of its own, appears in the rendered
    rule (its expression, for: or text), and nowhere in the other alerts."""
    for name, values in DEFAULTS.items():
        for key, default in values.items():
            if key in ("enabled", "severity"):
                continue
            sentinel = _sentinel(default)
            docs = helm_render({"prometheusRule": {"alerts": {name: {key: sentinel}}}})
            alerts = _alerts(docs)
            text = yaml.safe_dump(alerts[name])
            assert str(sentinel) in text, (name, key)
            for other, rule in alerts.items():
                if other != name:
                    assert str(sentinel) not in yaml.safe_dump(rule), (name, key, other)


def test_severity_labels_and_disabling() -> None:
    docs = helm_render(
        {
            "prometheusRule": {
                "alertLabels": {"team": "ml-platform"},
                "alerts": {
                    "VllmScalerFrozenMetrics": {"enabled": False},
                    "VllmScalerSignalAbsent": {"severity": "critical"},
                },
            }
        }
    )
    alerts = _alerts(docs)
    assert "VllmScalerFrozenMetrics" not in alerts
    assert len(alerts) == len(DEFAULTS) - 1
    assert alerts["VllmScalerSignalAbsent"]["labels"] == {
        "severity": "critical",
        "team": "ml-platform",
    }
    # the other values of the alert keep their defaults (Helm merges the mapping)
    assert alerts["VllmScalerSignalAbsent"]["for"] == DEFAULTS["VllmScalerSignalAbsent"]["for"]
    for rule in alerts.values():
        assert rule["labels"]["team"] == "ml-platform"
    off = {name: {"enabled": False} for name in DEFAULTS}
    rule = one(helm_render({"prometheusRule": {"alerts": off}}), "PrometheusRule")
    assert [g["name"] for g in rule["spec"]["groups"]] == ["vllm-scaler-recording"]


def test_down_looks_for_this_install_s_job_and_namespace() -> None:
    """The job the ServiceMonitor gives is the metrics Service's name; a relabeled job is
    prometheusRule.scrapeJob."""
    docs = helm_render({"fullnameOverride": "scaler"})
    service = one(docs, "Service")["metadata"]["name"]
    expr = _alerts(docs)["VllmScalerDown"]["expr"]
    assert expr == f'absent(vllm_scaler_build_info{{job="{service}", namespace="vllm-scaler"}})'
    assert service == "scaler-metrics"
    relabeled = helm_render({"prometheusRule": {"scrapeJob": "controllers"}})
    assert 'job="controllers"' in _alerts(relabeled)["VllmScalerDown"]["expr"]


@pytest.mark.parametrize(
    ("values", "message"),
    [
        pytest.param(
            {"prometheusRule": {"alerts": {"VllmScalerDwn": {"for": "1m"}}}},
            "additional properties 'VllmScalerDwn' not allowed",
            id="unknown-alert",
        ),
        pytest.param(
            {"prometheusRule": {"alerts": {"VllmScalerDown": {"fro": "1m"}}}},
            "additional properties 'fro' not allowed",
            id="unknown-value",
        ),
        pytest.param(
            {"prometheusRule": {"alerts": {"VllmScalerDown": {"for": "5 minutes"}}}},
            "at '/prometheusRule/alerts/VllmScalerDown/for': '5 minutes' does not match pattern",
            id="for-not-a-duration",
        ),
        pytest.param(
            {"prometheusRule": {"alerts": {"VllmScalerDown": {"severity": "page"}}}},
            "value must be one of 'critical', 'warning', 'info'",
            id="severity",
        ),
        pytest.param(
            {"prometheusRule": {"alerts": {"VllmScalerCyclesFailing": {"failedRatio": "half"}}}},
            "at '/prometheusRule/alerts/VllmScalerCyclesFailing/failedRatio': got string, "
            "want number",
            id="threshold-type",
        ),
    ],
)
def test_alert_values_out_of_the_schema_fail_before_rendering(
    values: dict[str, Any], message: str
) -> None:
    assert message in helm_refusal(values, by_schema=True)


def _promtool() -> str:
    found = shutil.which("promtool")
    if not found:
        pytest.skip("promtool not found; install Debian's prometheus package")
    return found


def test_a_threshold_from_the_values_moves_when_the_alert_fires(tmp_path: Path) -> None:
    """promtool on the chart's own rendering: with noSuccessSeconds 120 and for 0s a replica
    whose queries stopped succeeding at 2m fires at 5m, where the defaults (300 s, 1m) are
    still quiet; the description says which query."""
    values = {"noSuccessSeconds": 120, "for": "0s"}
    labels = 'job="vllm-scaler-metrics", instance="10.0.0.5:9100", namespace="vllm-scaler"'
    series = [
        {
            "series": "vllm_scaler_last_successful_query_timestamp_seconds"
            f'{{{labels}, signal="waiting"}}',
            "values": "0+60x2 120x20",
        }
    ]
    name = "VllmScalerPrometheusQueriesFailing"
    results = {}
    for case, given in (("defaults", {}), ("values", values)):
        rule = one(helm_render({"prometheusRule": {"alerts": {name: given}}}), "PrometheusRule")
        rules = tmp_path / f"{case}.rules.yaml"
        rules.write_text(yaml.safe_dump({"groups": rule["spec"]["groups"]}))
        firing = {
            "exp_labels": {
                "job": "vllm-scaler-metrics",
                "namespace": "vllm-scaler",
                "severity": "critical",
            },
            "exp_annotations": {
                "summary": "vllm-scaler vllm-scaler-metrics in vllm-scaler cannot read Prometheus",
                "description": "A vllm-scaler replica of vllm-scaler-metrics in vllm-scaler has "
                "had no successful answer from Prometheus for 3m 0s (or since it started, if it "
                "never had one) to the queries waiting, while they were "
                "due. vllm-scaler holds the current replicas while it cannot read: no scale-up "
                "happens under load.",
                "runbook_url": "https://github.com/vllm-scaler/vllm-scaler/blob/main/docs/"
                "runbooks.md#vllmscalerprometheusqueriesfailing",
            },
        }
        test = {
            "rule_files": [rules.name],
            "evaluation_interval": "1m",
            "tests": [
                {
                    "interval": "1m",
                    "input_series": series,
                    "alert_rule_test": [
                        {
                            "eval_time": "5m",
                            "alertname": name,
                            "exp_alerts": [firing] if given else [],
                        }
                    ],
                }
            ],
        }
        path = tmp_path / f"{case}.test.yaml"
        path.write_text(yaml.safe_dump(test))
        out = subprocess.run(
            [_promtool(), "test", "rules", path.name],
            capture_output=True,
            text=True,
            check=False,
            cwd=tmp_path,
        )
        results[case] = out.returncode, out.stdout + out.stderr
    assert results["defaults"][0] == 0, results["defaults"][1]
    assert results["values"][0] == 0, results["values"][1]


def test_the_rule_file_is_the_chart_with_its_defaults() -> None:
    """deploy/rules/vllm-scaler.rules.yaml (for rule_files) holds the PrometheusRule's groups
    of the chart's defaults; scripts/render-manifests.py --check keeps the text up to date."""
    plain = yaml.safe_load((DEPLOY / "rules" / "vllm-scaler.rules.yaml").read_text())
    assert plain["groups"] == one(helm_render(), "PrometheusRule")["spec"]["groups"]
