"""Quantiles from histogram bucket rates, computed as Prometheus computes them, and told
apart when they are only a lower bound.

The source reads per-``le`` bucket rates and estimates the quantile itself instead of asking
Prometheus for ``histogram_quantile``: the estimate is the same number (Prometheus 2.x
``promql/quantile.go``, ``bucketQuantile``: coalesce equal bounds, force monotonic counts,
linear interpolation inside the bucket that holds the rank, lower bound 0 for the first
bucket), and the source also learns what ``histogram_quantile`` hides: when the rank falls in
the ``+Inf`` bucket, Prometheus answers the largest finite bound, which is then only a lower
bound of the true quantile (vLLM's early V1 TTFT buckets stopped at 10 s, so every TTFT above
10 s read as exactly 10). :func:`common_buckets` keeps, of rates summed over histograms whose
bounds differ, the bounds every one has.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

__all__ = ["BucketLayouts", "BucketQuantile", "bucket_quantile", "common_buckets"]


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


@dataclass(frozen=True, slots=True)
class BucketLayouts:
    """How the histograms summed into one set of bucket rates share their bounds.

    Attributes:
        histograms: the histogram series summed (those with the ``+Inf`` bound: all).
        bounds: the bounds found, ``+Inf`` included.
        partial: bound -> how many of the histograms have it, for the bounds not every one
            has (pods of one target with different layouts: a rollout across a bucket change,
            two vLLM versions, ``--custom-histogram-buckets`` on some pods); empty when they
            share one layout.
    """

    histograms: float
    bounds: int
    partial: dict[float, float]

    @property
    def mixed(self) -> bool:
        """The histograms do not share one set of bounds."""
        return bool(self.partial)

    def describe(self) -> str:
        """``mixed bucket layouts: 6 of the 23 bounds (20-2560 s) are on only 2 of the 4
        histograms``; '' for one layout."""
        if not self.partial:
            return ""
        low, high = min(self.partial), max(self.partial)
        span = f"{low:g} s" if low == high else f"{low:g}-{high:g} s"
        fewest, most = min(self.partial.values()), max(self.partial.values())
        on = f"{fewest:g}" if fewest == most else f"{fewest:g}-{most:g}"
        return (
            f"mixed bucket layouts: {len(self.partial)} of the {self.bounds} bounds ({span}) "
            f"are on only {on} of the {self.histograms:g} histograms"
        )


def common_buckets(
    buckets: Mapping[float, float], series: Mapping[float, float] | None
) -> tuple[dict[float, float], BucketLayouts | None]:
    """The summed bucket rates restricted to the bounds every histogram has.

    Summing per ``le`` is exact only where every histogram has the bound: at a bound only some
    have, the sum misses the others' observations below it, and the quantile of the sum is
    wrong (with two layouts whose top finite bounds are 10 s and 2560 s, every observation
    above 10 s falls between the shorter layout's top bound and ``+Inf`` for half the pods,
    and the quantile reads as saturated at 2560 s). On the common bounds each sum is the
    histograms' exact cumulative count, a coarser histogram of the same observations.

    Args:
        buckets: ``le`` -> summed rate (cumulative), ``+Inf`` included.
        series: ``le`` -> how many histogram series have that bound (the second round's
            ``count by (le)``); None when the answer did not say (the layout cannot be told:
            the buckets are read as they are).

    Returns:
        The buckets on the common bounds, and the layouts (None without ``series`` or its
        ``+Inf`` count).
    """
    histograms = series.get(math.inf) if series else None
    if series is None or histograms is None or not histograms > 0:
        return dict(buckets), None
    bounds = set(buckets) | set(series)
    # a bound the count did not answer is not known to be on every histogram
    partial = {le: n for le in sorted(bounds) if (n := series.get(le, 0.0)) < histograms}
    layouts = BucketLayouts(histograms, len(bounds), partial)
    return {le: v for le, v in buckets.items() if le not in partial}, layouts
