"""The target deleted and recreated; pods stuck Pending for lack of GPUs."""

from __future__ import annotations

from scaler.core.reasons import Reason
from tests.faults.helpers import busy, names, serving
from tests.support.controller_harness import KEY, LABELS, NAME, NS, HarnessFactory


async def test_deleted_target_is_skipped_then_recreated_target_is_scaled_again(
    make_harness: HarnessFactory,
) -> None:
    pods = names(2)
    h = await make_harness(replicas=2, ready=pods, answers=busy(pods))
    r = await h.cycle()
    assert r.action == "scaled" and h.replicas() == 6

    h.store.delete_workload(NS, NAME)
    for _ in range(3):
        r = await h.next_cycle()
        assert r.action == "read_failed" and r.decision is None
        assert 'deployments.apps "vllm" not found' in r.error
    assert h.count("vllm_scaler_target_read_errors_total", target=KEY, outcome="not_found") == 3
    assert len(h.patches()) == 1  # nothing written to a target that is gone

    # recreated (kubectl apply) with 2 replicas; the same two pods serve again
    h.store.add_deployment(NS, NAME, 2, LABELS)
    r = await h.next_cycle()
    assert r.decision is not None
    assert r.action == "scaled" and h.replicas() == 6  # decided afresh from the signals


async def test_stuck_pending_pods_are_reported_never_an_endless_scale_up(
    make_harness: HarnessFactory,
) -> None:
    """Two of four replicas Pending for lack of GPUs for an hour, with long queues."""
    ready = names(2)
    h = await make_harness(replicas=4, ready=ready, answers=busy(ready, 30))
    h.store.add_pod(NS, "gpu-less-0", LABELS, ready=False, created_at=h.clock.now - 3600)
    h.store.add_pod(NS, "gpu-less-1", LABELS, ready=False, created_at=h.clock.now - 3600)

    r = await h.cycle()  # 60 waiting asks for 6: scale up once to 6
    assert r.decision is not None and r.decision.replicas.stuck == 2
    assert h.replicas() == 6
    assert h.target_value("vllm_scaler_stuck_replicas") == 2
    # the two new pods are Pending too: they never get a GPU
    h.store.add_pod(NS, "gpu-less-2", LABELS, ready=False, created_at=h.clock.now)
    h.store.add_pod(NS, "gpu-less-3", LABELS, ready=False, created_at=h.clock.now)

    for _ in range(120):  # one hour of 30 s cycles: queues stay long
        r = await h.next_cycle()
        assert r.decision is not None
        assert h.replicas() == 6  # no cascade: the demand is compared with spec.replicas
    assert r.decision.replicas.stuck == 4  # the new pods passed the model load timeout
    # TTFT at 1.5x its target is not "within tolerance": it asks for 3 from the 2 ready
    # replicas, which the 6 asked for cover (the queue, at its target, keeps 6 as well)
    assert r.decision.reason is Reason.DEMAND_COVERED
    assert "ceil(1.50 x 2 ready) = 3 replicas, no more than the 6 asked for (4 of them stuck)" in (
        r.decision.message
    )
    assert h.target_value("vllm_scaler_stuck_replicas") == 4
    assert len(h.patches()) == 1

    stuck_events = [e for e in h.store.events(NS) if e["reason"] == "ReplicasStuck"]
    assert 12 <= len(stuck_events) <= 13  # at most one per 5 minutes over the hour
    assert all(e["type"] == "Warning" for e in stuck_events)
    assert "gpu-less-0 (Pending)" in str(stuck_events[0]["message"])
    assert "4 replica(s) not Ready" in str(stuck_events[-1]["message"])


async def test_no_stuck_event_without_stuck_pods(make_harness: HarnessFactory) -> None:
    pods = names(2)
    h = await make_harness(replicas=2, ready=pods, answers=serving(dict.fromkeys(pods, "10")))
    for _ in range(3):
        await h.next_cycle()
    assert [e for e in h.store.events(NS) if e["reason"] == "ReplicasStuck"] == []
    assert h.target_value("vllm_scaler_stuck_replicas") == 0
