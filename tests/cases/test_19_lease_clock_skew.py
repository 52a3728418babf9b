"""Case 19: leader election across machines whose clocks disagree.

Two electors in one process, each with its own clock (the harness's fake clock plus a fixed
skew: the wall clock it stamps into the Lease, and a monotonic clock that starts anywhere),
over the Kubernetes stand-in through the real client. Time moves in 1 s ticks; each elector
tries every retry period at its own phase. Nothing sleeps.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest

from scaler.actuators.kubernetes import build_api_client
from scaler.actuators.lease import LeaseClient
from scaler.controller.leader import LeaderElectionConfig, LeaderElector
from tests.support.clock import FakeClock
from tests.support.controller_harness import T0, Harness, HarnessFactory
from tests.support.fakeprom import case_file
from tests.support.replicas import LEASE_NAME, LEASE_NS


class SkewedClock:
    """``base`` plus a fixed offset: another node's clock."""

    def __init__(self, base: FakeClock, offset: float) -> None:
        self.base = base
        self.offset = offset

    def __call__(self) -> float:
        return self.base.now + self.offset


@dataclass
class Node:
    """One replica's elector and the tick phase of its retries."""

    elector: LeaderElector
    retry: int
    phase: int
    alive: bool = True

    def due(self, t: int) -> bool:
        return self.alive and t % self.retry == self.phase


@contextlib.asynccontextmanager
async def node(
    h: Harness, identity: str, *, skew: float, retry: int = 2, phase: int = 0
) -> AsyncIterator[Node]:
    """An elector whose wall clock is ``skew`` seconds off and whose monotonic clock
    starts at an unrelated value (lease 15 s, renew deadline 10 s)."""
    api = await build_api_client(kubeconfig=h.kubeconfig, in_cluster=False)
    try:
        wall = SkewedClock(h.clock, skew)
        elector = LeaderElector(
            LeaderElectionConfig(
                namespace=LEASE_NS,
                name=LEASE_NAME,
                identity=identity,
                lease_duration_seconds=15,
                renew_deadline_seconds=10,
                retry_period_seconds=retry,
            ),
            LeaseClient(api, clock=wall),
            clock=wall,
            monotonic=SkewedClock(h.clock, 1000.0 * len(identity) - T0),
        )
        yield Node(elector, retry, phase)
    finally:
        await api.close()


async def run(h: Harness, nodes: list[Node], seconds: int) -> list[tuple[int, str]]:
    """Tick ``seconds`` of fake time; returns (t, identity) of every tick someone leads, and
    asserts at every tick that two electors never lead at once."""
    leaders: list[tuple[int, str]] = []
    for _ in range(seconds):
        h.clock.advance(1)
        t = int(h.clock.now - T0)
        for n in nodes:
            if n.due(t):
                await n.elector.try_acquire_or_renew()
        leading = [n.elector.identity for n in nodes if n.alive and n.elector.is_leader()]
        assert len(leading) <= 1, (t, leading)
        leaders += [(t, who) for who in leading]
    return leaders


def lease_spec(h: Harness) -> dict[str, object]:
    spec = h.store.get_object("coordination.k8s.io", "leases", LEASE_NS, LEASE_NAME)["spec"]
    assert isinstance(spec, dict)
    return spec


@pytest.mark.parametrize(
    "skew",
    [
        pytest.param(20.0, id="b 20 s ahead"),
        pytest.param(-20.0, id="b 20 s behind"),
        pytest.param(3600.0, id="b an hour ahead"),
        pytest.param(86400.0 * 365, id="b a year ahead"),
    ],
)
async def test_case_19_a_skewed_follower_never_takes_over_a_renewed_lease(
    make_harness: HarnessFactory, skew: float
) -> None:
    """Case 19: a follower whose clock is off never acquires a Lease its holder renews."""
    case_file("19-lease-clock-skew.md")
    h = await make_harness(replicas=1)
    async with node(h, "a", skew=0.0) as a, node(h, "b", skew=skew, phase=1) as b:
        assert await a.elector.try_acquire_or_renew()
        leaders = await run(h, [a, b], 60)
    assert {who for _, who in leaders} == {"a"} and len(leaders) == 60
    assert not b.elector.is_leader()
    spec = lease_spec(h)
    assert spec["holderIdentity"] == "a" and spec["leaseTransitions"] == 0


@pytest.mark.parametrize(
    "skew",
    [
        pytest.param(-20.0, id="b 20 s behind"),
        pytest.param(20.0, id="b 20 s ahead"),
        pytest.param(-3600.0, id="b an hour behind"),
        pytest.param(0.0, id="clocks agree"),
    ],
)
async def test_case_19_takeover_comes_a_lease_duration_after_the_last_change_seen(
    make_harness: HarnessFactory, skew: float
) -> None:
    """Case 19: after a crash, b takes over 15 s after it last saw the record change."""
    case_file("19-lease-clock-skew.md")
    h = await make_harness(replicas=1)
    # b retries every second, so the takeover instant shows exactly
    async with node(h, "a", skew=0.0) as a, node(h, "b", skew=skew, retry=1) as b:
        assert await a.elector.try_acquire_or_renew()
        leaders = await run(h, [a, b], 30)  # a renews at 2, 4, ..., 30 (before b looks)
        a.alive = False  # crash at t = 30: no release
        leaders += await run(h, [a, b], 30)
    last_renewal_seen = 30  # b read a's renewal of t = 30 in the same tick
    took_over = min(t for t, who in leaders if who == "b")
    assert took_over == last_renewal_seen + 15
    assert [who for t, who in leaders if t <= 30] == ["a"] * 30
    assert lease_spec(h)["holderIdentity"] == "b" and lease_spec(h)["leaseTransitions"] == 1


async def test_case_19_a_restarted_follower_waits_a_whole_lease_duration(
    make_harness: HarnessFactory,
) -> None:
    """Case 19: a replica that first sees a held Lease waits a full lease duration from
    then, however old the record's renewTime looks on its clock."""
    case_file("19-lease-clock-skew.md")
    h = await make_harness(replicas=1)
    async with node(h, "a", skew=0.0) as a:
        assert await a.elector.try_acquire_or_renew()
    h.clock.advance(600)  # a died long ago; its renewTime is ten minutes old
    async with node(h, "b", skew=0.0, retry=1) as b:
        leaders = await run(h, [b], 20)
    assert min(t for t, _ in leaders) == 600 + 1 + 15  # first seen at +601
