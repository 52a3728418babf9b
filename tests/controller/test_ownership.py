"""Who owns spec.replicas: other autoscalers (case 16's variant), pause and pin annotations,
and targets of other kinds (LeaderWorkerSet, Argo Rollout, StatefulSet), through the real
controller over HTTP (see ``tests/support/controller_harness.py``)."""

from __future__ import annotations

from typing import Any

import pytest

from scaler.config.policy import parse_policy
from scaler.controller.overrides import PAUSED_ANNOTATION, PINNED_ANNOTATION
from tests.support.controller_harness import (
    KEY,
    NAME,
    NS,
    SCALE_PATH,
    Harness,
    HarnessFactory,
    captured_logs,
)
from tests.support.fakeprom import case_file, kv, per_pod, ttft_answers

PODS = ["vllm-p0", "vllm-p1"]


def busy(h: Harness, pods: list[str] = PODS, waiting: str = "20") -> None:
    """Answers that ask for a scale-up: 20 waiting per pod (target 10), KV 0.9."""
    h.fake.set(
        waiting=per_pod(dict.fromkeys(pods, waiting)),
        running=per_pod(dict.fromkeys(pods, "4")),
        kv_cache=kv(dict.fromkeys(pods, "0.9")),
        **ttft_answers("1.0", "4"),
    )


def conflict_value(h: Harness, owner: str) -> float | None:
    return h.value("vllm_scaler_conflict", target=KEY, owner=owner)


@pytest.mark.parametrize(
    ("make_owner", "owner"),
    [
        pytest.param(
            lambda s: s.add_hpa(NS, "vllm-hpa", target_name=NAME),
            "HorizontalPodAutoscaler/vllm-hpa",
            id="HPA on the Deployment",
        ),
        pytest.param(
            lambda s: s.add_hpa(NS, "bare", target_name=NAME, target_api_version=None),
            "HorizontalPodAutoscaler/bare",
            id="HPA without scaleTargetRef.apiVersion",
        ),
        pytest.param(
            lambda s: s.add_scaled_object(NS, "vllm-keda", target_name=NAME),
            "ScaledObject/vllm-keda",
            id="ScaledObject with KEDA's defaults (Deployment, apps/v1)",
        ),
    ],
)
async def test_case_16_variant_conflict_is_refused(
    make_harness: HarnessFactory, make_owner: Any, owner: str
) -> None:
    """Case 16 variant: an HPA or ScaledObject on the workload makes it recommend-only."""
    case_file("16-another-writer-owns-replicas.md")
    h = await make_harness(replicas=2, ready=PODS)
    make_owner(h.store)
    busy(h)
    with captured_logs() as logs:
        r = await h.cycle()
        r2 = await h.next_cycle()
    assert r.decision is not None and r.decision.reason == "conflict"
    assert r.decision.desired_replicas == 2 and r.decision.recommended_replicas == 4
    assert "would" not in r.decision.message and "recommending 4" in r.decision.message
    assert r2.action == "none"
    assert h.patches() == [] and h.replicas() == 2
    assert conflict_value(h, owner) == 1
    assert h.target_value("vllm_scaler_desired_replicas") == 2
    assert h.target_value("vllm_scaler_recommended_replicas") == 4
    assert h.count("vllm_scaler_refused_writes_total", target=KEY, reason="conflict") == 2
    errors = [e for e in logs if e["event"] == "scale_conflict"]
    assert errors and errors[0]["log_level"] == "error"
    assert owner.split("/")[1] in " ".join(errors[0]["owners"])
    # one Warning event (not repeated every cycle) naming the other owner
    events = h.store.events(NS)
    assert [(e["type"], e["reason"]) for e in events] == [("Warning", "ConflictingAutoscaler")]
    assert owner.split("/")[1] in events[0]["message"]
    assert events[0]["involvedObject"]["name"] == NAME


async def test_conflict_ends_when_the_other_autoscaler_goes(make_harness: HarnessFactory) -> None:
    h = await make_harness(replicas=2, ready=PODS)
    h.store.add_hpa(NS, "vllm-hpa", target_name=NAME)
    busy(h)
    await h.cycle()
    h.store.delete_object("autoscaling", "horizontalpodautoscalers", NS, "vllm-hpa")
    r = await h.next_cycle()
    assert r.action == "scaled" and h.replicas() == 4
    assert conflict_value(h, "HorizontalPodAutoscaler/vllm-hpa") == 0


async def test_autoscalers_of_other_workloads_are_no_conflict(
    make_harness: HarnessFactory,
) -> None:
    h = await make_harness(replicas=2, ready=PODS)
    h.store.add_hpa(NS, "other", target_name="other-deployment")
    h.store.add_hpa(NS, "sts", target_kind="StatefulSet", target_name=NAME)  # another kind
    h.store.add_scaled_object("elsewhere", "so", target_name=NAME)  # another namespace
    busy(h)
    r = await h.cycle()
    assert r.action == "scaled" and h.replicas() == 4


async def test_pause_holds_and_reports(make_harness: HarnessFactory) -> None:
    h = await make_harness(replicas=2, ready=PODS)
    h.store.set_workload_annotations(NS, NAME, {PAUSED_ANNOTATION: "true"})
    busy(h)
    r = await h.cycle()
    await h.next_cycle()
    assert r.decision is not None and r.decision.reason == "paused"
    assert "would scale to 4" in r.decision.message
    assert h.patches() == [] and h.replicas() == 2
    assert h.target_value("vllm_scaler_paused") == 1
    assert h.count("vllm_scaler_refused_writes_total", target=KEY, reason="paused") == 2
    assert [(e["type"], e["reason"]) for e in h.store.events(NS)] == [("Normal", "ScalingPaused")]
    # someone scales by hand while paused; unpausing is not taken for an outside write
    h.store.external_scale(NS, NAME, 3)
    h.add_ready(["vllm-p2"])
    h.store.set_workload_annotations(NS, NAME, {PAUSED_ANNOTATION: None})
    busy(h, pods=[*PODS, "vllm-p2"])
    r = await h.next_cycle()
    assert r.action == "scaled" and h.replicas() == 6
    assert r.decision is not None and not r.decision.outside_write
    assert h.target_value("vllm_scaler_paused") == 0


async def test_pin_writes_the_pinned_replicas(make_harness: HarnessFactory) -> None:
    h = await make_harness(replicas=2, ready=PODS)
    h.store.set_workload_annotations(NS, NAME, {PINNED_ANNOTATION: "3"})
    busy(h)  # the signals ask for 4
    r = await h.cycle()
    assert r.decision is not None and r.decision.reason == "pinned"
    assert r.action == "scaled" and h.replicas() == 3
    assert h.target_value("vllm_scaler_pinned_replicas") == 3
    events = h.store.events(NS)
    assert events[-1]["reason"] == "SuccessfulRescale" and "pinned" in events[-1]["message"]
    h.add_ready(["vllm-p2"])
    busy(h, pods=[*PODS, "vllm-p2"])
    r = await h.next_cycle()
    assert r.action == "none" and len(h.patches()) == 1  # already at the pin
    # an invalid pin pauses (fail safe) with a Warning
    h.store.set_workload_annotations(NS, NAME, {PINNED_ANNOTATION: "lots"})
    r = await h.next_cycle()
    assert r.decision is not None and r.decision.reason == "paused"
    assert h.target_value("vllm_scaler_paused") == 1
    assert h.value("vllm_scaler_pinned_replicas", target=KEY) is None
    assert h.store.events(NS)[-1]["reason"] == "InvalidPinnedReplicas"
    assert h.store.events(NS)[-1]["type"] == "Warning"


def _kind_policy(api_version: str, kind: str, name: str) -> Any:
    return parse_policy(
        {
            "targets": [
                {
                    "workload": {
                        "apiVersion": api_version,
                        "kind": kind,
                        "namespace": NS,
                        "name": name,
                    },
                    "max_replicas": 10,
                    "scale_down": {
                        "stabilization_window_seconds": 0,
                        "max_replicas_per_period": 1,
                        "period_seconds": 60,
                    },
                }
            ]
        }
    )


@pytest.mark.parametrize(
    ("group", "version", "kind", "plural"),
    [
        pytest.param(
            "leaderworkerset.x-k8s.io", "v1", "LeaderWorkerSet", "leaderworkersets",
            id="LeaderWorkerSet: no pod-deletion-cost",
        ),
        pytest.param(
            "argoproj.io", "v1alpha1", "Rollout", "rollouts", id="Rollout: pod-deletion-cost"
        ),
    ],
)  # fmt: skip
async def test_lws_and_rollout_targets(
    make_harness: HarnessFactory, group: str, version: str, kind: str, plural: str
) -> None:
    """Any kind with a scale subresource: its /scale is read and patched, its annotations
    read, and (for a Rollout, whose ReplicaSets honour it) pod-deletion-cost is written
    before a scale-down; an LWS (groups, highest index removed first) gets no pod patches."""
    policy = _kind_policy(f"{group}/{version}", kind, "llm-group")
    h = await make_harness(replicas=1, policy=policy)
    h.store.register_kind(group, version, kind, plural)
    h.store.add_workload(group, plural, NS, "llm-group", replicas=2, labels={"app": "grp"})
    pods = ["llm-group-0", "llm-group-1"]
    for p in pods:
        h.store.add_pod(NS, p, {"app": "grp"}, ready=True, created_at=h.clock.now - 3600)
    busy(h, pods=pods)
    [r] = await h.controller.run_cycle()
    assert r.target == f"{NS}/{kind}/llm-group" and r.action == "scaled"
    assert h.store.get_spec_replicas(NS, "llm-group", group=group, plural=plural) == 4
    scale_path = f"/apis/{group}/{version}/namespaces/{NS}/{plural}/llm-group/scale"
    assert [r.path for r in h.kube.requests if r.method == "PATCH"] == [scale_path]
    assert any(
        r.method == "GET" and r.path == scale_path.removesuffix("/scale") for r in h.kube.requests
    )
    # scale down 4 -> 3 (two pods idle, the signals ask for 1)
    for p in ("llm-group-2", "llm-group-3"):
        h.store.add_pod(NS, p, {"app": "grp"}, ready=True, created_at=h.clock.now - 3600)
    all_pods = [*pods, "llm-group-2", "llm-group-3"]
    h.fake.set(
        waiting=per_pod(dict.fromkeys(all_pods, "0")),
        running=per_pod(dict(zip(all_pods, ["3", "0", "2", "1"], strict=True))),
        kv_cache=kv(dict.fromkeys(all_pods, "0.1")),
        **ttft_answers("NaN", "0"),
    )
    h.clock.advance(60)
    with captured_logs() as logs:
        [r] = await h.controller.run_cycle()
    pod_patches = [r.path for r in h.kube.requests if r.method == "PATCH" and "/pods/" in r.path]
    if kind == "Rollout":
        # the pods are ranked first; the scale-down follows once that ranking is read back
        assert r.action == "pods_ranked"
        assert pod_patches and h.store.get_pod(NS, "llm-group-1")["metadata"]["annotations"] == {
            "controller.kubernetes.io/pod-deletion-cost": "0"
        }
        h.clock.advance(30)
        [r] = await h.controller.run_cycle()
        assert r.action == "scaled"
        assert h.store.get_spec_replicas(NS, "llm-group", group=group, plural=plural) == 3
    else:
        assert r.action == "scaled"
        assert pod_patches == []
        assert any(e["event"] == "pod_deletion_cost_unsupported" for e in logs)


async def test_statefulset_scale_down_falls_back_to_plain_behaviour(
    make_harness: HarnessFactory,
) -> None:
    policy = _kind_policy("apps/v1", "StatefulSet", "big")
    h = await make_harness(replicas=1, policy=policy)
    h.store.add_statefulset(NS, "big", 3, {"app": "big"})
    pods = ["big-0", "big-1", "big-2"]
    for p in pods:
        h.store.add_pod(NS, p, {"app": "big"}, ready=True, created_at=h.clock.now - 3600)
    h.fake.set(
        waiting=per_pod(dict.fromkeys(pods, "0")),
        running=per_pod(dict.fromkeys(pods, "0")),
        kv_cache=kv(dict.fromkeys(pods, "0.1")),
        **ttft_answers("NaN", "0"),
    )
    with captured_logs() as logs:
        [r] = await h.controller.run_cycle()
        h.clock.advance(60)
        await h.controller.run_cycle()
    assert r.action == "scaled"
    assert not [r for r in h.kube.requests if "/pods/" in r.path and r.method == "PATCH"]
    notes = [e for e in logs if e["event"] == "pod_deletion_cost_unsupported"]
    assert len(notes) == 1 and "highest ordinal" in notes[0]["message"]
    assert SCALE_PATH not in {r.path for r in h.kube.requests}  # the harness Deployment
