"""Which targets a cycle scales: the policy file's, the resources', one owner per workload."""

from __future__ import annotations

from typing import Any

from scaler.config.policy import parse_policy
from scaler.config.resource import API_VERSION, KIND
from scaler.controller.status import due, refused_status, unread_status
from scaler.controller.targets import resolve_targets

REF = {"apiVersion": "apps/v1", "kind": "Deployment", "name": "vllm"}


def _resource(name: str, created: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {
            "name": name,
            "namespace": "llm",
            "uid": f"uid-{name}",
            "generation": 1,
            "creationTimestamp": created,
        },
        "spec": {"scaleTargetRef": REF, **spec},
    }


def test_the_second_resource_on_one_workload_is_refused_naming_the_first() -> None:
    late = _resource("late", "2026-01-02T00:00:00Z")
    early = _resource("early", "2026-01-01T00:00:00Z", maxReplicas=4)
    found = resolve_targets([], [late, early])
    assert [(t.key, t.resource.key() if t.resource else "") for t in found.targets] == [
        ("llm/Deployment/vllm", "llm/early")
    ]
    assert found.targets[0].policy.max_replicas == 4
    [refused] = found.refused
    assert (refused.resource.key(), refused.reason) == ("llm/late", "ambiguous_target")
    assert "VLLMAutoscaler llm/early (created first) scales llm/Deployment/vllm" in refused.message


def test_the_policy_files_target_wins_over_a_resource_on_the_same_workload() -> None:
    policy = parse_policy({"targets": [{"workload": {**REF, "namespace": "llm"}}]})
    found = resolve_targets(policy.targets, [_resource("mine", "2026-01-01T00:00:00Z")])
    assert [t.resource for t in found.targets] == [None]
    assert [(r.resource.key(), r.reason) for r in found.refused] == [
        ("llm/mine", "ambiguous_target")
    ]
    assert "the policy file names llm/Deployment/vllm too" in found.refused[0].message


def test_an_invalid_resource_is_refused_with_its_fields_and_the_others_still_scale() -> None:
    bad = _resource("bad", "2026-01-01T00:00:00Z", minReplicas=5, maxReplicas=2)
    other = _resource("other", "2026-01-01T00:00:01Z")
    other["spec"]["scaleTargetRef"] = {**REF, "name": "other"}
    found = resolve_targets([], [bad, other])
    assert [t.key for t in found.targets] == ["llm/Deployment/other"]
    [refused] = found.refused
    assert refused.reason == "invalid_spec"
    assert refused.message == ("spec.maxReplicas: value 2: expected a number >= minReplicas (5)")


def test_a_refused_status_says_why_in_hpa_like_conditions() -> None:
    status = refused_status("ambiguous_target", "taken", generation=2, previous=None, now=0.0)
    assert status["observedGeneration"] == 2
    assert [(c["type"], c["status"], c["reason"]) for c in status["conditions"]] == [
        ("AbleToScale", "False", "AmbiguousTarget"),
        ("ScalingActive", "False", "AmbiguousTarget"),
    ]
    assert {c["lastTransitionTime"] for c in status["conditions"]} == {"1970-01-01T00:00:00Z"}


def test_a_condition_keeps_its_transition_time_while_its_status_holds() -> None:
    first = unread_status(True, "gone", generation=1, previous=None, now=0.0)
    again = unread_status(True, "gone", generation=1, previous=first, now=100.0)
    assert again["conditions"] == first["conditions"]
    assert again["reason"] == "target_not_found"
    assert not due(again, first, last_written_at=0.0, now=100.0)  # nothing changed


def test_a_status_is_due_at_once_on_a_change_and_values_only_once_a_minute() -> None:
    old = {"reason": "stabilized", "currentReplicas": 2, "signals": [{"value": 1.0}]}
    moved = {**old, "signals": [{"value": 2.0}]}
    assert not due(moved, old, last_written_at=100.0, now=130.0)
    assert due(moved, old, last_written_at=100.0, now=160.0)
    assert due({**old, "currentReplicas": 3}, old, last_written_at=100.0, now=101.0)
    # a model load time measured (a replica's start): at once, not with the moving values
    assert due({**old, "modelLoadSeconds": 4.0}, old, last_written_at=100.0, now=101.0)
    assert due(old, None, last_written_at=None, now=0.0)
