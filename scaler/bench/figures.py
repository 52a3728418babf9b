"""The benchmark's figures per policy: service (TTFT vs the SLO), cost (GPU-hours), churn.

Definitions (times in seconds, TTFT measured from arrival to the end of the engine step that
produced the first token):

- rejected: requests longer than the model's context (prompt + output above
  ``max_model_len``), answered at once as vLLM does; they count nowhere else;
- share of requests within the SLO: accepted requests whose TTFT <= SLO over all accepted
  requests; a request with no first token (cut, or still queued at the end) is a miss;
- share within the ITL SLO: accepted requests that finished with a mean inter-token latency
  (first to last token over the gaps: the request's TPOT) at most the ITL SLO; a request of
  one token has no gap and is within it once finished; a cut or unfinished request is a miss.
  *Both*: within the TTFT and the ITL SLO;
- share of minutes within the SLO: over the trace's minutes that have accepted arrivals, those
  whose TTFT p95 (nearest rank over the accepted requests that *arrived* in that minute) is
  within the SLO;
- GPU-hours: every pod from its creation to its deletion (model load and draining included),
  counted inside the trace window ``[0, duration]``;
- scale events: writes of ``spec.replicas``; reversals: consecutive events in opposite
  directions;
- peak queue: the largest number of requests waiting (in replicas, or held while none was
  ready), sampled every second;
- cut: requests aborted because their pod was killed at the end of its grace period;
- reaction (on a trace with a load step, :attr:`~scaler.sim.trace.Trace.step_seconds`):
  seconds from the step's start to the first scale-up write and to the first added replica
  Ready, counting from ``model load`` seconds before the step (so that a schedule that
  anticipates it shows a negative time; a reactive policy cannot);
- sawtooth: scale-ups written within :data:`SAWTOOTH_SECONDS` after a scale-down while the
  load is steady: the arrival rate over the :data:`SAWTOOTH_RISE_SECONDS` before the
  scale-up is at most :data:`SAWTOOTH_RISE` times the rate over the
  :data:`SAWTOOTH_SECONDS` before the scale-down (the capacity removed was needed again
  for the same load: a scale-down that went too far);
- halves: the share within the SLO and the GPU-hours of the requests arriving in, and the
  pods' time inside, the first and the second half of the trace window (parameters are
  chosen on the first half; the second half shows whether they carry over).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

from scaler.bench.capacity import nearest_rank
from scaler.bench.simulate import PodRecord, RunRecord
from scaler.config.signal_specs import CapacityCost
from scaler.sim.engine import SimRequest

__all__ = [
    "DEFAULT_ITL_SLO_SECONDS",
    "SAWTOOTH_RISE",
    "SAWTOOTH_RISE_SECONDS",
    "SAWTOOTH_SECONDS",
    "PolicyFigures",
    "Reaction",
    "RowFigures",
    "WindowFigures",
    "figures_of_run",
    "littles_law",
    "reaction",
    "reversals",
    "sawtooth",
    "window_figures",
]

#: The default ITL SLO, seconds, on each request's mean inter-token latency: 100 ms a token
#: (10 tokens/s, ahead of a reader), the TPOT target of llm-d's published autoscaling figure
#: (TTFT 3 s / TPOT 100 ms). The replica decodes at 17-40 ms a token at 1-48 requests in
#: flight and a step that prefills a 2,048-token chunk takes about 0.1 s, so a request misses it
#: when most of the steps it decodes in are prefilling: a replica run near its compute limit.
DEFAULT_ITL_SLO_SECONDS = 0.1

#: A scale-up this soon after a scale-down (seconds) is a sawtooth tooth if the load is steady.
SAWTOOTH_SECONDS = 300.0
#: The load counts as steady while the arrival rate before the scale-up is at most this many
#: times the rate before the scale-down.
SAWTOOTH_RISE = 1.25
#: The span before the scale-up whose arrival rate is compared, seconds.
SAWTOOTH_RISE_SECONDS = 120.0


@dataclass(frozen=True, slots=True)
class Reaction:
    """Seconds from a load step's start to a policy's first scale-up write and to its first
    added replica Ready (None: it never did)."""

    first_write_seconds: float | None
    first_ready_seconds: float | None


@dataclass(frozen=True, slots=True)
class WindowFigures:
    """A policy's figures over part of the trace window.

    Attributes:
        start_seconds, end_seconds: the part, seconds from the trace start.
        requests: accepted requests that arrived in it.
        slo_request_share: of those, the share whose TTFT was within the SLO (0-1; NaN
            without requests).
        gpu_hours: replica-hours of the pods' time inside it.
        itl_request_share, both_request_share: the shares within the ITL SLO and within both.
    """

    start_seconds: float
    end_seconds: float
    requests: int
    slo_request_share: float
    gpu_hours: float
    itl_request_share: float = float("nan")
    both_request_share: float = float("nan")


@dataclass(frozen=True, slots=True)
class PolicyFigures:
    """One policy's figures (see the module docstring for definitions).

    Attributes:
        name: the policy's short name.
        requests, served, cut, unfinished: request counts (``requests`` includes rejected).
        rejected: requests refused for exceeding the context.
        slo_request_share: 0-1.
        slo_minute_share: 0-1.
        violating_minutes: minutes with arrivals whose TTFT p95 missed the SLO.
        ttft_p50, ttft_p95, ttft_p99: seconds, over requests that got a first token.
        gpu_hours: replica-hours.
        scale_events, scale_ups, scale_downs, reversals: counts.
        peak_queue: requests.
        peak_replicas: the largest replica count asked for.
        minute_p95: TTFT p95 per minute (seconds; NaN for minutes without arrivals).
        replicas_over_time: ``(seconds, pods)`` steps, for the plot.
        reaction: on a trace with a load step, the reaction times.
        sawtooth: scale-ups soon after a scale-down at a steady load (:func:`sawtooth`).
        halves: the figures of the first and the second half of the trace window.
        itl_request_share: accepted requests within the ITL SLO, 0-1.
        both_request_share: within both SLOs, 0-1.
        itl_p95: the 95th percentile of the finished requests' mean inter-token latency,
            seconds.
        slo_itl_seconds: the ITL SLO the shares count against, seconds.
        learned_capacity: ``(seconds, learned)`` at each control cycle of a policy that
            learns one replica's capacity (vllm-scaler; None before it has an estimate), in
            its own unit (:func:`~scaler.bench.controllers.learned_capacity`).
        sleeping_replicas: the most replicas asleep at once.
        learned_prices: ``(seconds, prices)`` at each control cycle of that policy: the
            prices of unit work then (its cost as the online fit scaled it), in which the
            learned capacity is.
    """

    name: str
    requests: int
    served: int
    cut: int
    unfinished: int
    rejected: int
    slo_request_share: float
    slo_minute_share: float
    violating_minutes: int
    ttft_p50: float
    ttft_p95: float
    ttft_p99: float
    gpu_hours: float
    scale_events: int
    scale_ups: int
    scale_downs: int
    reversals: int
    peak_queue: int
    peak_replicas: int
    minute_p95: tuple[float, ...]
    replicas_over_time: tuple[tuple[float, int], ...]
    reaction: Reaction | None = None
    sawtooth: int = 0
    halves: tuple[WindowFigures, ...] = ()
    itl_request_share: float = float("nan")
    both_request_share: float = float("nan")
    itl_p95: float = float("nan")
    slo_itl_seconds: float = DEFAULT_ITL_SLO_SECONDS
    learned_capacity: tuple[tuple[float, float | None], ...] = ()
    sleeping_replicas: int = 0
    learned_prices: tuple[tuple[float, CapacityCost], ...] = ()


def reversals(directions: Sequence[int]) -> int:
    """Consecutive scale events in opposite directions (signs of the changes)."""
    signs = [1 if d > 0 else -1 for d in directions if d != 0]
    return sum(1 for a, b in itertools.pairwise(signs) if a != b)


def _service(
    requests: Sequence[SimRequest], duration: float, slo: float
) -> tuple[float, float, int, tuple[float, float, float], tuple[float, ...]]:
    counted = [r for r in requests if not r.rejected]
    ttfts = [r.ttft for r in counted if r.ttft is not None]
    within = sum(1 for t in ttfts if t <= slo)
    minutes = max(1, math.ceil(duration / 60 - 1e-9))
    per_minute: list[list[float]] = [[] for _ in range(minutes)]
    for r in counted:
        m = min(minutes - 1, int(r.arrival // 60))
        per_minute[m].append(r.ttft if r.ttft is not None else math.inf)
    p95s = tuple(nearest_rank(v, 0.95) for v in per_minute)
    busy = [p for p, v in zip(p95s, per_minute, strict=True) if v]
    ok_minutes = sum(1 for p in busy if p <= slo)
    quantiles = (nearest_rank(ttfts, 0.5), nearest_rank(ttfts, 0.95), nearest_rank(ttfts, 0.99))
    return (
        within / len(counted) if counted else math.nan,
        ok_minutes / len(busy) if busy else math.nan,
        len(busy) - ok_minutes,
        quantiles,
        p95s,
    )


def reaction(run: RunRecord, step_seconds: float, lead_seconds: float) -> Reaction:
    """Reaction times to a load step at ``step_seconds`` (see the module docstring); writes
    and pods from ``step_seconds - lead_seconds`` on count."""
    since = step_seconds - lead_seconds
    write = next((t for t, a, b in run.scale_events if t >= since and b > a), None)
    ready = [p.ready_at for p in run.pods if p.created_at >= since and p.ready_at is not None]
    return Reaction(
        None if write is None else write - step_seconds,
        min(ready) - step_seconds if ready else None,
    )


def _arrival_rate(arrivals: Sequence[int], start: float, end: float) -> float:
    """Mean arrivals per second over ``[start, end)`` (per-second counts; clipped to them)."""
    lo, hi = max(0, int(start)), min(len(arrivals), int(end))
    return sum(arrivals[lo:hi]) / (hi - lo) if hi > lo else 0.0


def sawtooth(run: RunRecord) -> int:
    """Scale-ups written within :data:`SAWTOOTH_SECONDS` after a scale-down while the load is
    steady (see the module docstring); each scale-up counts once."""
    arrivals = [s.arrivals for s in run.samples]
    teeth = 0
    last_down: float | None = None
    for t, before, after in run.scale_events:
        if after < before:
            last_down = t
            continue
        if after > before and last_down is not None and t - last_down <= SAWTOOTH_SECONDS:
            earlier = _arrival_rate(arrivals, last_down - SAWTOOTH_SECONDS, last_down)
            now = _arrival_rate(arrivals, t - SAWTOOTH_RISE_SECONDS, t)
            if now <= SAWTOOTH_RISE * earlier:
                teeth += 1
    return teeth


def itl_within(r: SimRequest, slo_itl_seconds: float) -> bool:
    """The request finished with a mean inter-token latency within the ITL SLO (a single
    token has no gap: within it once finished)."""
    if not r.done:
        return False
    itl = r.mean_itl
    return itl is None or itl <= slo_itl_seconds


def _shares(
    counted: Sequence[SimRequest], slo: float, slo_itl: float
) -> tuple[float, float, float]:
    """Shares of ``counted`` within the TTFT SLO, the ITL SLO and both (NaN for none)."""
    if not counted:
        return math.nan, math.nan, math.nan
    ttft = itl = both = 0
    for r in counted:
        a = r.ttft is not None and r.ttft <= slo
        b = itl_within(r, slo_itl)
        ttft += a
        itl += b
        both += a and b
    n = len(counted)
    return ttft / n, itl / n, both / n


def window_figures(
    run: RunRecord,
    slo_seconds: float,
    start_seconds: float,
    end_seconds: float,
    *,
    last: bool = False,
    slo_itl_seconds: float = DEFAULT_ITL_SLO_SECONDS,
) -> WindowFigures:
    """The figures of the accepted requests arriving in ``[start, end)`` (``[start, end]``
    with ``last``: the trace's last arrival may define its end) and of the pods' time in it."""
    counted = [
        r
        for r in run.requests
        if not r.rejected
        and start_seconds <= r.arrival
        and (r.arrival <= end_seconds if last else r.arrival < end_seconds)
    ]
    ttft, itl, both = _shares(counted, slo_seconds, slo_itl_seconds)
    return WindowFigures(
        start_seconds,
        end_seconds,
        len(counted),
        ttft,
        _pod_seconds(run.pods, start_seconds, end_seconds) / 3600,
        itl,
        both,
    )


def _pod_seconds(pods: Sequence[PodRecord], start_seconds: float, end_seconds: float) -> float:
    """Seconds of pod time inside ``[start, end]``: each pod from its creation to its deletion
    (still there at the end: to the end), loading and draining included."""
    total = 0.0
    for pod in pods:
        lo = max(pod.created_at, start_seconds)
        hi = min(pod.deleted_at if pod.deleted_at is not None else math.inf, end_seconds)
        total += max(0.0, hi - lo)
    return total


def figures_of_run(
    run: RunRecord,
    slo_seconds: float,
    *,
    step_seconds: float | None = None,
    lead_seconds: float = 0.0,
    slo_itl_seconds: float = DEFAULT_ITL_SLO_SECONDS,
) -> PolicyFigures:
    """Figures of a simulated run (policy or replayed schedule); with ``step_seconds``, the
    reaction to that load step (``lead_seconds``: as :func:`reaction`); ITL shares against
    ``slo_itl_seconds``."""
    share, minute_share, bad, (p50, p95, p99), p95s = _service(
        run.requests, run.duration_seconds, slo_seconds
    )
    counted = [r for r in run.requests if not r.rejected]
    _, itl_share, both_share = _shares(counted, slo_seconds, slo_itl_seconds)
    itls = [i for i in (r.mean_itl for r in counted) if i is not None]
    end = run.duration_seconds
    deltas = [b - a for _, a, b in run.scale_events]
    steps: list[tuple[float, int]] = []
    for s in run.samples:
        if not steps or steps[-1][1] != s.pods:
            steps.append((s.t, s.pods))
    return PolicyFigures(
        name=run.name,
        requests=len(run.requests),
        served=sum(1 for r in run.requests if r.done),
        cut=sum(1 for r in run.requests if r.cut),
        unfinished=sum(1 for r in run.requests if r.finished_at is None),
        rejected=sum(1 for r in run.requests if r.rejected),
        slo_request_share=share,
        slo_minute_share=minute_share,
        violating_minutes=bad,
        ttft_p50=p50,
        ttft_p95=p95,
        ttft_p99=p99,
        gpu_hours=_pod_seconds(run.pods, 0.0, end) / 3600,
        scale_events=len(deltas),
        scale_ups=sum(1 for d in deltas if d > 0),
        scale_downs=sum(1 for d in deltas if d < 0),
        reversals=reversals(deltas),
        peak_queue=max((s.waiting for s in run.samples), default=0),
        peak_replicas=max((s.spec_replicas for s in run.samples), default=0),
        minute_p95=p95s,
        replicas_over_time=tuple(steps),
        reaction=None if step_seconds is None else reaction(run, step_seconds, lead_seconds),
        sawtooth=sawtooth(run),
        halves=(
            window_figures(run, slo_seconds, 0.0, end / 2, slo_itl_seconds=slo_itl_seconds),
            window_figures(
                run, slo_seconds, end / 2, end, last=True, slo_itl_seconds=slo_itl_seconds
            ),
        ),
        itl_request_share=itl_share,
        both_request_share=both_share,
        itl_p95=nearest_rank(itls, 0.95),
        slo_itl_seconds=slo_itl_seconds,
        sleeping_replicas=max((s.sleeping for s in run.samples), default=0),
    )


def littles_law(run: RunRecord) -> tuple[float, float]:
    """``(L, lambda x W)`` of a run: mean requests in the system (sampled each second) and
    the arrival rate times the mean time in system. Equal, up to sampling, when every request
    finished inside the sampled span (Little's law)."""
    if not run.samples or not run.requests:
        return 0.0, 0.0
    span = run.samples[-1].t + 1.0
    in_system = sum(s.waiting + s.running for s in run.samples) / len(run.samples)
    done = [r.e2e for r in run.requests if r.e2e is not None]
    mean_w = sum(done) / len(done) if done else 0.0
    return in_system, len(run.requests) / span * mean_w


@dataclass(frozen=True, slots=True)
class RowFigures:
    """One row's figures on each routing seed, with their means and spreads.

    Attributes:
        name: the row.
        runs: its figures on each seed, in seed order (the first is the one plotted).
    """

    name: str
    runs: tuple[PolicyFigures, ...]

    @property
    def first(self) -> PolicyFigures:
        """The figures on the first seed."""
        return self.runs[0]

    def _values(self, key: str) -> list[float]:
        return [float(getattr(r, key)) for r in self.runs]

    def mean(self, key: str) -> float:
        """The mean over the seeds of a :class:`PolicyFigures` field (NaN where any is)."""
        values = self._values(key)
        return math.fsum(values) / len(values)

    def spread(self, key: str) -> float:
        """Half the range over the seeds of a field (0 with one seed)."""
        values = self._values(key)
        return (max(values) - min(values)) / 2

    def half_mean(self, index: int, key: str) -> float:
        """The mean over the seeds of a :class:`WindowFigures` field of half ``index``."""
        values = [float(getattr(r.halves[index], key)) for r in self.runs]
        return math.fsum(values) / len(values)

    def half_spread(self, index: int, key: str) -> float:
        """Half the range over the seeds of a field of half ``index``."""
        values = [float(getattr(r.halves[index], key)) for r in self.runs]
        return (max(values) - min(values)) / 2
