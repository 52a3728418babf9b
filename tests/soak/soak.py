"""A soak in virtual time: the real source and decision core over the simulated fleet, with
Prometheus and Kubernetes faults injected at random (seeded).

Per control cycle, two controllers see the same fleet:

- the *faulty* one reads the emulated Prometheus (:mod:`scaler.bench.prometheus_api`) through
  a transport that injects the current fault (timeout, connection error, HTTP 5xx, empty
  answers, NaN values, a pod's series missing); its decisions drive the fleet, and its writes
  of ``spec.replicas`` fail during Kubernetes fault episodes (nothing is recorded then, as
  the controller records only successful writes);
- the *reference* one reads the same emulated Prometheus without faults, and records the
  same writes (those that reached the fleet), so it is what a fault-free controller would
  decide in the same situation.

Checked: no exception; every scale-down had every signal usable and equals the reference's
decision; once no fault has touched the last ``horizon`` seconds (the longest stabilization
window plus one interval) the two decide identically; the decision state and the emulated
Prometheus stay bounded, and so does memory: the Python heap traced by :mod:`tracemalloc` over
the last cycles (RSS also moves with the allocator's fragmentation; it is reported too).

``python -m tests.soak.soak [cycles] [seed] [heap_cycles]`` prints the figures.
"""

from __future__ import annotations

import asyncio
import gc
import json
import math
import random
import resource
import sys
import time
import tracemalloc
from collections import Counter
from dataclasses import dataclass, field
from urllib.parse import parse_qs

import httpx

from scaler.bench import tsdb as tsdb_module
from scaler.bench.controllers import bench_workload, snapshot
from scaler.bench.prometheus_api import prometheus_transport
from scaler.bench.tsdb import Tsdb
from scaler.config.policy import ScaleDownRules, TargetPolicy
from scaler.core.decide import Decision, Direction, decide
from scaler.core.observation import Observation, WorkloadSnapshot
from scaler.core.state import TargetState, record_write
from scaler.sim.engine import ReplicaModel, SimRequest
from scaler.sim.fleet import Fleet, FleetConfig
from scaler.sim.kubeapi import KubeStore
from scaler.sources.prometheus import PrometheusSource, SourceResult
from scaler.sources.promql import QueryKind, build_query_plan

INTERVAL = 5  # control interval, seconds (virtual)
RATE_WINDOW = 60.0
PROM_FAULTS = ("timeout", "transport", "http_5xx", "empty", "nan", "partial")
ALL_KINDS = tuple(QueryKind)
# Cycles traced before the heap baseline: longer than the emulated Prometheus' 900 s retention
# (180 cycles) and the 120 s stabilization window, so what comes and goes has turned over.
HEAP_WARMUP_CYCLES = 200


def soak_policy() -> TargetPolicy:
    """Defaults, max 16 replicas, with windows and periods sized for a 5 s interval."""
    return TargetPolicy(
        workload=bench_workload(),
        max_replicas=16,
        scale_down=ScaleDownRules(
            stabilization_window_seconds=120, max_replicas_per_period=1, period_seconds=30
        ),
    )


@dataclass
class Fault:
    kind: str  # one of PROM_FAULTS, or "kube_write"
    queries: frozenset[QueryKind]
    until: float


@dataclass
class SoakFigures:
    cycles: int = 0
    virtual_seconds: float = 0.0
    wall_seconds: float = 0.0
    requests: int = 0
    fault_cycles: Counter[str] = field(default_factory=Counter)
    reasons: Counter[str] = field(default_factory=Counter)
    scale_ups: int = 0
    scale_downs: int = 0
    failed_writes: int = 0
    bad_data_scale_downs: int = 0
    compared_cycles: int = 0
    mismatches: int = 0
    max_recommendations: int = 0
    max_scale_events: int = 0
    max_series: int = 0
    max_samples: int = 0
    peak_replicas: int = 0
    rss_growth_mb: float = 0.0
    heap_cycles: int = 0
    heap_growth_kb: float = 0.0
    first_mismatch: str = ""

    def as_json(self) -> dict[str, object]:
        out = dict(self.__dict__)
        out["fault_cycles"] = dict(sorted(self.fault_cycles.items()))
        out["reasons"] = dict(sorted(self.reasons.items()))
        return out


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[1])
    return pages * resource.getpagesize() / 2**20


def _traced_heap_bytes() -> int:
    """Bytes allocated since tracing started and still alive, after a collection, leaving out
    the emulated Prometheus' samples (they come and go with the pods, by a few MB; their
    count is bounded by its retention and checked as ``max_samples``)."""
    gc.collect()
    snap = tracemalloc.take_snapshot().filter_traces(
        [tracemalloc.Filter(False, tsdb_module.__file__)]
    )
    return sum(t.size for t in snap.traces)


def _faulty_transport(
    clean: httpx.MockTransport, fault: list[Fault | None], now: list[float]
) -> httpx.MockTransport:
    plan = build_query_plan([soak_policy()], rate_window_seconds=RATE_WINDOW)
    kinds = {q: k for k, q in plan.queries.items()}
    handler = clean.handler

    def faulty(request: httpx.Request) -> httpx.Response:
        f = fault[0]
        kind = kinds.get(parse_qs(request.content.decode()).get("query", [""])[0])
        if f is None or f.kind == "kube_write" or kind not in f.queries:
            return handler(request)  # type: ignore[no-any-return]
        if f.kind == "timeout":
            raise httpx.ReadTimeout("injected: no answer", request=request)
        if f.kind == "transport":
            raise httpx.ConnectError("injected: connection refused", request=request)
        if f.kind == "http_5xx":
            return httpx.Response(503, text="<html>503 Service Unavailable</html>")
        resp: httpx.Response = handler(request)
        body = json.loads(resp.content)
        result = body["data"]["result"]
        if f.kind == "empty":
            result.clear()
        elif f.kind == "nan":
            for item in result:
                item["value"][1] = "NaN"
        elif f.kind == "partial" and kind is not None and kind.per_pod and result:
            result.pop(0)
        return httpx.Response(200, content=json.dumps(body).encode())

    return httpx.MockTransport(faulty)


def _arrivals(rnd: random.Random, duration: float) -> list[tuple[float, int, int]]:
    """Poisson arrivals whose rate swings between 0.36/s and ~16/s over hours, with bursts
    (1.8x the rates chosen for the replica model before its calibration to the RTX 4090 sweep,
    which serves about 1.8x as much: the fleet again peaks at 7 replicas)."""
    out: list[tuple[float, int, int]] = []
    t = 0.0
    while t < duration:
        day = 0.5 - 0.5 * math.cos(2 * math.pi * t / 7200.0)
        burst = 3.0 if (t % 2400.0) < 240.0 else 0.0
        rate = 1.8 * (0.2 + 6.0 * day + burst)
        t += rnd.expovariate(rate)
        out.append((t, rnd.randint(200, 1500), rnd.randint(20, 200)))
    return out


async def _read_both(
    a: PrometheusSource, b: PrometheusSource, policy: TargetPolicy, snap: WorkloadSnapshot
) -> tuple[SourceResult, SourceResult]:
    snaps = {policy.key: snap}
    return await a.read([policy], snaps), await b.read([policy], snaps)


def _same(a: Decision, b: Decision) -> bool:
    return (a.desired_replicas, a.reason, a.recommended_replicas) == (
        b.desired_replicas,
        b.reason,
        b.recommended_replicas,
    )


def run_soak(
    cycles: int = 10_000, seed: int = 1, fault_rate: float = 0.03, heap_cycles: int = 0
) -> SoakFigures:
    """Run ``cycles`` control cycles (5 virtual seconds apart) and return the figures.

    With ``heap_cycles``, the last ``heap_cycles`` cycles run under :mod:`tracemalloc` (which
    slows them several times): ``heap_growth_kb`` is the traced heap's growth from
    :data:`HEAP_WARMUP_CYCLES` into them to the end, and ``rss_growth_mb`` stops before them.
    """
    rss_from = min(2000, cycles // 5)
    if heap_cycles and not HEAP_WARMUP_CYCLES < heap_cycles < cycles - rss_from:
        raise ValueError(f"heap_cycles must be in ({HEAP_WARMUP_CYCLES}, {cycles - rss_from})")
    started = time.monotonic()
    trace_from = cycles - heap_cycles if heap_cycles else cycles
    heap0 = 0
    we_trace = False
    rnd = random.Random(seed)
    policy = soak_policy()
    horizon = (
        max(
            policy.scale_down.stabilization_window_seconds,
            policy.scale_up.stabilization_window_seconds,
        )
        + INTERVAL
    )
    clock = [0.0]
    store = KubeStore(lambda: clock[0])
    fleet = Fleet(
        store,
        FleetConfig(model=ReplicaModel(model_load_seconds=60.0), initial_replicas=2, seed=seed),
        now=0.0,
    )
    tsdb = Tsdb(1)  # every pod scraped at every tick; ticks are 5 s apart
    now = [0.0]
    fault: list[Fault | None] = [None]
    clean = prometheus_transport(
        tsdb, policy, namespace="llm", rate_window_seconds=RATE_WINDOW, clock=lambda: now[0]
    )
    loop = asyncio.new_event_loop()
    faulty_http = httpx.AsyncClient(transport=_faulty_transport(clean, fault, now))
    clean_http = httpx.AsyncClient(transport=clean)
    base = "http://prometheus.soak"
    faulty_src = PrometheusSource(
        faulty_http, base_url=base, timeout_seconds=10, rate_window_seconds=RATE_WINDOW
    )
    clean_src = PrometheusSource(
        clean_http, base_url=base, timeout_seconds=10, rate_window_seconds=RATE_WINDOW
    )
    arrivals = _arrivals(random.Random(seed + 1), cycles * INTERVAL)
    fig = SoakFigures()
    state_a: TargetState | None = None
    state_b: TargetState | None = None
    last_fault_at = -math.inf
    i = 0
    rss0 = 0.0
    key = policy.key
    try:
        for c in range(cycles):
            t = float(c * INTERVAL)
            while i < len(arrivals) and arrivals[i][0] < t:
                a, prompt, out = arrivals[i]
                clock[0] = a
                fleet.step(a)
                fleet.submit(SimRequest(i, a, prompt, out), a)
                i += 1
            clock[0] = now[0] = t
            fleet.step(t)
            tsdb.scrape(fleet.pods.values(), t)

            f = fault[0]
            if f is not None and t >= f.until:
                fault[0] = f = None
            if f is None and c < cycles - 200 and rnd.random() < fault_rate:
                kind = rnd.choice((*PROM_FAULTS, "kube_write"))
                queries = frozenset(rnd.sample(ALL_KINDS, rnd.randint(1, len(ALL_KINDS))))
                fault[0] = f = Fault(kind, queries, t + INTERVAL * rnd.randint(1, 30))
            if f is not None:
                fig.fault_cycles[f.kind] += 1
                last_fault_at = t

            snap = snapshot(fleet, t)
            res_a, res_b = loop.run_until_complete(_read_both(faulty_src, clean_src, policy, snap))
            counts = snap.counts(policy.model_load_timeout_seconds)
            d_a = decide(
                policy,
                Observation(counts, res_a.readings(key)),
                state_a,
                t,
                ttft_window_seconds=RATE_WINDOW,
            )
            d_b = decide(
                policy,
                Observation(counts, res_b.readings(key)),
                state_b,
                t,
                ttft_window_seconds=RATE_WINDOW,
            )
            state_a, state_b = d_a.state, d_b.state
            fig.reasons[str(d_a.reason)] += 1

            # no signal at fault (a capacity signal still learning asks for nothing)
            usable = not any(e.status.blocks_scale_down for e in d_a.signals) and all(
                e.status.usable_for_scale_down or e.desired_replicas is None for e in d_a.signals
            )
            if d_a.direction is Direction.DOWN and (not usable or not _same(d_a, d_b)):
                fig.bad_data_scale_downs += 1
            if t - last_fault_at > horizon:
                fig.compared_cycles += 1
                if not _same(d_a, d_b):
                    fig.mismatches += 1
                    if not fig.first_mismatch:
                        fig.first_mismatch = (
                            f"t={t}: {d_a.reason} {d_a.message} | {d_b.reason} {d_b.message}"
                        )

            if d_a.direction is not Direction.NONE:
                if f is not None and f.kind == "kube_write":
                    fig.failed_writes += 1  # the write fails: nothing changes, nothing recorded
                else:
                    store.external_scale("llm", "vllm", d_a.desired_replicas)
                    state_a = record_write(
                        state_a,
                        from_replicas=d_a.current_replicas,
                        to_replicas=d_a.desired_replicas,
                        now=t,
                    )
                    state_b = record_write(
                        state_b,
                        from_replicas=d_a.current_replicas,
                        to_replicas=d_a.desired_replicas,
                        now=t,
                    )
                    if d_a.direction is Direction.UP:
                        fig.scale_ups += 1
                    else:
                        fig.scale_downs += 1
                    fleet.step(t)

            fig.max_recommendations = max(fig.max_recommendations, len(state_a.recommendations))
            fig.max_scale_events = max(fig.max_scale_events, len(state_a.scale_events))
            fig.max_series = max(fig.max_series, len(tsdb.series))
            fig.max_samples = max(
                fig.max_samples, max((len(s.samples) for s in tsdb.series.values()), default=0)
            )
            fig.peak_replicas = max(fig.peak_replicas, fleet.spec_replicas)
            # The fleet records every request and deleted pod for a run's report; the soak
            # keeps only what is in flight, every cycle, so that its own records neither grow
            # nor swing the traced heap measured below.
            fleet.requests = [r for r in fleet.requests if r.finished_at is None]
            fleet.gone.clear()
            if c == rss_from:
                rss0 = _rss_mb()
            fig.cycles += 1
            if c + 1 == trace_from:
                fig.rss_growth_mb = round(_rss_mb() - rss0, 1)
                if heap_cycles and not tracemalloc.is_tracing():
                    tracemalloc.start()
                    we_trace = True
            if heap_cycles and c + 1 == trace_from + HEAP_WARMUP_CYCLES:
                heap0 = _traced_heap_bytes()
        if heap_cycles:
            fig.heap_cycles = heap_cycles - HEAP_WARMUP_CYCLES
            fig.heap_growth_kb = round((_traced_heap_bytes() - heap0) / 1024, 1)
    finally:
        if we_trace:
            tracemalloc.stop()
        loop.run_until_complete(faulty_http.aclose())
        loop.run_until_complete(clean_http.aclose())
        loop.close()
    fig.requests = i
    fig.virtual_seconds = cycles * INTERVAL
    fig.wall_seconds = round(time.monotonic() - started, 1)
    return fig


if __name__ == "__main__":
    import logging

    import structlog

    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.CRITICAL))
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000
    s = int(sys.argv[2]) if len(sys.argv) > 2 else 1
    h = int(sys.argv[3]) if len(sys.argv) > 3 else 0
    print(json.dumps(run_soak(n, s, heap_cycles=h).as_json(), indent=1))
