"""The seasonal forecast (scaler.core.seasonal): fitted on a daily pattern it is in use and
forecasts the rise; without a pattern, or with too little history, it switches itself off and
says why; the replay reads prior history only."""

from __future__ import annotations

import math
import random

import pytest

from scaler.core.seasonal import (
    MIN_IMPROVEMENT,
    SeasonalForecast,
    fit_seasonal,
    mape,
    replay_seasonal,
    seasonal_replicas,
)

STEP = 600.0
DAY = 144  # windows a day


def daily(days: int, *, noise: float = 0.03, seed: int = 0) -> list[float]:
    """A demand with a daily curve (trough 100, peak 220 at 20:00), a level that drifts from
    day to day (as a service's does: yesterday's curve at today's level) and noise."""
    rng = random.Random(seed)
    out, level = [], 0.0
    for i in range(days * DAY):
        level = 0.995 * level + rng.gauss(0, 0.02)
        hour = (i % DAY) / 6
        curve = 160 + 60 * math.cos(2 * math.pi * (hour - 20) / 24)
        out.append(curve * math.exp(level + rng.gauss(0, noise)))
    return out


def flat(days: int, *, seed: int = 0) -> list[float]:
    """A demand without a season: a random walk of the level with noise around it."""
    rng = random.Random(seed)
    level, out = 0.0, []
    for _ in range(days * DAY):
        level += rng.gauss(0, 0.08)
        level *= 0.97
        out.append(200 * math.exp(level + rng.gauss(0, 0.3)))
    return out


def fit(values: list[float | None]) -> SeasonalForecast:
    return fit_seasonal(values, STEP, 0.0, horizon_seconds=300.0, ahead_seconds=3900.0)


def test_a_daily_pattern_is_in_use_and_beats_the_same_hour_yesterday() -> None:
    f = fit(list(daily(7)))
    assert f.in_use, f.note
    # a day ahead the path has the curve's swing: trough 100 at 08:00, peak 220 at 20:00
    ahead = fit_seasonal(
        list(daily(7)), STEP, 0.0, horizon_seconds=300.0, ahead_seconds=24 * 3600.0
    )
    assert max(ahead.path) / min(ahead.path) == pytest.approx(2.2, rel=0.15)
    assert ahead.path[20 * 6 - 1] > 0.95 * max(ahead.path)  # 20:00, a broad peak
    assert f.check is not None
    assert f.check.days == 2 and f.check.windows == 2 * DAY
    assert f.check.ratio < 1 - MIN_IMPROVEMENT
    assert "in use" in f.note and "same hour yesterday" in f.note
    assert len(f.path) == math.ceil(3900 / STEP)


def test_switches_itself_off_when_it_does_not_beat_the_seasonal_naive_forecast() -> None:
    f = fit(list(flat(7)))
    assert not f.in_use
    assert f.path == ()
    assert f.check is not None
    assert f.note.startswith("seasonal forecast off")
    # it says which forecast it failed to beat, with both errors
    assert "does not beat" in f.note or "adds nothing" in f.note
    assert f"{f.check.mape:.1%}" in f.note
    assert seasonal_replicas(f, 0.0, 300.0, 10.0) == (None, None)


def test_switches_itself_off_when_the_same_hour_yesterday_is_better() -> None:
    """A strong daily pattern that is jagged and drifts from one day to the next (each window
    of the day a random walk across days, 5% a day): yesterday's curve is the best guess of
    today's, the season averaged over the week lags it, so the check finds the model worse
    than the seasonal naive forecast, says so and stays out, though the pattern is there
    (the recent level, which knows no season, is far worse than both)."""
    rng = random.Random(3)
    profile = [math.log(100 + 150 * rng.random()) for _ in range(DAY)]
    series: list[float | None] = []
    for _ in range(7):
        profile = [p + rng.gauss(0, 0.05) for p in profile]
        series += [math.exp(p) for p in profile]
    f = fit(series)
    assert not f.in_use and f.path == ()
    assert f.check is not None
    assert f.check.mape > 1.2 * f.check.naive_mape and f.check.recent_mape > 4 * f.check.mape
    assert "does not beat the same hour yesterday by 5%" in f.note
    assert seasonal_replicas(f, 0.0, 300.0, 10.0) == (None, None)


def test_a_win_pooled_over_the_held_out_days_but_lost_on_one_of_them_is_off() -> None:
    """A daily curve whose level jumps by half on the first held-out day, and whose last day
    repeats that day exactly: pooled over the two held-out days the season beats the same hour
    yesterday by far (yesterday was at the old level), but on the last day yesterday is exact,
    so the model stays out and names the day and the forecast it lost to."""
    values = daily(7)
    values[5 * DAY :] = [1.5 * v for v in values[5 * DAY : 6 * DAY]] * 2
    f = fit(list(values))
    assert f.check is not None  # the pooled win over both baselines
    assert f.check.mape < 0.95 * min(f.check.naive_mape, f.check.recent_mape)
    assert not f.in_use
    assert "not on day 2 of them" in f.note and "the same hour yesterday (0.0%)" in f.note


def test_off_with_too_little_history() -> None:
    f = fit(list(daily(2)))
    assert not f.in_use and f.check is None
    assert "2.0 days of history, it needs 3" in f.note


def test_windows_before_the_first_with_data_are_no_history() -> None:
    """A fleet two days old read over 14 days: the twelve days without series are not filled
    in with its first window, so it has two days of history, too few."""
    values: list[float | None] = [None] * (12 * DAY) + list(daily(2))
    f = fit(values)
    assert not f.in_use and f.check is None
    assert "2.0 days of history, it needs 3" in f.note


def test_gaps_are_interpolated_not_zero() -> None:
    values: list[float | None] = list(daily(7))
    for i in range(300, 330):
        values[i] = None
    values[500] = math.nan
    f = fit(values)
    assert f.in_use, f.note


def test_peak_is_the_highest_window_within_the_horizon_and_none_when_stale() -> None:
    f = SeasonalForecast(1000.0, STEP, (10.0, 30.0, 20.0), None, True, "")
    assert f.peak(1000.0, 300.0) == 10.0  # the first window only
    assert f.peak(1000.0, 700.0) == 30.0  # reaches into the second
    assert f.peak(1700.0, 500.0) == 30.0  # inside the second window
    assert f.peak(2300.0, 300.0) == 20.0  # the third
    assert f.peak(2900.0, 300.0) is None  # past the path: a stale fit says nothing


def test_seasonal_replicas_over_the_capacity_per_replica() -> None:
    f = SeasonalForecast(0.0, STEP, (95.0, 400.0), None, True, "")
    assert seasonal_replicas(f, 0.0, 300.0, 10.0) == (10, 95.0)
    assert seasonal_replicas(f, 0.0, 900.0, 10.0) == (40, 400.0)
    assert seasonal_replicas(f, 0.0, 300.0, None) == (None, None)  # no capacity estimate
    assert seasonal_replicas(None, 0.0, 300.0, 10.0) == (None, None)


def test_replay_reads_only_the_history_before_each_step() -> None:
    values: list[float | None] = list(daily(8))
    first = 7 * DAY
    base = replay_seasonal(values, STEP, first, horizon_seconds=300.0)
    # a change in the last day's second half cannot alter a forecast made before it
    changed = values[: first + 72] + [5 * (v or 0.0) for v in values[first + 72 :]]
    after = replay_seasonal(changed, STEP, first, horizon_seconds=300.0)
    assert [v for v, _ in base[:72]] == [v for v, _ in after[:72]]
    assert [v for v, _ in base[72:]] != [v for v, _ in after[72:]]
    fc = [v for v, _ in base]
    assert all(v is not None for v in fc)
    actual = [v or 0.0 for v in values[first:]]
    ours, _ = mape([v or 0.0 for v in fc], actual)
    naive, _ = mape([v or 0.0 for v in values[first - DAY : -DAY]], actual)
    assert ours < 0.8 * naive


def test_mape_skips_windows_without_demand() -> None:
    m, n = mape([1.0, 2.0, 5.0], [2.0, 0.0, 4.0])
    assert (m, n) == (0.375, 2)
    m, n = mape([1.0], [0.0])
    assert math.isnan(m) and n == 0


def test_bad_arguments_name_the_value() -> None:
    with pytest.raises(ValueError, match="divide a day"):
        fit_seasonal([1.0], 7.0, 0.0, horizon_seconds=1.0, ahead_seconds=1.0)
    with pytest.raises(ValueError, match="must be > 0"):
        fit_seasonal([1.0], STEP, 0.0, horizon_seconds=0.0, ahead_seconds=1.0)
