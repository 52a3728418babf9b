"""The replica model's true capacity on a request mix, the truth the learned capacity is held to.

**Definition.** One replica's true capacity on a mix is the highest Poisson arrival rate of that
mix (requests/s) one fresh replica serves with the 95th percentile of TTFT within the TTFT SLO
and the 95th percentile of the requests' mean inter-token latency within the ITL SLO (the
quantile the TTFT and ITL signals read), over a probe of :data:`PROBE_REQUESTS` requests
(between :data:`MIN_PROBE_SECONDS` and :data:`MAX_PROBE_SECONDS`) after a warm-up of up to
:data:`WARMUP_SECONDS`, found by bisection to 2%; the median over :data:`PROBES`
draws of the arrivals (a heavy-tailed mix's quantile moves with a few long prompts: one draw
of the conversational shape ranged 12% around the median). The mix is the window's accepted
requests in their order (prompt and output lengths, stated prefix-cache hits; block hashes,
if any, are looked up in the one replica's own cache, which sees the whole mix where a fleet's
replica sees its share of it: a hash-driven hit rate is the upper one). The work it stands
for is given in every unit a capacity estimate may use: requests, prompt tokens (all of them,
as ``vllm:prompt_tokens_total`` counts), prompt tokens computed (the cache hits left out, as
``vllm:prompt_tokens_by_source_total{source="local_compute"}`` counts) and generated tokens,
all per second, so that a learned estimate in any linear combination of them can be compared
(:meth:`TrueCapacity.weighted`).

**Windows.** A trace's mix is taken per segment between its shifts (a change of request mix,
of cache-hit rate, of replicas asleep: :attr:`~scaler.sim.trace.Trace.shifts`), and on a
trace without shifts per :func:`windows` of equal length.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass

from scaler.bench.capacity import accepted, nearest_rank
from scaler.sim.engine import ReplicaEngine, ReplicaModel, SimRequest
from scaler.sim.trace import Trace, TraceRequest

__all__ = [
    "MAX_PROBE_SECONDS",
    "MIN_PROBE_SECONDS",
    "PROBES",
    "PROBE_REQUESTS",
    "WARMUP_SECONDS",
    "Segment",
    "TrueCapacity",
    "segments",
    "true_capacity",
    "windows",
]

#: Requests a probe counts (after the warm-up), and the bounds of its length, seconds.
PROBE_REQUESTS = 3000
MIN_PROBE_SECONDS = 120.0
MAX_PROBE_SECONDS = 1800.0
#: The longest warm-up whose requests are not counted, seconds (the batch fills from empty);
#: at most a quarter of the probe.
WARMUP_SECONDS = 60.0
#: Draws of the arrivals whose median is the capacity.
PROBES = 3
_QUANTILE = 0.95


@dataclass(frozen=True, slots=True)
class TrueCapacity:
    """What one replica serves of a mix within the SLOs (see the module docstring).

    Attributes:
        requests_per_second: the arrival rate, requests/s.
        prompt_tokens_per_second: prompt tokens arriving at that rate, tokens/s.
        computed_prompt_tokens_per_second: of them, those not found in the prefix cache.
        generation_tokens_per_second: tokens generated at that rate, tokens/s.
        ttft_p95_seconds, itl_p95_seconds: the probe's quantiles at that rate.
    """

    requests_per_second: float
    prompt_tokens_per_second: float
    computed_prompt_tokens_per_second: float
    generation_tokens_per_second: float
    ttft_p95_seconds: float
    itl_p95_seconds: float

    def weighted(self, generation_token_weight: float, *, computed: bool = False) -> float:
        """The capacity in weighted tokens/s: prompt tokens (computed ones with
        ``computed``) plus ``generation_token_weight`` times generated tokens."""
        prompt = (
            self.computed_prompt_tokens_per_second if computed else self.prompt_tokens_per_second
        )
        return prompt + generation_token_weight * self.generation_tokens_per_second


def _probe(
    mix: Sequence[TraceRequest], rate: float, model: ReplicaModel, hash_block_tokens: int, seed: int
) -> tuple[list[SimRequest], list[SimRequest]]:
    """Poisson arrivals of ``mix`` (cycled) at ``rate`` on one fresh replica: every request,
    and those counted (after the warm-up)."""
    rng = random.Random(f"truth:{seed}")
    engine = ReplicaEngine(model, name="truth")
    out: list[SimRequest] = []
    t = 0.0
    j = 0
    probe = min(MAX_PROBE_SECONDS, max(MIN_PROBE_SECONDS, PROBE_REQUESTS / rate))
    warmup = min(WARMUP_SECONDS, probe / 4)
    end = warmup + probe
    while True:
        t += rng.expovariate(rate)
        if t >= end:
            break
        r = mix[j % len(mix)]
        j += 1
        req = SimRequest(
            j, t, r.prompt_tokens, r.output_tokens, cached_tokens=r.cached_tokens,
            block_hashes=r.block_hashes, hash_block_tokens=hash_block_tokens,
        )  # fmt: skip
        engine.submit(req, t)
        out.append(req)
    engine.advance_to(math.inf)
    return out, [r for r in out if r.arrival >= warmup]


def _quantiles(counted: Sequence[SimRequest]) -> tuple[float, float]:
    ttfts = [r.ttft if r.ttft is not None else math.inf for r in counted]
    itls = [r.mean_itl for r in counted if r.mean_itl is not None]
    return nearest_rank(ttfts, _QUANTILE), nearest_rank(itls, _QUANTILE) if itls else 0.0


def true_capacity(
    mix: Sequence[TraceRequest],
    model: ReplicaModel,
    slo_ttft_seconds: float,
    slo_itl_seconds: float,
    *,
    hash_block_tokens: int = 0,
    seed: int = 0,
) -> TrueCapacity:
    """One replica's true capacity on ``mix`` (the module docstring's definition).

    Raises:
        ValueError: an empty mix or a non-positive SLO.
    """
    mix = accepted(mix, model)
    if not mix or not (slo_ttft_seconds > 0 and slo_itl_seconds > 0):
        raise ValueError("true_capacity: expected accepted requests and SLOs > 0")

    computed = max(1.0, sum(r.prompt_tokens - r.cached_tokens for r in mix) / len(mix))

    def highest(draw: int) -> float:
        def ok(rate: float) -> bool:
            _, counted = _probe(mix, rate, model, hash_block_tokens, draw)
            ttft, itl = _quantiles(counted)
            return ttft <= slo_ttft_seconds and itl <= slo_itl_seconds

        hi = 2 * model.prefill_tokens_per_second / computed
        lo = hi / 1000
        while ok(hi) and hi < 1e4:
            lo, hi = hi, hi * 2
        for _ in range(30):
            if hi / lo < 1.02:
                break
            mid = math.sqrt(lo * hi)
            lo, hi = (mid, hi) if ok(mid) else (lo, mid)
        return lo

    rates = sorted((highest(seed * PROBES + i), seed * PROBES + i) for i in range(PROBES))
    lo, draw = rates[len(rates) // 2]
    done, counted = _probe(mix, lo, model, hash_block_tokens, draw)
    ttft, itl = _quantiles(counted)
    n = len(mix)
    per_request_prompt = sum(r.prompt_tokens for r in mix) / n
    # the hits the probe actually had (stated ones, or the replica's own cache)
    first = [r for r in done if r.first_token_at is not None]
    hit_share = (
        sum(r.prefix_hit_tokens for r in first) / max(1, sum(r.prompt_tokens for r in first))
        if first
        else 0.0
    )
    return TrueCapacity(
        requests_per_second=lo,
        prompt_tokens_per_second=lo * per_request_prompt,
        computed_prompt_tokens_per_second=lo * per_request_prompt * (1 - hit_share),
        generation_tokens_per_second=lo * sum(max(1, r.output_tokens) for r in mix) / n,
        ttft_p95_seconds=ttft,
        itl_p95_seconds=itl,
    )


@dataclass(frozen=True, slots=True)
class Segment:
    """A part of a trace with one request mix.

    Attributes:
        start_seconds, end_seconds: its span on the replay clock.
        after: what changed at its start (``start`` for the first).
    """

    start_seconds: float
    end_seconds: float
    after: str


def windows(duration_seconds: float, count: int) -> list[Segment]:
    """``count`` equal windows of a trace without shifts."""
    step = duration_seconds / max(1, count)
    return [
        Segment(i * step, (i + 1) * step, "start" if i == 0 else "window") for i in range(count)
    ]


def segments(trace: Trace, *, window_count: int = 2) -> list[Segment]:
    """The segments between ``trace``'s shifts, or :func:`windows` when it has none."""
    shifts = sorted((t, what) for t, what in trace.shifts if 0 < t < trace.duration_seconds)
    if not shifts:
        return windows(trace.duration_seconds, window_count)
    edges = [(0.0, "start"), *shifts]
    return [
        Segment(t, edges[i + 1][0] if i + 1 < len(edges) else trace.duration_seconds, what)
        for i, (t, what) in enumerate(edges)
    ]
