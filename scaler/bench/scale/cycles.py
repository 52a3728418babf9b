"""The scale benchmark's control cycles, run three ways, and the figures of each way.

A cycle is the Prometheus side plus the decisions (:func:`decide_all`); the Kubernetes
snapshots are built once and handed in, since their cost does not depend on the query plan.
:func:`run_ours` runs vllm-scaler's plan (at most six queries a cycle), :func:`run_per_target`
one query per target and signal (the KEDA model), and :func:`figures` sums up an approach.
"""

from __future__ import annotations

import asyncio
import math
import os
import resource
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from scaler.bench.scale.machine import Background, cycle_floor, cycle_work
from scaler.bench.scale.report import QueryFigures, ScaleFigures
from scaler.config.policy import TargetPolicy
from scaler.controller.observe import observe
from scaler.core.decide import decide
from scaler.core.observation import WorkloadSnapshot
from scaler.core.signals import SignalName, SignalReading
from scaler.core.state import TargetState
from scaler.sources.prometheus import PrometheusSource, TargetReadings, Throughput
from scaler.sources.promql import QueryKind

__all__ = [
    "Cycles",
    "decide_all",
    "figures",
    "peak_rss_mb",
    "percentile",
    "rss_mb",
    "run_ours",
    "run_per_target",
]


def rss_mb() -> float:
    """This process' resident set size now, MiB."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() / 2**20


def peak_rss_mb(pid: int | None = None) -> float:
    """Peak resident set size (VmHWM) of a process, MiB."""
    path = f"/proc/{pid or 'self'}/status"
    try:
        with open(path) as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


@dataclass(slots=True)
class Cycles:
    """What the cycles of one approach measured.

    Attributes:
        durations: wall seconds per cycle.
        controller_cpu: this process' CPU seconds per cycle (vllm-scaler's plan only).
        queries: queries sent in the last cycle.
        queries_max: queries sent in the cycle that sent most.
        resending: cycles that sent a dependent query again (planned otherwise than the
            previous cycle's: :attr:`~scaler.sources.prometheus.SourceResult.unused_queries`).
        failed: failed queries over all cycles.
        recorded: per cycle, the targets that read TTFT from the recording rule.
        throughput_recorded: per cycle, the namespaces whose pods' throughput was read from
            the recording rules.
        query_seconds: query kind -> client-side seconds (sent to parsed), per cycle.
        query_series: query kind -> series in its answer (the last cycle).
        promql: query kind -> the PromQL sent (the last cycle).
        load_average: the 1-minute load average when the approach started.
    """

    durations: list[float] = field(default_factory=list)
    controller_cpu: list[float] = field(default_factory=list)
    queries: int = 0
    queries_max: int = 0
    resending: int = 0
    failed: int = 0
    recorded: list[int] = field(default_factory=list)
    throughput_recorded: list[int] = field(default_factory=list)
    query_seconds: dict[QueryKind, list[float]] = field(default_factory=dict)
    query_series: dict[QueryKind, int] = field(default_factory=dict)
    promql: dict[QueryKind, str] = field(default_factory=dict)
    load_average: float = field(default_factory=lambda: os.getloadavg()[0])


async def decide_all(
    policies: Sequence[TargetPolicy],
    snaps: dict[str, WorkloadSnapshot],
    readings: dict[str, TargetReadings],
    states: dict[str, TargetState | None],
    now: float,
    ttft_window_seconds: float,
) -> None:
    """Observe and decide every target, as the controller's cycle does (states updated)."""
    for t in policies:
        state = states.get(t.key)
        obs = observe(t, snaps[t.key], readings[t.key], state)
        states[t.key] = decide(t, obs, state, now, ttft_window_seconds=ttft_window_seconds).state


async def run_ours(
    source: PrometheusSource,
    policies: Sequence[TargetPolicy],
    snaps: dict[str, WorkloadSnapshot],
    cycles: int,
    last: dict[str, dict[SignalName, SignalReading]],
    throughput: dict[str, Throughput] | None = None,
) -> Cycles:
    """``cycles`` cycles of vllm-scaler's plan; ``last`` gets the last cycle's readings and
    ``throughput`` each target's throughput of the last cycle."""
    out = Cycles()
    states: dict[str, TargetState | None] = {}
    for _ in range(cycles):
        start = time.monotonic()
        cpu = time.process_time()
        result = await source.read(policies, snaps)
        await decide_all(
            policies, snaps, result.targets, states, time.time(), source.rate_window_seconds
        )
        readings = {k: r.signals for k, r in result.targets.items()}
        out.durations.append(time.monotonic() - start)
        # the controller's own work: this process' CPU time in the cycle (answers parsed,
        # split and read, decisions); the exposition server runs in a child process
        out.controller_cpu.append(time.process_time() - cpu)
        last.update(readings)
        out.queries = result.queries_sent
        out.queries_max = max(out.queries_max, result.queries_sent)
        out.resending += result.unused_queries > 0
        out.failed += sum(1 for o in result.queries.values() if not o.ok)
        out.recorded.append(sum(1 for r in result.targets.values() if r.ttft_query == "recorded"))
        out.throughput_recorded.append(result.throughput_recorded_namespaces)
        if throughput is not None:
            throughput.update({k: r.throughput for k, r in result.targets.items()})
        for kind, o in result.queries.items():
            out.query_seconds.setdefault(kind, []).append(o.duration_seconds)
            out.query_series[kind] = o.series
            out.promql[kind] = o.query
    return out


async def run_per_target(
    source: PrometheusSource,
    policies: Sequence[TargetPolicy],
    snaps: dict[str, WorkloadSnapshot],
    cycles: int,
    concurrency: int,
    last: dict[str, dict[SignalName, SignalReading]],
) -> Cycles:
    """``cycles`` cycles of one query per target and signal, ``concurrency`` at a time."""
    out = Cycles()
    states: dict[str, TargetState | None] = {}
    sem = asyncio.Semaphore(concurrency)

    async def one(t: TargetPolicy) -> tuple[str, TargetReadings, int, int]:
        async with sem:
            r = await source.read([t], {t.key: snaps[t.key]})
        bad = sum(1 for o in r.queries.values() if not o.ok)
        return t.key, r.targets[t.key], r.queries_sent, bad

    for _ in range(cycles):
        start = time.monotonic()
        results = await asyncio.gather(*(one(t) for t in policies))
        await decide_all(
            policies,
            snaps,
            {k: r for k, r, _, _ in results},
            states,
            time.time(),
            source.rate_window_seconds,
        )
        readings = {k: r.signals for k, r, _, _ in results}
        out.durations.append(time.monotonic() - start)
        last.update(readings)
        out.queries = sum(q for _, _, q, _ in results)
        out.failed += sum(b for _, _, _, b in results)
    return out


def percentile(values: Sequence[float], q: float) -> float:
    """The nearest-rank ``q`` quantile (0-1) of ``values``."""
    s = sorted(values)
    return s[min(len(s) - 1, max(0, math.ceil(q * len(s)) - 1))]


def figures(
    name: str,
    cycles: Cycles,
    rss: float,
    *,
    cpu: float = 0.0,
    prometheus_stats: dict[QueryKind, dict[str, float]] | None = None,
    background: Background | None = None,
    cores: int = 1,
) -> ScaleFigures:
    """One approach's figures: ``rss`` its RSS growth (MiB), ``cpu`` Prometheus' CPU seconds
    while it ran, ``prometheus_stats`` each query's own timings (:func:`~.server.query_stats`),
    ``background`` the CPU scraping took before any cycle on a machine of ``cores`` CPUs (the
    cycle's own work and the shortest cycle it allows: :mod:`.machine`; none without it)."""
    d = cycles.durations
    stats = prometheus_stats or {}
    queries = tuple(
        QueryFigures(
            kind=str(kind),
            series=cycles.query_series.get(kind, 0),
            client_p50_seconds=round(statistics.median(seconds), 4),
            prometheus_exec_seconds=round(stats.get(kind, {}).get("exec", 0.0), 4),
            prometheus_selection_seconds=round(stats.get(kind, {}).get("prep", 0.0), 4),
            samples=int(stats.get(kind, {}).get("samples", 0)),
            response_mb=round(stats.get(kind, {}).get("bytes", 0.0) / 2**20, 2),
        )
        for kind, seconds in cycles.query_seconds.items()
    )
    cpu_own = cycles.controller_cpu
    work = floor = 0.0
    if background is not None and cpu_own:
        work = cycle_work(
            cpu, sum(d), len(d), statistics.fmean(cpu_own), background.prometheus_cores
        )
        floor = cycle_floor(work, cores, background.cores)
    return ScaleFigures(
        approach=name,
        queries_per_cycle=cycles.queries,
        queries_max_per_cycle=max(cycles.queries_max, cycles.queries),
        resending_cycles=cycles.resending,
        cycles=len(d),
        cycle_p50_seconds=round(statistics.median(d), 4),
        cycle_p95_seconds=round(percentile(d, 0.95), 4),
        cycle_max_seconds=round(max(d), 4),
        rss_growth_mb=round(rss, 1),
        failed_queries=cycles.failed,
        controller_cpu_p50_seconds=round(statistics.median(cpu_own), 4) if cpu_own else 0.0,
        controller_cpu_p95_seconds=round(percentile(cpu_own, 0.95), 4) if cpu_own else 0.0,
        prometheus_cpu_per_cycle_seconds=round(cpu / len(d), 4),
        ttft_recorded_targets=min(cycles.recorded) if cycles.recorded else 0,
        throughput_recorded_namespaces=(
            min(cycles.throughput_recorded) if cycles.throughput_recorded else 0
        ),
        load_average=round(cycles.load_average, 2),
        queries=queries,
        work_per_cycle_seconds=round(work, 4),
        cycle_floor_seconds=round(floor, 4),
    )
