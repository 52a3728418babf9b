"""The demand forecast (scaler.core.forecast): Holt's level and trend on irregular cycles, the
burstiness headroom, and a rise that never extrapolates a step into several."""

from __future__ import annotations

import math

import pytest

from scaler.core.forecast import MAX_RISE, DemandForecast, observe_demand


def _run(values: list[float], *, dt: float = 15.0) -> DemandForecast:
    f: DemandForecast | None = None
    for i, v in enumerate(values):
        f = observe_demand(f, v, i * dt)
    assert f is not None
    return f


def test_a_steady_demand_has_no_trend_and_no_burstiness() -> None:
    """A constant demand is its own forecast at any horizon."""
    f = _run([50_000.0] * 100)
    assert f.level == pytest.approx(50_000.0)
    assert f.trend == pytest.approx(0.0, abs=1e-9)
    assert f.peak(150.0, headroom=1.0) == pytest.approx(50_000.0)


def test_a_ramp_is_met_ahead_and_a_fall_is_not_anticipated() -> None:
    """On a ramp of 20 tokens/s per second the trend converges to it and the forecast leads
    the level by about trend x horizon; on the way down the forecast stays at the level."""
    up = _run([10_000.0 + 20.0 * 15 * i for i in range(200)])
    assert up.trend == pytest.approx(20.0, rel=0.05)
    assert up.peak(150.0, headroom=0.0) == pytest.approx(up.level + up.trend * 150.0)
    down = _run([70_000.0 - 20.0 * 15 * i for i in range(200)])
    assert down.trend < 0
    assert down.peak(150.0, headroom=0.0) == pytest.approx(down.level)


def test_a_step_is_not_extrapolated_into_several() -> None:
    """A step looks like a steep ramp through the rate window; over a long model load (10
    minutes) the rise the trend may add is capped at MAX_RISE of the level."""
    f = _run([1_000.0] * 40 + [10_000.0] * 4)
    assert f.trend * 600.0 > MAX_RISE * f.level  # uncapped it would ask for more
    assert f.peak(600.0, headroom=0.0) == pytest.approx((1 + MAX_RISE) * f.level)


def test_burstiness_adds_headroom_and_fades() -> None:
    """Alternating bursts leave a standard deviation of the one-step errors that headroom
    multiplies; after a quarter of an hour of calm it has mostly faded."""
    bursty = _run([5_000.0, 45_000.0] * 60)
    assert bursty.burst_std > 10_000
    assert bursty.peak(0.0, headroom=2.0) == pytest.approx(bursty.level + 2.0 * bursty.burst_std)
    f = bursty
    for _ in range(60):  # 15 minutes of a steady 25k: the variance fades by about e
        f = observe_demand(f, 25_000.0, f.at + 15.0)
    assert f.burst_std < 0.65 * bursty.burst_std


def test_a_gap_weighs_as_one_update() -> None:
    """After an outage of 20 minutes the level jumps to the new reading; its error counts as
    one burst (one rate window of weight), not twenty minutes of them."""
    f = _run([20_000.0] * 20)
    after = observe_demand(f, 60_000.0, f.at + 1200.0)
    assert after.level == pytest.approx(60_000.0, rel=1e-3)
    weight = 1 - math.exp(-60.0 / 900.0)
    assert after.burstiness == pytest.approx(weight * 40_000.0**2, rel=1e-3)


def test_a_clock_that_goes_back_changes_nothing_but_the_time() -> None:
    """A reading at or before the last update restarts the interval; nothing else moves."""
    f = _run([30_000.0, 31_000.0, 32_000.0])
    back = observe_demand(f, 90_000.0, f.at - 30.0)
    assert (back.level, back.trend, back.burstiness) == (f.level, f.trend, f.burstiness)
    assert back.at == f.at - 30.0


@pytest.mark.parametrize(
    "bad", [pytest.param(-1.0, id="negative"), pytest.param(math.nan, id="nan"),
            pytest.param(math.inf, id="inf")],
)  # fmt: skip
def test_only_valid_demand_is_observed(bad: float) -> None:
    """The caller passes valid readings only; anything else is a programming error."""
    with pytest.raises(ValueError, match="finite number >= 0"):
        observe_demand(None, bad, 0.0)
