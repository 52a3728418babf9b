"""The simulated fleet: vLLM replicas as pods of a workload in the Kubernetes stand-in.

:class:`Fleet` plays the parts of the cluster that vllm-scaler does not own: the workload
controller (a ReplicaSet that creates and removes pods to match ``spec.replicas``), the
kubelet (model load before Ready, draining on deletion) and whatever routes requests to the
pods (:mod:`scaler.sim.routing`: a Service by default, which picks a Ready pod at random).

Sleep mode: a pod put to sleep (:meth:`Fleet.sleep`) stays Ready for Kubernetes but serves
nothing: vLLM answers its generation endpoints with 503 while it sleeps, so the client's retry
(or a sleep-aware gateway) takes the request to an awake pod; the requests it held are handed
back and routed again, as their clients retry. It costs GPU time like any pod.

It is synchronous and takes time as an argument (seconds on the store's clock), so the same
code runs under the wall clock (``vllm-scaler sim``, see :mod:`scaler.sim.serving`) and in
virtual time. The objects live in a :class:`PodStore`: the Kubernetes API stand-in
(:class:`~scaler.sim.kubeapi.KubeStore`) when a controller talks to the cluster over HTTP, or
a plain in-memory one when nothing else reads them (the benchmark).
"""

from __future__ import annotations

import itertools
import random
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from scaler.sim.engine import ReplicaEngine, ReplicaModel, SimRequest
from scaler.sim.exposition import KV_METRIC_NEW, SERVED_MODEL_NAME, VllmMetrics
from scaler.sim.kubeapi import ScaleChange
from scaler.sim.ranking import DELETION_COST, PodFacts, deletion_cost, removal_order
from scaler.sim.routing import GATEWAY_SCRAPE_SECONDS, Routing, make_router

#: Annotation the ReplicaSet controller reads to pick which pods to remove first.
POD_DELETION_COST = DELETION_COST


class PodStore(Protocol):
    """The Kubernetes objects a :class:`Fleet` keeps in step (KubeStore's methods)."""

    def add_deployment(
        self, namespace: str, name: str, replicas: int, labels: Mapping[str, str]
    ) -> object: ...

    def on_scale_change(self, callback: Callable[[ScaleChange], None]) -> object: ...

    def get_spec_replicas(self, namespace: str, name: str) -> int: ...

    def add_pod(
        self, namespace: str, name: str, labels: Mapping[str, str], *, created_at: float | None
    ) -> object: ...

    def get_pod(self, namespace: str, name: str) -> dict[str, Any]: ...

    def set_pod_ready(self, namespace: str, name: str, ready: bool = True) -> None: ...

    def mark_pod_terminating(
        self, namespace: str, name: str, *, grace_period_seconds: int = 30
    ) -> None: ...

    def delete_pod(self, namespace: str, name: str) -> None: ...


@dataclass(frozen=True, slots=True)
class FleetConfig:
    """The simulated workload.

    Attributes:
        namespace, name: the Deployment.
        labels: its selector and pod labels.
        model: the replica performance model (its ``model_load_seconds`` is the time from
            pod creation to Ready).
        termination_grace_seconds: ``terminationGracePeriodSeconds``: how long a removed pod
            may drain its in-flight requests before they are cut.
        initial_replicas: pods that exist, ready, at the start.
        kv_metric_name: which KV-cache gauge the replicas export (emulates vLLM versions).
        model_name: the ``model_name`` label.
        seed: seeds pod names and the routing.
        routing: how requests reach the Ready pods (:class:`~scaler.sim.routing.Routing`):
            ``random`` (a Service), ``round-robin`` or ``least-request`` (a gateway).
        gateway_scrape_seconds: with ``least-request``, how often the gateway reads the
            replicas' queues, seconds.
        export_metrics: give every replica its vLLM metrics (:class:`VllmMetrics`); off where
            nothing scrapes them (faster, and the fleet can be deep-copied).
        pods_per_node: how many replicas fit on one node (its GPUs over a replica's): 1
            puts each pod on a node of its own; more places a new pod on the node with the
            most free room, as the scheduler's least-allocated scoring does, on a new node
            when every node is full. Pods that share a node are removed first (the
            ReplicaSet's "doubled up" rule, :mod:`scaler.sim.ranking`).
        decode_runs: the engines run the steps between two batch changes as one
            (:class:`~scaler.sim.engine.ReplicaEngine`'s fast path); False runs every step.
        full_metrics: every family vLLM exports (default); False records only what the
            benchmark's emulated Prometheus reads (:class:`~scaler.sim.engine.ReplicaEngine`'s
            ``full_metrics``): the long replays' fast path.

    Raises:
        ValueError: an unknown ``routing``.
    """

    namespace: str = "llm"
    name: str = "vllm"
    labels: Mapping[str, str] = field(default_factory=lambda: {"app": "vllm"})
    model: ReplicaModel = field(default_factory=ReplicaModel)
    termination_grace_seconds: float = 120.0
    initial_replicas: int = 1
    kv_metric_name: str = KV_METRIC_NEW
    model_name: str = SERVED_MODEL_NAME
    seed: int = 0
    routing: Routing | str = Routing.RANDOM
    gateway_scrape_seconds: float = GATEWAY_SCRAPE_SECONDS
    export_metrics: bool = True
    pods_per_node: int = 1
    decode_runs: bool = True
    full_metrics: bool = True

    def __post_init__(self) -> None:
        make_router(self.routing, scrape_interval_seconds=self.gateway_scrape_seconds)
        if self.pods_per_node < 1:
            raise ValueError(f"pods_per_node must be at least 1, got {self.pods_per_node}")


@dataclass(slots=True, eq=False)
class SimPod:
    """One pod: a replica engine plus its lifecycle times (seconds on the store's clock);
    ``metrics`` is None when the fleet exports none."""

    name: str
    engine: ReplicaEngine
    metrics: VllmMetrics | None
    created_at: float
    node: str = ""
    ready_at: float | None = None
    terminating_since: float | None = None
    deleted_at: float | None = None

    @property
    def ready(self) -> bool:
        """Ready (its model loaded) and not terminating; a sleeping pod is Ready too."""
        return self.ready_at is not None and self.terminating_since is None

    @property
    def sleeping(self) -> bool:
        """Ready but put to sleep (a wake-up in progress included): serves nothing."""
        return self.ready and self.engine.asleep


@dataclass(frozen=True, slots=True)
class FleetSample:
    """The fleet at one instant (:meth:`Fleet.sample`).

    Attributes:
        t: seconds since the run started (the trace start, or the replay's start).
        arrivals: requests that arrived since the previous sample (a second before ``t``).
        spec_replicas: ``spec.replicas``.
        ready, starting, terminating: pods by state (all of them cost GPU time).
        waiting: requests queued in replicas plus those held while no replica was ready.
        running: requests in the replicas' running batches.
        sleeping: of the ready pods, those asleep (they serve nothing).
    """

    t: float
    arrivals: int
    spec_replicas: int
    ready: int
    starting: int
    terminating: int
    waiting: int
    running: int
    sleeping: int = 0

    @property
    def pods(self) -> int:
        """Pods that exist (cost GPU time)."""
        return self.ready + self.starting + self.terminating


@dataclass(frozen=True, slots=True)
class ObservedPod:
    """A pod of the workload as a real API server shows it, for a fleet that follows the
    cluster's own controllers (:meth:`Fleet.observe`): its name, node, and whether its Ready
    condition is True and it has a deletionTimestamp."""

    name: str
    ready: bool
    terminating: bool
    node: str = ""


@dataclass(slots=True)
class StepChanges:
    """Pods whose endpoint appeared or went away during one :meth:`Fleet.step`."""

    ready: list[SimPod] = field(default_factory=list)
    gone: list[SimPod] = field(default_factory=list)


class Fleet:
    """The pods of one simulated vLLM Deployment, kept in step with a :class:`PodStore`.

    Args:
        store: the Kubernetes objects (the API stand-in's, or in memory); the Deployment is
            created here.
        config: the workload.
        now: the start time, seconds on the store's clock.
        follow: the pods are a real cluster's (its ReplicaSet creates and removes them, kwok
            or a kubelet makes them Ready after the model load): the fleet creates none and
            times no model load, but follows what :meth:`observe` reports, a replica per pod,
            Ready when its pod is; a removed pod drains and is deleted through ``store`` when
            its requests are done (or its grace period is over), as the kubelet does.
    """

    def __init__(
        self, store: PodStore, config: FleetConfig, *, now: float, follow: bool = False
    ) -> None:
        self.store = store
        self.follow = follow
        self._observed: list[ObservedPod] | None = None
        self.config = config
        self.pods: dict[str, SimPod] = {}
        self.gone: list[SimPod] = []
        self.backlog: deque[SimRequest] = deque()
        self.requests: list[SimRequest] = []
        self.scale_changes: list[tuple[float, ScaleChange]] = []
        self._rng = random.Random(config.seed)
        self.router = make_router(
            config.routing,
            seed=config.seed,
            scrape_interval_seconds=config.gateway_scrape_seconds,
        )
        self._hash = "".join(self._rng.choice("bcdfghjklmnpqrstvwxz2456789") for _ in range(9))
        self._now = now
        self._nodes: dict[str, int] = {}  # node -> pods bound to it (terminating included)
        self._node_names = itertools.count()
        # The routable pods and their engines, kept until a pod or engine changes state (every
        # change goes through this class: step, sleep, wake); two lists per arrival otherwise.
        self._routable: tuple[list[SimPod], list[ReplicaEngine]] | None = None
        store.add_deployment(
            config.namespace, config.name, config.initial_replicas, dict(config.labels)
        )
        store.on_scale_change(self._on_scale_change)
        for _ in range(0 if follow else config.initial_replicas):
            pod = self._create_pod(now - config.model.model_load_seconds)
            self._set_ready(pod, now)

    # ------------------------------------------------------------------ queries
    @property
    def live_pods(self) -> list[SimPod]:
        """Pods that exist and are not terminating."""
        return [p for p in self.pods.values() if p.terminating_since is None]

    def count(self) -> tuple[int, int, int]:
        """(ready, starting, terminating) pods now."""
        ready = sum(1 for p in self.pods.values() if p.ready)
        terminating = sum(1 for p in self.pods.values() if p.terminating_since is not None)
        return ready, len(self.pods) - ready - terminating, terminating

    @property
    def spec_replicas(self) -> int:
        """``spec.replicas`` of the Deployment in the store."""
        return self.store.get_spec_replicas(self.config.namespace, self.config.name)

    def sample(self, t: float, arrivals: int) -> FleetSample:
        """The fleet now, as a :class:`FleetSample` at ``t`` with ``arrivals`` (both as the
        caller counts them)."""
        ready, starting, terminating = self.count()
        pods = self.pods.values()
        return FleetSample(
            t=t,
            arrivals=arrivals,
            spec_replicas=self.spec_replicas,
            ready=ready,
            starting=starting,
            terminating=terminating,
            waiting=sum(p.engine.num_waiting for p in pods) + len(self.backlog),
            running=sum(p.engine.num_running for p in pods),
            sleeping=sum(1 for p in pods if p.sleeping),
        )

    # ------------------------------------------------------------------ traffic
    def submit(self, req: SimRequest, now: float) -> None:
        """Route a request to a ready pod (:attr:`FleetConfig.routing`), or hold it in the
        backlog while no pod is ready (clients retrying).

        A request longer than the model's context (``max_model_len``) is answered at once with
        an error by whichever replica gets it, as vLLM's API server does, and changes nothing
        in any replica; it is marked rejected here without being routed, so that it takes no
        routing decision (no random draw, no turn) either.
        """
        self.requests.append(req)
        if req.prompt_tokens + max(1, req.output_tokens) > self.config.model.max_model_len:
            req.rejected = True
            req.finished_at = now
            return
        self._route(req, now)

    def _route(self, req: SimRequest, now: float) -> None:
        pod = self._pick(now)
        if pod is None:
            self.backlog.append(req)
        else:
            pod.engine.submit(req, now)

    def _candidates(self) -> list[SimPod]:
        return self._routing_view()[0]

    def _routing_view(self) -> tuple[list[SimPod], list[ReplicaEngine]]:
        view = self._routable
        if view is None:
            pods = [
                p
                for p in self.pods.values()
                if p.ready and p.engine.accepting and not p.engine.asleep
            ]
            view = self._routable = (pods, [p.engine for p in pods])
        return view

    def sleep(self, replicas: int, level: int, now: float) -> list[SimPod]:
        """Put up to ``replicas`` Ready, awake pods to sleep at ``level`` (the first by name);
        the requests they held are routed again. Returns the pods put to sleep.

        Raises:
            ValueError: a level other than 1 or 2.
        """
        chosen = sorted(self._candidates(), key=lambda p: p.name)[: max(0, replicas)]
        self._routable = None
        handed_back: list[SimRequest] = []
        for pod in chosen:
            handed_back += pod.engine.hand_back(now)
            pod.engine.sleep(level, now)
        for req in sorted(handed_back, key=lambda r: r.arrival):
            self._route(req, now)
        return chosen

    def wake(self, replicas: int, now: float) -> list[SimPod]:
        """Start waking up to ``replicas`` sleeping pods (the first by name). Returns them."""
        asleep = sorted(
            (p for p in self.pods.values() if p.engine.asleep and p.engine.wake_at is None),
            key=lambda p: p.name,
        )[: max(0, replicas)]
        self._routable = None
        for pod in asleep:
            pod.engine.wake_up(now)
        return asleep

    def prepare_routing(self, now: float) -> None:
        """Let the router take the readings it takes at fixed times up to ``now`` (a gateway's
        scrapes), without advancing the replicas or playing the lifecycle (which
        :meth:`step` does): what a request arriving at ``now`` needs before :meth:`submit`."""
        self.router.observe(self._routing_view()[1], now)

    def _pick(self, now: float) -> SimPod | None:
        ready, engines = self._routing_view()
        if not ready:
            return None
        return ready[self.router.pick(engines, now)]

    # ---------------------------------------------------------------- lifecycle
    def step(self, now: float) -> StepChanges:
        """Advance every replica to ``now`` and play the ReplicaSet and kubelet parts.

        Returns the pods whose endpoints appeared (Ready) or went away (deleted).
        """
        self._now = now
        self._routable = None
        self.router.observe(self._routing_view()[1], now)
        self._routable = None  # the lifecycle below and the engines' wake-ups change it
        changes = StepChanges()
        if self.follow:
            self._follow(now, changes)
        for pod in list(self.pods.values()):
            pod.engine.advance_to(now)
            if pod.ready_at is None and pod.terminating_since is None:
                if not self.follow and now >= pod.created_at + self.config.model.model_load_seconds:
                    self._set_ready(pod, now)
                    changes.ready.append(pod)
            elif pod.terminating_since is not None:
                grace_over = now >= pod.terminating_since + self.config.termination_grace_seconds
                if pod.engine.in_flight == 0 or grace_over:
                    if pod.engine.in_flight:
                        pod.engine.abort_all(now)  # SIGKILL at the end of the grace period
                    self._delete(pod, now)
                    changes.gone.append(pod)
        if not self.follow:
            self._reconcile(now)
        self._routable = None
        while self.backlog:
            target = self._pick(now)
            if target is None:
                break
            target.engine.submit(self.backlog.popleft(), now)
        return changes

    def observe(self, pods: list[ObservedPod]) -> None:
        """The workload's pods as the API shows them now (a following fleet, see the class);
        the next :meth:`step` acts on them."""
        self._observed = list(pods)

    def _follow(self, now: float, changes: StepChanges) -> None:
        """A replica for each new pod, Ready with its pod, draining once its pod is being
        deleted; one whose pod is gone from the API is killed (its grace ended there)."""
        observed, self._observed = self._observed, None
        if observed is None:
            return
        seen = {o.name for o in observed}
        gone = {p.name for p in self.gone}
        for o in observed:
            pod = self.pods.get(o.name)
            if pod is None:
                if o.name in gone or o.terminating:
                    continue
                pod = self._new_pod(o.name, now, node=o.node)
            if o.terminating and pod.terminating_since is None:
                self._terminate(pod, now)
            elif o.ready and pod.ready_at is None and pod.terminating_since is None:
                self._set_ready(pod, now)
                changes.ready.append(pod)
        for pod in [p for name, p in self.pods.items() if name not in seen]:
            if pod.engine.in_flight:
                pod.engine.abort_all(now)
            self._delete(pod, now, in_store=False)
            changes.gone.append(pod)

    def _on_scale_change(self, change: ScaleChange) -> None:
        if change.namespace == self.config.namespace and change.name == self.config.name:
            self.scale_changes.append((self._now, change))

    def _reconcile(self, now: float) -> None:
        spec = self.spec_replicas
        live = self.live_pods
        if spec > len(live):
            for _ in range(spec - len(live)):
                self._create_pod(now)
        elif spec < len(live):
            for pod in self._deletion_order(live)[: len(live) - spec]:
                self._terminate(pod, now)

    def _deletion_order(self, live: list[SimPod]) -> list[SimPod]:
        """``live`` in the order the ReplicaSet controller removes them
        (:func:`~scaler.sim.ranking.removal_order`, from what the API holds of each pod:
        times in whole seconds, its uid and its ``pod-deletion-cost``)."""
        facts = {p.name: self._facts(p) for p in live}
        order = removal_order(list(facts.values()), now=self._now)
        return [self.pods[f.name] for f in order]

    def _facts(self, p: SimPod) -> PodFacts:
        meta = self.store.get_pod(self.config.namespace, p.name)["metadata"]
        return PodFacts(
            name=p.name,
            uid=str(meta.get("uid") or p.name),
            node=p.node,
            phase="Running" if p.ready_at is not None else "Pending",
            ready=p.ready,
            ready_since=float(int(p.ready_at)) if p.ready_at is not None else None,
            deletion_cost=deletion_cost(meta.get("annotations")),
            restarts=0,
            created_at=float(int(p.created_at)),
        )

    def _place(self) -> str:
        """The node of a new pod (:attr:`FleetConfig.pods_per_node`)."""
        open_nodes = [(n, c) for n, c in self._nodes.items() if c < self.config.pods_per_node]
        if open_nodes:  # the least allocated; the oldest node among equals
            node = min(open_nodes, key=lambda nc: nc[1])[0]
        else:
            node = f"node-{next(self._node_names)}"
        self._nodes[node] = self._nodes.get(node, 0) + 1
        return node

    def _create_pod(self, now: float) -> SimPod:
        while True:
            suffix = "".join(self._rng.choice("bcdfghjklmnpqrstvwxz2456789") for _ in range(5))
            name = f"{self.config.name}-{self._hash}-{suffix}"
            if name not in self.pods:
                break
        pod = self._new_pod(name, now, node=self._place())
        self.store.add_pod(self.config.namespace, name, dict(self.config.labels), created_at=now)
        return pod

    def _new_pod(self, name: str, now: float, *, node: str) -> SimPod:
        """A replica (its engine and metrics) for the pod ``name``."""
        metrics = (
            VllmMetrics(
                model_name=self.config.model_name,
                kv_metric_name=self.config.kv_metric_name,
                max_model_len=self.config.model.max_model_len,
                block_size=self.config.model.block_size,
                num_gpu_blocks=self.config.model.kv_cache_blocks,
            )
            if self.config.export_metrics
            else None
        )
        engine = ReplicaEngine(
            self.config.model,
            name=name,
            metrics=metrics,
            decode_runs=self.config.decode_runs,
            full_metrics=self.config.full_metrics,
        )
        engine.advance_to(now)
        pod = SimPod(name, engine, metrics, created_at=now, node=node)
        self.pods[name] = pod
        return pod

    def _set_ready(self, pod: SimPod, now: float) -> None:
        pod.ready_at = now
        self.store.set_pod_ready(self.config.namespace, pod.name, True)

    def _terminate(self, pod: SimPod, now: float) -> None:
        pod.terminating_since = now
        pod.engine.drain()
        if pod.ready_at is None:
            # A pod still loading its model has nothing in flight: it goes at once.
            pod.engine.abort_all(now)
        self.store.mark_pod_terminating(
            self.config.namespace,
            pod.name,
            grace_period_seconds=int(self.config.termination_grace_seconds),
        )

    def _delete(self, pod: SimPod, now: float, *, in_store: bool = True) -> None:
        pod.deleted_at = now
        del self.pods[pod.name]
        if pod.node in self._nodes:
            self._nodes[pod.node] -= 1
            if self._nodes[pod.node] == 0 and self.config.pods_per_node == 1:
                del self._nodes[pod.node]  # a node of its own: gone with it
        self.gone.append(pod)
        if in_store:
            self.store.delete_pod(self.config.namespace, pod.name)
