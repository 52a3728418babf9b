"""A provable lower bound on the GPU time of keeping a share of requests within the TTFT SLO.

Statement. For any replica schedule, however it was chosen and whatever routing, with at
least one replica at every instant, whose replay keeps at least ``share`` of the accepted
requests within the SLO ``S``, the GPU-seconds counted in the window ``[0, D]`` are at least

    max over a few partitions P of [0, D] into intervals of
        sum over I in P of max(|I|, W(I) - R(I))

where ``W(I)`` is the prefill work (prompt tokens / ``prefill_tokens_per_second``, seconds)
of the accepted requests whose whole SLO window ``[arrival, arrival + S]`` lies in ``I``, and
the ``R(I)`` remove the largest works the allowed misses (``floor((1 - share) x accepted)``
requests in all) can take away, chosen to lower the sum most.

Proof, in the replica model (:class:`~scaler.sim.engine.ReplicaModel`):

1. A request within the SLO got its first token at the end of the step that completed its
   prefill, no later than ``arrival + S``; every step that prefilled part of it started at or
   after its arrival (a request joins the next step). So all of its prefill happened inside
   ``[arrival, arrival + S]``, hence inside ``I``.
2. A step that prefills ``n`` tokens lasts at least ``n / prefill_tokens_per_second`` (the
   compute side of the roofline; preemption only adds prefill). Steps of one replica do not
   overlap, and a replica exists while it steps, so the GPU-seconds inside ``I`` are at least
   the prefill work of the requests within the SLO counted in ``W(I)``.
3. At least one replica exists at every instant, so the GPU-seconds inside ``I`` are also at
   least ``|I|``.
4. The intervals are disjoint: the GPU-seconds in ``[0, D]`` are at least the sum of the
   per-interval bounds, for whichever requests are the misses. The misses that lower the sum
   most are found greedily: per interval, removing the largest works first lowers
   ``max(|I|, W)`` by non-increasing steps (concave), so taking the largest steps over all
   intervals is optimal for a count of removals.
5. Each partition gives a bound, so their maximum does.

It ignores decode (nothing in a TTFT SLO forces decode work inside the window: a policy may
cut a request after its first token) and the time replicas wait for work, so it is far below
what any real schedule needs when decode dominates; it is a floor, not a target.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence

from scaler.sim.engine import ReplicaModel
from scaler.sim.trace import Trace

__all__ = ["PARTITION_SECONDS", "gpu_seconds_lower_bound"]

#: Interval lengths of the partitions tried (each also shifted by half its length), seconds.
PARTITION_SECONDS: tuple[float, ...] = (5.0, 10.0, 20.0, 30.0, 60.0, 120.0)


def _partition_bound(
    works: Sequence[tuple[float, float]],
    duration: float,
    slo: float,
    length: float,
    offset: float,
    allowed_misses: int,
) -> float:
    edges = [0.0, *(offset + k * length for k in range(math.ceil(duration / length) + 1))]
    edges = sorted({min(max(e, 0.0), duration) for e in edges} | {duration})
    per: list[list[float]] = [[] for _ in edges[:-1]]
    j = 0
    for arrival, work in works:  # sorted by arrival
        while j < len(per) and edges[j + 1] <= arrival:
            j += 1
        if j < len(per) and arrival + slo <= edges[j + 1]:
            per[j].append(work)
    total = 0.0
    gains: list[float] = []
    for i, items in enumerate(per):
        span = edges[i + 1] - edges[i]
        load = math.fsum(items)
        total += max(span, load)
        room = load - span
        for w in sorted(items, reverse=True):
            if room <= 0:
                break
            gains.append(min(w, room))
            room -= w
    return total - math.fsum(heapq.nlargest(allowed_misses, gains))


def gpu_seconds_lower_bound(
    trace: Trace, model: ReplicaModel, slo_seconds: float, share: float = 0.99
) -> float:
    """The bound of the module docstring, GPU-seconds over the trace's window.

    Raises:
        ValueError: ``share`` outside [0, 1] or a non-positive SLO.
    """
    if not 0 <= share <= 1 or not slo_seconds > 0:
        raise ValueError(f"share must be in [0, 1] and slo > 0, got {share}, {slo_seconds}")
    limit = model.max_model_len
    works = [
        (r.arrival_seconds, r.prompt_tokens / model.prefill_tokens_per_second)
        for r in trace.requests
        if r.prompt_tokens + max(1, r.output_tokens) <= limit
    ]
    allowed = len(works) - math.ceil(share * len(works) - 1e-9)
    duration = trace.duration_seconds
    return max(
        _partition_bound(works, duration, slo_seconds, length, offset, allowed)
        for length in PARTITION_SECONDS
        for offset in (0.0, length / 2)
    )
