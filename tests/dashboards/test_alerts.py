"""deploy/prometheusrule.yaml: valid for promtool, complete, and unit-tested per alert."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
RULE = ROOT / "deploy" / "prometheusrule.yaml"
TESTS = ROOT / "deploy" / "alerts-tests.yaml"


def _promtool() -> str:
    found = shutil.which("promtool") or shutil.which("/usr/bin/promtool")
    if not found:
        pytest.skip("promtool not found; install Debian's prometheus package")
    return found


def _rules() -> list[dict[str, Any]]:
    doc = yaml.safe_load(RULE.read_text(encoding="utf-8"))
    return [r for g in doc["spec"]["groups"] for r in g["rules"]]


@pytest.fixture()
def rules_dir(tmp_path: Path) -> Path:
    """A folder with the spec's groups as a plain rule file and the promtool tests beside it."""
    doc = yaml.safe_load(RULE.read_text(encoding="utf-8"))
    plain = {"groups": doc["spec"]["groups"]}
    (tmp_path / "prometheusrule.rules.yaml").write_text(yaml.safe_dump(plain), encoding="utf-8")
    shutil.copy(TESTS, tmp_path / TESTS.name)
    return tmp_path


def test_is_a_prometheusrule() -> None:
    doc = yaml.safe_load(RULE.read_text(encoding="utf-8"))
    assert doc["apiVersion"] == "monitoring.coreos.com/v1"
    assert doc["kind"] == "PrometheusRule"
    assert doc["metadata"]["name"]


def test_every_alert_is_complete() -> None:
    rules = _rules()
    assert len(rules) >= 8
    for r in rules:
        assert r.get("alert"), r
        assert r.get("for"), r["alert"]
        assert r["labels"]["severity"] in {"critical", "warning", "info"}, r["alert"]
        for key in ("summary", "description", "runbook"):
            assert r["annotations"].get(key), f"{r['alert']} lacks {key}"


def test_the_required_alerts_exist() -> None:
    exprs = {r["alert"]: r["expr"] for r in _rules()}
    joined = "\n".join(exprs.values())
    for needle in (
        'absent(up{job=~".*vllm-scaler.*"}',
        "vllm_scaler_leader",
        "time() - vllm_scaler_last_successful_query_timestamp_seconds",
        "vllm_scaler_signal_valid == 0",
        "vllm_scaler_max_replicas",
        'vllm_scaler_signal_status{status="absent"} == 1',
        "vllm_scaler_conflict",
        "vllm_scaler_stuck_replicas > 0",
    ):
        assert needle in joined, needle


def test_every_alert_has_a_firing_and_a_quiet_unit_test() -> None:
    tests = yaml.safe_load(TESTS.read_text(encoding="utf-8"))["tests"]
    firing: set[str] = set()
    quiet: set[str] = set()
    for t in tests:
        for a in t["alert_rule_test"]:
            (firing if a["exp_alerts"] else quiet).add(a["alertname"])
    names = {r["alert"] for r in _rules()}
    assert names <= firing, names - firing
    assert names <= quiet, names - quiet


def test_promtool_check_rules(rules_dir: Path) -> None:
    out = subprocess.run(
        [_promtool(), "check", "rules", str(rules_dir / "prometheusrule.rules.yaml")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 0, out.stdout + out.stderr


def test_promtool_test_rules(rules_dir: Path) -> None:
    out = subprocess.run(
        [_promtool(), "test", "rules", str(rules_dir / TESTS.name)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 0, out.stdout + out.stderr
