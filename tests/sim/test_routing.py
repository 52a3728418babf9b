"""Routing in front of the replicas: a Service (random), round-robin, a least-request gateway."""

from __future__ import annotations

from collections import Counter

import pytest
from typer.testing import CliRunner

from scaler.cli import app
from scaler.sim.engine import ReplicaEngine, SimRequest
from scaler.sim.fleet import Fleet, FleetConfig
from scaler.sim.kubeapi import KubeStore
from scaler.sim.routing import LeastRequestRouter, RandomRouter, RoundRobinRouter, make_router


def _engines(n: int) -> list[ReplicaEngine]:
    return [ReplicaEngine(name=f"r{i}") for i in range(n)]


def test_random_is_uniform_and_seeded() -> None:
    engines = _engines(4)
    router = RandomRouter(7)
    picks = [router.pick(engines, float(t)) for t in range(8000)]
    counts = Counter(picks)
    assert set(counts) == {0, 1, 2, 3}
    assert all(1800 < c < 2200 for c in counts.values()), counts
    again = RandomRouter(7)
    assert [again.pick(engines, float(t)) for t in range(8000)] == picks


def test_round_robin_takes_turns_and_continues_when_the_set_changes() -> None:
    router = RoundRobinRouter()
    assert [router.pick(_engines(3), 0.0) for _ in range(7)] == [0, 1, 2, 0, 1, 2, 0]
    assert router.pick(_engines(2), 0.0) == 1  # the 8th request: 7 % 2


def test_least_request_sees_queues_only_as_of_its_last_scrape() -> None:
    engines = _engines(2)
    router = LeastRequestRouter(0, scrape_interval_seconds=0.05)
    busy = engines[0]
    for i in range(3):
        busy.submit(SimRequest(i, 0.0, 8000, 100), 0.0)
    # The first scrape (t = 0) sees r0 with 3 requests: r1 gets the next ones...
    assert router.pick(engines, 0.001) == 1
    # ...and keeps getting them until the next scrape, though it now has more in flight.
    for i in range(5):
        engines[1].submit(SimRequest(10 + i, 0.01, 8000, 100), 0.01)
        assert router.pick(engines, 0.02 + i * 0.005) == 1
    # The scrape at 0.05 s sees r1's queue: back to r0.
    assert router.pick(engines, 0.05) == 0


def test_least_request_breaks_ties_at_random() -> None:
    router = LeastRequestRouter(3)
    counts = Counter(router.pick(_engines(3), t * 0.05) for t in range(900))
    assert set(counts) == {0, 1, 2}


@pytest.mark.parametrize(
    "routing",
    [
        pytest.param("random", id="random"),
        pytest.param("round-robin", id="round-robin"),
        pytest.param("least-request", id="least-request"),
    ],
)
def test_fleet_routes_only_to_ready_pods(routing: str) -> None:
    clock = [0.0]
    store = KubeStore(lambda: clock[0])
    fleet = Fleet(store, FleetConfig(initial_replicas=3, routing=routing), now=0.0)
    store.external_scale("llm", "vllm", 5)
    fleet.step(0.0)  # two more pods, loading their model
    for i in range(60):
        t = i * 0.5
        fleet.step(t)
        fleet.submit(SimRequest(i, t, 200, 5), t)
    fleet.step(31.0)
    loading = {p.name for p in fleet.pods.values() if not p.ready}
    assert len(loading) == 2
    per_pod = {}
    for p in fleet.pods.values():
        assert p.metrics is not None
        per_pod[p.name] = p.metrics.request_success["stop"]
    assert sum(per_pod.values()) == 60
    assert all(per_pod[name] == 0 for name in loading)
    assert sum(1 for name, n in per_pod.items() if n > 0) == 3


def test_unknown_routing_is_refused_naming_the_field() -> None:
    with pytest.raises(ValueError, match="routing: expected one of 'random', 'round-robin'"):
        FleetConfig(routing="least-loaded")
    with pytest.raises(ValueError, match="routing"):
        make_router("nope")


def test_sim_refuses_an_unknown_routing() -> None:
    result = CliRunner().invoke(app, ["sim", "--routing", "sticky"])
    assert result.exit_code == 2
    assert "--routing: expected one of random, round-robin, least-request, got 'sticky'" in (
        result.output
    )


def test_a_request_longer_than_the_context_is_answered_without_routing() -> None:
    clock = [0.0]
    store = KubeStore(lambda: clock[0])
    fleet = Fleet(store, FleetConfig(initial_replicas=2, routing="round-robin"), now=0.0)
    too_long = SimRequest(0, 0.0, 40_000, 10)
    fleet.submit(too_long, 0.0)
    assert too_long.rejected and too_long.finished_at == 0.0
    assert fleet.requests == [too_long]
    # It took no turn: the next request goes to the first pod.
    fleet.submit(SimRequest(1, 0.0, 100, 5), 0.0)
    assert [p.engine.in_flight for p in fleet.pods.values()] == [1, 0]
