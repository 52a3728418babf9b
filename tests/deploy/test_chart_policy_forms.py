"""The chart's own check of ``values.policy`` takes what users write now: a target in the
resource's form (``namespace`` and ``scaleTargetRef``, camelCase, as in
deploy/examples/vllmautoscaler.yaml and what ``vllm-scaler as-resources`` writes), beside the
``workload`` form of the first releases. The chart's RBAC follows either form, and a target
the chart refuses is one the controller refuses too, each naming the field."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml

from scaler.config.policy import PolicyError, parse_policy
from scaler.config.resource import target_of
from tests.deploy.render import DEPLOY, Doc, helm_render, one

EXAMPLE = yaml.safe_load((DEPLOY / "examples" / "vllmautoscaler.yaml").read_text())


def _as_target(resource: Doc) -> Doc:
    """The resource's spec as a policy file's target: the spec and its namespace."""
    return {"namespace": resource["metadata"]["namespace"], **copy.deepcopy(resource["spec"])}


def _policy_of(docs: list[Doc]) -> Any:
    return yaml.safe_load(one(docs, "ConfigMap", "vllm-scaler-policy")["data"]["policy.yaml"])


def _roles(docs: list[Doc]) -> dict[str, list[Doc]]:
    """namespace -> rules of the workloads' Roles (the leader election's left out)."""
    return {
        d["metadata"]["namespace"]: d["rules"]
        for d in docs
        if d["kind"] == "Role" and not d["metadata"]["name"].endswith("-leader-election")
    }


def test_the_examples_resource_form_renders_as_the_controller_reads_it() -> None:
    target = _as_target(EXAMPLE)
    values = {"policy": {"rateWindowSeconds": 60, "targets": [target]}}
    docs = helm_render({**values, "rbac": {"scope": "namespaces"}})
    policy = _policy_of(docs)
    assert policy == values["policy"]  # as written, never rewritten
    (parsed,) = parse_policy(policy).targets
    assert parsed == target_of(EXAMPLE)  # the same target as the resource defines
    assert parsed.workload.namespace == "llm"
    assert list(_roles(docs)) == ["llm"]  # the Role where the target lives
    env = {
        e["name"]: e.get("value")
        for e in one(docs, "Deployment")["spec"]["template"]["spec"]["containers"][0]["env"]
    }
    assert env["VLLM_SCALER_RESOURCE_NAMESPACES"] == "llm"


def test_both_forms_side_by_side_and_a_custom_kind_in_the_resource_form() -> None:
    kserve = {
        "namespace": "team-b",
        "scaleTargetRef": {
            "apiVersion": "serving.kserve.io/v1beta1",
            "kind": "InferenceService",
            "name": "qwen",
            "plural": "inferenceservices",
        },
        "minReplicas": 1,
        "maxReplicas": 4,
    }
    old = {
        "workload": {"apiVersion": "apps/v1", "kind": "Deployment", "namespace": "team-a"}
        | {"name": "llama"},
        "min_replicas": 1,
        "max_replicas": 3,
    }
    policy = {"targets": [kserve, old]}
    docs = helm_render({"policy": policy, "rbac": {"scope": "namespaces"}})
    assert len(parse_policy(_policy_of(docs)).targets) == 2
    roles = _roles(docs)
    assert sorted(roles) == ["team-a", "team-b"]
    granted = {
        (group, resource)
        for rule in roles["team-b"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
    }
    assert ("serving.kserve.io", "inferenceservices/scale") in granted
    assert not any(
        g == "serving.kserve.io"
        for g, _ in {
            (group, resource)
            for rule in roles["team-a"]
            for group in rule["apiGroups"]
            for resource in rule["resources"]
        }
    )


REF = {"apiVersion": "apps/v1", "kind": "Deployment", "name": "vllm"}

REFUSED = [
    pytest.param(
        {"scaleTargetRef": REF, "minReplicas": 1},
        "policy.targets[0].namespace: missing; expected the workload's namespace beside "
        "scaleTargetRef",
        id="no namespace",
    ),
    pytest.param(
        {"namespace": "llm", "minReplicas": 1},
        "policy.targets[0].scaleTargetRef: missing; expected a mapping with apiVersion, kind "
        "and name",
        id="no scaleTargetRef",
    ),
    pytest.param(
        {"namespace": "llm", "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment"}},
        "policy.targets[0].scaleTargetRef.name: missing",
        id="no name",
    ),
    pytest.param(
        {"namespace": "llm", "scaleTargetRef": "vllm"},
        'policy.targets[0].scaleTargetRef: value "vllm": expected a mapping with apiVersion, '
        "kind and name",
        id="not a mapping",
    ),
    pytest.param(
        {"namespace": "llm", "scaleTargetRef": {**REF, "namespace": "other"}},
        "policy.targets[0].scaleTargetRef.namespace: expected none here",
        id="namespace in the ref",
    ),
    pytest.param(
        {"namespace": "llm", "scaleTargetRef": REF, "workload": {**REF, "namespace": "llm"}},
        "policy.targets[0].scaleTargetRef: expected the workload either as workload (with its "
        "namespace) or as namespace and scaleTargetRef, not both",
        id="both forms",
    ),
    pytest.param(
        {
            "namespace": "llm",
            "scaleTargetRef": {"apiVersion": "x.io/v1", "kind": "Pool", "name": "p"},
        },
        "policy.targets[0].scaleTargetRef: kind Pool of x.io/v1 names no plural",
        id="custom kind without plural",
    ),
    pytest.param(
        {"minReplicas": 1},
        "policy.targets[0]: no workload; expected namespace and scaleTargetRef",
        id="neither form",
    ),
]


@pytest.mark.parametrize(("target", "message"), REFUSED)
def test_a_target_without_a_workload_is_refused_naming_the_field(target: Doc, message: str) -> None:
    helm = pytest.importorskip("helm_python")
    with pytest.raises(helm.HelmError) as err:
        helm_render({"policy": {"targets": [target]}})
    assert message in str(err.value)
    with pytest.raises(PolicyError):  # the controller refuses it too
        parse_policy({"targets": [target]})
