"""Several controller replicas against one stand-in, in fake time (leader election tests).

:func:`open_instance` adds a controller replica to a :class:`Harness`: its own kubeconfig
client, actuator, Prometheus source, metrics and :class:`LeaderElector`, all on the
harness's fake clock and stand-ins - what ``serve`` builds in each pod. :class:`Cluster`
plays the pods' loops: every retry period each live replica tries to acquire or renew
the Lease, and every control interval it runs a cycle. "Killing" a replica stops its loop
without a release, which is what the API server sees of a crashed pod. Nothing sleeps.

:class:`ReplicaSetSim` plays the workload controller for a Deployment: pods follow
``spec.replicas`` at once, removing them in the real ReplicaSet controller's order
(:func:`scaler.sim.ranking.removal_order`: not Ready first, then the lowest
``pod-deletion-cost``, then the shortest Ready...).
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

from scaler.actuators.kubernetes import KubernetesActuator, build_api_client
from scaler.actuators.lease import LeaseClient
from scaler.controller.leader import LeaderElectionConfig, LeaderElector, parse_time
from scaler.controller.loop import Controller
from scaler.controller.report import TargetReport
from scaler.sim.kubeapi import KubeStore, ScaleChange
from scaler.sim.ranking import deletion_cost, pod_facts, removal_order
from scaler.sources.prometheus import PrometheusSource
from scaler.telemetry.metrics import ScalerMetrics
from tests.support.controller_harness import LABELS, NAME, NS, Harness

LEASE_NS = "vllm-scaler"
LEASE_NAME = "vllm-scaler"
COST = "controller.kubernetes.io/pod-deletion-cost"


@dataclass
class Instance:
    """One controller replica (what one pod of the Deployment runs)."""

    name: str
    elector: LeaderElector
    controller: Controller
    metrics: ScalerMetrics
    interval: float
    next_cycle: float
    retry_period: float
    next_try: float
    alive: bool = True
    reports: list[tuple[float, TargetReport]] = field(default_factory=list)

    def leading(self) -> bool:
        return self.elector.is_leader()

    def leader_metric(self) -> float | None:
        return self.metrics.registry.get_sample_value("vllm_scaler_leader")


@contextlib.asynccontextmanager
async def open_instance(
    h: Harness,
    identity: str,
    *,
    interval: float = 15.0,
    lease_duration: float = 15.0,
    renew_deadline: float = 10.0,
    retry_period: float = 2.0,
) -> AsyncIterator[Instance]:
    """A controller replica wired like ``serve`` does, on the harness's stand-ins."""
    async with contextlib.AsyncExitStack() as stack:
        api = await build_api_client(kubeconfig=h.kubeconfig, in_cluster=False)
        stack.push_async_callback(api.close)
        http = await stack.enter_async_context(httpx.AsyncClient())
        metrics = ScalerMetrics()
        elector = LeaderElector(
            LeaderElectionConfig(
                namespace=LEASE_NS,
                name=LEASE_NAME,
                identity=identity,
                lease_duration_seconds=lease_duration,
                renew_deadline_seconds=renew_deadline,
                retry_period_seconds=retry_period,
            ),
            LeaseClient(api, clock=h.clock),
            clock=h.clock,
            metrics=metrics,
        )
        controller = Controller(
            policy=h.policy,
            source=PrometheusSource(
                http,
                base_url=h.prom.url,
                timeout_seconds=5,
                rate_window_seconds=h.policy.rate_window_seconds,
            ),
            actuator=KubernetesActuator(api, clock=h.clock),
            metrics=metrics,
            clock=h.clock,
            leader=elector,
            resume_max_gap_seconds=lease_duration + 2 * interval,
        )
        now = h.clock.now
        yield Instance(identity, elector, controller, metrics, interval, now, retry_period, now)

    # (next_cycle/next_try start at creation; a test sets them when the pod "starts")


class Cluster:
    """Drives replicas' loops in fake time (see the module docstring).

    Args:
        h: the harness (clock, stand-ins).
        instances: the replicas.
        tick: the step of the fake clock, seconds.
        before_cycle: called before every cycle (e.g. to set Prometheus answers from the pods).
    """

    def __init__(
        self,
        h: Harness,
        instances: list[Instance],
        *,
        tick: float = 1.0,
        before_cycle: Callable[[], None] = lambda: None,
    ) -> None:
        self.h = h
        self.instances = instances
        self.retry_period = tick
        self.before_cycle = before_cycle

    def start(self, inst: Instance) -> None:
        """The replica's pod starts now."""
        inst.next_cycle = inst.next_try = self.h.clock.now
        self.instances.append(inst)

    async def step(self) -> None:
        """Every live replica renews/acquires when its retry is due, then cycles when due."""
        for inst in self.instances:
            if inst.alive and self.h.clock.now >= inst.next_try:
                await inst.elector.try_acquire_or_renew()
                inst.next_try += inst.retry_period
        for inst in self.instances:
            if inst.alive and self.h.clock.now >= inst.next_cycle:
                self.before_cycle()
                reports = await inst.controller.run_cycle()
                inst.reports.extend((self.h.clock.now, r) for r in reports)
                inst.next_cycle += inst.interval

    async def run_until(self, t: float) -> None:
        """Step until the fake clock reaches ``t`` (epoch seconds)."""
        while self.h.clock.now + self.retry_period <= t + 1e-9:
            self.h.clock.advance(self.retry_period)
            await self.step()

    @staticmethod
    def kill(inst: Instance) -> None:
        """A crash: the replica stops, without releasing the Lease."""
        inst.alive = False


class ReplicaSetSim:
    """The workload controller of Deployment ``llm/vllm``: pods follow its ``spec.replicas``.

    Removal follows the ReplicaSet controller's ranking (:mod:`scaler.sim.ranking`). Added
    pods are ready at once.

    Args:
        store, clock: the stand-in and the fake clock.
        informer_lag: rank by the annotations as of the last :meth:`sync` (the controller's
            informer cache, which a write of the same instant has not reached), not as stored.
        grace_seconds: a removed pod gets a deletionTimestamp and is deleted by :meth:`reap`
            this long after; 0 deletes it at once.
        keep_surplus: a change of spec.replicas removes or adds exactly the difference, so
            pods beyond spec.replicas (a rollout's surge or canary) stay; otherwise every
            live pod beyond spec.replicas is removed.
    """

    def __init__(
        self,
        store: KubeStore,
        clock: Callable[[], float],
        *,
        informer_lag: bool = False,
        grace_seconds: float = 0.0,
        keep_surplus: bool = False,
    ) -> None:
        self.store = store
        self.clock = clock
        self.informer_lag = informer_lag
        self.grace_seconds = grace_seconds
        self.keep_surplus = keep_surplus
        self.removed: list[str] = []
        self._n = 0
        self._cache: dict[str, int] = {}
        self.sync()
        store.on_scale_change(self._on_change)

    def pods(self) -> list[str]:
        """Names of the live pods (no deletionTimestamp)."""
        return [p["metadata"]["name"] for p in self._live()]

    def _live(self) -> list[dict[str, Any]]:
        # a pod in a terminal phase (evicted, exited) is no longer active: the ReplicaSet
        # neither counts nor removes it (the pod garbage collector does, much later)
        return [
            p
            for p in self.store.list_pods(NS, "app=vllm")
            if "deletionTimestamp" not in p["metadata"]
            and p["status"].get("phase") not in ("Failed", "Succeeded")
        ]

    def sync(self) -> None:
        """The informer cache catches up with the pods as stored now."""
        self._cache = {
            p["metadata"]["name"]: deletion_cost(p["metadata"].get("annotations"))
            for p in self._live()
        }

    def reap(self) -> None:
        """Delete the terminating pods whose grace period has ended."""
        for p in self.store.list_pods(NS, "app=vllm"):
            meta = p["metadata"]
            ends = parse_time(meta.get("deletionTimestamp"))
            if ends is not None and self.clock() >= ends:
                self.store.delete_pod(NS, meta["name"])

    def _on_change(self, change: ScaleChange) -> None:
        if (change.namespace, change.name) != (NS, NAME):
            return
        live = self._live()
        if self.keep_surplus:
            excess = change.old_replicas - change.new_replicas
        else:
            excess = len(live) - change.new_replicas
        facts = [pod_facts(p) for p in live]
        if self.informer_lag:  # the costs as the informer cache holds them
            facts = [
                dataclasses.replace(f, deletion_cost=self._cache.get(f.name, 0)) for f in facts
            ]
        for f in removal_order(facts, now=self.clock())[: max(0, excess)]:
            name = f.name
            if self.grace_seconds > 0:
                self.store.mark_pod_terminating(
                    NS, name, grace_period_seconds=int(self.grace_seconds)
                )
            else:
                self.store.delete_pod(NS, name)
            self.removed.append(name)
        for _ in range(-excess):
            self._n += 1
            self.store.add_pod(
                NS, f"{NAME}-new-{self._n}", LABELS, ready=True, created_at=self.clock() - 3600
            )
