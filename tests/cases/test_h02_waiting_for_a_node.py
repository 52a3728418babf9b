"""h02: pods waiting for a GPU node are neither loading nor stuck (the real controller against
the Kubernetes stand-in over HTTP and the fake Prometheus)."""

from __future__ import annotations

from scaler.core.observation import ReplicaCounts
from scaler.core.reasons import Reason
from tests.cases.hunt import busy, condition, idle
from tests.support.controller_harness import (
    LABELS,
    NS,
    T0,
    Harness,
    HarnessFactory,
    captured_logs,
    make_harness,
)
from tests.support.fakeprom import case_file, ttft_answers
from tests.support.policies import case_policy
from tests.support.replicas import ReplicaSetSim

__all__ = ["make_harness"]

READY = ["vllm-6d4cf56db6-b2mzq", "vllm-6d4cf56db6-f7x9k", "vllm-6d4cf56db6-q8wvn"]
NEW = ["vllm-6d4cf56db6-n1new", "vllm-6d4cf56db6-n2new"]
NO_GPU = "0/3 nodes are available: 3 Insufficient nvidia.com/gpu."


def add_unscheduled(h: Harness, names: list[str]) -> None:
    """Pods created now that the scheduler cannot place (no kubelet has seen them)."""
    for name in names:
        h.store.add_pod(NS, name, LABELS, created_at=h.clock.now)
        h.store.set_pod_status(
            NS,
            name,
            phase="Pending",
            conditions=[
                condition(
                    "PodScheduled", False, h.clock.now, reason="Unschedulable", message=NO_GPU
                )
            ],
        )


async def test_h02_a_long_wait_for_a_node_is_not_model_load_time(
    make_harness: HarnessFactory,
) -> None:
    """h02 (a): TTFT stays capped while pods wait for a node and then load; pods that got
    their node late are starting, not stuck, so no cascade and no stuck warning."""
    case_file("h02-waiting-for-a-gpu-node.md")
    h = await make_harness(replicas=5, policy=case_policy(model_load_timeout_seconds=600))
    h.add_ready(READY)
    add_unscheduled(h, NEW)
    h.fake.set(**{**busy(dict.fromkeys(READY, "5")), **ttft_answers("6", "4")})
    seen: list[tuple[float, int, ReplicaCounts]] = []
    messages: dict[float, str] = {}
    with captured_logs() as logs:
        for i in range(24):  # 12 minutes
            if i:
                h.clock.advance(30)
            t = h.clock.now - T0
            if t == 480:  # the node is there: scheduled, the kubelet starts the pod
                for name in NEW:
                    h.store.set_pod_status(
                        NS,
                        name,
                        conditions=[
                            condition("PodScheduled", True, T0 + 480),
                            condition("Ready", False, T0 + 485),
                        ],
                    )
            report = await h.cycle()
            assert report.decision is not None
            seen.append((t, h.replicas(), report.decision.replicas))
            messages[t] = report.decision.message
            if t == 300:
                waiting_metric = h.target_value("vllm_scaler_unschedulable_replicas")
    assert {r for _, r, _ in seen} == {5}, [(t, r) for t, r, _ in seen]  # never a 6th replica
    assert {c.stuck for _, _, c in seen} == {0}
    assert {(c.starting, c.unschedulable) for t, _, c in seen if t < 480} == {(0, 2)}
    assert {(c.starting, c.unschedulable) for t, _, c in seen if t >= 480} == {(2, 0)}
    assert "2 of them waiting for a node" in messages[300], messages[300]
    assert "2 of them still starting" in messages[600], messages[600]
    assert waiting_metric == 2
    assert not [e for e in logs if e["event"] == "replicas_stuck"]
    assert "ReplicasStuck" not in {e["reason"] for e in h.store.events(NS)}
    h.clock.advance(30)
    await h.cycle()
    assert h.target_value("vllm_scaler_unschedulable_replicas") == 0
    assert h.target_value("vllm_scaler_pending_replicas") == 2


async def test_h02_a_pod_without_a_node_past_the_timeout_is_stuck_and_named(
    make_harness: HarnessFactory,
) -> None:
    """h02: a pod that has waited for a node longer than the model load timeout is stuck, and
    the Event names it with the scheduler's reason."""
    case_file("h02-waiting-for-a-gpu-node.md")
    h = await make_harness(replicas=5, policy=case_policy(model_load_timeout_seconds=600))
    h.add_ready(READY)
    add_unscheduled(h, NEW)
    h.fake.set(**{**busy(dict.fromkeys(READY, "5")), **ttft_answers("1", "4")})
    await h.cycle()
    report = await h.next_cycle(601)
    assert report.decision is not None
    assert (report.decision.replicas.stuck, report.decision.replicas.unschedulable) == (2, 0)
    stuck = [e for e in h.store.events(NS) if e["reason"] == "ReplicasStuck"]
    assert len(stuck) == 1
    assert f"{NEW[0]} (Pending, Unschedulable: {NO_GPU})" in stuck[0]["message"]


async def test_h02_pods_without_a_node_do_not_hold_a_scale_down(
    make_harness: HarnessFactory,
) -> None:
    """h02 (b): unscheduled pods never hold a scale-down the way loading ones do."""
    case_file("h02-waiting-for-a-gpu-node.md")
    h = await make_harness(replicas=4, policy=case_policy(model_load_timeout_seconds=600))
    h.add_ready(READY[:2])
    add_unscheduled(h, NEW)
    rs = ReplicaSetSim(h.store, h.clock)
    timeline: list[tuple[float, int, Reason]] = []
    for i in range(12):
        if i:
            h.clock.advance(30)
        h.fake.set(**idle(READY[:2]))
        report = await h.cycle()
        assert report.decision is not None
        timeline.append((h.clock.now - T0, h.replicas(), report.decision.reason))
    assert Reason.WAITING_FOR_STARTING not in {why for _, _, why in timeline}, timeline
    assert [(t, r) for t, r, _ in timeline if t in (270, 300)] == [(270, 4), (300, 3)]
    # an unscheduled pod goes first (which of the two, created together, is the ReplicaSet's
    # tie-break: the lower UID)
    assert len(rs.removed) == 1 and rs.removed[0] in NEW, rs.removed
