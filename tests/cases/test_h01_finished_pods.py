"""h01: evicted and finished pods are not replicas (the real controller against the
Kubernetes stand-in over HTTP and the fake Prometheus)."""

from __future__ import annotations

from scaler.core.reasons import Reason
from tests.cases.hunt import condition, idle
from tests.support.controller_harness import (
    LABELS,
    NS,
    T0,
    HarnessFactory,
    captured_logs,
    decision_of,
    make_harness,
)
from tests.support.fakeprom import case_file
from tests.support.replicas import ReplicaSetSim

__all__ = ["make_harness"]

READY = [f"vllm-6d4cf56db6-{s}" for s in ("b2mzq", "f7x9k", "q8wvn", "t5rjp")]
EVICTED = "vllm-6d4cf56db6-evctd"
SUCCEEDED = "vllm-6d4cf56db6-succd"


async def test_h01_finished_pods_neither_hold_a_scale_down_nor_read_as_stuck(
    make_harness: HarnessFactory,
) -> None:
    """h01: a recent evicted pod does not hold the scale-down as a starting replica, an old
    finished one is not stuck; both are reported as finished."""
    case_file("h01-finished-pods-are-not-replicas.md")
    h = await make_harness(replicas=4)
    h.add_ready(READY, age=7200)
    for name, age, status in (
        (EVICTED, 180, {"phase": "Failed", "reason": "Evicted"}),
        (SUCCEEDED, 7200, {"phase": "Succeeded"}),
    ):
        h.store.add_pod(NS, name, LABELS, created_at=T0 - age)
        h.store.set_pod_status(
            NS,
            name,
            **status,
            message="The node was low on resource: ephemeral-storage.",
            conditions=[condition("Ready", False, T0 - 60)],
        )
    rs = ReplicaSetSim(h.store, h.clock)
    timeline: list[tuple[float, int, Reason]] = []
    counts: list[tuple[int, int, int]] = []
    with captured_logs() as logs:
        for i in range(16):
            if i:
                h.clock.advance(30)
            h.fake.set(**idle(rs.pods()))
            report = await h.cycle()
            d = decision_of(report)
            timeline.append((h.clock.now - T0, h.replicas(), d.reason))
            counts.append((d.replicas.ready, d.replicas.starting, d.replicas.stuck))
    assert all(r == 4 and why is Reason.STABILIZED for t, r, why in timeline if t < 300)
    assert [(t, r) for t, r, _ in timeline if t in (300, 360, 420)] == [
        (300, 3),
        (360, 2),
        (420, 1),
    ]
    assert Reason.WAITING_FOR_STARTING not in {why for _, _, why in timeline}
    assert {(starting, stuck) for _, starting, stuck in counts} == {(0, 0)}
    assert report.decision is not None and report.decision.replicas.finished == 2
    assert h.target_value("vllm_scaler_finished_pods") == 2
    assert h.target_value("vllm_scaler_pending_replicas") == 0
    assert h.target_value("vllm_scaler_stuck_replicas") == 0
    assert not [e for e in logs if e["event"] == "replicas_stuck"]
    assert "ReplicasStuck" not in {e["reason"] for e in h.store.events(NS)}
    assert len(rs.pods()) == 1 and set(rs.removed) <= set(READY)  # finished pods not counted
