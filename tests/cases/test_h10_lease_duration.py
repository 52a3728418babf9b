"""h10: another holder's term is judged by the lease duration in its record (two electors
over the Kubernetes stand-in through the real client, on the fake clock)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from scaler.actuators.kubernetes import build_api_client
from scaler.actuators.lease import LeaseClient
from scaler.controller.leader import LeaderElectionConfig, LeaderElector
from tests.support.controller_harness import T0, Harness, HarnessFactory, make_harness
from tests.support.fakeprom import case_file
from tests.support.replicas import LEASE_NAME, LEASE_NS

__all__ = ["make_harness"]


@contextlib.asynccontextmanager
async def elector(
    h: Harness, identity: str, *, lease: float, deadline: float, retry: float
) -> AsyncIterator[LeaderElector]:
    api = await build_api_client(kubeconfig=h.kubeconfig, in_cluster=False)
    try:
        yield LeaderElector(
            LeaderElectionConfig(
                namespace=LEASE_NS,
                name=LEASE_NAME,
                identity=identity,
                lease_duration_seconds=lease,
                renew_deadline_seconds=deadline,
                retry_period_seconds=retry,
            ),
            LeaseClient(api, clock=h.clock),
            clock=h.clock,
            monotonic=h.clock,
        )
    finally:
        await api.close()


async def test_h10_a_short_lease_follower_waits_for_the_holders_longer_term(
    make_harness: HarnessFactory,
) -> None:
    """h10: b (15 s) never takes a's Lease (60 s) while a renews every 20 s; after a stops,
    b takes over 60 s after the last change it saw."""
    case_file("h10-lease-duration-of-the-holder.md")
    h = await make_harness(replicas=1)
    async with (
        elector(h, "a", lease=60, deadline=45, retry=20) as a,
        elector(h, "b", lease=15, deadline=10, retry=2) as b,
    ):
        assert await a.try_acquire_or_renew()
        a_alive = True
        last_renewal = 0
        took_over_at = None
        for _ in range(300):
            h.clock.advance(1)
            t = int(h.clock.now - T0)
            if t == 180:
                a_alive = False  # a crashes: no release
            if a_alive and t % 20 == 0:
                assert await a.try_acquire_or_renew()
                last_renewal = t
            if t % 2 == 1 and await b.try_acquire_or_renew() and took_over_at is None:
                took_over_at = t
            assert not (a_alive and a.is_leader() and b.is_leader()), t
            if a_alive:
                assert not b.is_leader(), t
    assert last_renewal == 160
    # b saw the last change at its first try after a's renewal at 160: t=161; 60 s later
    assert took_over_at == 221
    spec = h.store.get_object("coordination.k8s.io", "leases", LEASE_NS, LEASE_NAME)["spec"]
    assert (spec["holderIdentity"], spec["leaseDurationSeconds"]) == ("b", 15)
