"""Sizing figures of a trace: one replica's capacity on its mix, and what its busiest minutes
need. They set the benchmark up (``--rate-scale auto``, the KPA's target); the results come
from the replays.

Rejected requests (prompt + output above the model's context) are left out of both: vLLM
answers them at once, so they cost no capacity.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

from scaler.bench.hindsight import search_schedule
from scaler.sim.engine import ReplicaEngine, ReplicaModel, SimRequest
from scaler.sim.routing import Routing
from scaler.sim.trace import Trace, TraceRequest

__all__ = [
    "Capacity",
    "accepted",
    "interval_requests",
    "minute_need",
    "nearest_rank",
    "peak_need",
    "probe_capacity",
]


def nearest_rank(values: Sequence[float], q: float) -> float:
    """The ``q`` (0-1) quantile by the nearest-rank method; NaN for no values."""
    if not values:
        return math.nan
    ordered = sorted(values)
    return ordered[max(1, math.ceil(q * len(ordered))) - 1]


def accepted(requests: Sequence[TraceRequest], model: ReplicaModel) -> list[TraceRequest]:
    """The requests vLLM would not reject (prompt + output, at least 1, within the context)."""
    limit = model.max_model_len
    return [r for r in requests if r.prompt_tokens + max(1, r.output_tokens) <= limit]


def interval_requests(trace: Trace, interval_seconds: float) -> list[list[TraceRequest]]:
    """The trace's arrivals cut into consecutive intervals (times relative to each start)."""
    n = max(1, math.ceil(trace.duration_seconds / interval_seconds - 1e-9))
    out: list[list[TraceRequest]] = [[] for _ in range(n)]
    for r in trace.requests:
        i = min(n - 1, int(r.arrival_seconds // interval_seconds))
        start = i * interval_seconds
        out[i].append(replace(r, arrival_seconds=r.arrival_seconds - start))
    return out


def minute_need(
    arrivals: Sequence[TraceRequest],
    model: ReplicaModel,
    slo_seconds: float,
    *,
    share: float = 0.99,
    routing: Routing | str = Routing.RANDOM,
    seed: int = 0,
    hash_block_tokens: int = 0,
) -> int:
    """The fewest replicas that, ready and empty from the start of a minute with these
    ``arrivals`` (seconds from its start), keep ``share`` of them within the SLO (the
    hindsight search on that minute alone); ``hash_block_tokens``: the tokens per block hash
    of their prompts, if they carry any."""
    if not arrivals:
        return 1
    minute = Trace(
        tuple(arrivals), "minute", "one minute", 60.0, hash_block_tokens=hash_block_tokens
    )
    return search_schedule(
        minute, model=model, slo_seconds=slo_seconds, share=share, routing=routing, seed=seed
    ).replicas[0]


def peak_need(
    trace: Trace,
    model: ReplicaModel,
    slo_seconds: float,
    *,
    routing: Routing | str = Routing.RANDOM,
    seed: int = 0,
) -> int:
    """:func:`minute_need` of the busiest minutes (the three with the most accepted requests,
    prompt tokens and output tokens each), the largest of them."""
    parts = [accepted(p, model) for p in interval_requests(trace, 60.0)]
    keys = (
        lambda p: len(p),
        lambda p: sum(r.prompt_tokens for r in p),
        lambda p: sum(r.output_tokens for r in p),
    )
    chosen: set[int] = set()
    for key in keys:
        chosen.update(sorted(range(len(parts)), key=lambda i: key(parts[i]), reverse=True)[:3])
    return max(
        minute_need(
            parts[i],
            model,
            slo_seconds,
            routing=routing,
            seed=seed,
            hash_block_tokens=trace.hash_block_tokens,
        )
        for i in sorted(chosen)
    )


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


def _replay_one(arrivals: Sequence[TraceRequest], model: ReplicaModel) -> list[SimRequest]:
    """``arrivals`` on one fresh replica, run until every request finished (their stated
    prefix-cache hits included)."""
    engine = ReplicaEngine(model, name="probe")
    out = []
    for j, r in enumerate(arrivals):
        req = SimRequest(
            j, r.arrival_seconds, r.prompt_tokens, r.output_tokens, cached_tokens=r.cached_tokens
        )
        engine.submit(req, r.arrival_seconds)
        out.append(req)
    engine.advance_to(math.inf)
    return out


def probe_capacity(
    trace: Trace,
    model: ReplicaModel,
    slo_seconds: float,
    *,
    probe_seconds: float = 120.0,
    quantile: float = 0.95,
) -> Capacity:
    """Measure one replica's capacity on ``trace``'s mix of prompt and output lengths.

    The trace's accepted requests, in order, arrive evenly spaced at a rate found by bisection
    (geometric, to 2%) on one fresh replica for ``probe_seconds``; a rate is served when the
    ``quantile`` (0-1) of the TTFTs is within ``slo_seconds``. Without any accepted request,
    the mix is 1,000-token prompts and 100-token answers.
    """
    mix = [
        (r.prompt_tokens, r.output_tokens, r.cached_tokens) for r in accepted(trace.requests, model)
    ]
    mix = mix or [(1000, 100, 0)]

    def arrivals(rate: float) -> list[TraceRequest]:
        n = max(2, int(rate * probe_seconds))
        return [TraceRequest(j / rate, *mix[j % len(mix)]) for j in range(n)]

    def ok(rate: float) -> bool:
        done = _replay_one(arrivals(rate), model)
        ttfts = [r.ttft if r.ttft is not None else math.inf for r in done]
        return nearest_rank(ttfts, quantile) <= slo_seconds

    # Prefill alone caps the rate at prefill throughput / mean prompt: start below twice that.
    mean_prompt = max(1.0, sum(p - c for p, _, c in mix) / len(mix))
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
    done = _replay_one(arrivals(lo), model)
    span = max(r.finished_at or 0.0 for r in done)
    busy = sum((r.finished_at or 0.0) - r.arrival for r in done)
    return Capacity(rate=lo, concurrency=busy / span if span > 0 else 0.0)
