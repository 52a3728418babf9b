"""The benchmark: one trace, the policies and the hindsight references, the same replica model,
in virtual time.

:func:`run_bench` resolves the rate scale (``auto``: the smallest multiple of 0.25 at which the
trace's busiest minutes need at least ``min_peak_replicas`` replicas, each started empty and
instantly, to keep 99% of their requests within the SLO), measures one replica's capacity on
the trace's mix (the KPA's target), finds the hindsight schedules
(:mod:`scaler.bench.hindsight`) and the cheapest fixed fleet, simulates the four autoscalers
(in parallel processes when ``jobs > 1``; the results do not depend on it), computes the lower
bound (:mod:`scaler.bench.bound`) and derives every figure and ratio. Every row, policy or
reference, is a replay through :mod:`scaler.bench.simulate` with the same routing. Requests
longer than the model's context are rejected at once, as vLLM does: counted per row, left out
of every share, the searches, the rate scale and the starting fleet. Same inputs and seed,
same numbers.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass, replace
from typing import Any

from scaler.bench.bound import gpu_seconds_lower_bound
from scaler.bench.capacity import Capacity, peak_need, probe_capacity
from scaler.bench.controllers import (
    FixedController,
    KedaHpaController,
    KpaController,
    KvHpaController,
    VllmScalerController,
    bench_workload,
)
from scaler.bench.figures import PolicyFigures, figures_of_run
from scaler.bench.hindsight import pay_model_load, replay_schedule, search_schedule
from scaler.bench.kpa import KpaConfig
from scaler.bench.simulate import Controller, RunRecord, simulate
from scaler.config.policy import Policy, TargetPolicy
from scaler.sim.catalog import open_trace
from scaler.sim.engine import ReplicaModel
from scaler.sim.routing import Routing
from scaler.sim.trace import Trace, rejected_count, summary_line

__all__ = [
    "BASELINE",
    "HINDSIGHT",
    "MAX_AUTO_RATE_SCALE",
    "REACTIVE",
    "BenchOptions",
    "BenchResult",
    "Goal",
    "RateScaleError",
    "RateScaleStart",
    "auto_rate_scale",
    "cheapest_fixed",
    "default_policy",
    "rate_scale_start",
    "reactive_schedule",
    "run_bench",
]

#: The policy the others are compared with (policy 2: KEDA on queue depth).
BASELINE = "keda-queue"
#: The reference the goals are stated against: the hindsight schedule paying model load.
HINDSIGHT = "hindsight-load"
#: The best a reactive policy can do (see :func:`reactive_schedule`).
REACTIVE = "hindsight-reactive"
#: Row order of the table.
ROWS = (
    "vllm-scaler",
    BASELINE,
    "hpa-kv",
    "kpa",
    "fixed",
    "hindsight-instant",
    HINDSIGHT,
    REACTIVE,
)
#: The rows a policy is compared with for "no other row both cheaper and better".
OTHERS = (BASELINE, "hpa-kv", "kpa", "fixed")
#: The share of accepted requests within the SLO the issue asks for, per trace: 97% where
#: bursts start from idle and end before a model load could answer them, 99% elsewhere.
SHARE_GOALS = {"code": 0.97, "synthetic:flash": 0.97}
#: The most GPU-hours a policy may spend, over the hindsight schedule paying model load.
COST_GOAL = 1.3
#: The scale-down window the reactive reference keeps replicas through (HPA's default), minutes.
_REACTIVE_HOLD_MINUTES = 5
# Knative's default container-concurrency-target-percentage: aim at 70% of capacity.
_KPA_UTILIZATION = 0.7
_RATE_STEP = 0.25
#: The most ``--rate-scale auto`` multiplies a trace by. The bundled traces and shapes need
#: x0.5-x3; above x10 nine in ten replayed requests would be copies of the same request, and
#: the figures would describe the copying more than the trace.
MAX_AUTO_RATE_SCALE = 10.0
#: The share of accepted requests within the SLO the references keep (the issue's goal).
FIXED_SLO_SHARE = 0.99
# Searches of the load-paying schedule when its replay falls short of the share.
_LOAD_ATTEMPTS = 3


def default_policy(max_replicas: int = 32) -> Policy:
    """vllm-scaler's shipped defaults (:class:`TargetPolicy`) with room to scale."""
    return Policy(targets=[TargetPolicy(workload=bench_workload(), max_replicas=max_replicas)])


@dataclass(frozen=True, slots=True)
class BenchOptions:
    """What to benchmark.

    Attributes:
        trace: ``code``, ``conv``, ``synthetic:<shape>`` or a CSV/JSONL path
            (:func:`~scaler.sim.catalog.open_trace`).
        time_column, prompt_column, output_column, time_unit: how to read a file (see
            :func:`~scaler.sim.trace.load_trace`).
        start_seconds, duration_seconds: the window replayed (real seconds; None: to the end).
        rate_scale: request-rate multiplier, or None for auto.
        min_peak_replicas: with auto, the busiest minutes' need to reach.
        slo_ttft_seconds: the TTFT SLO, seconds.
        model_load_seconds: time from pod creation to Ready, seconds.
        policy: vllm-scaler's policy (its first target is used), default :func:`default_policy`.
        control_interval_seconds: vllm-scaler's control interval, seconds.
        scrape_interval_seconds: Prometheus' scrape interval, seconds.
        max_replicas: every baseline's maximum.
        seed: seed of the rate scaling, the synthetic shapes and the routing.
        policy_source: how reports name vllm-scaler's policy.
        jobs: processes to simulate in (1: in this process).
        routing: how requests reach the replicas (:class:`~scaler.sim.routing.Routing`).
        keda_cached_metrics: the KEDA baseline reuses its last 30 s poll on every HPA sync
            (``useCachedMetrics: true``) instead of querying afresh (KEDA's default).
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
    model_load_seconds: float = 120.0
    policy: Policy | None = None
    control_interval_seconds: int = 15
    scrape_interval_seconds: int = 15
    max_replicas: int = 32
    seed: int = 0
    jobs: int = 1
    policy_source: str = "shipped default policy (max 32)"
    routing: str = Routing.RANDOM.value
    keda_cached_metrics: bool = False


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
        summary: the one line on what was read (requests, duration, unit, rejected, scale).
        duration_seconds: the trace window replayed, seconds (GPU time is counted over it).
        rate_scale: the rate scale used; ``rate_scale_auto`` says whether it was searched.
        slo_ttft_seconds: the TTFT SLO, seconds.
        model_load_seconds: time from pod creation to Ready, seconds.
        capacity: one replica's measured capacity on the trace's mix.
        kpa_target: the KPA's target concurrency per replica.
        initial_replicas: replicas every policy starts with (the hindsight schedule's first
            minute).
        policy_source: where vllm-scaler's policy came from (a file, or the defaults).
        control_interval_seconds: vllm-scaler's control interval, seconds.
        routing: how requests reached the replicas.
        keda_cached_metrics: whether the KEDA baseline reused its poll.
        rejected: requests longer than the context (rejected at once, in every row).
        step_seconds: the trace's load step (synthetic:flash), for the reaction times.
        arrivals_per_second: the offered load for the plot: accepted and rejected arrivals
            per second, averaged over consecutive 10 s bins from the trace start.
        policies: figures per row, in :data:`ROWS` order.
        hindsight_replicas: the instant and load-paying schedules, per minute.
        lower_bound_gpu_hours: the provable floor (:mod:`scaler.bench.bound`).
        goals: the issue's goals for vllm-scaler.
        elapsed_seconds: wall time of the benchmark.
    """

    trace: str
    summary: str
    duration_seconds: float
    rate_scale: float
    rate_scale_auto: bool
    slo_ttft_seconds: float
    model_load_seconds: float
    capacity: Capacity
    kpa_target: float
    initial_replicas: int
    policy_source: str
    control_interval_seconds: int
    routing: str
    keda_cached_metrics: bool
    rejected: int
    step_seconds: float | None
    arrivals_per_second: tuple[float, ...]
    policies: tuple[PolicyFigures, ...]
    hindsight_replicas: dict[str, tuple[int, ...]]
    lower_bound_gpu_hours: float
    goals: tuple[Goal, ...]
    elapsed_seconds: float

    def by_name(self, name: str) -> PolicyFigures:
        """The figures of one row (KeyError when absent)."""
        for p in self.policies:
            if p.name == name:
                return p
        raise KeyError(name)


@dataclass(frozen=True, slots=True)
class RateScaleStart:
    """Where ``--rate-scale auto`` starts, from the trace at x1 (cheap: one replica's probe).

    Attributes:
        capacity_rps: one replica's capacity on the trace's mix, requests/s.
        peak_minute_requests: accepted arrivals in the trace's busiest minute.
        estimate: ``min_peak x capacity / peak-minute rate``, rounded up to a multiple of 0.25.
        below_lowest: the unrounded estimate was below 0.25, the lowest scale auto takes.
    """

    capacity_rps: float
    peak_minute_requests: int
    estimate: float
    below_lowest: bool = False

    def text(self, min_peak: int) -> str:
        """One line on the estimate, for the progress output."""
        return (
            f"one replica serves about {self.capacity_rps:.3g} requests/s of this mix as "
            "recorded (x1, a first estimate) and the busiest minute has "
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
    ``slo`` seconds and ``min_peak`` replicas at the busiest minute.

    Raises:
        RateScaleError: the estimate is above :data:`MAX_AUTO_RATE_SCALE`.
    """
    cap = probe_capacity(base, model, slo)
    per_minute = [0] * max(1, math.ceil(base.duration_seconds / 60))
    for r in base.requests:
        if r.prompt_tokens + max(1, r.output_tokens) <= model.max_model_len:
            per_minute[min(len(per_minute) - 1, int(r.arrival_seconds // 60))] += 1
    # a trace shorter than a minute has its busiest "minute" in that much time
    window = min(60.0, base.duration_seconds) if base.duration_seconds > 0 else 60.0
    peak_rate = max(per_minute) / window or 1.0
    raw = min_peak * cap.rate / peak_rate
    x = max(_RATE_STEP, math.ceil(raw / _RATE_STEP) * _RATE_STEP)
    start = RateScaleStart(cap.rate, max(per_minute), x, below_lowest=raw < _RATE_STEP)
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
    """One row's simulation: the controller ``kind`` (a row name) and what it runs with."""

    kind: str
    trace: Trace
    model: ReplicaModel
    initial_replicas: int
    scrape_interval_seconds: int
    routing: str
    seed: int = 0
    policy: Policy | None = None
    interval_seconds: int = 15
    max_replicas: int = 32
    kpa_target: float = 1.0
    slo_seconds: float = 2.0
    fixed_replicas: int = 1
    keda_cached_metrics: bool = False


def _controller(job: _Job) -> Controller:
    if job.kind == "vllm-scaler":
        assert job.policy is not None
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
    if job.kind == "fixed":
        return FixedController(job.fixed_replicas)
    return KpaController(KpaConfig(job.kpa_target, max_replicas=job.max_replicas))


def _figures(job: _Job, run: RunRecord) -> PolicyFigures:
    return figures_of_run(
        run,
        job.slo_seconds,
        step_seconds=job.trace.step_seconds,
        lead_seconds=job.model.model_load_seconds,
    )


def _run_job(job: _Job) -> PolicyFigures:
    run = simulate(
        job.trace,
        _controller(job),
        model=job.model,
        initial_replicas=job.initial_replicas,
        scrape_interval_seconds=job.scrape_interval_seconds,
        seed=job.seed,
        routing=job.routing,
    )
    return _figures(job, run)


def cheapest_fixed(
    run: Callable[[int], PolicyFigures],
    start: int,
    max_replicas: int,
    share: float = FIXED_SLO_SHARE,
) -> PolicyFigures:
    """The run of the smallest constant fleet in ``[1, max_replicas]`` that keeps at least
    ``share`` (0-1) of the requests within the SLO; the ``max_replicas`` run if none does.

    Walks from ``start`` (an estimate of the peak need: a few runs) down while the fleet one
    smaller still meets ``share``, or up until one meets it; assumes attainment does not fall
    as replicas are added (true on average; with random routing one fleet size may do a
    little worse than the next smaller one, and then the walk stops at the first it meets).
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


def reactive_schedule(
    instant: Sequence[int], hold_minutes: int = _REACTIVE_HOLD_MINUTES
) -> tuple[int, ...]:
    """The reactive reference: each minute the largest instant-start need of that minute and
    the ``hold_minutes - 1`` before it.

    Replayed with no lead, it is a policy that knows the exact need of each minute at its start
    (before any of its requests arrive), asks for it at once, gets the added replicas a model
    load later, and keeps them through a scale-down window. No policy that reacts to load it
    has seen does better; what it misses, only a forecast of load not seen yet could serve.
    """
    return tuple(max(instant[max(0, m - hold_minutes + 1) : m + 1]) for m in range(len(instant)))


def _run_hindsight(
    base: _Job,
) -> tuple[PolicyFigures, PolicyFigures, PolicyFigures, dict[str, tuple[int, ...]]]:
    """The instant-start, load-paying and reactive hindsight schedules and their replays."""
    model, trace, load = base.model, base.trace, base.model.model_load_seconds
    common: dict[str, Any] = {"routing": base.routing, "seed": base.seed}
    found = first = search_schedule(trace, model=model, slo_seconds=base.slo_seconds, **common)
    instant_model = replace(model, model_load_seconds=0.0)
    instant = _figures(
        base,
        replay_schedule(
            trace, found.replicas, model=instant_model, name="hindsight-instant", **common
        ),
    )
    target = FIXED_SLO_SHARE
    for attempt in range(_LOAD_ATTEMPTS):
        schedule, lead = pay_model_load(found.replicas, load)
        paying = _figures(
            base,
            replay_schedule(
                trace, schedule, model=model, lead_seconds=lead, name=HINDSIGHT, **common
            ),
        )
        short = FIXED_SLO_SHARE - paying.slo_request_share
        if short <= 0 or attempt == _LOAD_ATTEMPTS - 1:
            break
        target = min(1.0, target + short + 0.0005)
        found = search_schedule(
            trace, model=model, slo_seconds=base.slo_seconds, share=target, **common
        )
    reactive = reactive_schedule(first.replicas)
    reacting = _figures(
        base, replay_schedule(trace, reactive, model=model, name=REACTIVE, **common)
    )
    return (
        instant,
        paying,
        reacting,
        {"hindsight-instant": first.replicas, HINDSIGHT: schedule, REACTIVE: reactive},
    )


def _cheapest_reference(
    figures: dict[str, PolicyFigures],
    schedules: dict[str, tuple[int, ...]],
    duration_seconds: float,
) -> None:
    """A constant fleet is a schedule too: where the cheapest fixed fleet keeps the share at
    fewer GPU-hours than a searched schedule (noisy needs per minute, random routing), it is
    the reference, under the reference's name and with its schedule (in place)."""
    fixed = figures["fixed"]
    if fixed.slo_request_share < FIXED_SLO_SHARE:
        return
    minutes = max(1, math.ceil(duration_seconds / 60 - 1e-9))
    for name in ("hindsight-instant", HINDSIGHT):
        ref = figures[name]
        if ref.slo_request_share < FIXED_SLO_SHARE or fixed.gpu_hours < ref.gpu_hours:
            figures[name] = replace(fixed, name=name)
            schedules[name] = (fixed.peak_replicas,) * minutes


def _goals(result: dict[str, PolicyFigures], share_goal: float) -> tuple[Goal, ...]:
    """Issue 13's goals for vllm-scaler on this trace."""
    us, ref = result["vllm-scaler"], result[HINDSIGHT]
    cost_ref = us.gpu_hours / ref.gpu_hours if ref.gpu_hours else math.inf
    dominating = [
        name
        for name in OTHERS
        if result[name].gpu_hours < us.gpu_hours
        and result[name].slo_request_share > us.slo_request_share
    ]
    return (
        Goal(
            f">= {100 * share_goal:g}% of accepted requests within the TTFT SLO",
            f"{100 * us.slo_request_share:.2f}%",
            us.slo_request_share >= share_goal,
        ),
        Goal(
            f"GPU-hours <= {COST_GOAL:g}x the hindsight schedule paying model load ({HINDSIGHT})",
            f"{cost_ref:.2f}x",
            cost_ref <= COST_GOAL,
        ),
        Goal(
            f"no other row ({', '.join(OTHERS)}) both cheaper and better",
            ", ".join(dominating) if dominating else "none",
            not dominating,
        ),
        Goal("no request cut by a scale-down", f"{us.cut} cut", us.cut == 0),
        Goal(
            "no sawtooth (scale-up within 5 minutes after a scale-down at a steady load)",
            f"{us.sawtooth}",
            us.sawtooth == 0,
        ),
    )


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
    )


def run_bench(options: BenchOptions, progress: Callable[[str], None] | None = None) -> BenchResult:
    """Run the whole benchmark (see the module docstring).

    Args:
        options: what to run.
        progress: called with one line on what was read (with auto: at x1 and the search's
            estimate, before the search) and one with the rate scale used, before the
            simulations.

    Raises:
        FileNotFoundError, ValueError: a trace that cannot be read, an empty window, one
            whose arrivals span 0 s, or one whose every request is longer than the context.
        RateScaleError: auto would multiply the trace above :data:`MAX_AUTO_RATE_SCALE`, or
            the rate scale leaves fewer than two requests (or all at one instant).
    """
    started = time.monotonic()
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
    trace = load(scale)
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
    if progress is not None:
        # the report opens with the read line: said once, not here too
        progress(
            f"rate scale {scale_text}: {len(trace)} requests{auto_text}; simulating the "
            f"{len(ROWS)} rows in {options.jobs} process{'es' if options.jobs > 1 else ''}"
        )
    capacity = probe_capacity(trace, model, slo)
    kpa_target = max(1.0, round(_KPA_UTILIZATION * capacity.concurrency))
    # Every policy starts sized for the first minute, as the hindsight schedule is.
    initial = search_schedule(
        trace, model=model, slo_seconds=slo, routing=options.routing, seed=options.seed,
        first_minute_only=True,
    ).replicas[0]  # fmt: skip
    policy = options.policy or default_policy(options.max_replicas)
    base = _Job(
        kind=BASELINE,
        trace=trace,
        model=model,
        initial_replicas=initial,
        scrape_interval_seconds=options.scrape_interval_seconds,
        routing=options.routing,
        seed=options.seed,
        max_replicas=options.max_replicas,
        slo_seconds=slo,
        keda_cached_metrics=options.keda_cached_metrics,
    )
    jobs = [
        replace(
            base,
            kind="vllm-scaler",
            policy=policy,
            interval_seconds=options.control_interval_seconds,
        ),
        base,
        replace(base, kind="hpa-kv"),
        replace(base, kind="kpa", kpa_target=kpa_target),
    ]
    if options.jobs > 1:
        with ProcessPoolExecutor(max_workers=options.jobs) as pool:
            # The hindsight search is the longest job: start it first.
            refs: Future[Any] = pool.submit(_run_hindsight, base)
            fixed_future = pool.submit(_run_fixed, base, fixed_start)
            futures = [pool.submit(_run_job, j) for j in jobs]
            runs = [f.result() for f in futures] + [fixed_future.result()]
            instant, paying, reacting, schedules = refs.result()
    else:
        instant, paying, reacting, schedules = _run_hindsight(base)
        runs = [_run_job(j) for j in jobs] + [_run_fixed(base, fixed_start)]
    figures = {f.name: f for f in [*runs, instant, paying, reacting]}
    _cheapest_reference(figures, schedules, trace.duration_seconds)
    bound = gpu_seconds_lower_bound(trace, model, slo, FIXED_SLO_SHARE) / 3600
    per_second = [0.0] * max(1, math.ceil(trace.duration_seconds / 10))
    for r in trace.requests:
        per_second[min(len(per_second) - 1, int(r.arrival_seconds // 10))] += 0.1
    return BenchResult(
        trace=trace.description,
        summary=summary,
        duration_seconds=trace.duration_seconds,
        rate_scale=scale,
        rate_scale_auto=options.rate_scale is None,
        slo_ttft_seconds=slo,
        model_load_seconds=options.model_load_seconds,
        capacity=capacity,
        kpa_target=kpa_target,
        initial_replicas=initial,
        policy_source=options.policy_source,
        control_interval_seconds=options.control_interval_seconds,
        routing=options.routing,
        keda_cached_metrics=options.keda_cached_metrics,
        rejected=rejected_count(trace, model.max_model_len),
        step_seconds=trace.step_seconds,
        arrivals_per_second=tuple(per_second),
        policies=tuple(figures[n] for n in ROWS),
        hindsight_replicas=schedules,
        lower_bound_gpu_hours=bound,
        goals=_goals(figures, SHARE_GOALS.get(options.trace, FIXED_SLO_SHARE)),
        elapsed_seconds=time.monotonic() - started,
    )
