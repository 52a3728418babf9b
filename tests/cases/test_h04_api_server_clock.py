"""h04: pod ages on the API server's clock (the stand-in's clock runs apart from the
controller's; its objects and its Date header are on its own)."""

from __future__ import annotations

from tests.cases.hunt import busy
from tests.support.controller_harness import (
    LABELS,
    NS,
    HarnessFactory,
    captured_logs,
    decision_of,
    make_harness,
)
from tests.support.fakeprom import case_file
from tests.support.policies import case_policy

__all__ = ["make_harness"]

PODS = ["vllm-6d4cf56db6-b2mzq", "vllm-6d4cf56db6-f7x9k"]
NEW = ["vllm-6d4cf56db6-n1new", "vllm-6d4cf56db6-n2new"]


async def test_h04_a_server_clock_behind_does_not_make_fresh_pods_stuck(
    make_harness: HarnessFactory,
) -> None:
    """h04 (a): the server 900 s behind: pods created 30 s ago are starting, not stuck."""
    case_file("h04-api-server-clock.md")
    h = await make_harness(
        replicas=4,
        policy=case_policy(model_load_timeout_seconds=600),
        server_clock_ahead_seconds=-900,
    )
    server_now = h.store.now()
    for name in PODS:
        h.store.add_pod(NS, name, LABELS, ready=True, created_at=server_now - 3600)
    for name in NEW:
        h.store.add_pod(NS, name, LABELS, created_at=server_now - 30)
    h.fake.set(**busy(dict.fromkeys(PODS, "4")))
    with captured_logs() as logs:
        report = await h.cycle()
        await h.next_cycle()
    d = decision_of(report)
    assert (d.replicas.ready, d.replicas.starting, d.replicas.stuck) == (2, 2, 0)
    assert "ReplicasStuck" not in {e["reason"] for e in h.store.events(NS)}
    skew = [e for e in logs if e["event"] == "api_server_clock_skew"]
    assert len(skew) == 1 and skew[0]["offset_seconds"] == -899.5
    assert "900 s behind this machine's" in skew[0]["message"]


async def test_h04_a_server_clock_ahead_does_not_hide_a_stuck_pod(
    make_harness: HarnessFactory,
) -> None:
    """h04 (b): the server 600 s ahead: a pod Pending for 660 s (server time) is stuck."""
    case_file("h04-api-server-clock.md")
    h = await make_harness(
        replicas=3,
        policy=case_policy(model_load_timeout_seconds=600),
        server_clock_ahead_seconds=600,
    )
    server_now = h.store.now()
    for name in PODS:
        h.store.add_pod(NS, name, LABELS, ready=True, created_at=server_now - 3600)
    h.store.add_pod(NS, NEW[0], LABELS, created_at=server_now - 660)
    h.fake.set(**busy(dict.fromkeys(PODS, "4")))
    report = await h.cycle()
    d = decision_of(report)
    assert (d.replicas.ready, d.replicas.starting, d.replicas.stuck) == (2, 0, 1)
    stuck = [e for e in h.store.events(NS) if e["reason"] == "ReplicasStuck"]
    assert len(stuck) == 1 and f"{NEW[0]} (Pending)" in stuck[0]["message"]
