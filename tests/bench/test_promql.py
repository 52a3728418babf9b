"""The emulated PromQL functions against Prometheus' algorithms on hand-computed cases."""

from __future__ import annotations

import math

import pytest

from scaler.bench.promql import extrapolated_rate, histogram_quantile

INF = math.inf
# Cumulative buckets: 10 obs <= 0.1 s, 20 in (0.1, 0.5], 10 in (0.5, 1], none above.
BUCKETS = [(0.1, 10.0), (0.5, 30.0), (1.0, 40.0), (INF, 40.0)]


@pytest.mark.parametrize(
    ("q", "buckets", "expected"),
    [
        # rank 20 falls in (0.1, 0.5]: 0.1 + 0.4 x (20 - 10) / 20
        (0.5, BUCKETS, 0.3),
        # rank 38 falls in (0.5, 1]: 0.5 + 0.5 x (38 - 30) / 10
        (0.95, BUCKETS, 0.9),
        # rank 2 in the first bucket: lower bound 0, 0.1 x 2 / 10
        (0.05, BUCKETS, 0.02),
        # rank 49.5 lands in +Inf: the last finite upper bound
        (0.99, [(0.1, 10.0), (0.5, 30.0), (1.0, 40.0), (INF, 50.0)], 1.0),
        # order of the input does not matter
        (0.5, list(reversed(BUCKETS)), 0.3),
        # a dip (rate noise) is flattened: 0.5 becomes 10, rank 10 ends bucket 0
        (0.5, [(0.1, 10.0), (0.5, 9.0), (INF, 20.0)], 0.1),
    ],
)
def test_histogram_quantile_hand_computed(
    q: float, buckets: list[tuple[float, float]], expected: float
) -> None:
    assert histogram_quantile(q, buckets) == pytest.approx(expected)


@pytest.mark.parametrize(
    "buckets",
    [
        [(0.1, 0.0), (INF, 0.0)],  # no observations: 0/0, the idle case
        [(0.1, 1.0), (0.5, 2.0)],  # no +Inf bucket
        [(INF, 3.0)],  # fewer than two buckets
        [],
    ],
)
def test_histogram_quantile_nan(buckets: list[tuple[float, float]]) -> None:
    assert math.isnan(histogram_quantile(0.95, buckets))


def test_histogram_quantile_out_of_range_q() -> None:
    assert histogram_quantile(-0.1, BUCKETS) == -INF
    assert histogram_quantile(1.1, BUCKETS) == INF


@pytest.mark.parametrize(
    ("samples", "expected"),
    [
        # From 0: the zero point (t=15) is the start; 45 over 45 s of data, per 60 s range.
        ([(15.0, 0.0), (30.0, 15.0), (45.0, 30.0), (60.0, 45.0)], 45 * (45 / 45) / 60),
        # From 100: extrapolated 15 s back to the range start (15 < 1.1 x 15): 45 x 60/45 / 60.
        ([(15.0, 100.0), (30.0, 115.0), (45.0, 130.0), (60.0, 145.0)], 1.0),
        # A reset (20 -> 5) adds the value before it: increase 25, extrapolated to 60 s.
        ([(15.0, 10.0), (30.0, 20.0), (45.0, 5.0), (60.0, 15.0)], 25 * (60 / 45) / 60),
        # Gaps to both ends larger than 1.1 intervals: half an interval each side.
        ([(20.0, 100.0), (30.0, 110.0)], 10 * (10 + 5 + 5) / 10 / 60),
    ],
)
def test_extrapolated_rate_hand_computed(
    samples: list[tuple[float, float]], expected: float
) -> None:
    assert extrapolated_rate(samples, 0.0, 60.0) == pytest.approx(expected)


def test_rate_needs_two_samples() -> None:
    assert extrapolated_rate([(30.0, 5.0)], 0.0, 60.0) is None
    assert extrapolated_rate([], 0.0, 60.0) is None
