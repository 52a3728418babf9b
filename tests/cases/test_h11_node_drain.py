"""h11: a node drain during a scale-down (the real controller against the Kubernetes
stand-in over HTTP; the ReplicaSet is played by ReplicaSetSim)."""

from __future__ import annotations

import itertools

from scaler.core.reasons import Reason
from tests.cases.hunt import idle
from tests.support.controller_harness import LABELS, NS, T0, HarnessFactory, make_harness
from tests.support.fakeprom import case_file
from tests.support.policies import case_policy
from tests.support.replicas import ReplicaSetSim

__all__ = ["make_harness"]

PODS = ["pod-0", "pod-1", "pod-2", "pod-3"]


async def test_h11_a_drain_mid_scale_down_holds_until_the_replacement_serves(
    make_harness: HarnessFactory,
) -> None:
    """h11: no removal while the evicted pod drains and its replacement loads, no replica
    added for it; then the scale-down resumes one replica per 60 s."""
    case_file("h11-node-drain-during-scale-down.md")
    policy = case_policy(
        scale_down={
            "stabilization_window_seconds": 0,
            "max_replicas_per_period": 1,
            "period_seconds": 60,
        }
    )
    h = await make_harness(replicas=4, policy=policy)
    for i, name in enumerate(PODS):
        h.store.add_pod(NS, name, LABELS, ready=True, created_at=T0 - 400 + 50 * i)
    rs = ReplicaSetSim(h.store, h.clock, grace_seconds=30)
    h.fake.set(**idle(PODS))
    first = await h.cycle()
    assert first.action == "pods_ranked" and h.replicas() == 4
    # the drain: pod-1 evicted, its replacement created
    h.store.mark_pod_terminating(NS, "pod-1", grace_period_seconds=30)
    h.store.add_pod(NS, "pod-4", LABELS, created_at=h.clock.now)
    timeline: list[tuple[float, int, Reason, str]] = []
    for _ in range(32):  # 8 minutes
        h.clock.advance(15)
        t = h.clock.now - T0
        if t == 210:  # the replacement has loaded its model
            h.store.set_pod_ready(NS, "pod-4")
        rs.reap()  # the evicted pod is gone once its 30 s grace period ends
        serving = [p for p in rs.pods() if p != "pod-4" or t >= 210]
        h.fake.set(**idle(serving))
        report = await h.cycle()
        assert report.decision is not None
        timeline.append((t, h.replicas(), report.decision.reason, report.action))
    before = [(r, why) for t, r, why, _ in timeline if t < 210]
    assert {r for r, _ in before} == {4}, timeline  # nothing removed, nothing added
    assert {why for _, why in before} <= {Reason.WAITING_FOR_STARTING, Reason.WAITING_FOR_DRAIN}
    after = [(t, r) for t, r, _, _ in timeline if t >= 210]
    assert after[-1][1] == 1, timeline  # to the minimum, one per 60 s
    steps = [t for (t, r), (_, prev) in zip(after[1:], after, strict=False) if r < prev]
    assert all(b - a >= 60 for a, b in itertools.pairwise(steps)), steps
    assert "pod-1" not in rs.removed  # the drain took it, not the scale-down
