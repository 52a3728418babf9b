"""The VLLMAutoscaler resource: the same target as the policy file's, errors at spec.<field>."""

from __future__ import annotations

from typing import Any

import pytest

from scaler.config.policy import PolicyError, parse_policy
from scaler.config.resource import API_VERSION, KIND, ResourceRef, resource_of, target_of

REF = {"apiVersion": "apps/v1", "kind": "Deployment", "name": "vllm"}


def _resource(spec: dict[str, Any], name: str = "vllm") -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {"name": name, "namespace": "llm", "uid": "u-1", "generation": 3},
        "spec": spec,
    }


def test_a_resource_is_the_policy_files_target_with_its_namespace() -> None:
    spec = {"scaleTargetRef": REF, "minReplicas": 2, "maxReplicas": 6}
    from_resource = target_of(_resource(spec))
    from_file = parse_policy(
        {"targets": [{"workload": {**REF, "namespace": "llm"}, "minReplicas": 2, "maxReplicas": 6}]}
    ).targets[0]
    assert from_resource == from_file
    assert from_resource.key == "llm/Deployment/vllm"


def test_the_file_may_write_a_target_in_the_resources_form() -> None:
    written = {"namespace": "llm", "scaleTargetRef": REF, "maxReplicas": 6}
    t = parse_policy({"targets": [written]}).targets[0]
    assert (t.workload.namespace, t.workload.name, t.max_replicas) == ("llm", "vllm", 6)


def test_snake_case_of_the_first_releases_is_read_too() -> None:
    t = parse_policy(
        {"targets": [{"workload": {**REF, "namespace": "llm"}, "max_replicas": 7}]}
    ).targets[0]
    assert t.max_replicas == 7


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        pytest.param(
            {"scaleTargetRef": REF, "minReplicas": 4, "maxReplicas": 2},
            "spec.maxReplicas: value 2: expected a number >= minReplicas (4)",
            id="max below min",
        ),
        pytest.param(
            {"scaleTargetRef": {**REF, "apiVersion": "v1"}},
            "spec.scaleTargetRef.apiVersion",
            id="core group",
        ),
        pytest.param(
            {"scaleTargetRef": REF, "maxReplica": 4},
            "spec.maxReplica: unknown field; did you mean maxReplicas?",
            id="unknown field",
        ),
        pytest.param({"minReplicas": 1}, "spec.scaleTargetRef", id="no scaleTargetRef"),
        pytest.param(
            {"scaleTargetRef": REF, "behavior": {"scaleDown": {"stabilizationWindowSeconds": 60}}},
            "spec.behavior: unknown field: the HPA's behavior.scaleUp and behavior.scaleDown are "
            "scaleUp and scaleDown here, without a behavior block (stabilizationWindowSeconds as "
            "the HPA's; its policies as maxReplicasPerPeriod",
            id="an HPA behavior block",
        ),
    ],
)
def test_an_invalid_spec_names_the_field_under_spec(spec: dict[str, Any], expected: str) -> None:
    with pytest.raises(PolicyError) as err:
        target_of(_resource(spec))
    assert "VLLMAutoscaler llm/vllm" in str(err.value)
    assert expected in str(err.value)


def test_a_target_of_the_file_becomes_a_resource_that_reads_back_the_same() -> None:
    t = parse_policy(
        {
            "targets": [
                {
                    "workload": {**REF, "namespace": "llm"},
                    "maxReplicas": 6,
                    "scaleDown": {"stabilizationWindowSeconds": 120},
                }
            ]
        }
    ).targets[0]
    obj = resource_of(t)
    assert obj["metadata"] == {"name": "vllm", "namespace": "llm"}
    assert obj["spec"] == {
        "scaleTargetRef": REF,
        "maxReplicas": 6,
        "scaleDown": {"stabilizationWindowSeconds": 120},
    }
    assert target_of(obj) == t


def test_the_reference_of_an_object() -> None:
    ref = ResourceRef.of(_resource({}))
    assert (ref.key(), ref.uid, ref.generation, ref.kind) == ("llm/vllm", "u-1", 3, KIND)
