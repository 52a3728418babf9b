"""Two controller replicas with leader election against the stand-in, in fake time.

Each replica is what ``serve`` builds in a pod (its own client, actuator, source, metrics and
Lease elector); :class:`~tests.support.replicas.Cluster` plays their loops: acquire/renew
every 2 s, a cycle every 15 s. A crash stops a replica's loop without a release. The
Deployment's pods follow ``spec.replicas`` at once (:class:`ReplicaSetSim`). Load is high
until T0+60 (4 replicas asked for), then idle (1 asked for); the policy's scale-down window is
300 s with one replica per 60 s.
"""

from __future__ import annotations

import json
from typing import Any

from scaler.controller.fence import WriteFence
from scaler.controller.leader import parse_time
from scaler.controller.lease_state import STATE_ANNOTATION
from scaler.sim.kubeapi import ScaleChange
from tests.support.controller_harness import NS, T0, Harness, HarnessFactory, captured_logs
from tests.support.fakeprom import kv, per_pod, ttft_answers
from tests.support.replicas import LEASE_NAME, LEASE_NS, Cluster, ReplicaSetSim, open_instance

LOAD_DROPS_AT = T0 + 60


def serve_load(h: Harness, rs: ReplicaSetSim) -> None:
    """Prometheus answers for the pods that exist now: busy before the drop, idle after."""
    pods = rs.pods()
    if h.clock.now < LOAD_DROPS_AT:
        waiting, running, kv_each, ttft = "10", "4", "0.8", ttft_answers("1.0", "4")
    else:
        waiting, running, kv_each, ttft = "0", "0", "0.1", ttft_answers("NaN", "0")
    h.fake.set(
        waiting=per_pod(dict.fromkeys(pods, waiting)),
        running=per_pod(dict.fromkeys(pods, running)),
        kv_cache=kv(dict.fromkeys(pods, kv_each)),
        **ttft,
    )


def lease(h: Harness) -> dict[str, Any]:
    return h.store.get_object("coordination.k8s.io", "leases", LEASE_NS, LEASE_NAME)


def scale_log(h: Harness) -> list[tuple[float, int, int]]:
    changes: list[tuple[float, int, int]] = []

    def record(c: ScaleChange) -> None:
        changes.append((h.clock.now - T0, c.old_replicas, c.new_replicas))

    h.store.on_scale_change(record)
    return changes


async def _setup(make_harness: HarnessFactory) -> tuple[Harness, ReplicaSetSim]:
    h = await make_harness(replicas=4, ready=[f"vllm-p{i}" for i in range(4)])
    return h, ReplicaSetSim(h.store, h.clock)


async def test_crash_takeover_continues_the_inherited_stabilization_window(
    make_harness: HarnessFactory,
) -> None:
    h, rs = await _setup(make_harness)
    changes = scale_log(h)
    async with open_instance(h, "a") as a, open_instance(h, "b") as b:
        cluster = Cluster(h, [a], before_cycle=lambda: serve_load(h, rs))
        with captured_logs() as logs:
            await cluster.step()
            assert a.leading() and a.leader_metric() == 1
            await cluster.run_until(T0 + 100)
            cluster.start(b)  # the second pod starts after the load dropped
            await cluster.run_until(T0 + 120)
            assert not b.leading() and b.leader_metric() == 0
            assert [r.action for _, r in b.reports] == ["none"] * len(b.reports)
            # the leader persisted its state on the Lease (compact JSON, bounded)
            raw = lease(h)["metadata"]["annotations"][STATE_ANNOTATION]
            doc = json.loads(raw)
            assert doc["v"] == 1 and len(raw) < 1024
            assert [n for _, n in doc["targets"]["llm/Deployment/vllm"]["r"]] == [4, 1]

            cluster.kill(a)  # crash: no release
            last_renew = parse_time(lease(h)["spec"]["renewTime"])
            assert last_renew == T0 + 120
            took_over = None
            while took_over is None:
                await cluster.run_until(h.clock.now + 1)
                if b.leading():
                    took_over = h.clock.now
            # within one lease duration of the last renewal (plus the retry step)
            assert took_over - last_renew <= 15 + 2
            assert lease(h)["spec"]["holderIdentity"] == "b"
            assert lease(h)["spec"]["leaseTransitions"] == 1
            assert b.leader_metric() == 1
            await cluster.run_until(T0 + 500)
    # B resumed A's history: the 4s of T0..T0+45 leave the 300 s window at T0+345, so the
    # first scale-down is B's first cycle after that (T0+355) - not T0+400, which B's own
    # history (seeded with 4 when it started at T0+100) would give; then one per 60 s.
    assert changes == [(355, 4, 3), (415, 3, 2), (475, 2, 1)]
    assert not [r for _, r in a.reports if r.action not in ("none",)]
    events = [(e["reason"], e["type"]) for e in h.store.events(NS)]
    assert events == [("SuccessfulRescale", "Normal")] * 3
    assert any(e["event"] == "leader_acquired" and e["term"] == 1 for e in logs)
    loaded = [e for e in logs if e["event"] == "state_loaded"]
    assert loaded and loaded[0]["targets"] == ["llm/Deployment/vllm"]


async def test_step_limit_survives_a_crash_right_after_a_scale_down(
    make_harness: HarnessFactory,
) -> None:
    h, rs = await _setup(make_harness)
    changes = scale_log(h)
    async with open_instance(h, "a") as a, open_instance(h, "b") as b:
        cluster = Cluster(h, [a, b], before_cycle=lambda: serve_load(h, rs))
        await cluster.step()
        await cluster.run_until(T0 + 350)
        assert changes == [(345, 4, 3)]
        # the follower wanted the same change but did not write it
        b_at_345 = [r for t, r in b.reports if t == T0 + 345]
        assert [r.action for r in b_at_345] == ["not_leader"]
        assert (
            b.metrics.registry.get_sample_value(
                "vllm_scaler_refused_writes_total",
                {"target": "llm/Deployment/vllm", "reason": "not_leader"},
            )
            == 1
        )
        cluster.kill(a)
        await cluster.run_until(T0 + 500)
    # A's write at T0+345 was persisted: B (leader from T0+366) keeps one step per 60 s
    # instead of scaling again at its first cycle (T0+375).
    assert changes == [(345, 4, 3), (405, 3, 2), (465, 2, 1)]
    assert b.leading()


async def test_graceful_release_hands_over_at_once(make_harness: HarnessFactory) -> None:
    h, rs = await _setup(make_harness)
    async with open_instance(h, "a") as a, open_instance(h, "b") as b:
        cluster = Cluster(h, [a, b], before_cycle=lambda: serve_load(h, rs))
        await cluster.step()
        await cluster.run_until(T0 + 30)
        assert a.leading() and not b.leading()
        with captured_logs() as logs:
            assert await a.elector.release()
            cluster.kill(a)
            spec = lease(h)["spec"]
            assert spec["holderIdentity"] == "" and spec["leaseDurationSeconds"] == 1
            assert STATE_ANNOTATION in lease(h)["metadata"]["annotations"]  # kept for B
            assert a.leader_metric() == 0
            await cluster.run_until(h.clock.now + 2)  # B's next retry, not the lease expiry
        assert b.leading() and b.leader_metric() == 1
        assert lease(h)["spec"]["holderIdentity"] == "b"
        assert [e["event"] for e in logs if e["event"].startswith("leader_")] == [
            "leader_released",
            "leader_acquired",
        ]


async def test_no_flap_while_the_leader_renews(make_harness: HarnessFactory) -> None:
    h, rs = await _setup(make_harness)
    async with open_instance(h, "a") as a, open_instance(h, "b") as b:
        cluster = Cluster(h, [a, b], before_cycle=lambda: serve_load(h, rs))
        await cluster.step()
        holders = set()
        for _ in range(300):  # 600 s
            await cluster.run_until(h.clock.now + 2)
            holders.add(lease(h)["spec"]["holderIdentity"])
            assert a.leading() != b.leading()
        assert holders == {"a"}
        assert lease(h)["spec"]["leaseTransitions"] == 0
        # the state is written at most once per cycle, and not again when unchanged
        cycles = len(a.reports)
        written = a.metrics.registry.get_sample_value(
            "vllm_scaler_state_writes_total", {"outcome": "written"}
        )
        assert written is not None and 1 <= written <= cycles
        puts = len([r for r in h.kube.requests if r.method == "PUT"])
        await a.controller.persist(WriteFence(a.elector))
        assert len([r for r in h.kube.requests if r.method == "PUT"]) == puts


async def test_conflicting_lease_write_is_reread_and_retried(
    make_harness: HarnessFactory,
) -> None:
    h, _ = await _setup(make_harness)
    async with open_instance(h, "a") as a:
        assert await a.elector.try_acquire_or_renew()
        h.store.inject_fault("PUT", "/leases/", 409)
        h.clock.advance(2)
        assert await a.elector.try_acquire_or_renew()  # 409, read again, renewed
        puts = [r for r in h.kube.requests if r.method == "PUT" and "/leases/" in r.path]
        assert [r.status for r in puts] == [409, 200]
        assert parse_time(lease(h)["spec"]["renewTime"]) == h.clock.now


async def test_leader_steps_down_when_it_cannot_renew(make_harness: HarnessFactory) -> None:
    """The leader stops at its renew deadline; another replica takes over a lease duration
    after it last saw the record change, and never while the first one still leads."""
    h, _ = await _setup(make_harness)
    async with open_instance(h, "a") as a, open_instance(h, "b") as b:
        assert await a.elector.try_acquire_or_renew()
        assert not await b.elector.try_acquire_or_renew()  # B sees A's record now (T0)
        h.store.inject_fault("PUT", "/leases/", 503, times=100)  # A can no longer renew
        stepped_down = took_over = None
        for _ in range(30):
            h.clock.advance(1)
            if (h.clock.now - T0) % 2 == 0:  # A retries every 2 s
                await a.elector.try_acquire_or_renew()
            if stepped_down is None and not a.leading():
                stepped_down = h.clock.now - T0
            h.store.clear_faults()  # B's own writes go through
            if took_over is None and await b.elector.try_acquire_or_renew():
                took_over = h.clock.now - T0
            h.store.inject_fault("PUT", "/leases/", 503, times=100)
            assert not (a.leading() and b.leading())
        assert (stepped_down, took_over) == (10, 15)
        assert a.leader_metric() == 0 and b.leader_metric() == 1
