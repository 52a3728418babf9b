"""Prometheus' ``rate()`` and ``histogram_quantile()``, re-implemented for virtual time.

Both follow Prometheus 2.x (``promql/functions.go``: ``extrapolatedRate``;
``promql/quantile.go``: ``bucketQuantile``) line by line, so that the benchmark feeds the
decision core the numbers a real Prometheus would answer for the same scraped samples.
Times are seconds (Prometheus works in milliseconds; the difference is below any effect here).
"""

from __future__ import annotations

from collections.abc import Sequence

from scaler.sources.quantile import bucket_quantile

__all__ = ["extrapolated_rate", "histogram_quantile"]


def extrapolated_rate(
    samples: Sequence[tuple[float, float]], range_start: float, range_end: float
) -> float | None:
    """``rate(counter[range_end - range_start])`` at ``range_end``, per second.

    Args:
        samples: ``(time s, value)`` of one counter series inside the range, time-ordered
            (stale markers already left out, as Prometheus' range selection does).
        range_start, range_end: the range, seconds.

    Returns:
        The per-second rate, or ``None`` when fewer than two samples lie in the range
        (Prometheus drops the series from the result).

    The increase is corrected for counter resets, then extrapolated to the range boundaries
    when the first/last sample lies within 1.1 average sample intervals of them (else by half
    an interval), and never extrapolated below a counter value of zero.
    """
    if len(samples) < 2:
        return None
    first_t, first_v = samples[0]
    last_t, last_v = samples[-1]
    result = last_v - first_v
    previous = 0.0
    for _, v in samples:
        if v < previous:  # counter reset: the value before the reset was lost
            result += previous
        previous = v
    to_start = first_t - range_start
    to_end = range_end - last_t
    sampled = last_t - first_t
    if sampled <= 0:
        return None
    average = sampled / (len(samples) - 1)
    if result > 0 and first_v >= 0:
        to_zero = sampled * (first_v / result)
        if to_zero < to_start:
            to_start = to_zero
    threshold = average * 1.1
    interval = sampled
    interval += to_start if to_start < threshold else average / 2
    interval += to_end if to_end < threshold else average / 2
    return result * (interval / sampled) / (range_end - range_start)


def histogram_quantile(q: float, buckets: Sequence[tuple[float, float]]) -> float:
    """Prometheus' ``histogram_quantile(q, ...)`` over classic buckets.

    Args:
        q: the quantile, 0-1.
        buckets: ``(upper bound le, cumulative count or rate)`` in any order; the ``+Inf``
            bucket must be present.

    Returns:
        The quantile estimate (:func:`scaler.sources.quantile.bucket_quantile`, which the
        live source uses too): linear interpolation inside the bucket that holds the rank;
        the upper bound of the last finite bucket when the rank falls in ``+Inf``; NaN with
        no ``+Inf`` bucket, fewer than two buckets or no observations.
    """
    return bucket_quantile(q, buckets).value
