"""``vllm-scaler check-policy`` of a file of VLLMAutoscaler resources: validated as the
controller validates each resource (the same model), its errors named by ``spec.`` paths,
not as a policy file whose apiVersion, kind, metadata and spec are unknown fields."""

from __future__ import annotations

from pathlib import Path

import yaml
from typer.testing import CliRunner

from scaler.cli import app

EXAMPLE = Path(__file__).resolve().parents[2] / "deploy" / "examples" / "vllmautoscaler.yaml"


def _resource(name: str, **spec: object) -> dict[str, object]:
    return {
        "apiVersion": "autoscaling.vllm-scaler.io/v1alpha1",
        "kind": "VLLMAutoscaler",
        "metadata": {"name": name, "namespace": "llm"},
        "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": name}}
        | spec,
    }


def test_the_example_resource_checks_as_its_target() -> None:
    result = CliRunner().invoke(app, ["check-policy", str(EXAMPLE)])
    assert result.exit_code == 0, result.output
    first = result.stdout.splitlines()[0]
    assert first == (
        "llm/Deployment/vllm-llama-8b: replicas 1..8, signals queue_depth, kv_cache_usage, "
        "ttft_p95, capacity"
    )


def test_several_resources_and_a_list_each_become_a_target(tmp_path: Path) -> None:
    path = tmp_path / "resources.yaml"
    path.write_text(
        yaml.safe_dump_all([_resource("a", maxReplicas=3), None, _resource("b")]),
        encoding="utf-8",
    )
    result = CliRunner().invoke(app, ["check-policy", str(path), "-o", "json"])
    assert result.exit_code == 0, result.output
    doc = yaml.safe_load(result.stdout)
    assert [(t["target"], t["max_replicas"]) for t in doc] == [
        ("llm/Deployment/a", 3),
        ("llm/Deployment/b", 10),
    ]
    listed = tmp_path / "list.yaml"
    listed.write_text(
        yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": [_resource("c")]}),
        encoding="utf-8",
    )
    result = CliRunner().invoke(app, ["check-policy", str(listed)])
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("llm/Deployment/c: replicas 1..10")


def test_a_bad_resource_names_its_fields_by_spec_paths(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    bad = _resource(
        "bad", minReplicas=10, maxReplicas=4, signals={"kvCacheUsage": {"targetRatio": 70}}
    )
    wrong_version = _resource("old") | {"apiVersion": "autoscaling.vllm-scaler.io/v1"}
    path.write_text(yaml.safe_dump_all([bad, wrong_version]), encoding="utf-8")
    result = CliRunner().invoke(app, ["check-policy", str(path)])
    assert result.exit_code == 2, result.output
    lines = result.stderr.splitlines()
    assert lines[0] == "vllm-scaler: invalid resources"
    assert lines[1] == f"  {path}: VLLMAutoscaler llm/bad"
    problems = lines[2:-1]
    assert problems and all(p.startswith("    spec.") for p in problems), lines
    assert any(
        p.startswith("    spec.signals.kvCacheUsage.targetRatio: value 70") for p in problems
    )
    assert any("spec.maxReplicas" in p or "spec.minReplicas" in p for p in problems)
    assert lines[-1] == (
        f"  {path}: resource 2: apiVersion: value 'autoscaling.vllm-scaler.io/v1': expected "
        "autoscaling.vllm-scaler.io/v1alpha1"
    )
    # none of the policy file's errors about a resource's top-level fields
    assert "targets" not in result.stderr and "unknown" not in result.stderr
