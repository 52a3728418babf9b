"""``vllm-scaler as-resources``: a policy file's targets as VLLMAutoscaler resources
that read back as the same targets."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from typer.testing import CliRunner

from scaler.cli import app
from scaler.config.policy import load_policy
from scaler.config.resource import KIND, target_of

POLICY = Path(__file__).resolve().parents[2] / "deploy" / "base" / "policy.yaml"


def test_each_target_becomes_a_resource_that_reads_back_the_same(tmp_path: Path) -> None:
    policy = tmp_path / "policy.yaml"
    text = POLICY.read_text(encoding="utf-8")
    other = {
        "workload": {
            "apiVersion": "apps/v1",
            "kind": "StatefulSet",
            "namespace": "batch",
            "name": "big",
        },
        "maxReplicas": 3,
    }
    doc = yaml.safe_load(text)
    doc["targets"].append(other)
    policy.write_text(yaml.safe_dump(doc), encoding="utf-8")
    result = CliRunner().invoke(app, ["as-resources", str(policy)])
    assert result.exit_code == 0, result.output
    objs = [d for d in yaml.safe_load_all(result.stdout) if d]
    assert [(o["kind"], o["metadata"]["namespace"], o["metadata"]["name"]) for o in objs] == [
        (KIND, "llm", "vllm-llama-8b"),
        (KIND, "batch", "big"),
    ]
    assert objs[1]["spec"] == {
        "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "big"},
        "maxReplicas": 3,
    }
    assert [target_of(o) for o in objs] == load_policy(policy).targets


def test_json_is_a_list_and_a_bad_file_names_its_field(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["as-resources", str(POLICY), "-o", "json"])
    assert result.exit_code == 0, result.output
    listed = json.loads(result.stdout)
    assert (listed["kind"], len(listed["items"])) == ("List", 1)
    bad = tmp_path / "bad.yaml"
    bad.write_text("targets: [{workload: {apiVersion: apps/v1}}]\n", encoding="utf-8")
    result = CliRunner().invoke(app, ["as-resources", str(bad)])
    assert result.exit_code == 2
    assert "targets[0].workload.kind" in result.output
