"""Case 25: every write is fenced on leadership checked at the moment it is sent.

The real controller with a real Lease elector on the harness's fake clock, four targets in
one namespace, the Kubernetes stand-in over HTTP. The stand-in "takes 8 s" to answer each
scale PATCH: the fake clock moves 8 s while the request is handled. No renewal succeeds
during the cycle (lease 15 s, renew deadline 10 s).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from scaler.actuators.kubernetes import build_api_client
from scaler.actuators.lease import LeaseClient
from scaler.config.policy import parse_policy
from scaler.controller.fence import WriteFence
from scaler.controller.leader import LeaderElectionConfig, LeaderElector
from scaler.controller.lease_state import STATE_ANNOTATION
from scaler.core.reasons import Reason
from tests.support.controller_harness import NS, T0, Harness, HarnessFactory, captured_logs
from tests.support.fakeprom import case_file, kv, per_pod
from tests.support.replicas import LEASE_NAME, LEASE_NS

TARGETS = ["vllm-a", "vllm-b", "vllm-c", "vllm-d"]


def _policy() -> Any:
    """Four Deployments; queue depth and KV cache (TTFT off: one answer per target)."""
    return parse_policy(
        {
            "targets": [
                {
                    "workload": {
                        "apiVersion": "apps/v1",
                        "kind": "Deployment",
                        "namespace": NS,
                        "name": name,
                    },
                    "min_replicas": 1,
                    "max_replicas": 10,
                    "signals": {"ttft_p95": {"enabled": False}},
                }
                for name in TARGETS
            ]
        }
    )


def _pods(name: str) -> list[str]:
    return [f"{name}-5d8c7b6f4-p{i}" for i in range(2)]


async def _setup(make_harness: HarnessFactory) -> tuple[Harness, LeaderElector]:
    h = await make_harness(replicas=1, policy=_policy())
    every: list[str] = []
    for name in TARGETS:
        h.store.add_deployment(NS, name, 2, {"app": name})
        for pod in _pods(name):
            h.store.add_pod(NS, pod, {"app": name}, ready=True, created_at=h.clock.now - 3600)
        every += _pods(name)
    # 30 waiting on each of 2 pods: every target asks for 6 replicas
    h.fake.set(
        waiting=per_pod(dict.fromkeys(every, "30")),
        running=per_pod(dict.fromkeys(every, "1")),
        kv_cache=kv(dict.fromkeys(every, "0.5")),
    )
    api = await build_api_client(kubeconfig=h.kubeconfig, in_cluster=False)
    elector = LeaderElector(
        LeaderElectionConfig(namespace=LEASE_NS, name=LEASE_NAME, identity="a"),
        LeaseClient(api, clock=h.clock),
        clock=h.clock,
        metrics=h.metrics,
    )
    h.controller.leader = elector
    h.store.on_scale_change(lambda _: h.clock.advance(8))  # each PATCH takes 8 s
    return h, elector


async def test_case_25_writes_after_the_renew_deadline_are_not_sent(
    make_harness: HarnessFactory,
) -> None:
    """Case 25: each write checks leadership when sent; past the deadline none is sent."""
    case_file("25-leadership-checked-before-each-write.md")
    h, elector = await _setup(make_harness)
    sent: list[tuple[float, str, int]] = []
    h.store.on_scale_change(lambda c: sent.append((h.clock.now - T0 - 8, c.name, c.new_replicas)))
    assert await elector.try_acquire_or_renew()  # renewed at T0, and never again
    h.kube.requests.clear()
    with captured_logs() as logs:
        reports = await h.controller.run_cycle()
    # a's PATCH at +0 and b's at +8 are sent; c's (+16) and d's (+24) are not
    assert sent == [(0, "vllm-a", 6), (8, "vllm-b", 6)]
    assert [r.action for r in reports] == ["scaled", "scaled", "not_leader", "not_leader"]
    assert all(r.decision is not None and r.decision.reason is Reason.SCALE_UP for r in reports)
    assert [h.store.get_spec_replicas(NS, n) for n in TARGETS] == [6, 6, 2, 2]
    # a's SuccessfulRescale went out at +8; b's (+16) did not; nor did the state annotation
    writes = [(r.method, r.path) for r in h.kube.requests if r.method != "GET"]
    assert writes == [
        ("PATCH", f"/apis/apps/v1/namespaces/{NS}/deployments/vllm-a/scale"),
        ("POST", f"/api/v1/namespaces/{NS}/events"),
        ("PATCH", f"/apis/apps/v1/namespaces/{NS}/deployments/vllm-b/scale"),
    ]
    assert [e["reason"] for e in h.store.events(NS)] == ["SuccessfulRescale"]
    lease = h.store.get_object("coordination.k8s.io", "leases", LEASE_NS, LEASE_NAME)
    assert STATE_ANNOTATION not in (lease["metadata"].get("annotations") or {})
    for name in ("vllm-c", "vllm-d"):
        key = f"{NS}/Deployment/{name}"
        assert h.count("vllm_scaler_refused_writes_total", target=key, reason="not_leader") == 1
        assert h.value("vllm_scaler_desired_replicas", target=key) == 6  # decided, not written
    fenced = [(e["target"], e["write"]) for e in logs if e["event"] == "write_fenced"]
    assert fenced == [(f"{NS}/Deployment/vllm-b", "event")]  # then c and d: not planned
    decided = {e["target"]: e["action"] for e in logs if e["event"] == "decision"}
    assert decided[f"{NS}/Deployment/vllm-d"] == "not_leader"
    assert any(e["event"] == "leader_lost" for e in logs)
    assert h.value("vllm_scaler_leader") == 0

    # The next cycle starts without leadership: read-only from its start.
    h.kube.requests.clear()
    reports = await h.controller.run_cycle()
    assert [r.action for r in reports] == ["none", "none", "not_leader", "not_leader"]
    assert [r for r in h.kube.requests if r.method != "GET"] == []
    # A renewal (the Lease still names this replica) starts a new term: it writes again.
    term = elector.term
    assert await elector.try_acquire_or_renew() and elector.term == term + 1
    reports = await h.controller.run_cycle()
    assert [r.action for r in reports] == ["none", "none", "scaled", "scaled"]


class _Lead:
    """A Leadership whose answers the test sets."""

    def __init__(self) -> None:
        self.leading = True
        self.term = 1

    def is_leader(self) -> bool:
        return self.leading

    def observe(self) -> bool:
        return self.leading

    def annotation(self, key: str) -> str | None:
        return None

    async def write_annotations(self, annotations: Mapping[str, str]) -> bool:
        return self.leading


def test_case_25_a_fence_once_refused_stays_refused_for_the_cycle() -> None:
    """Case 25: after a refused write the cycle stays read-only, even if leadership comes
    back (a renewal, or a new term) before its next write."""
    lead = _Lead()
    fence = WriteFence(lead)
    assert fence.allows()
    lead.leading = False
    assert not fence.allows()
    lead.leading = True
    assert not fence.allows() and fence.lost
    assert WriteFence(lead).allows()  # the next cycle
    lead.term = 2
    later = WriteFence(lead)
    lead.term = 3  # lost and re-acquired between two writes of one cycle
    assert not later.allows()
    lead.leading = False
    assert not WriteFence(lead).allows()  # a cycle that starts as a follower writes nothing
    assert WriteFence(None).allows()  # without leader election this process always writes
