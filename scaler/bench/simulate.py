"""One policy, one trace, in virtual time: the fleet, the emulated Prometheus and a controller.

The loop ticks once per virtual second. Before tick ``k``, each arrival in ``[k - 1, k)`` is
routed at its own time (every replica is first advanced to it, so the router sees the replicas
as they are then; :mod:`scaler.sim.routing`). At each tick the fleet plays the ReplicaSet and
kubelet (pods become Ready after the model load, removed pods drain up to the grace period),
Prometheus scrapes the targets whose offset falls on that second, the controller observes, and
on its interval it decides and writes ``spec.replicas``. No wall clock, no HTTP server, no
randomness beyond the trace's seeded rate scaling and the router's seed.

Every row of the benchmark, policies and hindsight references alike, runs through this loop.
A :class:`Simulation` can be run in pieces (:meth:`Simulation.run_until`) and copied
(:meth:`Simulation.fork`), which is how the hindsight search tries replica counts for one
minute from the state the minutes before it left.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from scaler.bench.tsdb import Tsdb
from scaler.sim.engine import ReplicaModel, SimRequest
from scaler.sim.fleet import Fleet, FleetConfig, FleetSample, SimPod
from scaler.sim.kubeapi import ScaleChange
from scaler.sim.routing import Routing
from scaler.sim.trace import Trace, to_sim_request

__all__ = [
    "BenchStore",
    "Controller",
    "FleetSample",
    "PodRecord",
    "RunRecord",
    "Simulation",
    "TickContext",
    "simulate",
]

#: Longest the run goes on after the trace ends, waiting for the last requests, seconds.
MAX_TAIL_SECONDS = 1800


@dataclass(slots=True)
class TickContext:
    """What a controller may look at: the virtual clock, the fleet and Prometheus' data."""

    now: float
    fleet: Fleet
    tsdb: Tsdb


class Controller(Protocol):
    """An autoscaler under test.

    ``observe`` runs every virtual second (for controllers that sample more often than they
    decide); ``decide`` runs every ``interval_seconds`` and returns the ``spec.replicas`` to
    write (the current value for no change); ``close`` releases resources at the end.
    ``reads_prometheus`` (optional, default True): False lets the loop skip the scrapes.
    ``rate_window_seconds`` (optional): the longest ``rate()`` window it queries, seconds;
    the emulated Prometheus keeps samples at least that long.
    """

    name: str
    interval_seconds: int

    def observe(self, ctx: TickContext) -> None: ...

    def decide(self, ctx: TickContext) -> int: ...

    def close(self) -> None: ...


class BenchStore:
    """The Kubernetes objects of a benchmark fleet, in memory (a :class:`PodStore`).

    Nothing but the fleet and the loop read them, so only what they need is kept:
    ``spec.replicas`` per workload, the pods, the scale-change callbacks.
    """

    def __init__(self) -> None:
        self.spec: dict[tuple[str, str], int] = {}
        self.pods: dict[tuple[str, str], dict[str, Any]] = {}
        self._callbacks: list[Callable[[ScaleChange], None]] = []

    def add_deployment(
        self, namespace: str, name: str, replicas: int, labels: Mapping[str, str]
    ) -> object:
        """Create the workload with ``replicas``."""
        self.spec[(namespace, name)] = replicas
        return None

    def on_scale_change(self, callback: Callable[[ScaleChange], None]) -> object:
        """Call ``callback`` on every change of ``spec.replicas``."""
        self._callbacks.append(callback)
        return None

    def get_spec_replicas(self, namespace: str, name: str) -> int:
        """``spec.replicas``."""
        return self.spec[(namespace, name)]

    def external_scale(self, namespace: str, name: str, replicas: int) -> None:
        """Write ``spec.replicas`` (a controller's scale write)."""
        old = self.spec[(namespace, name)]
        self.spec[(namespace, name)] = replicas
        change = ScaleChange("apps", "deployments", namespace, name, old, replicas, "", "api")
        for cb in list(self._callbacks):
            cb(change)

    def add_pod(
        self, namespace: str, name: str, labels: Mapping[str, str], *, created_at: float | None
    ) -> object:
        """Record a pod."""
        self.pods[(namespace, name)] = {"metadata": {"name": name}}
        return None

    def get_pod(self, namespace: str, name: str) -> dict[str, Any]:
        """The pod (no annotations: the benchmark's controllers set none)."""
        return self.pods[(namespace, name)]

    def set_pod_ready(self, namespace: str, name: str, ready: bool = True) -> None:
        """Nothing to record: the fleet holds readiness."""

    def mark_pod_terminating(
        self, namespace: str, name: str, *, grace_period_seconds: int = 30
    ) -> None:
        """Nothing to record: the fleet holds termination."""

    def delete_pod(self, namespace: str, name: str) -> None:
        """Forget the pod."""
        del self.pods[(namespace, name)]


@dataclass(frozen=True, slots=True)
class PodRecord:
    """One pod's life, seconds since the trace start (None: not yet, or never)."""

    created_at: float
    ready_at: float | None
    deleted_at: float | None


@dataclass(slots=True)
class RunRecord:
    """Everything a run produced, for :mod:`scaler.bench.figures`.

    Attributes:
        name: the controller's name.
        duration_seconds: the trace window, seconds (GPU time is counted over it).
        requests: every request with its timings.
        pods: every pod that existed.
        samples: one :class:`FleetSample` per second.
        scale_events: ``(seconds, from, to)`` of each write of ``spec.replicas``.
        routing: how requests reached the replicas.
    """

    name: str
    duration_seconds: float
    requests: list[SimRequest]
    pods: list[PodRecord]
    samples: list[FleetSample]
    scale_events: list[tuple[float, int, int]] = field(default_factory=list)
    routing: str = Routing.RANDOM.value


def _idle(fleet: Fleet) -> bool:
    return not fleet.backlog and all(p.engine.in_flight == 0 for p in fleet.pods.values())


class Simulation:
    """A run of ``controller`` on ``trace`` that can be advanced in pieces and copied.

    Args:
        trace: the arrivals (seconds from 0).
        controller: the autoscaler.
        model: the replica model (``model_load_seconds`` is the time to Ready).
        initial_replicas: ready replicas at time 0.
        scrape_interval_seconds: Prometheus' scrape interval.
        termination_grace_seconds: how long a removed pod may drain before it is killed.
        seed: pod-name and routing seed (names decide scrape offsets).
        routing: how requests reach the replicas (:class:`~scaler.sim.routing.Routing`).
        record: keep a :class:`FleetSample` per second and every request (off in the search,
            which only counts).
        fast: the fast path for long replays: the engines run decode runs, and an arrival
            advances only the replica it is routed to (the pods' lifecycle plays at each
            second), and the replicas record only the metrics the emulated Prometheus reads
            (``FleetConfig.full_metrics``). False advances every replica and plays the
            lifecycle at every arrival, and runs every engine step, recording every metric
            (a test holds the two to the same figures).
    """

    def __init__(
        self,
        trace: Trace,
        controller: Controller,
        *,
        model: ReplicaModel,
        initial_replicas: int,
        scrape_interval_seconds: int = 15,
        termination_grace_seconds: float = 120.0,
        seed: int = 0,
        routing: Routing | str = Routing.RANDOM,
        record: bool = True,
        fast: bool = True,
    ) -> None:
        self.trace = trace
        self.fast = fast
        self.controller = controller
        self.record = record
        self.scrapes = bool(getattr(controller, "reads_prometheus", True))
        self.store = BenchStore()
        self.config = FleetConfig(
            model=model,
            initial_replicas=initial_replicas,
            termination_grace_seconds=termination_grace_seconds,
            seed=seed,
            routing=routing,
            export_metrics=self.scrapes,
            decode_runs=fast,
            full_metrics=not fast,
        )
        self.fleet = Fleet(self.store, self.config, now=0.0)
        self.tsdb = Tsdb(
            scrape_interval_seconds,
            longest_window_seconds=float(getattr(controller, "rate_window_seconds", 0.0)),
        )
        self.ctx = TickContext(0.0, self.fleet, self.tsdb)
        self.samples: list[FleetSample] = []
        self.events: list[tuple[float, int, int]] = []
        self.next_arrival = 0  # index in trace.requests
        self.next_sleep = 0  # index in trace.sleep_events
        self.tick = 0  # the next tick to run

    @property
    def done(self) -> bool:
        """Every arrival routed, the trace's window over, and nothing in flight (or the tail
        ran out)."""
        end = self.trace.duration_seconds
        return (
            self.next_arrival >= len(self.trace.requests)
            and self.tick > end
            and (_idle(self.fleet) or self.tick > end + MAX_TAIL_SECONDS)
        )

    def run_until(self, tick: int) -> None:
        """Run the ticks before ``tick`` (and the arrivals before each of them)."""
        arrivals = self.trace.requests
        sleeps = self.trace.sleep_events
        fleet = self.fleet
        store = self.store
        controller = self.controller
        ns, name = self.config.namespace, self.config.name
        while self.tick < tick and not self.done:
            k = self.tick
            since = 0
            i = self.next_arrival
            while i < len(arrivals) and arrivals[i].arrival_seconds < k:
                a = arrivals[i].arrival_seconds
                if self.fast:
                    fleet.prepare_routing(a)
                else:
                    fleet.step(a)
                fleet.submit(to_sim_request(self.trace, i, a), a)
                i += 1
                since += 1
            self.next_arrival = i
            now = float(k)
            self.ctx.now = now
            fleet.step(now)
            while self.next_sleep < len(sleeps) and sleeps[self.next_sleep].seconds <= now:
                event = sleeps[self.next_sleep]
                if event.level:
                    fleet.sleep(event.replicas, event.level, now)
                else:
                    fleet.wake(event.replicas, now)
                self.next_sleep += 1
            if self.scrapes:
                self.tsdb.scrape(fleet.pods.values(), now)
            controller.observe(self.ctx)
            if k % controller.interval_seconds == 0:
                current = fleet.spec_replicas
                desired = controller.decide(self.ctx)
                if desired != current:
                    store.external_scale(ns, name, desired)
                    self.events.append((now, current, desired))
                    fleet.step(now)
            if self.record:
                self.samples.append(fleet.sample(now, since))
            self.tick = k + 1

    def finish(self) -> RunRecord:
        """Run to the end (every request finished, at most :data:`MAX_TAIL_SECONDS` after
        the trace), close the controller and return the record."""
        try:
            self.run_until(2**62)
        finally:
            self.controller.close()
        fleet = self.fleet
        everyone: list[SimPod] = [*fleet.gone, *fleet.pods.values()]
        return RunRecord(
            name=self.controller.name,
            duration_seconds=self.trace.duration_seconds,
            requests=fleet.requests,
            pods=[PodRecord(p.created_at, p.ready_at, p.deleted_at) for p in everyone],
            samples=self.samples,
            scale_events=self.events,
            routing=str(Routing(self.config.routing).value),
        )

    def fork(self) -> Simulation:
        """An independent copy of the whole state (fleet, router, controller, Prometheus),
        sharing only the immutable trace. Meant for unrecorded runs of controllers that do not
        read Prometheus (the copy of a fleet that exports metrics fails)."""
        memo: dict[int, Any] = {id(self.trace): self.trace}
        return copy.deepcopy(self, memo)


def simulate(
    trace: Trace,
    controller: Controller,
    *,
    model: ReplicaModel,
    initial_replicas: int,
    scrape_interval_seconds: int = 15,
    termination_grace_seconds: float = 120.0,
    seed: int = 0,
    routing: Routing | str = Routing.RANDOM,
    fast: bool = True,
) -> RunRecord:
    """Replay ``trace`` against a fleet driven by ``controller``, in virtual time.

    Args: as :class:`Simulation`.

    Returns:
        The :class:`RunRecord`. The run continues after the trace until every request has
        finished (at most :data:`MAX_TAIL_SECONDS`).
    """
    return Simulation(
        trace,
        controller,
        model=model,
        initial_replicas=initial_replicas,
        scrape_interval_seconds=scrape_interval_seconds,
        termination_grace_seconds=termination_grace_seconds,
        seed=seed,
        routing=routing,
        fast=fast,
    ).finish()
