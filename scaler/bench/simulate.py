"""One policy, one trace, in virtual time: the fleet, the emulated Prometheus and a controller.

The loop ticks once per virtual second. Between ticks, each arrival is routed at its own
time (every replica is first advanced to it, so the Service's least-in-flight choice sees
current queues). At each tick the fleet plays the ReplicaSet and kubelet (pods become Ready
after the model load, removed pods drain up to the grace period), Prometheus scrapes the
targets whose offset falls on that second, the controller observes, and on its interval it
decides and writes ``spec.replicas``. No wall clock, no HTTP server, no randomness beyond the
trace's own seeded rate scaling.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from scaler.bench.tsdb import Tsdb
from scaler.sim.engine import ReplicaModel, SimRequest
from scaler.sim.fleet import Fleet, FleetConfig, SimPod
from scaler.sim.kubeapi import KubeStore
from scaler.sim.trace import Trace, TraceRequest

__all__ = ["Controller", "FleetSample", "RunRecord", "TickContext", "simulate"]

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
    """

    name: str
    interval_seconds: int

    def observe(self, ctx: TickContext) -> None: ...

    def decide(self, ctx: TickContext) -> int: ...

    def close(self) -> None: ...


@dataclass(frozen=True, slots=True)
class FleetSample:
    """The fleet at one virtual second.

    Attributes:
        t: seconds since the trace start.
        arrivals: requests that arrived during the second before ``t``.
        spec_replicas: ``spec.replicas``.
        ready, starting, terminating: pods by state (all of them cost GPU time).
        waiting: requests queued in replicas plus those held while no replica was ready.
        running: requests in the replicas' running batches.
    """

    t: float
    arrivals: int
    spec_replicas: int
    ready: int
    starting: int
    terminating: int
    waiting: int
    running: int

    @property
    def pods(self) -> int:
        """Pods that exist (cost GPU time)."""
        return self.ready + self.starting + self.terminating


@dataclass(slots=True)
class RunRecord:
    """Everything a run produced, for :mod:`scaler.bench.figures`.

    Attributes:
        name: the controller's name.
        duration_seconds: the trace window, seconds (GPU time is counted over it).
        requests: every request with its timings.
        pods: ``(created, deleted or None)`` seconds of every pod that existed.
        samples: one :class:`FleetSample` per second.
        scale_events: ``(seconds, from, to)`` of each write of ``spec.replicas``.
    """

    name: str
    duration_seconds: float
    requests: list[SimRequest]
    pods: list[tuple[float, float | None]]
    samples: list[FleetSample]
    scale_events: list[tuple[float, int, int]] = field(default_factory=list)


def _sample(fleet: Fleet, t: float, arrivals: int) -> FleetSample:
    ready, starting, terminating = fleet.count()
    pods = fleet.pods.values()
    return FleetSample(
        t=t,
        arrivals=arrivals,
        spec_replicas=fleet.spec_replicas,
        ready=ready,
        starting=starting,
        terminating=terminating,
        waiting=sum(p.engine.num_waiting for p in pods) + len(fleet.backlog),
        running=sum(p.engine.num_running for p in pods),
    )


def _idle(fleet: Fleet) -> bool:
    return not fleet.backlog and all(p.engine.in_flight == 0 for p in fleet.pods.values())


def simulate(
    trace: Trace,
    controller: Controller,
    *,
    model: ReplicaModel,
    initial_replicas: int,
    scrape_interval_seconds: int = 15,
    termination_grace_seconds: float = 120.0,
    seed: int = 0,
) -> RunRecord:
    """Replay ``trace`` against a fleet driven by ``controller``, in virtual time.

    Args:
        trace: the arrivals (seconds from 0).
        controller: the autoscaler.
        model: the replica model (``model_load_seconds`` is the time to Ready).
        initial_replicas: ready replicas at time 0.
        scrape_interval_seconds: Prometheus' scrape interval.
        termination_grace_seconds: how long a removed pod may drain before it is killed.
        seed: pod-name seed (names decide scrape offsets).

    Returns:
        The :class:`RunRecord`. The run continues after the trace until every request has
        finished (at most :data:`MAX_TAIL_SECONDS`).
    """
    clock = [0.0]
    store = KubeStore(lambda: clock[0])
    config = FleetConfig(
        model=model,
        initial_replicas=initial_replicas,
        termination_grace_seconds=termination_grace_seconds,
        seed=seed,
    )
    fleet = Fleet(store, config, now=0.0)
    tsdb = Tsdb(scrape_interval_seconds)
    ctx = TickContext(0.0, fleet, tsdb)
    arrivals: Sequence[TraceRequest] = trace.requests
    samples: list[FleetSample] = []
    events: list[tuple[float, int, int]] = []
    i = 0
    k = 0
    end = trace.duration_seconds
    try:
        while True:
            since = 0
            while i < len(arrivals) and arrivals[i].arrival_seconds < k:
                r = arrivals[i]
                a = r.arrival_seconds
                clock[0] = a
                fleet.step(a)
                fleet.submit(SimRequest(i, a, r.prompt_tokens, r.output_tokens), a)
                i += 1
                since += 1
            now = float(k)
            clock[0] = now
            ctx.now = now
            fleet.step(now)
            tsdb.scrape(fleet.pods.values(), now)
            controller.observe(ctx)
            if k % controller.interval_seconds == 0:
                current = fleet.spec_replicas
                desired = controller.decide(ctx)
                if desired != current:
                    store.external_scale(config.namespace, config.name, desired)
                    events.append((now, current, desired))
                    fleet.step(now)
            samples.append(_sample(fleet, now, since))
            k += 1
            if i >= len(arrivals) and k > end and (_idle(fleet) or k > end + MAX_TAIL_SECONDS):
                break
    finally:
        controller.close()
    everyone: list[SimPod] = [*fleet.gone, *fleet.pods.values()]
    return RunRecord(
        name=controller.name,
        duration_seconds=end,
        requests=fleet.requests,
        pods=[(p.created_at, p.deleted_at) for p in everyone],
        samples=samples,
        scale_events=events,
    )
