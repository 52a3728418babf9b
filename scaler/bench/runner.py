"""The benchmark: one trace, the policies and the hindsight references, the same replica model,
in virtual time.

:func:`run_bench` resolves the rate scale (``auto``: the smallest multiple of 0.25 at which the
trace's busiest minutes need at least ``min_peak_replicas`` replicas, each started empty and
instantly, to keep 99% of their requests within the SLO), derives the one maximum every row
shares (twice what the busiest minutes need, and no less than the starting fleet), measures
one replica's capacity on the trace's mix (the KPA's target), computes the hindsight rows
(:mod:`scaler.bench.references`, the yardstick by :mod:`scaler.bench.optimal`), simulates the
four autoscalers on every routing seed (in parallel processes when ``jobs > 1``; the results
do not depend on it), computes the replica model's true capacity on each segment of the trace
(:mod:`scaler.bench.truth`) and the lower bound (:mod:`scaler.bench.bound`), and derives every
figure and ratio. Every row, policy or reference, is a replay through
:mod:`scaler.bench.simulate` with the same routing, on each routing seed. Requests longer than
the model's context are rejected at once, as vLLM does: counted per row, left out of every
share, the searches, the rate scale and the starting fleet. Same inputs and seed, same numbers.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass, replace
from typing import TypeVar

from scaler.bench.bound import gpu_seconds_lower_bound
from scaler.bench.capacity import Capacity, peak_need, probe_capacity
from scaler.bench.controllers import (
    KedaHpaController,
    KpaController,
    KvHpaController,
    VllmScalerController,
    bench_workload,
    truth_in_learned_units,
)
from scaler.bench.figures import DEFAULT_ITL_SLO_SECONDS, PolicyFigures, RowFigures, figures_of_run
from scaler.bench.goals import CapacityCheck, Goal, goals_for
from scaler.bench.hindsight import search_schedule
from scaler.bench.kpa import KpaConfig
from scaler.bench.optimal import OptimalResult
from scaler.bench.references import (
    FIXED,
    HINDSIGHT,
    INSTANT,
    REACTIVE,
    REFERENCE_SHARE,
    References,
    ReferenceSetup,
    reactive_schedule,
    run_references,
)
from scaler.bench.simulate import Controller, simulate
from scaler.bench.truth import TrueCapacity, segments, true_capacity
from scaler.config.policy import Policy, TargetPolicy
from scaler.sim.catalog import open_trace
from scaler.sim.engine import ReplicaModel
from scaler.sim.routing import Routing
from scaler.sim.trace import Trace, TraceRequest, rejected_count, summary_line

__all__ = [
    "BASELINE",
    "HINDSIGHT",
    "MAX_AUTO_RATE_SCALE",
    "REACTIVE",
    "ROWS",
    "BenchOptions",
    "BenchResult",
    "Goal",
    "Prepared",
    "RateScaleError",
    "RateScaleStart",
    "auto_rate_scale",
    "default_policy",
    "derive_max_replicas",
    "prepare",
    "rate_scale_start",
    "reactive_schedule",
    "run_bench",
    "run_policy",
]

#: The policy the others are compared with (policy 2: KEDA on queue depth).
BASELINE = "keda-queue"
#: The policies of the table, on every routing seed.
POLICIES = ("vllm-scaler", BASELINE, "hpa-kv", "kpa")
#: Row order of the table.
ROWS = (*POLICIES, FIXED, INSTANT, HINDSIGHT, REACTIVE)
#: The share of accepted requests within both SLOs the references keep.
FIXED_SLO_SHARE = REFERENCE_SHARE
# Knative's default container-concurrency-target-percentage: aim at 70% of capacity.
_KPA_UTILIZATION = 0.7
_RATE_STEP = 0.25
#: The most ``--rate-scale auto`` multiplies a trace by. The bundled traces and shapes need
#: x0.5-x3; above x10 nine in ten replayed requests would be copies of the same request, and
#: the figures would describe the copying more than the trace.
MAX_AUTO_RATE_SCALE = 10.0
# The true capacity is read this long after each shift (the goal's 10 minutes), seconds.
_AFTER_SHIFT_SECONDS = 600.0


def default_policy(max_replicas: int = 32) -> Policy:
    """vllm-scaler's shipped defaults (:class:`TargetPolicy`) with room to scale."""
    return Policy(targets=[TargetPolicy(workload=bench_workload(), max_replicas=max_replicas)])


def derive_max_replicas(peak: int, initial: int) -> int:
    """The one maximum of every row: twice what the busiest minutes need from empty (room for
    a policy to overshoot, and to show it), and no less than the starting fleet."""
    return max(2 * peak, initial, 1)


@dataclass(frozen=True, slots=True)
class BenchOptions:
    """What to benchmark.

    Attributes:
        trace: ``code``, ``conv``, ``synthetic:<shape>``, ``servegen:<model>:<days>`` or a
            CSV/JSONL path (:func:`~scaler.sim.catalog.open_trace`).
        time_column, prompt_column, output_column, time_unit: how to read a file (see
            :func:`~scaler.sim.trace.load_trace`).
        start_seconds, duration_seconds: the window replayed (real seconds; None: to the end).
        rate_scale: request-rate multiplier, or None for auto.
        min_peak_replicas: with auto, the busiest minutes' need to reach.
        slo_ttft_seconds: the TTFT SLO, seconds.
        slo_itl_seconds: the ITL SLO on each request's mean inter-token latency, seconds.
        model_load_seconds: time from pod creation to Ready, seconds.
        policy: vllm-scaler's policy (its first target is used), default :func:`default_policy`;
            its ``max_replicas`` is replaced by the bench's one maximum.
        control_interval_seconds: vllm-scaler's control interval, seconds.
        scrape_interval_seconds: Prometheus' scrape interval, seconds.
        max_replicas: every row's maximum, or None to derive it from the trace
            (:func:`derive_max_replicas`).
        seed: seed of the rate scaling, the synthetic shapes and the first routing seed.
        routing_seeds: routing seeds every row runs on (``seed``, ``seed + 1``, ...).
        policy_source: how reports name vllm-scaler's policy.
        jobs: processes to simulate in (1: in this process).
        routing: how requests reach the replicas (:class:`~scaler.sim.routing.Routing`).
        keda_cached_metrics: the KEDA baseline reuses its last 30 s poll on every HPA sync
            (``useCachedMetrics: true``) instead of querying afresh (KEDA's default).
        references: compute the hindsight rows (off: the policies only, for a sweep).
        fast: the fast replay path (:class:`~scaler.bench.simulate.Simulation`).
        hash_column, hash_block_tokens: a file's column of prompt block hashes (Mooncake's
            ``hash_ids``) and the tokens each hash covers: the replicas' prefix caches look
            them up.
    """

    trace: str
    time_column: str = "TIMESTAMP"
    prompt_column: str = "ContextTokens"
    output_column: str = "GeneratedTokens"
    time_unit: str = "auto"
    start_seconds: float = 0.0
    duration_seconds: float | None = None
    rate_scale: float | None = None
    min_peak_replicas: int = 8
    slo_ttft_seconds: float = 2.0
    slo_itl_seconds: float = DEFAULT_ITL_SLO_SECONDS
    model_load_seconds: float = 120.0
    policy: Policy | None = None
    control_interval_seconds: int = 15
    scrape_interval_seconds: int = 15
    max_replicas: int | None = None
    seed: int = 0
    routing_seeds: int = 3
    jobs: int = 1
    policy_source: str = "shipped default policy"
    routing: str = Routing.RANDOM.value
    keda_cached_metrics: bool = False
    references: bool = True
    fast: bool = True
    hash_column: str | None = None
    hash_block_tokens: int = 512


@dataclass(frozen=True, slots=True)
class BenchResult:
    """Everything the benchmark measured.

    Attributes:
        trace: the trace's description (window, compression, rate scale, requests).
        summary: the one line on what was read (requests, duration, unit, rejected, scale).
        duration_seconds: the trace window replayed, seconds (GPU time is counted over it).
        rate_scale: the rate scale used; ``rate_scale_auto`` says whether it was searched.
        slo_ttft_seconds, slo_itl_seconds: the SLOs, seconds.
        model_load_seconds: time from pod creation to Ready, seconds.
        capacity: one replica's measured capacity on the trace's mix (the KPA's target).
        kpa_target: the KPA's target concurrency per replica.
        initial_replicas: replicas every row starts with (the instant schedule's first minute).
        max_replicas: every row's maximum; ``max_replicas_derived`` says whether it came from
            the trace.
        seeds: the routing seeds every row ran on.
        policy_source: where vllm-scaler's policy came from (a file, or the defaults).
        control_interval_seconds: vllm-scaler's control interval, seconds.
        routing: how requests reached the replicas.
        keda_cached_metrics: whether the KEDA baseline reused its poll.
        rejected: requests longer than the context (rejected at once, in every row).
        step_seconds: the trace's load step (synthetic:flash), for the reaction times.
        arrivals_per_second: the offered load for the plot: accepted and rejected arrivals
            per second, averaged over consecutive 10 s bins from the trace start.
        rows: every row on every seed, in :data:`ROWS` order.
        hindsight_replicas: the reference schedules, per minute.
        optimal: how the yardstick was found, and its near-minimality check.
        truth: the true capacity of each segment of the trace (its start, end, what changed).
        capacity_checks: the learned capacity against the truth (goal (e)).
        lower_bound_gpu_hours: the provable floor (:mod:`scaler.bench.bound`).
        goals: the goals for vllm-scaler.
        elapsed_seconds: wall time of the benchmark.
    """

    trace: str
    summary: str
    duration_seconds: float
    rate_scale: float
    rate_scale_auto: bool
    slo_ttft_seconds: float
    slo_itl_seconds: float
    model_load_seconds: float
    capacity: Capacity
    kpa_target: float
    initial_replicas: int
    max_replicas: int
    max_replicas_derived: bool
    seeds: tuple[int, ...]
    policy_source: str
    control_interval_seconds: int
    routing: str
    keda_cached_metrics: bool
    rejected: int
    step_seconds: float | None
    arrivals_per_second: tuple[float, ...]
    rows: tuple[RowFigures, ...]
    hindsight_replicas: dict[str, tuple[int, ...]]
    optimal: OptimalResult | None
    truth: tuple[tuple[float, float, str, TrueCapacity], ...]
    capacity_checks: tuple[CapacityCheck, ...]
    lower_bound_gpu_hours: float
    goals: tuple[Goal, ...]
    elapsed_seconds: float

    @property
    def policies(self) -> tuple[PolicyFigures, ...]:
        """Every row's figures on the first seed (what the plot draws)."""
        return tuple(r.first for r in self.rows)

    def by_name(self, name: str) -> PolicyFigures:
        """The figures of one row on the first seed (KeyError when absent)."""
        return self.row(name).first

    def row(self, name: str) -> RowFigures:
        """One row on every seed (KeyError when absent)."""
        for r in self.rows:
            if r.name == name:
                return r
        raise KeyError(name)


@dataclass(frozen=True, slots=True)
class RateScaleStart:
    """Where ``--rate-scale auto`` starts, from the trace at x1 (cheap: one replica's probe).

    Attributes:
        capacity_rps: one replica's capacity on the trace's mix, requests/s.
        peak_minute_requests: accepted arrivals in the trace's busiest minute.
        estimate: ``min_peak x capacity / peak-minute rate``, rounded up to a multiple of 0.25.
        below_lowest: the unrounded estimate was below 0.25, the lowest scale auto takes.
        heaviest: the estimate came from the minute with the most prompt tokens to compute.
    """

    capacity_rps: float
    peak_minute_requests: int
    estimate: float
    below_lowest: bool = False
    heaviest: bool = False

    def text(self, min_peak: int) -> str:
        """One line on the estimate, for the progress output."""
        which = (
            "of the mix of its heaviest minute as recorded (x1, a first estimate) and that "
            "minute has"
            if self.heaviest
            else "of this mix as recorded (x1, a first estimate) and the busiest minute has"
        )
        return (
            f"one replica serves about {self.capacity_rps:.3g} requests/s {which} "
            f"{self.peak_minute_requests} requests: {min_peak} "
            f"replica{'s need' if min_peak > 1 else ' needs'} about "
            f"x{self.estimate:g}"
            + (" or less (the lowest scale auto takes)" if self.below_lowest else "")
        )


class RateScaleError(ValueError):
    """``--rate-scale auto`` would multiply the trace beyond :data:`MAX_AUTO_RATE_SCALE`, or
    the rate scale leaves too few requests to autoscale."""


def rate_scale_start(base: Trace, model: ReplicaModel, slo: float, min_peak: int) -> RateScaleStart:
    """The auto search's starting estimate on ``base`` (the trace at x1), for a TTFT SLO of
    ``slo`` seconds and ``min_peak`` replicas at the busiest minute: from one replica's
    capacity on the whole mix and the busiest minute's rate, or, when it needs less, from its
    capacity on the mix of the minute with the most prompt tokens to compute and that minute's
    rate (a trace whose mix shifts has its heaviest minute elsewhere than its busiest).

    Raises:
        RateScaleError: the estimate is above :data:`MAX_AUTO_RATE_SCALE`.
    """
    minutes = max(1, math.ceil(base.duration_seconds / 60))
    per_minute: list[list[TraceRequest]] = [[] for _ in range(minutes)]
    for r in base.requests:
        if r.prompt_tokens + max(1, r.output_tokens) <= model.max_model_len:
            per_minute[min(minutes - 1, int(r.arrival_seconds // 60))].append(r)
    # a trace shorter than a minute has its busiest "minute" in that much time
    window = min(60.0, base.duration_seconds) if base.duration_seconds > 0 else 60.0
    busiest = max(len(m) for m in per_minute)
    cap = probe_capacity(base, model, slo)
    raw = min_peak * cap.rate / (busiest / window or 1.0)
    rate, count, heaviest = cap.rate, busiest, False
    work = [sum(r.prompt_tokens - r.cached_tokens for r in m) for m in per_minute]
    top = max(range(minutes), key=lambda i: work[i])
    if per_minute[top]:
        minute = Trace(
            tuple(per_minute[top]), base.source, "heaviest minute", base.duration_seconds
        )
        heavy = probe_capacity(minute, model, slo)
        raw_heavy = min_peak * heavy.rate / (len(per_minute[top]) / window)
        if raw_heavy < raw:
            raw, rate, count, heaviest = raw_heavy, heavy.rate, len(per_minute[top]), True
    x = max(_RATE_STEP, math.ceil(raw / _RATE_STEP) * _RATE_STEP)
    start = RateScaleStart(rate, count, x, below_lowest=raw < _RATE_STEP, heaviest=heaviest)
    if x > MAX_AUTO_RATE_SCALE:
        raise _too_light(start, min_peak, "the trace is too light")
    return start


def _too_light(start: RateScaleStart, min_peak: int, why: str) -> RateScaleError:
    return RateScaleError(
        f"{why}: {start.text(min_peak)}, above x{MAX_AUTO_RATE_SCALE:g}, the most auto "
        "multiplies a trace by (the replay would be mostly copies of the same requests); "
        "pass --rate-scale N to replay at a scale you choose (1: as recorded) or a lower "
        "--min-peak-replicas"
    )


def auto_rate_scale(
    load: Callable[[float], Trace],
    model: ReplicaModel,
    slo: float,
    min_peak: int,
    *,
    routing: str = Routing.RANDOM.value,
    seed: int = 0,
    start: RateScaleStart | None = None,
) -> float:
    """The smallest multiple of 0.25 at which the busiest minutes need ``min_peak`` replicas
    (:func:`~scaler.bench.capacity.peak_need`, TTFT SLO ``slo`` seconds), at most
    :data:`MAX_AUTO_RATE_SCALE`; ``load(x)`` is the trace at rate scale ``x``.

    Starts from ``start`` (default: :func:`rate_scale_start` on ``load(1.0)``) and walks in
    steps of 0.25, never above the cap.

    Raises:
        RateScaleError: the estimate, or the walk, goes above :data:`MAX_AUTO_RATE_SCALE` (a
            trace too light or too short for its busiest minute to need ``min_peak``
            replicas without mostly copied requests).
    """

    def need(x: float) -> int:
        return peak_need(load(x), model, slo, routing=routing, seed=seed)

    start = start or rate_scale_start(load(1.0), model, slo, min_peak)
    x = start.estimate
    if need(x) >= min_peak:
        while x > _RATE_STEP and need(x - _RATE_STEP) >= min_peak:
            x -= _RATE_STEP
        return x
    while x < MAX_AUTO_RATE_SCALE:
        x += _RATE_STEP
        if need(x) >= min_peak:
            return x
    raise _too_light(
        start,
        min_peak,
        f"the busiest minute needs fewer than {min_peak} replicas even at x{MAX_AUTO_RATE_SCALE:g}",
    )


@dataclass(frozen=True, slots=True)
class _Job:
    """One policy's simulation on one seed: the controller ``kind`` and what it runs with."""

    kind: str
    trace: Trace
    model: ReplicaModel
    initial_replicas: int
    scrape_interval_seconds: int
    routing: str
    seed: int
    policy: Policy
    interval_seconds: int
    max_replicas: int
    kpa_target: float
    slo_seconds: float
    slo_itl_seconds: float
    keda_cached_metrics: bool
    fast: bool


def _controller(job: _Job) -> Controller:
    if job.kind == "vllm-scaler":
        return VllmScalerController(
            job.policy.targets[0],
            rate_window_seconds=job.policy.rate_window_seconds,
            interval_seconds=job.interval_seconds,
        )
    if job.kind == BASELINE:
        return KedaHpaController(
            max_replicas=job.max_replicas, cached_metrics=job.keda_cached_metrics
        )
    if job.kind == "hpa-kv":
        return KvHpaController(max_replicas=job.max_replicas)
    return KpaController(KpaConfig(job.kpa_target, max_replicas=job.max_replicas))


def run_policy(job: _Job, controller: Controller | None = None) -> PolicyFigures:
    """One policy on one routing seed: its figures (with what it learned, if it learns);
    ``controller`` replaces the one ``job.kind`` names (a variant of it)."""
    controller = controller or _controller(job)
    run = simulate(
        job.trace,
        controller,
        model=job.model,
        initial_replicas=job.initial_replicas,
        scrape_interval_seconds=job.scrape_interval_seconds,
        seed=job.seed,
        routing=job.routing,
        fast=job.fast,
    )
    figures = figures_of_run(
        run,
        job.slo_seconds,
        step_seconds=job.trace.step_seconds,
        lead_seconds=job.model.model_load_seconds,
        slo_itl_seconds=job.slo_itl_seconds,
    )
    learned = getattr(controller, "learned", None)
    if learned:
        prices = tuple(getattr(controller, "prices", ()))
        figures = replace(figures, learned_capacity=tuple(learned), learned_prices=prices)
    return figures


def load_bench_trace(options: BenchOptions, scale: float) -> Trace:
    """The options' trace at ``scale``.

    Raises:
        FileNotFoundError, ValueError: as :func:`~scaler.sim.catalog.open_trace`.
    """
    return open_trace(
        options.trace,
        time_column=options.time_column,
        prompt_column=options.prompt_column,
        output_column=options.output_column,
        time_unit=options.time_unit,
        start_seconds=options.start_seconds,
        duration_seconds=options.duration_seconds,
        rate_scale=scale,
        seed=options.seed,
        hash_column=options.hash_column,
        hash_block_tokens=options.hash_block_tokens,
    )


@dataclass(frozen=True, slots=True)
class Prepared:
    """The trace at its rate scale and what every row runs with (:func:`prepare`)."""

    options: BenchOptions
    model: ReplicaModel
    trace: Trace
    summary: str
    scale: float
    capacity: Capacity
    kpa_target: float
    initial_replicas: int
    fixed_start: int
    max_replicas: int
    policy: Policy
    seeds: tuple[int, ...]

    def job(self, kind: str, seed: int, policy: Policy | None = None) -> _Job:
        """The simulation of policy ``kind`` on routing seed ``seed``."""
        o = self.options
        return _Job(
            kind=kind, trace=self.trace, model=self.model, initial_replicas=self.initial_replicas,
            scrape_interval_seconds=o.scrape_interval_seconds, routing=o.routing, seed=seed,
            policy=policy or self.policy, interval_seconds=o.control_interval_seconds,
            max_replicas=self.max_replicas, kpa_target=self.kpa_target,
            slo_seconds=o.slo_ttft_seconds, slo_itl_seconds=o.slo_itl_seconds,
            keda_cached_metrics=o.keda_cached_metrics, fast=o.fast,
        )  # fmt: skip

    def reference_setup(self) -> ReferenceSetup:
        """What the hindsight rows are computed with."""
        o = self.options
        return ReferenceSetup(
            trace=self.trace, model=self.model, slo_seconds=o.slo_ttft_seconds,
            slo_itl_seconds=o.slo_itl_seconds, routing=o.routing, seeds=self.seeds,
            max_replicas=self.max_replicas, fixed_start=self.fixed_start,
            step_seconds=self.trace.step_seconds,
        )  # fmt: skip


def _with_max(policy: Policy, max_replicas: int) -> Policy:
    targets = [t.model_copy(update={"max_replicas": max_replicas}) for t in policy.targets]
    return policy.model_copy(update={"targets": targets})


def prepare(options: BenchOptions, progress: Callable[[str], None] | None = None) -> Prepared:
    """Read the trace, resolve the rate scale, size the starting fleet and the maximum.

    Args:
        options: what to run.
        progress: called with one line on what was read (with auto: at x1 and the search's
            estimate, before the search) and one with the rate scale used.

    Raises:
        FileNotFoundError, ValueError: a trace that cannot be read, an empty window, one
            whose arrivals span 0 s, or one whose every request is longer than the context.
        RateScaleError: auto would multiply the trace above :data:`MAX_AUTO_RATE_SCALE`, or
            the rate scale leaves fewer than two requests (or all at one instant).
    """
    model = ReplicaModel(model_load_seconds=options.model_load_seconds)
    slo = options.slo_ttft_seconds

    def load(scale: float) -> Trace:
        return load_bench_trace(options, scale)

    base_trace = load(1.0)
    if not base_trace.requests:
        end = (
            f"{(options.start_seconds + options.duration_seconds) / 60:g}"
            if options.duration_seconds is not None
            else "the end"
        )
        raise ValueError(
            f"no requests in minutes {options.start_seconds / 60:g} to {end} of "
            f"{options.trace} (check --start-minute and --minutes)"
        )
    if not base_trace.duration_seconds > 0:
        raise ValueError(
            f"{base_trace.source}: {len(base_trace)} request(s) over 0 s: nothing to autoscale "
            "(expected arrivals spread over time)"
        )
    if rejected_count(base_trace, model.max_model_len) == len(base_trace.requests):
        raise ValueError(
            f"{base_trace.source}: all {len(base_trace.requests)} request(s) are longer than the "
            f"model's context (prompt + output > {model.max_model_len} tokens), rejected at once: "
            "nothing to serve (expected requests that fit)"
        )
    scale = options.rate_scale
    auto_text = ""
    if scale is None:
        start = rate_scale_start(base_trace, model, slo, options.min_peak_replicas)
        if progress is not None:
            progress(
                summary_line(
                    base_trace,
                    max_model_len=model.max_model_len,
                    rate_scale=f"auto: {start.text(options.min_peak_replicas)}; searching for "
                    f"the smallest multiple of 0.25 (at most x{MAX_AUTO_RATE_SCALE:g})",
                )
            )
        scale = auto_rate_scale(
            load, model, slo, options.min_peak_replicas, routing=options.routing,
            seed=options.seed, start=start,
        )  # fmt: skip
        auto_text = (
            f"; the smallest at which the busiest minute needs {options.min_peak_replicas} "
            f"replica{'' if options.min_peak_replicas == 1 else 's'}"
        )
    trace = base_trace if scale == 1.0 else load(scale)  # a day's trace takes a while to draw
    if len(trace) < 2 or not trace.duration_seconds > 0:
        raise RateScaleError(
            f"{trace.source}: {len(trace)} request(s) left at rate x{scale:g} (of "
            f"{len(base_trace)} at x1): nothing to autoscale (expected a rate scale that keeps "
            "requests spread over time)"
        )
    scale_text = f"x{scale:g}" + (" (auto)" if options.rate_scale is None else "")
    summary = summary_line(trace, max_model_len=model.max_model_len, rate_scale=scale_text)
    # the fixed row starts at it; with auto it says what the busiest minute needs at the scale
    fixed_start = peak_need(trace, model, slo, routing=options.routing, seed=options.seed)
    lowest = options.rate_scale is None and scale <= _RATE_STEP
    if lowest and fixed_start > options.min_peak_replicas:
        auto_text = (
            f"; the lowest auto takes, and even there the busiest minute needs {fixed_start} "
            f"replicas, more than {options.min_peak_replicas} (pass --rate-scale N below "
            f"x{_RATE_STEP:g} for fewer)"
        )
    seeds = tuple(options.seed + i for i in range(max(1, options.routing_seeds)))
    if progress is not None:
        # the report opens with the read line: said once, not here too
        progress(
            f"rate scale {scale_text}: {len(trace)} requests{auto_text}; simulating the "
            f"{len(ROWS)} rows on {len(seeds)} routing seed{'s' if len(seeds) > 1 else ''} in "
            f"{options.jobs} process{'es' if options.jobs > 1 else ''}"
        )
    capacity = probe_capacity(trace, model, slo)
    kpa_target = max(1.0, round(_KPA_UTILIZATION * capacity.concurrency))
    # Every row starts sized for the first minute, as the instant schedule is.
    initial = search_schedule(
        trace, model=model, slo_seconds=slo, routing=options.routing, seed=options.seed,
        first_minute_only=True, max_replicas=max(128, 2 * fixed_start),
    ).replicas[0]  # fmt: skip
    top = options.max_replicas or derive_max_replicas(fixed_start, initial)
    initial = min(initial, top)
    policy = _with_max(options.policy or default_policy(top), top)
    return Prepared(
        options, model, trace, summary, scale, capacity, kpa_target, initial, fixed_start, top,
        policy, seeds,
    )  # fmt: skip


def _truth(prep: Prepared) -> list[tuple[float, float, str, TrueCapacity]]:
    """The true capacity on each segment of the trace (:mod:`scaler.bench.truth`)."""
    trace, o = prep.trace, prep.options
    out = []
    for seg in segments(trace, window_count=_windows(trace.duration_seconds)):
        mix = [
            r for r in trace.requests if seg.start_seconds <= r.arrival_seconds < seg.end_seconds
        ]
        if not any(
            r.prompt_tokens + max(1, r.output_tokens) <= prep.model.max_model_len for r in mix
        ):
            continue
        cap = true_capacity(
            mix, prep.model, o.slo_ttft_seconds, o.slo_itl_seconds,
            hash_block_tokens=trace.hash_block_tokens, seed=o.seed,
        )  # fmt: skip
        out.append((seg.start_seconds, seg.end_seconds, seg.after, cap))
    return out


def _windows(duration_seconds: float) -> int:
    """Windows of a trace without shifts: halves up to six hours, then one per three hours."""
    return max(2, math.ceil(duration_seconds / 10800 - 1e-9))


_V = TypeVar("_V")


def _learned_at(series: Sequence[tuple[float, _V | None]], t: float) -> _V | None:
    """The last learned value at or before ``t``."""
    value: _V | None = None
    for at, v in series:
        if at > t:
            break
        value = v
    return value


def _capacity_checks(
    prep: Prepared,
    truth: Sequence[tuple[float, float, str, TrueCapacity]],
    us: RowFigures,
) -> list[CapacityCheck]:
    """Goal (e): the learned capacity 10 minutes into each segment after a shift, or at the end
    of each window of a trace without shifts, against the segment's truth (first seed)."""
    units = truth_in_learned_units(prep.policy.targets[0])
    shifted = bool(prep.trace.shifts)
    out = []
    for start, end, after, cap in truth:
        # after a shift: 10 minutes into the segment; else (and for the first): its end
        at = min(end, start + _AFTER_SHIFT_SECONDS) if shifted and after != "start" else end
        prices = _learned_at(us.first.learned_prices, at)
        learned = _learned_at(us.first.learned_capacity, at)
        out.append(CapacityCheck(at, after, units(cap, prices), learned))
    return out


def run_bench(options: BenchOptions, progress: Callable[[str], None] | None = None) -> BenchResult:
    """Run the whole benchmark (see the module docstring).

    Args:
        options: what to run.
        progress: as :func:`prepare`.

    Raises:
        FileNotFoundError, ValueError, RateScaleError: as :func:`prepare`.
    """
    started = time.monotonic()
    prep = prepare(options, progress)
    trace, model = prep.trace, prep.model
    jobs = [prep.job(kind, seed) for kind in POLICIES for seed in prep.seeds]
    refs: References | None = None
    if options.jobs > 1:
        with ProcessPoolExecutor(max_workers=options.jobs) as pool:
            # The references are the longest job: start them first.
            future: Future[References] | None = (
                pool.submit(run_references, prep.reference_setup()) if options.references else None
            )
            futures = [pool.submit(run_policy, j) for j in jobs]
            truth = _truth(prep)
            runs = [f.result() for f in futures]
            refs = future.result() if future is not None else None
    else:
        refs = run_references(prep.reference_setup()) if options.references else None
        runs = [run_policy(j) for j in jobs]
        truth = _truth(prep)
    per_row: dict[str, list[PolicyFigures]] = {}
    for job, fig in zip(jobs, runs, strict=True):
        per_row.setdefault(job.kind, []).append(fig)
    rows = {name: RowFigures(name, tuple(figs)) for name, figs in per_row.items()}
    if refs is not None:
        rows.update({name: RowFigures(name, figs) for name, figs in refs.rows.items()})
    checks = _capacity_checks(prep, truth, rows["vllm-scaler"])
    bound = gpu_seconds_lower_bound(trace, model, options.slo_ttft_seconds, FIXED_SLO_SHARE) / 3600
    per_second = [0.0] * max(1, math.ceil(trace.duration_seconds / 10))
    for r in trace.requests:
        per_second[min(len(per_second) - 1, int(r.arrival_seconds // 10))] += 0.1
    return BenchResult(
        trace=trace.description,
        summary=prep.summary,
        duration_seconds=trace.duration_seconds,
        rate_scale=prep.scale,
        rate_scale_auto=options.rate_scale is None,
        slo_ttft_seconds=options.slo_ttft_seconds,
        slo_itl_seconds=options.slo_itl_seconds,
        model_load_seconds=options.model_load_seconds,
        capacity=prep.capacity,
        kpa_target=prep.kpa_target,
        initial_replicas=prep.initial_replicas,
        max_replicas=prep.max_replicas,
        max_replicas_derived=options.max_replicas is None,
        seeds=prep.seeds,
        policy_source=options.policy_source,
        control_interval_seconds=options.control_interval_seconds,
        routing=options.routing,
        keda_cached_metrics=options.keda_cached_metrics,
        rejected=rejected_count(trace, model.max_model_len),
        step_seconds=trace.step_seconds,
        arrivals_per_second=tuple(per_second),
        rows=tuple(rows[n] for n in ROWS if n in rows),
        hindsight_replicas=refs.schedules if refs is not None else {},
        optimal=refs.optimal if refs is not None else None,
        truth=tuple(truth),
        capacity_checks=tuple(checks),
        lower_bound_gpu_hours=bound,
        goals=goals_for(options.trace, rows, checks) if refs is not None else (),
        elapsed_seconds=time.monotonic() - started,
    )
