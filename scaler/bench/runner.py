"""The benchmark: one trace, six policies, the same replica model, in virtual time.

:func:`run_bench` resolves the rate scale (``auto``: the smallest multiple of 0.25 at which the
oracle needs at least ``min_peak_replicas`` replicas in the trace's busiest minutes), measures
one replica's capacity on the trace's request mix, computes the oracle, simulates the four
autoscalers (in parallel processes when ``jobs > 1``; the results do not depend on it) and
derives every figure and ratio. Same inputs and seed, same numbers.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path

from scaler.bench.controllers import (
    FixedController,
    KedaHpaController,
    KpaController,
    KvHpaController,
    VllmScalerController,
    bench_workload,
)
from scaler.bench.figures import PolicyFigures, figures_of_oracle, figures_of_run
from scaler.bench.kpa import KpaConfig
from scaler.bench.oracle import Capacity, interval_requests, min_replicas_for, probe_capacity
from scaler.bench.oracle import run_oracle as compute_oracle
from scaler.bench.simulate import Controller, simulate
from scaler.config.policy import Policy, TargetPolicy
from scaler.sim.engine import ReplicaModel
from scaler.sim.trace import Trace, load_trace

__all__ = [
    "BASELINE",
    "BenchOptions",
    "BenchResult",
    "Goal",
    "auto_rate_scale",
    "cheapest_fixed",
    "default_policy",
    "run_bench",
]

#: The policy the others are compared with (policy 2: KEDA on queue depth).
BASELINE = "keda-queue"
# Knative's default container-concurrency-target-percentage: aim at 70% of capacity.
_KPA_UTILIZATION = 0.7
_RATE_STEP = 0.25
#: The share of requests within the SLO the fixed fleet is sized for (the issue's goal).
FIXED_SLO_SHARE = 0.99


def default_policy(max_replicas: int = 32) -> Policy:
    """vllm-scaler's shipped defaults (:class:`TargetPolicy`) with room to scale."""
    return Policy(targets=[TargetPolicy(workload=bench_workload(), max_replicas=max_replicas)])


@dataclass(frozen=True, slots=True)
class BenchOptions:
    """What to benchmark.

    Attributes:
        trace_path: CSV or JSONL trace.
        time_column, prompt_column, output_column: the trace's columns (see
            :func:`~scaler.sim.trace.load_trace`).
        start_seconds, duration_seconds: the window replayed (real seconds; None: to the end).
        rate_scale: request-rate multiplier, or None for auto.
        min_peak_replicas: with auto, the oracle's need in the busiest minute to reach.
        slo_ttft_seconds: the TTFT p95 SLO, seconds.
        model_load_seconds: time from pod creation to Ready, seconds.
        policy: vllm-scaler's policy (its first target is used), default :func:`default_policy`.
        control_interval_seconds: vllm-scaler's control interval, seconds.
        scrape_interval_seconds: Prometheus' scrape interval, seconds.
        max_replicas: every baseline's maximum.
        seed: seed of the rate scaling.
        policy_source: how reports name vllm-scaler's policy.
        jobs: processes to simulate policies in (1: in this process).
    """

    trace_path: Path
    time_column: str = "TIMESTAMP"
    prompt_column: str = "ContextTokens"
    output_column: str = "GeneratedTokens"
    start_seconds: float = 0.0
    duration_seconds: float | None = None
    rate_scale: float | None = None
    min_peak_replicas: int = 8
    slo_ttft_seconds: float = 2.0
    model_load_seconds: float = 120.0
    policy: Policy | None = None
    control_interval_seconds: int = 15
    scrape_interval_seconds: int = 15
    max_replicas: int = 32
    seed: int = 0
    jobs: int = 1
    policy_source: str = "shipped default policy (max 32)"


@dataclass(frozen=True, slots=True)
class Goal:
    """One of the issue's goals, with the measured number and whether it is met."""

    text: str
    measured: str
    met: bool


@dataclass(frozen=True, slots=True)
class BenchResult:
    """Everything the benchmark measured.

    Attributes:
        trace: the trace's description (window, compression, rate scale, requests).
        rate_scale: the rate scale used; ``rate_scale_auto`` says whether it was searched.
        capacity: one replica's measured capacity on the trace's mix.
        kpa_target: the KPA's target concurrency per replica.
        initial_replicas: replicas every policy starts with (the oracle's first interval).
        policy_source: where vllm-scaler's policy came from (a file, or the defaults).
        policies: figures per policy, oracle last.
        goals: the issue's goals for vllm-scaler.
        elapsed_seconds: wall time of the benchmark.
    """

    trace: str
    duration_seconds: float
    rate_scale: float
    rate_scale_auto: bool
    slo_ttft_seconds: float
    model_load_seconds: float
    capacity: Capacity
    kpa_target: float
    initial_replicas: int
    policy_source: str
    arrivals_per_second: tuple[float, ...]
    policies: tuple[PolicyFigures, ...]
    goals: tuple[Goal, ...]
    elapsed_seconds: float

    def by_name(self, name: str) -> PolicyFigures:
        """The figures of one policy (KeyError when absent)."""
        for p in self.policies:
            if p.name == name:
                return p
        raise KeyError(name)


def _peak_need(trace: Trace, model: ReplicaModel, slo: float, hint: int) -> int:
    """The oracle's replicas for the busiest minutes (by requests, prompt and output tokens)."""
    parts = interval_requests(trace, 60.0)
    keys: list[Callable[[int], float]] = [
        lambda i: len(parts[i]),
        lambda i: sum(r.prompt_tokens for r in parts[i]),
        lambda i: sum(r.output_tokens for r in parts[i]),
    ]
    chosen: set[int] = set()
    for key in keys:
        chosen.update(sorted(range(len(parts)), key=key, reverse=True)[:3])
    return max(min_replicas_for(parts[i], model, slo, hint=hint)[0] for i in sorted(chosen))


def auto_rate_scale(
    load: Callable[[float], Trace], model: ReplicaModel, slo: float, min_peak: int
) -> float:
    """The smallest multiple of 0.25 at which the oracle needs ``min_peak`` replicas at peak.

    Starts from the capacity estimate ``min_peak x capacity / peak-minute rate`` and walks
    in steps of 0.25.
    """
    base = load(1.0)
    cap = probe_capacity(base, model, slo)
    parts = interval_requests(base, 60.0)
    peak_rate = max(len(p) for p in parts) / 60.0 if base.requests else 1.0
    x = max(_RATE_STEP, math.ceil(min_peak * cap.rate / peak_rate / _RATE_STEP) * _RATE_STEP)
    if _peak_need(load(x), model, slo, min_peak) >= min_peak:
        while x > _RATE_STEP and _peak_need(load(x - _RATE_STEP), model, slo, min_peak) >= min_peak:
            x -= _RATE_STEP
        return x
    for _ in range(200):
        x += _RATE_STEP
        if _peak_need(load(x), model, slo, min_peak) >= min_peak:
            break
    return x


@dataclass(frozen=True, slots=True)
class _Job:
    kind: str
    trace: Trace
    model: ReplicaModel
    initial_replicas: int
    scrape: int
    policy: Policy | None = None
    interval: int = 15
    max_replicas: int = 32
    kpa_target: float = 1.0
    slo: float = 2.0
    fixed_replicas: int = 1


def _controller(job: _Job) -> Controller:
    if job.kind == "vllm-scaler":
        assert job.policy is not None
        return VllmScalerController(
            job.policy.targets[0],
            rate_window_seconds=job.policy.rate_window_seconds,
            interval_seconds=job.interval,
        )
    if job.kind == BASELINE:
        return KedaHpaController(max_replicas=job.max_replicas)
    if job.kind == "hpa-kv":
        return KvHpaController(max_replicas=job.max_replicas)
    if job.kind == "fixed":
        return FixedController(job.fixed_replicas)
    return KpaController(KpaConfig(job.kpa_target, max_replicas=job.max_replicas))


def _run_job(job: _Job) -> PolicyFigures:
    run = simulate(
        job.trace,
        _controller(job),
        model=job.model,
        initial_replicas=job.initial_replicas,
        scrape_interval_seconds=job.scrape,
    )
    return figures_of_run(run, job.slo)


def cheapest_fixed(
    run: Callable[[int], PolicyFigures],
    start: int,
    max_replicas: int,
    share: float = FIXED_SLO_SHARE,
) -> PolicyFigures:
    """The run of the smallest constant fleet in ``[1, max_replicas]`` that keeps at least
    ``share`` (0-1) of the requests within the SLO; the ``max_replicas`` run if none does.

    Walks from ``start`` (the oracle's peak: a few runs) down while the fleet one smaller still
    meets ``share``, or up until one meets it; assumes attainment does not fall as replicas are
    added (more idle capacity never delays a request in the replica model).
    """
    runs: dict[int, PolicyFigures] = {}

    def meets(n: int) -> bool:
        if n not in runs:
            runs[n] = run(n)
        return runs[n].slo_request_share >= share

    n = min(max(1, start), max_replicas)
    if meets(n):
        while n > 1 and meets(n - 1):
            n -= 1
        return runs[n]
    while n < max_replicas:
        n += 1
        if meets(n):
            return runs[n]
    return runs[n]


def _run_fixed(base: _Job, start: int) -> PolicyFigures:
    """:func:`cheapest_fixed` on simulated runs, each fleet ready from the start."""

    def run(n: int) -> PolicyFigures:
        return _run_job(replace(base, kind="fixed", fixed_replicas=n, initial_replicas=n))

    return cheapest_fixed(run, start, base.max_replicas)


def _goals(result: dict[str, PolicyFigures]) -> tuple[Goal, ...]:
    us, base, oracle = result["vllm-scaler"], result[BASELINE], result["oracle"]
    cost_oracle = us.gpu_hours / oracle.gpu_hours if oracle.gpu_hours else math.inf
    cost_base = us.gpu_hours / base.gpu_hours if base.gpu_hours else math.inf
    cheaper = us.slo_request_share >= base.slo_request_share and cost_base <= 0.75
    fewer_bad = (
        us.violating_minutes <= 0.5 * base.violating_minutes and us.gpu_hours <= base.gpu_hours
    )
    return (
        Goal(
            ">= 99% of requests within the TTFT SLO",
            f"{100 * us.slo_request_share:.2f}%",
            us.slo_request_share >= 0.99,
        ),
        Goal("GPU-hours <= 1.25x the oracle's", f"{cost_oracle:.2f}x", cost_oracle <= 1.25),
        Goal(
            f"vs {BASELINE}: >= 25% fewer GPU-hours at equal or better SLO attainment, or "
            ">= 50% fewer SLO-violating minutes at equal GPU-hours",
            f"GPU-hours {cost_base:.2f}x, requests within SLO {100 * us.slo_request_share:.2f}%"
            f" vs {100 * base.slo_request_share:.2f}%, violating minutes "
            f"{us.violating_minutes} vs {base.violating_minutes}",
            cheaper or fewer_bad,
        ),
        Goal(
            f"at most half of {BASELINE}'s scale events",
            f"{us.scale_events} vs {base.scale_events}",
            us.scale_events <= 0.5 * base.scale_events,
        ),
        Goal("no request cut by a scale-down", f"{us.cut} cut", us.cut == 0),
    )


def run_bench(options: BenchOptions) -> BenchResult:
    """Run the whole benchmark (see the module docstring)."""
    started = time.monotonic()
    model = ReplicaModel(model_load_seconds=options.model_load_seconds)
    slo = options.slo_ttft_seconds

    def load(scale: float) -> Trace:
        return load_trace(
            options.trace_path,
            time_column=options.time_column,
            prompt_column=options.prompt_column,
            output_column=options.output_column,
            start_seconds=options.start_seconds,
            duration_seconds=options.duration_seconds,
            rate_scale=scale,
            seed=options.seed,
        )

    if not load(1.0).requests:
        end = (
            f"{(options.start_seconds + options.duration_seconds) / 60:g}"
            if options.duration_seconds is not None
            else "the end"
        )
        raise ValueError(
            f"no requests in minutes {options.start_seconds / 60:g} to {end} of "
            f"{options.trace_path} (check --start-minute and --minutes)"
        )
    scale = options.rate_scale
    if scale is None:
        scale = auto_rate_scale(load, model, slo, options.min_peak_replicas)
    trace = load(scale)
    capacity = probe_capacity(trace, model, slo)
    kpa_target = max(1.0, round(_KPA_UTILIZATION * capacity.concurrency))
    # Every policy starts sized for the first minute, as the oracle is.
    first = interval_requests(trace, 60.0)[0]
    initial = min_replicas_for(first, model, slo)[0]
    policy = options.policy or default_policy(options.max_replicas)
    base = _Job(
        kind=BASELINE,
        trace=trace,
        model=model,
        initial_replicas=initial,
        scrape=options.scrape_interval_seconds,
        max_replicas=options.max_replicas,
        slo=slo,
    )
    jobs = [
        replace(base, kind="vllm-scaler", policy=policy, interval=options.control_interval_seconds),
        base,
        replace(base, kind="hpa-kv"),
        replace(base, kind="kpa", kpa_target=kpa_target),
    ]
    if options.jobs > 1:
        with ProcessPoolExecutor(max_workers=options.jobs) as pool:
            # The oracle is the longest job: start it first.
            oracle_future = pool.submit(compute_oracle, trace, model, slo)
            futures = [pool.submit(_run_job, j) for j in jobs]
            oracle = figures_of_oracle(oracle_future.result(), trace.duration_seconds, slo)
            fixed_future = pool.submit(_run_fixed, base, oracle.peak_replicas)
            runs = [f.result() for f in futures] + [fixed_future.result()]
    else:
        oracle = figures_of_oracle(compute_oracle(trace, model, slo), trace.duration_seconds, slo)
        runs = [_run_job(j) for j in jobs] + [_run_fixed(base, oracle.peak_replicas)]
    figures = {f.name: f for f in runs}
    figures["oracle"] = oracle
    per_second = [0.0] * max(1, math.ceil(trace.duration_seconds / 10))
    for r in trace.requests:
        per_second[min(len(per_second) - 1, int(r.arrival_seconds // 10))] += 0.1
    return BenchResult(
        trace=trace.description,
        duration_seconds=trace.duration_seconds,
        rate_scale=scale,
        rate_scale_auto=options.rate_scale is None,
        slo_ttft_seconds=slo,
        model_load_seconds=options.model_load_seconds,
        capacity=capacity,
        kpa_target=kpa_target,
        initial_replicas=initial,
        policy_source=options.policy_source,
        arrivals_per_second=tuple(per_second),
        policies=tuple(
            figures[n] for n in ("vllm-scaler", BASELINE, "hpa-kv", "kpa", "fixed", "oracle")
        ),
        goals=_goals(figures),
        elapsed_seconds=time.monotonic() - started,
    )
