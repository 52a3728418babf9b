"""deploy/rules/vllm-scaler.rules.yaml: accepted by promtool as shipped, complete, each alert
unit-tested and linked to its runbook, and aggregated over the controller's replicas."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
RULES_DIR = ROOT / "deploy" / "rules"
RULES = RULES_DIR / "vllm-scaler.rules.yaml"
TESTS = ROOT / "deploy" / "alerts-tests.yaml"
RUNBOOKS = ROOT / "docs" / "runbooks.md"
RUNBOOK_BASE = "https://github.com/vllm-scaler/vllm-scaler/blob/main/docs/runbooks.md#"
# Labels that name one replica of the controller (or its scrape), never kept by an alert.
REPLICA_LABELS = {"instance", "pod", "container", "endpoint", "service"}


def _promtool() -> str:
    found = shutil.which("promtool") or shutil.which("/usr/bin/promtool")
    if not found:
        pytest.skip("promtool not found; install Debian's prometheus package")
    return found


def _rules() -> list[dict[str, Any]]:
    doc = yaml.safe_load(RULES.read_text(encoding="utf-8"))
    return [r for g in doc["groups"] for r in g["rules"] if "alert" in r]


def _tests() -> list[dict[str, Any]]:
    tests: list[dict[str, Any]] = yaml.safe_load(TESTS.read_text(encoding="utf-8"))["tests"]
    return tests


def test_every_alert_is_complete() -> None:
    rules = _rules()
    assert len(rules) >= 9
    for r in rules:
        assert r.get("alert"), r
        assert r.get("for"), r["alert"]
        assert r["labels"]["severity"] in {"critical", "warning", "info"}, r["alert"]
        for key in ("summary", "description", "runbook_url"):
            assert r["annotations"].get(key), f"{r['alert']} lacks {key}"


def _anchor(heading: str) -> str:
    """The anchor a Markdown renderer gives a heading: lower case, punctuation dropped,
    spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_every_alert_links_to_its_written_runbook() -> None:
    text = RUNBOOKS.read_text(encoding="utf-8")
    sections = {
        _anchor(m[1]): m[2]
        for m in re.finditer(r"^## ([^\n]+)\n(.*?)(?=^## |\Z)", text, flags=re.M | re.S)
    }
    for r in _rules():
        url = r["annotations"]["runbook_url"]
        assert url == RUNBOOK_BASE + _anchor(r["alert"]), url
        body = sections.get(_anchor(r["alert"]))
        assert body is not None, f"docs/runbooks.md has no section {r['alert']}"
        for part in ("**Meaning.**", "**Check.**", "**Act.**"):
            assert part in body, f"runbook {r['alert']} lacks {part}"


def test_the_required_alerts_exist() -> None:
    joined = "\n".join(r["expr"] for r in _rules())
    for needle in (
        'absent(vllm_scaler_build_info{job="vllm-scaler-metrics", namespace="vllm-scaler"})',
        "vllm_scaler_target_read_errors_total",
        "vllm_scaler_leader",
        "vllm_scaler_last_successful_query_timestamp_seconds",
        "vllm_scaler_signal_valid",
        "vllm_scaler_max_replicas",
        'vllm_scaler_signal_status{status="absent"}',
        "vllm_scaler_conflict",
        "vllm_scaler_stuck_replicas",
        "vllm_scaler_scale_failures_total",
        "vllm_scaler_hung_pods",
        "vllm_scaler_frozen_pods",
        "vllm_scaler_cycle_failures_total",
        "vllm_scaler_scale_selector_missing",
        "vllm_scaler_policy_last_reload_successful",
        "vllm_scaler_unschedulable_replicas",
    ):
        assert needle in joined, needle


def test_every_alert_has_a_firing_and_a_quiet_unit_test() -> None:
    firing: set[str] = set()
    quiet: set[str] = set()
    for t in _tests():
        for a in t.get("alert_rule_test", []):  # the recording rule's tests have none
            (firing if a["exp_alerts"] else quiet).add(a["alertname"])
    names = {r["alert"] for r in _rules()}
    assert names <= firing, names - firing
    assert names <= quiet, names - quiet


def test_every_alert_carries_the_job_and_namespace_of_its_controller() -> None:
    """Alertmanager routes per install on ``job`` and ``namespace``: every alert's expression
    keeps both (VllmScalerDown from its selector's matchers), and every alert a unit test
    expects has them."""
    for r in _rules():
        expr = " ".join(r["expr"].split())
        kept = re.findall(r"(?:by|on) \(([^)]*)\)", expr)
        outer = kept[0] if kept else ""
        assert {"job", "namespace"} <= {x.strip() for x in outer.split(",")} or (
            expr.startswith("absent(") and 'job="' in expr and 'namespace="' in expr
        ), r["alert"]
    for t in _tests():
        for a in t.get("alert_rule_test", []):
            for e in a["exp_alerts"]:
                assert {"job", "namespace"} <= set(e["exp_labels"]), (t["name"], e)


def test_one_prometheus_outage_fires_one_alert() -> None:
    """The outage test expects every alert of the rules file by name: only
    VllmScalerPrometheusQueriesFailing fires, once, whatever the queries, signals, targets
    and replicas (a new alert must say what it does in an outage)."""
    (outage,) = [t for t in _tests() if t["name"].startswith("One Prometheus outage")]
    expected = {a["alertname"]: a["exp_alerts"] for a in outage["alert_rule_test"]}
    assert set(expected) == {r["alert"] for r in _rules()}
    fired = {name: alerts for name, alerts in expected.items() if alerts}
    assert list(fired) == ["VllmScalerPrometheusQueriesFailing"]
    (alert,) = fired["VllmScalerPrometheusQueriesFailing"]
    description = alert["exp_annotations"]["description"]
    for query in ("kv_cache", "running", "throughput", "ttft_buckets", "ttft_rate", "waiting"):
        assert query in description, query
    inputs = " ".join(s["series"] for s in outage["input_series"])
    assert inputs.count("vllm_scaler_signal_valid{") >= 6  # signals of two targets invalid


def test_per_target_alerts_fire_once_for_two_controller_replicas() -> None:
    """Every alert on per-target series has a unit test in which two replicas of the
    controller export the same series and exactly one alert is expected, and no expected
    alert carries a label of one replica."""
    per_target = {r["alert"] for r in _rules() if "target" in r["expr"] or "signal" in r["expr"]}
    per_target -= {"VllmScalerDown", "VllmScalerNotLeading"}
    covered: set[str] = set()
    for t in _tests():
        instances = {
            m for s in t["input_series"] for m in re.findall(r'instance="([^"]+)"', s["series"])
        }
        for a in t.get("alert_rule_test", []):
            for e in a["exp_alerts"]:
                assert not REPLICA_LABELS & set(e["exp_labels"]), (t["name"], e["exp_labels"])
            if len(instances) >= 2 and len(a["exp_alerts"]) == 1:
                covered.add(a["alertname"])
    assert per_target, "no per-target alert found"
    assert per_target <= covered, per_target - covered


def test_promtool_check_rules_as_shipped() -> None:
    files = sorted(str(p) for p in RULES_DIR.iterdir())
    # the inter-token latency signal's recording rules, loaded only where a target enables it
    assert files == [str(RULES_DIR / "vllm-scaler-itl.rules.yaml"), str(RULES)]
    out = subprocess.run(
        [_promtool(), "check", "rules", *files], capture_output=True, text=True, check=False
    )
    assert out.returncode == 0, out.stdout + out.stderr
    # 17 alerts; 11 recording rules: TTFT buckets per pod group, TTFT histograms per namespace
    # and bound, the bounds not on every one per namespace, the throughput rates per pod
    # (tokens, prefix-cache hits, the prefill and decode phase sums the price fit reads),
    # their timestamp per namespace and counter
    assert "SUCCESS: 28 rules found" in out.stdout, out.stdout
    # the same three histogram rules for ITL
    assert "SUCCESS: 3 rules found" in out.stdout, out.stdout


def test_promtool_test_rules_as_shipped() -> None:
    out = subprocess.run(
        [_promtool(), "test", "rules", str(TESTS)],
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "SUCCESS" in out.stdout + out.stderr


INFO_JOIN = (
    "* on (job, namespace, target) group_left (resource)\n"
    "  topk by (job, namespace, target) (1, max by (job, namespace, target, resource) "
    '(vllm_scaler_target_info{resource!=""}))\n'
    "or on (job, namespace, target)\n"
)


def _expected_alerts() -> list[dict[str, Any]]:
    return [e for t in _tests() for a in t.get("alert_rule_test", []) for e in a["exp_alerts"]]


def test_every_alert_of_one_target_carries_its_resource_as_a_label() -> None:
    """An alert of one target (its summary names it) carries the VLLMAutoscaler that defines
    it as the label ``resource``: its expression joined with vllm_scaler_target_info of the
    same controller (job, namespace, target), "or on" the expression alone, so a target of
    the policy file (or a controller without the info series) still alerts, without the
    label; the summary names it from the label. The unit tests expect the label with a
    resource and none without."""
    named = [r for r in _rules() if "$labels.target" in r["annotations"]["summary"]]
    assert len(named) >= 9
    for r in named:
        expr = r["expr"]
        assert INFO_JOIN in expr, r["alert"]
        # the same expression on both sides of the join's "or"
        left, right = expr.split(INFO_JOIN)
        assert left.strip() == right.strip(), r["alert"]
        assert left.strip().startswith("(") and left.strip().endswith(")"), r["alert"]
        summary = r["annotations"]["summary"]
        assert "{{ with $labels.resource }} (VLLMAutoscaler {{ . }}){{ end }}" in summary
    alerts = _expected_alerts()
    with_resource = [e for e in alerts if "resource" in e["exp_labels"]]
    assert {e["exp_labels"]["resource"] for e in with_resource} == {"llm/vllm-llama-8b"}
    for e in with_resource:
        resource = e["exp_labels"]["resource"]
        assert f"(VLLMAutoscaler {resource})" in " ".join(e["exp_annotations"]["summary"].split())
    # a target of the policy file alerts too, with no resource label and none in its text
    no_resource = [
        e for e in alerts if "target" in e["exp_labels"] and "resource" not in e["exp_labels"]
    ]
    assert no_resource
    assert not any("VLLMAutoscaler" in e["exp_annotations"]["summary"] for e in no_resource)


def test_alerts_over_many_targets_name_each_targets_resource() -> None:
    """An alert that counts targets (one per install and outcome or signal) carries no one
    resource: its description names each listed target's VLLMAutoscaler, looked up by its
    template in vllm_scaler_target_info of the same controller."""
    listing = [r for r in _rules() if "$s.Labels.target" in r["annotations"]["description"]]
    assert {r["alert"] for r in listing} == {
        "VllmScalerScaleWritesFailing",
        "VllmScalerSignalAbsent",
        "VllmScalerTargetReadsFailing",
    }
    lookup = (
        "{{ $s.Labels.target }}{{ with printf `vllm_scaler_target_info{job='%s',namespace='%s',"
        "target='%s',resource!=''}` $labels.job $labels.namespace $s.Labels.target | query }}"
        " (VLLMAutoscaler {{ (index . 0).Labels.resource }}){{ end }}"
    )
    for r in listing:
        assert "target" not in re.findall(r"by \(([^)]*)\)", r["expr"])[0], r["alert"]
        assert lookup in " ".join(r["annotations"]["description"].split()), r["alert"]
    descriptions = " ".join(
        " ".join(e["exp_annotations"]["description"].split()) for e in _expected_alerts()
    )
    for named in (
        "llm/Deployment/vllm-70b (VLLMAutoscaler llm/vllm-70b)",
        "llm/Deployment/b (VLLMAutoscaler llm/b)",
        "team/StatefulSet/c (VLLMAutoscaler team/c)",
    ):
        assert named in descriptions, named
