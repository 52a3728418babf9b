"""The ReplicaSet controller's removal ranking (scaler.sim.ranking), rule by rule, and the
simulated fleet removing by it (its order against the real controller's is held in
tests/cluster/test_removal_order.py)."""

from __future__ import annotations

import dataclasses

import pytest

from scaler.sim.engine import ReplicaModel
from scaler.sim.fleet import Fleet, FleetConfig
from scaler.sim.kubeapi import KubeStore
from scaler.sim.ranking import PodFacts, deletion_cost, pod_facts, removal_order
from tests.support.clock import FakeClock

NOW = 1_800_000_000.0


def pod(name: str, **kw: object) -> PodFacts:
    base = PodFacts(name=name, uid=f"uid-{name}", node="n1", phase="Running", ready=True,
                    ready_since=NOW - 600, deletion_cost=0, restarts=0,
                    created_at=NOW - 700)  # fmt: skip
    return dataclasses.replace(base, **kw)  # type: ignore[arg-type]


def first(*pods: PodFacts, related: list[PodFacts] | None = None, **kw: object) -> str:
    return removal_order(list(pods), now=NOW, related=related, **kw)[0].name  # type: ignore[arg-type]


RULES = [
    pytest.param(pod("x", node=""), pod("y"), id="1 unassigned before assigned"),
    pytest.param(pod("x", phase="Pending", ready=False), pod("y", ready=False),
                 id="2 Pending before Running"),
    pytest.param(pod("x", phase="Unknown"), pod("y"), id="2 Unknown before Running"),
    pytest.param(pod("x", ready=False, ready_since=None), pod("y"), id="3 not Ready first"),
    pytest.param(pod("x", deletion_cost=-1), pod("y"), id="4 lower cost first"),
    pytest.param(pod("x", ready_since=NOW - 100), pod("y", ready_since=NOW - 1000),
                 id="6 Ready for a shorter time first"),
    pytest.param(pod("x", ready_since=None), pod("y"), id="6 a Ready pod of no known time first"),
    pytest.param(pod("x", restarts=2), pod("y", restarts=1), id="7 more restarts first"),
    pytest.param(pod("x", created_at=NOW - 10), pod("y", created_at=NOW - 100),
                 id="8 newer first"),
]  # fmt: skip


@pytest.mark.parametrize(("goes", "stays"), RULES)
def test_each_rule(goes: PodFacts, stays: PodFacts) -> None:
    assert first(goes, stays) == first(stays, goes) == goes.name


def test_the_rules_come_in_their_order() -> None:
    # a lower cost outweighs a shorter Ready time; not Ready outweighs a lower cost...
    assert first(pod("x", deletion_cost=-1, ready_since=NOW - 5000), pod("y")) == "x"
    assert first(pod("x", ready=False), pod("y", deletion_cost=-5)) == "x"
    assert first(pod("x", node=""), pod("y", phase="Pending", ready=False)) == "x"
    # restarts count only between equal Ready times
    assert first(pod("x", restarts=9, ready_since=NOW - 5000), pod("y")) == "y"


def test_doubled_up_pods_go_first_after_cost() -> None:
    mates = [pod(f"m{i}", node="n1") for i in range(2)]
    alone = pod("alone", node="n2", ready_since=NOW - 10)  # the shortest Ready
    crowded = pod("crowded", node="n1", ready_since=NOW - 5000)
    related = [*mates, alone, crowded]
    assert first(alone, crowded, related=related) == "crowded"
    assert first(alone, dataclasses.replace(crowded, deletion_cost=1), related=related) == "alone"
    # without related pods (a ReplicaSet without a controller) the rule never decides
    assert first(alone, crowded, related=[]) == "alone"
    # terminating pods do not count as node-mates
    gone = [dataclasses.replace(m, active=False) for m in mates]
    assert first(alone, crowded, related=[*gone, alone, crowded]) == "alone"


def test_ready_times_in_one_power_of_two_bucket_tie_and_the_lower_uid_goes() -> None:
    # 100 s and 130 s ago: both in [2^36, 2^37) ns, about [68.7 s, 137.4 s)
    a = pod("a", uid="uid-2", ready_since=NOW - 100)
    b = pod("b", uid="uid-1", ready_since=NOW - 130)
    assert first(a, b) == first(b, a) == "b"
    # 60 s is in the bucket below: the shorter Ready goes whatever its uid
    c = pod("c", uid="uid-9", ready_since=NOW - 60)
    assert first(b, c) == "c"
    # without a clock the times compare exactly: the most recent goes
    assert removal_order([a, b], now=None)[0].name == "a"


def test_the_feature_gate_off_ignores_the_cost() -> None:
    cheap = pod("cheap", deletion_cost=-100, ready_since=NOW - 5000)
    assert first(cheap, pod("y")) == "cheap"
    assert first(cheap, pod("y"), deletion_cost_gate=False) == "y"


@pytest.mark.parametrize(
    ("value", "cost"),
    [("5", 5), ("-7", -7), ("-007", -7), ("0", 0), ("+5", 0), ("007", 0), ("", 0), ("1_0", 0),
     ("5 ", 0), ("2147483648", 0), ("-2147483648", -2147483648), (None, 0)],
)  # fmt: skip
def test_the_cost_is_read_as_the_controller_reads_it(value: str | None, cost: int) -> None:
    annotations = {} if value is None else {"controller.kubernetes.io/pod-deletion-cost": value}
    assert deletion_cost(annotations) == cost


def test_pod_facts_from_an_api_object() -> None:
    facts = pod_facts(
        {
            "metadata": {"name": "p", "uid": "u", "creationTimestamp": "2027-01-15T08:00:00Z",
                         "annotations": {"controller.kubernetes.io/pod-deletion-cost": "3"}},
            "spec": {"nodeName": "n1"},
            "status": {
                "phase": "Running",
                "conditions": [{"type": "Ready", "status": "True",
                                "lastTransitionTime": "2027-01-15T08:01:00Z"}],
                "containerStatuses": [{"name": "a", "restartCount": 1},
                                      {"name": "b", "restartCount": 4}],
            },
        }
    )  # fmt: skip
    created = facts.created_at
    assert created is not None
    assert facts == PodFacts("p", "u", "n1", "Running", True, created + 60, 3, 4, created)
    terminating = pod_facts({"metadata": {"name": "t", "deletionTimestamp": "x"}, "status": {}})
    assert (terminating.active, terminating.ready, terminating.node) == (False, False, "")


def _fleet(pods_per_node: int, replicas: int) -> tuple[Fleet, KubeStore, FakeClock]:
    clock = FakeClock(NOW)
    store = KubeStore(clock)
    config = FleetConfig(
        model=ReplicaModel(model_load_seconds=10), initial_replicas=replicas,
        pods_per_node=pods_per_node, export_metrics=False, termination_grace_seconds=0,
    )  # fmt: skip
    return Fleet(store, config, now=clock.now), store, clock


def test_the_fleet_places_pods_on_the_least_allocated_node() -> None:
    fleet, _, _ = _fleet(pods_per_node=2, replicas=3)
    nodes = sorted(p.node for p in fleet.pods.values())
    assert nodes == ["node-0", "node-0", "node-1"]
    fleet, _, _ = _fleet(pods_per_node=1, replicas=3)
    assert len({p.node for p in fleet.pods.values()}) == 3


def test_the_fleet_removes_a_doubled_up_pod_first() -> None:
    fleet, store, clock = _fleet(pods_per_node=2, replicas=3)
    alone = next(p for p in fleet.pods.values() if p.node == "node-1")
    clock.advance(3600)  # all Ready long since, in one bucket: the node decides
    store.external_scale("llm", "vllm", 2)
    fleet.step(clock.now)
    gone = [p for p in fleet.pods.values() if p.terminating_since is not None] + fleet.gone
    assert [p.node for p in gone] == ["node-0"] and alone.name in fleet.pods
    with pytest.raises(ValueError, match="pods_per_node"):
        FleetConfig(pods_per_node=0)
