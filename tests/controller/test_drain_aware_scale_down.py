"""Drain-aware scale-down with the simulated fleet in virtual time.

The fleet (:class:`~scaler.sim.fleet.Fleet`: vLLM replicas as pods, a ReplicaSet that ranks
pods by readiness, ``controller.kubernetes.io/pod-deletion-cost`` and age, and a grace period
after which in-flight requests are cut) lives in the Kubernetes stand-in; the real controller
reaches it over HTTP, and the fake Prometheus answers what the replicas' engines hold. Two of
four pods serve long generations; the two that the ReplicaSet would remove first without the
annotation are the busy ones, so only the annotation saves their requests.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from scaler.actuators.kubernetes import KubernetesActuator, build_api_client
from scaler.config.policy import parse_policy
from scaler.controller.loop import Controller
from scaler.sim.engine import ReplicaModel, SimRequest
from scaler.sim.fleet import POD_DELETION_COST, Fleet, FleetConfig
from scaler.sim.kubeapi import KubeApiServer, KubeStore, write_kubeconfig
from scaler.sources.prometheus import PrometheusSource
from scaler.telemetry.metrics import ScalerMetrics
from tests.support.controller_harness import T0, FakeClock, PromServer, captured_logs
from tests.support.fakeprom import FakePrometheus, kv, per_pod, ttft_answers

POLICY = {
    "targets": [
        {
            "workload": {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "namespace": "llm",
                "name": "vllm",
            },
            "min_replicas": 1,
            "max_replicas": 8,
            "scale_down": {
                "stabilization_window_seconds": 0,
                "max_replicas_per_period": 2,
                "period_seconds": 60,
            },
        }
    ]
}


@dataclass
class Rig:
    clock: FakeClock
    store: KubeStore
    fleet: Fleet
    fake: FakePrometheus
    kube: KubeApiServer
    controller: Controller

    def observe(self) -> None:
        """Prometheus answers from the replicas' engines now."""
        pods = {n: p for n, p in self.fleet.pods.items() if p.ready}
        self.fake.set(
            waiting=per_pod({n: str(p.engine.num_waiting) for n, p in pods.items()}),
            running=per_pod({n: str(p.engine.num_running) for n, p in pods.items()}),
            kv_cache=kv({n: f"{p.engine.kv_usage_ratio:.4f}" for n, p in pods.items()}),
            **ttft_answers("0.2", "0.1"),
        )

    def run_fleet(self, seconds: float, step: float = 0.5) -> None:
        end = self.clock.now + seconds
        while self.clock.now < end:
            self.clock.advance(step)
            self.fleet.step(self.clock.now)


@contextlib.asynccontextmanager
async def open_rig(tmp_path: Path) -> AsyncIterator[Rig]:
    clock = FakeClock(T0)
    store = KubeStore(clock)
    fleet = Fleet(
        store,
        FleetConfig(
            model=ReplicaModel(model_load_seconds=5.0),
            termination_grace_seconds=10,
            initial_replicas=4,
        ),
        now=T0,
    )
    fake = FakePrometheus()
    prom = PromServer(fake)
    policy = parse_policy(POLICY)
    async with contextlib.AsyncExitStack() as stack:
        kube = await stack.enter_async_context(KubeApiServer(store, token="t"))
        await prom.start()
        stack.push_async_callback(prom.stop)
        api = await build_api_client(
            kubeconfig=write_kubeconfig(tmp_path / "kc", server_url=kube.url, token="t"),
            in_cluster=False,
        )
        stack.push_async_callback(api.close)
        http = await stack.enter_async_context(httpx.AsyncClient())
        controller = Controller(
            policy=policy,
            source=PrometheusSource(
                http, base_url=prom.url, timeout_seconds=5, rate_window_seconds=60
            ),
            actuator=KubernetesActuator(api, clock=clock),
            metrics=ScalerMetrics(),
            clock=clock,
        )
        yield Rig(clock, store, fleet, fake, kube, controller)


async def test_the_idlest_pods_are_removed_and_no_request_is_cut(tmp_path: Path) -> None:
    async with open_rig(tmp_path) as rig:
        fleet = rig.fleet
        # Without the annotation the ReplicaSet would remove these two first: make them busy.
        default_order = [p.name for p in fleet._deletion_order(fleet.live_pods)]
        busy, idle = default_order[:2], default_order[2:]
        for i, name in enumerate(busy):  # generations of ~1 minute, longer than the grace
            req = SimRequest(i, rig.clock.now, prompt_tokens=500, output_tokens=3000)
            fleet.requests.append(req)
            fleet.pods[name].engine.submit(req, rig.clock.now)
        rig.run_fleet(2)
        assert all(fleet.pods[n].engine.in_flight == 1 for n in busy)
        rig.observe()
        with captured_logs() as logs:
            [report] = await rig.controller.run_cycle()
        assert report.decision is not None
        assert (report.decision.current_replicas, report.decision.desired_replicas) == (4, 2)
        # the cycle that ranks the pods does not also lower spec.replicas
        assert report.action == "pods_ranked" and fleet.spec_replicas == 4
        # the idle pods got the lowest cost, the busy ones a higher one
        costs = {
            n: rig.store.get_pod("llm", n)["metadata"].get("annotations", {}).get(POD_DELETION_COST)
            for n in default_order
        }
        assert all(int(costs[b]) > max(int(costs[i]) for i in idle) for b in busy), costs
        chosen = next(e for e in logs if e["event"] == "scale_down_pods_chosen")
        assert sorted(chosen["remove"]) == sorted(idle)
        patches = [r for r in rig.kube.requests if r.method == "PATCH"]
        assert patches and all("/pods/" in r.path for r in patches)
        assert rig.controller.metrics.registry.get_sample_value(
            "vllm_scaler_pod_deletion_cost_patches_total", {"target": "llm/Deployment/vllm"}
        ) == len(patches)
        # the next cycle reads the ranking back and the plan still holds: scale down
        rig.run_fleet(15)
        rig.observe()
        [report] = await rig.controller.run_cycle()
        assert report.action == "scaled" and fleet.spec_replicas == 2
        # the ReplicaSet removes exactly the idle pods; the generations finish
        rig.run_fleet(120)
        assert sorted(p.name for p in fleet.gone) == sorted(idle)
        assert sorted(fleet.pods) == sorted(busy)
        assert [r.cut for r in fleet.requests] == [False, False]
        assert all(r.done for r in fleet.requests)


async def test_without_deletion_cost_the_busy_pods_would_be_cut(tmp_path: Path) -> None:
    """The counterfactual of the test above, to show it has teeth: a plain scale (as a
    StatefulSet-like fallback or another autoscaler would do) cuts the busy pods' requests."""
    async with open_rig(tmp_path) as rig:
        fleet = rig.fleet
        default_order = [p.name for p in fleet._deletion_order(fleet.live_pods)]
        for i, name in enumerate(default_order[:2]):
            req = SimRequest(i, rig.clock.now, prompt_tokens=500, output_tokens=3000)
            fleet.requests.append(req)
            fleet.pods[name].engine.submit(req, rig.clock.now)
        rig.run_fleet(2)
        rig.store.external_scale("llm", "vllm", 2)
        rig.run_fleet(120)
        assert [r.cut for r in fleet.requests] == [True, True]


@pytest.mark.parametrize(
    "loads",
    [pytest.param({"a": 3.0, "b": 0.0, "c": 1.0, "d": 0.0}, id="two idle pods of four")],
)
def test_plan_removal_orders_by_load(loads: dict[str, float]) -> None:
    from scaler.core.drain import plan_removal
    from scaler.core.observation import PodInfo

    pods = [PodInfo(n, ready=True, terminating=False, age_seconds=60) for n in loads]
    pods.append(PodInfo("starting", ready=False, terminating=False, age_seconds=1))
    pods.append(PodInfo("unscraped", ready=True, terminating=False, age_seconds=60))
    plan = plan_removal(pods, loads, 2)
    assert plan.chosen == ("b", "d") and plan.load == (0.0, 0.0)
    # each ready pod's place, idlest first; unscraped pods last (nothing proves them idle)
    assert plan.costs == {"b": 0, "d": 1, "c": 2, "a": 3, "unscraped": 4}
    plan = plan_removal(pods, loads, 1)
    assert plan.chosen == ("b",) and plan.costs["d"] == 1  # kept pods cost more than chosen
