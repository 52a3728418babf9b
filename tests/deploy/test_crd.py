"""The VLLMAutoscaler CRD: generated from the policy's models, so the resource's spec and a
target of the policy file are one schema; the copies the chart and kustomize ship are current."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from scaler.config.crd import PRINTER_COLUMNS, crd, spec_schema
from scaler.config.policy import TargetPolicy, load_policy
from scaler.config.resource import KIND, resource_of, target_of

ROOT = Path(__file__).resolve().parents[2]
COPIES = (
    ROOT / "deploy" / "helm" / "vllm-scaler" / "crds" / "vllmautoscalers.yaml",
    ROOT / "deploy" / "base" / "crd.yaml",
)


def _paths(node: dict[str, Any], path: str = "") -> dict[str, str]:
    """Every property path of a structural schema -> its type."""
    out: dict[str, str] = {}
    if "items" in node:
        out.update(_paths(node["items"], path + "[]"))
    for name, sub in (node.get("properties") or {}).items():
        child = f"{path}.{name}".lstrip(".")
        out[child] = str(sub.get("type"))
        out.update(_paths(sub, child))
    return out


def _pydantic_paths(schema: dict[str, Any]) -> dict[str, str]:
    """The same of pydantic's JSON schema ($ref and ``X | None`` followed)."""
    defs = schema.get("$defs", {})

    def resolve(node: dict[str, Any]) -> dict[str, Any]:
        if "$ref" in node:
            return resolve(defs[node["$ref"].rsplit("/", 1)[-1]])
        branches = [b for b in node.get("anyOf", []) if b.get("type") != "null"]
        return resolve(branches[0]) if branches else node

    out: dict[str, str] = {}

    def walk(node: dict[str, Any], path: str) -> None:
        node = resolve(node)
        if node.get("type") == "array":
            walk(node["items"], path + "[]")
        for name, sub in (node.get("properties") or {}).items():
            child = f"{path}.{name}".lstrip(".")
            out[child] = str(resolve(sub).get("type"))
            walk(sub, child)

    walk(schema, "")
    return out


def _under(paths: dict[str, str], root: str) -> dict[str, str]:
    return {k.removeprefix(root): v for k, v in paths.items() if k.startswith(root)}


def test_the_copies_the_chart_and_kustomize_ship_are_the_generated_crd() -> None:
    for path in COPIES:
        assert list(yaml.safe_load_all(path.read_text(encoding="utf-8"))) == [crd()], path


def test_the_spec_and_a_target_of_the_policy_file_are_one_schema() -> None:
    # but an HPA's behavior block, declared only to be refused with a hint (the next test)
    spec = {
        k: v for k, v in _paths(spec_schema()).items() if k not in ("behavior", "shadow.behavior")
    }
    target = _pydantic_paths(TargetPolicy.model_json_schema(by_alias=True))
    # the one difference: the workload is scaleTargetRef in the resource's namespace
    ref = _under(spec, "scaleTargetRef")
    workload = _under(target, "workload")
    assert ref == {k: v for k, v in workload.items() if k != ".namespace"}
    rest = {k: v for k, v in spec.items() if not k.startswith("scaleTargetRef")}
    assert rest == {k: v for k, v in target.items() if not k.startswith("workload")}
    assert "scaleDown.stabilizationWindowSeconds" in rest
    assert "shadow.signals.ttftP95.targetSeconds" in rest


def test_an_hpa_behavior_block_is_refused_naming_where_its_parts_live() -> None:
    """``spec.behavior`` (and ``spec.shadow.behavior``), as an HPA nests scaleUp and
    scaleDown, is declared only so that the server refuses it with where they live here,
    whatever the client: never an unknown field without a hint, never pruned in silence."""
    spec = spec_schema()
    for node, at in ((spec, "spec"), (spec["properties"]["shadow"], "spec.shadow")):
        declared = node["properties"]["behavior"]
        assert declared["type"] == "object"
        assert declared["x-kubernetes-preserve-unknown-fields"] is True
        [rule] = [r for r in node["x-kubernetes-validations"] if "behavior" in r["rule"]]
        assert rule == {
            "rule": "!has(self.behavior)",
            "message": (
                f"the HPA's behavior.scaleUp and behavior.scaleDown are {at}.scaleUp and "
                f"{at}.scaleDown here, without a behavior block (stabilizationWindowSeconds "
                "as the HPA's; its policies as maxReplicasPerPeriod (a Pods policy's value), "
                "maxPercentPerPeriod (a Percent policy's) and periodSeconds; its tolerance as "
                f"{at}.tolerance.scaleUp and .scaleDown)"
            ),
            "fieldPath": ".behavior",
            "reason": "FieldValueForbidden",
        }
        # where the message sends the reader is in the schema
        assert {"scaleUp", "scaleDown", "tolerance"} <= node["properties"].keys()
        assert "stabilizationWindowSeconds" in node["properties"]["scaleDown"]["properties"]


def test_every_field_has_a_description_and_bounds_are_carried() -> None:
    spec = spec_schema()

    def walk(node: dict[str, Any], path: str) -> None:
        for name, sub in (node.get("properties") or {}).items():
            assert sub.get("description"), f"{path}.{name}"
            walk(sub, f"{path}.{name}")

    walk(spec, "spec")
    props = spec["properties"]
    assert props["minReplicas"]["minimum"] == 1
    assert props["minReplicas"]["default"] == 1
    kv = props["signals"]["properties"]["kvCacheUsage"]["properties"]["targetRatio"]
    assert kv["x-kubernetes-validations"][0]["rule"] == "self <= 1.0"


def test_printer_columns_read_like_kubectl_get_hpa() -> None:
    shown = [c["name"] for c in PRINTER_COLUMNS if not c.get("priority")]
    assert shown == ["Target", "Min", "Max", "Current", "Desired", "Reason", "Age"]


def test_the_example_resource_is_the_example_policy_files_target() -> None:
    example = ROOT / "deploy" / "examples" / "vllmautoscaler.yaml"
    (obj,) = [d for d in yaml.safe_load_all(example.read_text(encoding="utf-8")) if d]
    assert obj["kind"] == KIND
    (target,) = load_policy(ROOT / "deploy" / "base" / "policy.yaml").targets
    assert target_of(obj) == target
    assert target_of(resource_of(target)) == target
