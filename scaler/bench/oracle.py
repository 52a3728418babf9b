"""The oracle: the fewest replicas per interval that meet the TTFT SLO, knowing the future.

Computation. The trace is cut into intervals of ``interval_seconds`` (60 s). For each interval
the oracle replays that interval's arrivals on ``N`` fresh, empty replicas of the same
:class:`~scaler.sim.engine.ReplicaModel` behind the same least-in-flight routing as the fleet,
and finds by bisection the smallest ``N >= 1`` whose TTFT p95 over those requests (nearest
rank; a request measured until its first token, however late) is within the SLO. Its GPU time
is ``sum(N_i x interval length)``.

Why it is a lower bound on the GPU time of any policy that meets the SLO in every interval
(policies here never scale below one replica, so neither does the oracle):

- it starts replicas instantly and removes them instantly: no model load, no draining, no
  replica kept for a stabilization window; every policy pays for all of these;
- each interval starts on empty replicas: no queue or running batch is carried over from the
  previous interval, which only makes the interval easier than in any continuous run;
- ``N`` is the smallest count that works for the interval under these easier conditions, so a
  policy that meets the SLO in that interval has had at least that many replicas serving for
  most of it. (A policy may change its count within an interval; with a 120 s model load and
  15 s control intervals it cannot add capacity faster, and any replica it adds is paid for
  from its creation, so the bound holds for the policies compared here. A policy that misses
  the SLO can of course spend less; the benchmark then shows the misses.)

Bisection assumes more replicas never make TTFT worse; with least-in-flight routing on
identical replicas this holds up to noise of one request.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from scaler.sim.engine import ReplicaEngine, ReplicaModel, SimRequest
from scaler.sim.trace import Trace, TraceRequest

__all__ = [
    "Capacity",
    "OracleResult",
    "interval_requests",
    "min_replicas_for",
    "nearest_rank",
    "probe_capacity",
    "replay_fixed",
    "run_oracle",
]

# Hard ceiling on replicas the oracle considers (a trace needing more is reported as this).
MAX_ORACLE_REPLICAS = 512
# Give up waiting for first tokens this long after the last arrival of a replay, seconds.
_REPLAY_TAIL_SECONDS = 3600.0


def nearest_rank(values: Sequence[float], q: float) -> float:
    """The ``q`` (0-1) quantile by the nearest-rank method; NaN for no values."""
    if not values:
        return math.nan
    ordered = sorted(values)
    return ordered[max(1, math.ceil(q * len(ordered))) - 1]


@dataclass(frozen=True, slots=True)
class Replay:
    """A replay on fixed replicas: the requests with their timings and the peak queue."""

    requests: list[SimRequest]
    peak_waiting: int
    gave_up: bool = False


def _misses(requests: Sequence[SimRequest], now: float, slo: float) -> int:
    """Requests that have certainly missed the TTFT SLO by ``now``."""
    n = 0
    for r in requests:
        if r.first_token_at is None:
            if now - r.arrival > slo:
                n += 1
        elif r.first_token_at - r.arrival > slo:
            n += 1
    return n


def replay_fixed(
    arrivals: Sequence[TraceRequest],
    replicas: int,
    model: ReplicaModel,
    *,
    to_completion: bool = False,
    first_id: int = 0,
    give_up: tuple[float, int] | None = None,
) -> Replay:
    """Replay ``arrivals`` on ``replicas`` fresh replicas (least in flight first, as the fleet).

    Args:
        arrivals: the requests, arrival seconds ascending.
        replicas: how many identical replicas serve from time 0 of the replay.
        model: the replica model.
        to_completion: run until every request finished; otherwise stop once every request
            has its first token (enough for TTFT, and much faster for long outputs).
        first_id: id of the first request.
        give_up: ``(slo seconds, allowed misses)``: stop early, returning the partial
            replay, once more requests than allowed have certainly missed the SLO (their
            first token is later than ``arrival + slo``, or has not come by then).
    """
    engines = [ReplicaEngine(model, name=f"oracle-{i}") for i in range(replicas)]
    out: list[SimRequest] = []
    peak = 0
    for j, r in enumerate(arrivals):
        t = r.arrival_seconds
        for e in engines:
            e.advance_to(t)
        target = min(engines, key=lambda e: e.in_flight)  # ties: lowest index, like the fleet
        req = SimRequest(first_id + j, t, r.prompt_tokens, r.output_tokens)
        target.submit(req, t)
        out.append(req)
        peak = max(peak, sum(e.num_waiting for e in engines))
        if give_up is not None and j % 16 == 15 and _misses(out, t, give_up[0]) > give_up[1]:
            return Replay(out, peak, gave_up=True)
    t = arrivals[-1].arrival_seconds if arrivals else 0.0
    limit = t + _REPLAY_TAIL_SECONDS
    while t < limit:
        if to_completion:
            if all(e.in_flight == 0 for e in engines):
                break
        elif all(q.first_token_at is not None or q.rejected for q in out):
            break
        t += 1.0
        for e in engines:
            e.advance_to(t)
    return Replay(out, peak)


def _p95_ok(replay: Replay, slo: float, quantile: float) -> bool:
    if replay.gave_up:
        return False
    ttfts = [r.ttft if r.ttft is not None else math.inf for r in replay.requests if not r.rejected]
    return not ttfts or nearest_rank(ttfts, quantile) <= slo


def min_replicas_for(
    arrivals: Sequence[TraceRequest],
    model: ReplicaModel,
    slo_seconds: float,
    *,
    quantile: float = 0.95,
    hint: int = 1,
) -> tuple[int, Replay]:
    """The smallest replica count (>= 1) whose replay meets the TTFT quantile SLO.

    Gallops up (doubling) or down from ``hint``, then bisects. Returns the count and its
    replay.
    """
    cache: dict[int, Replay] = {}

    served = [
        r for r in arrivals if r.prompt_tokens + max(1, r.output_tokens) <= model.max_model_len
    ]
    # Nearest rank: the quantile is within the SLO iff at most this many requests miss it.
    allowed = len(served) - math.ceil(quantile * len(served))

    def ok(n: int) -> bool:
        if n not in cache:
            cache[n] = replay_fixed(arrivals, n, model, give_up=(slo_seconds, allowed))
        return _p95_ok(cache[n], slo_seconds, quantile)

    if not arrivals:
        return 1, Replay([], 0)
    hint = max(1, min(hint, MAX_ORACLE_REPLICAS))
    if ok(hint):
        hi, lo = hint, 0
        step = 1
        while hi - step >= 1 and ok(hi - step):
            hi -= step
            step *= 2
        lo = max(lo, hi - step)
    else:
        lo, hi = hint, hint * 2
        while hi < MAX_ORACLE_REPLICAS and not ok(hi):
            lo, hi = hi, min(hi * 2, MAX_ORACLE_REPLICAS)
        if not ok(hi):
            return hi, cache[hi]
    # Invariant: ok(hi); lo == 0 or not ok(lo).
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if ok(mid):
            hi = mid
        else:
            lo = mid
    return hi, cache[hi]


def interval_requests(trace: Trace, interval_seconds: float) -> list[list[TraceRequest]]:
    """The trace's arrivals cut into consecutive intervals (times relative to each start)."""
    n = max(1, math.ceil(trace.duration_seconds / interval_seconds - 1e-9))
    out: list[list[TraceRequest]] = [[] for _ in range(n)]
    for r in trace.requests:
        i = min(n - 1, int(r.arrival_seconds // interval_seconds))
        start = i * interval_seconds
        out[i].append(TraceRequest(r.arrival_seconds - start, r.prompt_tokens, r.output_tokens))
    return out


@dataclass(frozen=True, slots=True)
class OracleResult:
    """The oracle's schedule and the service it gives.

    Attributes:
        interval_seconds: interval length, seconds.
        replicas: ``N`` per interval.
        lengths: each interval's length, seconds (the last may be shorter).
        requests: every request, with arrival times on the trace's clock.
        peak_waiting: the largest queue seen in the chosen replays.
    """

    interval_seconds: float
    replicas: tuple[int, ...]
    lengths: tuple[float, ...]
    requests: tuple[SimRequest, ...]
    peak_waiting: int

    @property
    def gpu_seconds(self) -> float:
        """Replica-seconds: ``sum(N_i x length_i)``."""
        return sum(n * d for n, d in zip(self.replicas, self.lengths, strict=True))


def run_oracle(
    trace: Trace,
    model: ReplicaModel,
    slo_seconds: float,
    *,
    interval_seconds: float = 60.0,
    quantile: float = 0.95,
) -> OracleResult:
    """Compute the oracle's schedule for ``trace`` (see the module docstring)."""
    parts = interval_requests(trace, interval_seconds)
    replicas: list[int] = []
    lengths: list[float] = []
    requests: list[SimRequest] = []
    peak = 0
    hint = 1
    next_id = 0
    for i, arrivals in enumerate(parts):
        start = i * interval_seconds
        lengths.append(max(0.0, min(interval_seconds, trace.duration_seconds - start)))
        n, replay = min_replicas_for(arrivals, model, slo_seconds, quantile=quantile, hint=hint)
        replicas.append(n)
        hint = n
        peak = max(peak, replay.peak_waiting)
        for r in replay.requests:
            # Back onto the trace's clock: shift every timing by the interval start.
            r.id = next_id
            next_id += 1
            r.arrival += start
            for attr in ("first_scheduled_at", "first_token_at", "finished_at"):
                v = getattr(r, attr)
                if v is not None:
                    setattr(r, attr, v + start)
            requests.append(r)
    return OracleResult(interval_seconds, tuple(replicas), tuple(lengths), tuple(requests), peak)


@dataclass(frozen=True, slots=True)
class Capacity:
    """One replica's measured capacity on a trace's request mix.

    Attributes:
        rate: the highest steady arrival rate (requests/s, evenly spaced) one replica serves
            with TTFT p95 within the SLO.
        concurrency: mean requests in the replica at that rate (Little's law: rate x mean
            time in system), the concurrency a replica sustains at the SLO.
    """

    rate: float
    concurrency: float


def probe_capacity(
    trace: Trace,
    model: ReplicaModel,
    slo_seconds: float,
    *,
    seconds: float = 120.0,
    quantile: float = 0.95,
) -> Capacity:
    """Measure one replica's capacity on ``trace``'s mix of prompt and output lengths.

    The trace's requests, in order, arrive evenly spaced at a rate found by bisection
    (12 steps, geometric) on one fresh replica for ``seconds``.
    """
    mix = [(r.prompt_tokens, r.output_tokens) for r in trace.requests] or [(1000, 100)]

    def arrivals(rate: float) -> list[TraceRequest]:
        n = max(2, int(rate * seconds))
        return [TraceRequest(j / rate, *mix[j % len(mix)]) for j in range(n)]

    def ok(rate: float) -> bool:
        return _p95_ok(replay_fixed(arrivals(rate), 1, model), slo_seconds, quantile)

    # Prefill alone caps the rate at prefill throughput / mean prompt: start below twice that.
    mean_prompt = max(1.0, sum(p for p, _ in mix) / len(mix))
    hi = 2 * model.prefill_tokens_per_second / mean_prompt
    lo = hi / 1000
    for _ in range(24):
        mid = math.sqrt(lo * hi)
        if ok(mid):
            lo = mid
        else:
            hi = mid
        if hi / lo < 1.02:
            break
    done = replay_fixed(arrivals(lo), 1, model, to_completion=True)
    span = max(r.finished_at or 0.0 for r in done.requests)
    busy = sum((r.finished_at or 0.0) - r.arrival for r in done.requests)
    return Capacity(rate=lo, concurrency=busy / span if span > 0 else 0.0)
