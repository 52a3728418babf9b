"""Cases 20 and 26: which pods a scale-down removes, and which extra pods hold one.

The real controller against the Kubernetes stand-in over HTTP and the fake Prometheus. The
Deployment's workload controller is :class:`~tests.support.replicas.ReplicaSetSim`: it
removes not-ready pods first, then the lowest pod-deletion-cost, then the newest; with
``informer_lag`` it ranks by the annotations of its cache, which catches up only while
time passes (:meth:`ReplicaSetSim.sync` between cycles), never within the instant a write
was sent.
"""

from __future__ import annotations

from typing import Any

from scaler.core.reasons import Reason
from tests.support.controller_harness import KEY, LABELS, NS, T0, Harness, HarnessFactory
from tests.support.fakeprom import case_file, kv, per_pod, ttft_answers
from tests.support.policies import case_policy
from tests.support.replicas import COST, ReplicaSetSim

PODS = ["pod-0", "pod-1", "pod-2", "pod-3"]


def answers(running: dict[str, str]) -> dict[str, Any]:
    """Nothing waiting; ``running`` requests per pod; idle TTFT."""
    return {
        "waiting": per_pod(dict.fromkeys(running, "0")),
        "running": per_pod(running),
        "kv_cache": kv(dict.fromkeys(running, "0.02")),
        **ttft_answers("NaN", "0"),
    }


def costs(h: Harness, pods: list[str]) -> dict[str, str | None]:
    return {
        p: (h.store.get_pod(NS, p)["metadata"].get("annotations") or {}).get(COST) for p in pods
    }


async def _case_20(make_harness: HarnessFactory) -> tuple[Harness, ReplicaSetSim]:
    """4 ready pods, pod-1 runs 3 requests and is the newest (with no usable cost the
    ReplicaSet removes it first); no scale-down window, one replica per 60 s."""
    policy = case_policy(
        scale_down={
            "stabilization_window_seconds": 0,
            "max_replicas_per_period": 1,
            "period_seconds": 60,
        }
    )
    h = await make_harness(replicas=4, policy=policy)
    for name, age in (("pod-0", 400), ("pod-1", 100), ("pod-2", 300), ("pod-3", 200)):
        h.store.add_pod(NS, name, LABELS, ready=True, created_at=T0 - age)
    h.fake.set(**answers({"pod-0": "0", "pod-1": "3", "pod-2": "0", "pod-3": "0"}))
    return h, ReplicaSetSim(h.store, h.clock, informer_lag=True)


async def test_case_20_the_cycle_that_ranks_the_pods_does_not_scale(
    make_harness: HarnessFactory,
) -> None:
    """Case 20: pods are ranked in one cycle, the scale-down written in a later one."""
    case_file("20-deletion-cost-then-scale.md")
    h, rs = await _case_20(make_harness)

    first = await h.cycle()
    assert first.decision is not None
    assert (first.decision.desired_replicas, first.decision.reason) == (3, Reason.STEP_LIMITED)
    assert (first.action, h.replicas(), h.patches()) == ("pods_ranked", 4, [])
    # idlest first, the busy pod last
    assert costs(h, PODS) == {"pod-0": "0", "pod-2": "1", "pod-3": "2", "pod-1": "3"}

    rs.sync()  # 15 s pass: the ReplicaSet's cache sees the annotations
    second = await h.next_cycle(15)
    assert (second.action, h.replicas()) == ("scaled", 3)
    assert rs.removed == ["pod-0"]  # the idlest, not the busy newest pod

    rs.sync()
    third = await h.next_cycle(15)
    assert third.decision is not None and third.decision.reason is Reason.STEP_LIMITED
    assert (third.action, h.replicas()) == ("none", 3)  # one replica per 60 s
    assert "pod-1" in rs.pods()  # no request cut
    assert h.target_value("vllm_scaler_pod_deletion_cost_patches_total") == 4
    assert len(h.patches()) == 1


async def test_case_20_the_scale_down_waits_again_when_the_plan_changed(
    make_harness: HarnessFactory,
) -> None:
    """Case 20: if the ranked pods are no longer the idlest, rank again and wait."""
    case_file("20-deletion-cost-then-scale.md")
    h, rs = await _case_20(make_harness)
    assert (await h.cycle()).action == "pods_ranked"
    # meanwhile pod-0, the one ranked to go, took 5 long requests
    h.fake.set(**answers({"pod-0": "5", "pod-1": "3", "pod-2": "0", "pod-3": "0"}))
    rs.sync()
    again = await h.next_cycle(15)
    assert (again.action, h.replicas()) == ("pods_ranked", 4)
    assert costs(h, PODS) == {"pod-2": "0", "pod-3": "1", "pod-1": "2", "pod-0": "3"}
    rs.sync()
    done = await h.next_cycle(15)
    assert (done.action, h.replicas()) == ("scaled", 3)
    assert rs.removed == ["pod-2"] and {"pod-0", "pod-1"} <= set(rs.pods())


async def test_case_20_counterfactual_ranking_and_scale_in_one_instant_cut_the_busy_pod(
    make_harness: HarnessFactory,
) -> None:
    """The model has teeth: annotations sent in the same instant as the scale-down are not
    in the ReplicaSet's cache yet, and the newest pod, the busy one, is removed."""
    h, rs = await _case_20(make_harness)
    snap = await h.actuator.read(h.policy.targets[0].workload)
    await h.actuator.set_deletion_costs(
        NS, {"pod-0": 0, "pod-2": 1, "pod-3": 2, "pod-1": 3}, current={}
    )
    await h.actuator.scale(h.policy.targets[0].workload, 3, current=snap)
    assert rs.removed == ["pod-1"]


# --- 26: extra pods of a rollout are not draining -------------------------------------------

OLD = [f"vllm-6d4cf56db6-{s}" for s in ("b2mzq", "f7x9k", "q8wvn", "t5rjp")]
CANARY = "vllm-7c9f8d6b5-h4kxd"


async def _rollout(make_harness: HarnessFactory) -> Harness:
    """Deployment llm/vllm, spec 4, paused mid-rollout: 4 pods of the old ReplicaSet and 1
    of the new one, as the stand-in lists them (pod-template-hash labels, names
    ``<deployment>-<hash>-<suffix>``), all ready, none terminating."""
    h = await make_harness(replicas=4)
    for name in [*OLD, CANARY]:
        template_hash = name.split("-")[1]
        h.store.add_pod(
            NS,
            name,
            {**LABELS, "pod-template-hash": template_hash},
            ready=True,
            created_at=T0 - (600 if name == CANARY else 7200),
        )
    return h


async def test_case_26_surplus_pods_of_a_paused_rollout_do_not_block_scale_down(
    make_harness: HarnessFactory,
) -> None:
    """Case 26: pods beyond spec.replicas that nobody removes do not hold a scale-down."""
    case_file("26-rollout-pods-are-not-draining.md")
    h = await _rollout(make_harness)
    # the Deployment removes exactly the difference (keeps its surge), each pod draining 20 s
    rs = ReplicaSetSim(h.store, h.clock, grace_seconds=20, keep_surplus=True)
    timeline: list[tuple[float, int, Reason]] = []
    for i in range(60):  # 30 minutes idle, a cycle every 30 s
        if i:
            h.clock.advance(30)
        rs.reap()
        h.fake.set(**answers(dict.fromkeys(rs.pods(), "0")))
        report = await h.cycle()
        assert report.decision is not None
        timeline.append((h.clock.now - T0, h.replicas(), report.decision.reason))
    assert all(r == 4 and why is Reason.STABILIZED for t, r, why in timeline if t < 300)
    # after the window, one replica per 60 s down to min, like a workload without surplus
    assert timeline[10:14] == [
        (300, 3, Reason.STEP_LIMITED),
        (330, 3, Reason.STEP_LIMITED),
        (360, 2, Reason.STEP_LIMITED),
        (390, 2, Reason.STEP_LIMITED),
    ]
    assert [(t, r) for t, r, _ in timeline[14:16]] == [(420, 1), (450, 1)]
    assert {r for _, r, _ in timeline[14:]} == {1}
    assert rs.removed == OLD[:3] and sorted(rs.pods()) == [OLD[3], CANARY]  # the canary stays
    assert h.decisions("waiting_for_drain") == 0


async def test_case_26_a_pod_chosen_for_removal_holds_until_it_is_taken(
    make_harness: HarnessFactory,
) -> None:
    """Case 26: a pod this controller chose holds further scale-down until it terminates and
    is gone; the rollout's surplus pod never does."""
    case_file("26-rollout-pods-are-not-draining.md")
    h = await _rollout(make_harness)
    live = [*OLD, CANARY]
    h.fake.set(**answers(dict.fromkeys(live, "0")))
    reports = [await h.cycle()] + [await h.next_cycle() for _ in range(10)]  # to T0+300
    assert reports[-1].action == "scaled" and h.replicas() == 3
    # the workload controller has not got to the chosen pod yet
    h.clock.advance(60)
    r = await h.cycle()
    assert r.decision is not None and r.decision.reason is Reason.WAITING_FOR_DRAIN
    assert r.decision.replicas.removing == 1 and r.decision.replicas.terminating == 0
    assert "1 pod(s) removed earlier" in r.decision.message
    h.store.mark_pod_terminating(NS, OLD[0])
    r = await h.next_cycle()
    assert r.decision is not None and r.decision.reason is Reason.WAITING_FOR_DRAIN
    assert (r.decision.replicas.removing, r.decision.replicas.terminating) == (0, 1)
    h.store.delete_pod(NS, OLD[0])
    h.fake.set(**answers(dict.fromkeys(live[1:], "0")))
    # gone: only the step limit stands before the next step (the drain holds only waited:
    # the stabilization window keeps what the signals asked for, not the held 3); the
    # canary, one pod over spec.replicas, never holds it
    reasons = set()
    while h.replicas() == 3:
        r = await h.next_cycle()
        assert r.decision is not None
        reasons.add(r.decision.reason)
    assert reasons == {Reason.STEP_LIMITED}
    assert h.clock.now - T0 == 420
    assert h.count("vllm_scaler_decisions_total", target=KEY, reason="waiting_for_drain") == 2


async def test_case_26_a_pod_the_replicaset_did_not_take_stops_holding(
    make_harness: HarnessFactory,
) -> None:
    """Case 26: if the workload controller removed another pod than the chosen one, the
    removal is done all the same: the chosen pod left alive does not hold scale-down."""
    case_file("26-rollout-pods-are-not-draining.md")
    h = await _rollout(make_harness)
    live = [*OLD, CANARY]
    h.fake.set(**answers(dict.fromkeys(live, "0")))
    for _ in range(10):
        await h.next_cycle()
    r = await h.next_cycle()
    assert r.action == "scaled" and h.replicas() == 3
    h.store.delete_pod(NS, OLD[1])  # not the chosen OLD[0]
    h.fake.set(**answers(dict.fromkeys([OLD[0], *OLD[2:], CANARY], "0")))
    r = await h.next_cycle(60)
    assert r.decision is not None and r.decision.replicas.removing == 0
    assert r.action == "scaled" and h.replicas() == 2
