"""Quantiles from histogram bucket rates, computed as Prometheus computes them, and told
apart when they are only a lower bound.

The source reads per-``le`` bucket rates and estimates the quantile itself instead of asking
Prometheus for ``histogram_quantile``: the estimate is the same number (Prometheus 2.x
``promql/quantile.go``, ``bucketQuantile``: coalesce equal bounds, force monotonic counts,
linear interpolation inside the bucket that holds the rank, lower bound 0 for the first
bucket), and the source also learns what ``histogram_quantile`` hides: when the rank falls in
the ``+Inf`` bucket, Prometheus answers the largest finite bound, which is then only a lower
bound of the true quantile (vLLM's early V1 TTFT buckets stopped at 10 s, so every TTFT above
10 s read as exactly 10).
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["BucketQuantile", "bucket_quantile"]


@dataclass(frozen=True, slots=True)
class BucketQuantile:
    """A quantile estimated from cumulative bucket counts (or rates).

    Attributes:
        value: what ``histogram_quantile`` answers: seconds for a latency histogram; NaN
            with no observations (the idle 0/0), no ``+Inf`` bucket or fewer than two buckets.
        lower_bound: the rank fell in the ``+Inf`` bucket, so ``value`` is the largest finite
            bound and the true quantile is at least that, size unknown.
        total: observations (or their rate) in the ``+Inf`` bucket: the histogram's count
            (NaN without a ``+Inf`` bucket).
        above_top: the share (0-1) of observations above the largest finite bound.
    """

    value: float
    lower_bound: bool = False
    total: float = 0.0
    above_top: float = 0.0


def bucket_quantile(q: float, buckets: Iterable[tuple[float, float]]) -> BucketQuantile:
    """Prometheus' ``histogram_quantile(q, ...)`` over classic buckets, with the clamp flagged.

    Args:
        q: the quantile, 0-1 (NaN, below 0 and above 1 answer as Prometheus does).
        buckets: ``(upper bound le, cumulative count or rate)`` pairs in any order; the
            ``+Inf`` bucket must be present.

    Returns:
        A :class:`BucketQuantile`; ``lower_bound`` is True exactly when Prometheus would
        return the largest finite bound because the rank lies beyond it.
    """
    if math.isnan(q):
        return BucketQuantile(math.nan)
    if q < 0:
        return BucketQuantile(-math.inf)
    if q > 1:
        return BucketQuantile(math.inf)
    ordered = sorted(buckets)
    if not ordered or not math.isinf(ordered[-1][0]):
        return BucketQuantile(math.nan, total=math.nan)
    # coalesceBuckets: equal bounds (from series with different label sets) are added up.
    merged: list[list[float]] = []
    for le, count in ordered:
        if merged and merged[-1][0] == le:
            merged[-1][1] += count
        else:
            merged.append([le, count])
    # ensureMonotonic: float noise in rates can make a cumulative count dip; flatten it.
    high = -math.inf
    for b in merged:
        if b[1] > high:
            high = b[1]
        else:
            b[1] = high
    total = merged[-1][1]
    if len(merged) < 2 or total == 0:
        return BucketQuantile(math.nan, total=total)
    top = merged[-2]
    above = max(0.0, (total - top[1]) / total)
    rank = q * total
    counts = [b[1] for b in merged[:-1]]
    i = bisect.bisect_left(counts, rank)  # sort.Search: first bucket with count >= rank
    if i == len(merged) - 1:
        return BucketQuantile(top[0], lower_bound=True, total=total, above_top=above)
    if i == 0 and merged[0][0] <= 0:
        return BucketQuantile(merged[0][0], total=total, above_top=above)
    start = 0.0
    end = merged[i][0]
    count = merged[i][1]
    if i > 0:
        start = merged[i - 1][0]
        count -= merged[i - 1][1]
        rank -= merged[i - 1][1]
    return BucketQuantile(start + (end - start) * (rank / count), total=total, above_top=above)
