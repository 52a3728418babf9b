"""The seasonal demand forecast: daily and weekly patterns learned from the target's own
history (pure: series in, forecast out; no I/O, no clock reads).

Production LLM traffic repeats: the evening peak of a service comes back every day, a batch
job at the top of the hour every hour. The short-horizon forecast (:mod:`scaler.core.forecast`)
sees a recurring rise only once it has begun, a model load too late. This module fits the
target's demand history (the capacity signal's demand, in its units, at a coarse step such as
10 minutes, up to 14 days: what AWS EC2 predictive scaling reads) and forecasts the demand one
model load plus one control interval ahead, so that replicas are Ready before the rise.

**Model.** The history is decomposed in log space (demand swings are proportional: a peak 2.2x
the trough is the same shape at any fleet size) by statsmodels' MSTL (Bandara, Hyndman and
Bergmeir, "MSTL: A Seasonal-Trend Decomposition Algorithm for Time Series with Multiple
Seasonal Patterns", 2021): a daily season, and a weekly one once the history holds more than
two weeks (MSTL drops a period longer than half the series). The forecast of the window at
``t + h`` made at ``t`` is the seasonal components of the same phase in the last period
observed, plus the deseasonalised level: the mean over the last :data:`LEVEL_SAMPLES` windows
of the log demand minus its season (Hyndman and Athanasopoulos, "Forecasting: Principles and
Practice", section 3.6 and 12.1: forecasting a decomposition, the seasonally adjusted series by
its recent level).

Why MSTL and not ``ExponentialSmoothing`` (Holt-Winters): Holt-Winters takes one seasonal
period, fits its smoothing parameters by an optimiser over the whole series (tens of seconds
with a 1,008-sample weekly season), and diverges on series with gaps; MSTL is a sequence of
LOESS smoothers, handles several periods, and fits two weeks at a 10-minute step in about 0.2 s
on one core. Prophet or ARIMA (Dynamo's planner) would add a heavy dependency (Stan) or an
optimiser per target for no better accuracy on a demand this regular.

**Out-of-sample check.** The model is used only where it beats the same-hour-yesterday
(seasonal naive) forecast, ``y(t) = y(t - 1 day)``, the baseline a recurring load is judged by.
The last :data:`CHECK_DAYS` days of the history are held out: the decomposition is fitted on
the days before them, and each held-out window ``j`` is forecast as it would have been in
operation, from the last refit at or before ``j - h`` (a refit every ``refit_seconds``, the
level from the windows up to it). The mean absolute percentage errors (MAPE, over windows with
demand) are compared: the model is in use only when its MAPE is below ``1 - MIN_IMPROVEMENT``
times the naive one's, and also below that share of the recent level's (the mean of the last
:data:`LEVEL_SAMPLES` windows at the refit: a forecast without any season, about what the
short-horizon forecast knows). A trace without a daily pattern can have a same-hour-yesterday
forecast so poor that any smoother beats it; beating the recent level too is the evidence that
the season itself predicts. The win must also hold on each held-out day on its own (a model no
worse than either baseline there): a pooled win can come from a few windows of one day whose
demand was near zero (any forecast of them is off by several times their size), which on a
trace without a daily pattern is luck, not a season. Held-out windows without data (gaps,
interpolated for the fit) are not scored. Otherwise it stays out and says why, as it does
with less than :data:`MIN_DAYS` days of history (two to fit a daily season, one to check it).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

__all__ = [
    "CHECK_DAYS",
    "DAY_SECONDS",
    "LEVEL_SAMPLES",
    "MIN_DAYS",
    "MIN_IMPROVEMENT",
    "WEEK_SECONDS",
    "SeasonalCheck",
    "SeasonalForecast",
    "SeasonalSchedule",
    "fit_seasonal",
    "mape",
    "replay_seasonal",
    "seasonal_replicas",
]

DAY_SECONDS = 86400.0
WEEK_SECONDS = 7 * DAY_SECONDS
#: Days of history held out for the out-of-sample check (at most; fewer when the history is
#: short, never fewer than one).
CHECK_DAYS = 2
#: The least history the model is fitted on, days: MSTL needs two whole daily periods, and
#: the check one more day held out.
MIN_DAYS = 3
#: The model must beat the seasonal naive forecast's MAPE by at least this share: a model no
#: better than yesterday's curve adds replicas for noise.
MIN_IMPROVEMENT = 0.05
#: Windows whose deseasonalised demand makes the level (three 10-minute windows: half an hour).
LEVEL_SAMPLES = 3
#: Demand below this share of the history's median counts as this share in log space (a window
#: without traffic has no logarithm).
_FLOOR_SHARE = 0.01


@dataclass(frozen=True, slots=True)
class SeasonalCheck:
    """The out-of-sample check of one fit.

    Attributes:
        mape: the model's mean absolute percentage error over the held-out windows (0.19 is
            19%).
        naive_mape: the same-hour-yesterday forecast's, over the same windows.
        days: the days held out.
        windows: the windows with demand the errors are averaged over.
        recent_mape: the recent level's (the mean of the last windows at the refit, what a
            forecast without a season says), over the same windows.
    """

    mape: float
    naive_mape: float
    days: float
    windows: int
    recent_mape: float = math.nan

    @property
    def ratio(self) -> float:
        """The model's MAPE over the naive one's (below 1: the model is better; inf when the
        naive forecast is exact)."""
        return self.mape / self.naive_mape if self.naive_mape > 0 else math.inf


@dataclass(frozen=True, slots=True)
class SeasonalForecast:
    """One target's seasonal forecast, as fitted at ``fitted_at``.

    Attributes:
        fitted_at: the time of the last history window the fit read, controller seconds.
        step_seconds: the history's step; ``path[i]`` is the demand forecast for the window
            ending at ``fitted_at + (i + 1) x step_seconds``.
        path: the forecast demand, in the demand's units (the capacity signal's), >= 0.
        check: the out-of-sample check (None when the history was too short for one).
        in_use: the model beat the seasonal naive forecast and may raise the replicas.
        note: why it is in use or not, in one sentence with the numbers.
        history_seconds: the history the fit read.
        interval_seconds: the control interval the forecast is read at, added to the horizon
            (the controller sets it; a replica asked for now starts at the next write).
    """

    fitted_at: float
    step_seconds: float
    path: tuple[float, ...]
    check: SeasonalCheck | None
    in_use: bool
    note: str
    history_seconds: float = 0.0
    interval_seconds: float = 0.0

    def peak(self, now: float, horizon_seconds: float) -> float | None:
        """The highest forecast demand of the windows that end after ``now`` and start before
        ``now + horizon_seconds`` (the windows a replica started now would serve first), or
        None when the path does not reach that far (a fit older than its path) or starts
        after it."""
        if not self.path:
            return None
        first = math.floor((now - self.fitted_at) / self.step_seconds)
        last = math.ceil((now + horizon_seconds - self.fitted_at) / self.step_seconds)
        first = max(first, 0)
        if last > len(self.path) or last < 1:
            return None
        return max(self.path[first:last])


def mape(forecast: Sequence[float], actual: Sequence[float]) -> tuple[float, int]:
    """``(mean absolute percentage error, windows)`` over the pairs whose actual value is
    positive and both finite (0.19 is 19%; ``(nan, 0)`` when there are none)."""
    errors = [
        abs(f - a) / a
        for f, a in zip(forecast, actual, strict=True)
        if a > 0 and math.isfinite(a) and math.isfinite(f)
    ]
    return (math.fsum(errors) / len(errors), len(errors)) if errors else (math.nan, 0)


def _observed(v: float | None) -> bool:
    return v is not None and math.isfinite(v) and v >= 0


def _filled(values: Sequence[float | None]) -> list[float] | None:
    """The series with missing or invalid windows interpolated linearly (ends held); None
    when no window is valid."""
    good = [(i, float(v)) for i, v in enumerate(values) if v is not None and _observed(v)]
    if not good:
        return None
    out: list[float] = []
    k = 0
    for i in range(len(values)):
        while k + 1 < len(good) and good[k + 1][0] <= i:
            k += 1
        i0, v0 = good[k]
        if i <= i0 or k + 1 >= len(good):
            out.append(v0)
            continue
        i1, v1 = good[k + 1]
        out.append(v0 + (v1 - v0) * (i - i0) / (i1 - i0))
    return out


@dataclass(frozen=True, slots=True)
class _Decomposition:
    """The seasonal components of a log series and its deseasonalised values."""

    periods: tuple[int, ...]
    seasonal: tuple[tuple[float, ...], ...]  # per period, over the fitted series
    adjusted: tuple[float, ...]  # log series minus all seasons

    def season_at(self, j: int) -> float:
        """The seasons' sum at index ``j`` (beyond the series: the same phase of the last
        period observed)."""
        n = len(self.adjusted)
        total = 0.0
        for p, s in zip(self.periods, self.seasonal, strict=True):
            k = j if j < n else j - p * math.ceil((j - n + 1) / p)
            total += s[k]
        return total


def _decompose(log_series: Sequence[float], step_seconds: float) -> _Decomposition:
    from statsmodels.tsa.seasonal import MSTL  # heavy import: only where a fit runs

    n = len(log_series)
    day = round(DAY_SECONDS / step_seconds)
    week = round(WEEK_SECONDS / step_seconds)
    periods = tuple(p for p in (day, week) if p < n / 2)
    if not periods:
        raise ValueError(f"{n} windows: too few for a daily season of {day}")
    fit = MSTL(list(log_series), periods=periods).fit()
    raw = fit.seasonal
    seasons = (
        (tuple(float(x) for x in raw),)
        if len(periods) == 1
        else tuple(tuple(float(x) for x in raw[:, i]) for i in range(len(periods)))
    )
    adjusted = tuple(float(y) - sum(s[i] for s in seasons) for i, y in enumerate(log_series))
    return _Decomposition(periods, seasons, adjusted)


def _level(dec: _Decomposition, log_series: Sequence[float], origin: int) -> float:
    """The deseasonalised level at index ``origin`` (inclusive), from the windows up to it:
    inside the fitted series its adjusted values, after it the observed log demand minus the
    extrapolated season."""
    lo = max(0, origin - LEVEL_SAMPLES + 1)
    vals = [
        dec.adjusted[i] if i < len(dec.adjusted) else log_series[i] - dec.season_at(i)
        for i in range(lo, origin + 1)
    ]
    return math.fsum(vals) / len(vals)


def fit_seasonal(
    values: Sequence[float | None],
    step_seconds: float,
    end_at: float,
    *,
    horizon_seconds: float,
    ahead_seconds: float,
    refit_seconds: float = 3600.0,
) -> SeasonalForecast:
    """Fit the seasonal model on a demand history and check it out of sample.

    Args:
        values: the demand in each window of ``step_seconds``, oldest first, the last ending
            at ``end_at``; None or NaN for a window without data (interpolated; the windows
            before the first with data are not history at all, and are dropped). Units are the
            capacity signal's demand; any unit works, the errors are relative.
        step_seconds: the history's step, seconds (5-10 minutes: a finer step adds noise and
            cost, not a better daily curve).
        end_at: controller time of the last window, seconds.
        horizon_seconds: the forecast horizon the controller sizes for (model load plus one
            control interval), seconds; the check scores forecasts made this far ahead.
        ahead_seconds: how far the returned path reaches past ``end_at``, seconds (the refit
            period plus the horizon, so that the forecast lasts until the next refit).
        refit_seconds: how often the controller refits, seconds; the check forecasts each
            held-out window from the last refit before it, as in operation.

    Returns:
        A :class:`SeasonalForecast`; ``in_use`` False, with the reason in ``note``, when the
        history is shorter than :data:`MIN_DAYS` days, holds no demand, or the model does not
        beat the seasonal naive forecast by :data:`MIN_IMPROVEMENT`.

    Raises:
        ValueError: ``step_seconds`` does not divide a day into whole windows, or a
            non-positive horizon, ``ahead_seconds`` or ``refit_seconds``.
    """
    day = DAY_SECONDS / step_seconds
    if step_seconds <= 0 or abs(day - round(day)) > 1e-9:
        raise ValueError(f"step_seconds must divide a day into whole windows, got {step_seconds!r}")
    if horizon_seconds <= 0 or ahead_seconds <= 0 or refit_seconds <= 0:
        raise ValueError(
            f"horizon_seconds, ahead_seconds and refit_seconds must be > 0, got "
            f"{horizon_seconds!r}, {ahead_seconds!r}, {refit_seconds!r}"
        )
    n_day = round(day)
    # the history starts at its first window with data: a fleet younger than the range read
    # has no series before it, which is not days of demand to fill in
    first = next((i for i, v in enumerate(values) if _observed(v)), len(values))
    values = values[first:]
    history = len(values) * step_seconds
    days = history / DAY_SECONDS

    def off(note: str, check: SeasonalCheck | None = None) -> SeasonalForecast:
        return SeasonalForecast(end_at, step_seconds, (), check, False, note, history)

    if days < MIN_DAYS:
        return off(
            f"seasonal forecast off: {days:.1f} days of history, it needs {MIN_DAYS} (two to "
            "fit a daily season, one to check it against the same hour yesterday)"
        )
    filled = _filled(values)
    if filled is None or max(filled) <= 0:
        return off("seasonal forecast off: no demand in the history")
    positive = sorted(v for v in filled if v > 0)
    floor = _FLOOR_SHARE * positive[len(positive) // 2]
    logs = [math.log(max(v, floor)) for v in filled]
    h = max(1, math.ceil(horizon_seconds / step_seconds))
    refit = max(1, round(refit_seconds / step_seconds))
    # the days held out leave more than two whole days to fit (MSTL's daily period)
    check_n = min(CHECK_DAYS * n_day, len(logs) - 2 * n_day - 1)
    t0 = len(logs) - check_n
    dec = _decompose(logs[:t0], step_seconds)
    ours: list[float] = []
    naive: list[float] = []
    recent: list[float] = []
    actual: list[float] = []
    held_out_day: list[int] = []
    for j in range(t0, len(logs)):
        if not _observed(values[j]):
            continue  # a gap: interpolated for the fit, not data to score
        held_out_day.append((j - t0) // n_day)
        origin = t0 - 1 + ((j - h - (t0 - 1)) // refit) * refit if j - h >= t0 else j - h
        ours.append(math.exp(_level(dec, logs, origin) + dec.season_at(j)))
        naive.append(filled[j - n_day])
        lo = max(0, origin - LEVEL_SAMPLES + 1)
        recent.append(math.fsum(filled[lo : origin + 1]) / (origin + 1 - lo))
        actual.append(filled[j])
    m, windows = mape(ours, actual)
    mn, _ = mape(naive, actual)
    mr, _ = mape(recent, actual)
    check = SeasonalCheck(m, mn, check_n / n_day, windows, mr)
    if windows == 0 or not math.isfinite(m) or not math.isfinite(mn):
        return off("seasonal forecast off: no demand in the held-out days to check it on", check)
    verdict = (
        f"MAPE {m:.1%} vs {mn:.1%} for the same hour yesterday and {mr:.1%} for the recent "
        f"level, over the last {check.days:g} days held out ({check.ratio:.2f}x)"
    )
    if m >= (1 - MIN_IMPROVEMENT) * mn:
        return off(
            f"seasonal forecast off: it does not beat the same hour yesterday by "
            f"{MIN_IMPROVEMENT:.0%}: {verdict}",
            check,
        )
    if math.isfinite(mr) and m >= (1 - MIN_IMPROVEMENT) * mr:
        return off(
            f"seasonal forecast off: the season adds nothing to the recent level (it does not "
            f"beat it by {MIN_IMPROVEMENT:.0%}): {verdict}",
            check,
        )
    for d in sorted(set(held_out_day)):
        pick = [i for i, k in enumerate(held_out_day) if k == d]
        md, _ = mape([ours[i] for i in pick], [actual[i] for i in pick])
        worse = [
            f"{name} ({b:.1%})"
            for name, forecast in (("the same hour yesterday", naive), ("the recent level", recent))
            if math.isfinite(md)
            and math.isfinite(b := mape([forecast[i] for i in pick], [actual[i] for i in pick])[0])
            and md >= b
        ]
        if worse:
            return off(
                f"seasonal forecast off: it wins over the held-out days but not on day {d + 1} "
                f"of them, where its MAPE {md:.1%} is no better than {' or '.join(worse)}: "
                f"{verdict}",
                check,
            )
    full = _decompose(logs, step_seconds)
    n = len(logs)
    level = _level(full, logs, n - 1)
    steps = max(1, math.ceil(ahead_seconds / step_seconds))
    path = tuple(math.exp(level + full.season_at(n + i)) for i in range(steps))
    weekly = " and weekly" if len(full.periods) > 1 else ""
    return SeasonalForecast(
        end_at,
        step_seconds,
        path,
        check,
        True,
        f"seasonal forecast in use (daily{weekly} season, {days:.1f} days): {verdict}",
        history,
    )


def seasonal_replicas(
    forecast: SeasonalForecast | None,
    now: float,
    horizon_seconds: float,
    per_replica: float | None,
) -> tuple[int | None, float | None]:
    """``(replicas, demand)`` the seasonal forecast asks for this cycle: the forecast's peak
    over the horizon (:meth:`SeasonalForecast.peak`) over what one replica serves at the
    target utilization (``per_replica``, the capacity signal's target, same units); ``(None,
    None)`` when the forecast is absent, off, stale, or the capacity signal has no estimate.
    """
    if forecast is None or not forecast.in_use or per_replica is None or per_replica <= 0:
        return None, None
    demand = forecast.peak(now, horizon_seconds)
    if demand is None:
        return None, None
    return max(0, math.ceil(demand / per_replica - 1e-9)), demand


def replay_seasonal(
    values: Sequence[float | None],
    step_seconds: float,
    first: int,
    *,
    horizon_seconds: float,
    refit_seconds: float = 3600.0,
    history_seconds: float = 14 * DAY_SECONDS,
) -> list[tuple[float | None, SeasonalForecast]]:
    """The seasonal forecast of each window from index ``first`` on, as the controller would
    have had it: refitted every ``refit_seconds`` on at most ``history_seconds`` of the windows
    before the refit (never a later one), and read ``horizon_seconds`` before the window ends.

    Args:
        values: the demand per window (see :func:`fit_seasonal`), oldest first.
        step_seconds: the window, seconds.
        first: the index of the first window forecast (at least one window of history).
        horizon_seconds, refit_seconds: as for :func:`fit_seasonal`.
        history_seconds: the most history one fit reads (14 days), seconds.

    Returns:
        Per window from ``first``: ``(forecast demand or None when off or stale, the fit it
        came from)``.

    Raises:
        ValueError: ``first`` below 1 or past the series; as :func:`fit_seasonal`.
    """
    if not 1 <= first <= len(values):
        raise ValueError(f"first must be in 1..{len(values)}, got {first!r}")
    refit = max(1, round(refit_seconds / step_seconds))
    keep = round(history_seconds / step_seconds) + 1  # both ends: a weekly season fits
    h = max(1, math.ceil(horizon_seconds / step_seconds))
    out: list[tuple[float | None, SeasonalForecast]] = []
    fit: SeasonalForecast | None = None
    fitted_end = -1
    for j in range(first, len(values)):
        # the fit as of the last refit at or before the window's read time (j - h), which
        # reads the windows before it only
        end = first - 1 + max(0, (j - h - (first - 1)) // refit) * refit
        end = min(end, j - 1)
        if fit is None or end != fitted_end:
            start = max(0, end + 1 - keep)
            fit = fit_seasonal(
                values[start : end + 1],
                step_seconds,
                float(end),
                horizon_seconds=horizon_seconds,
                ahead_seconds=refit_seconds + horizon_seconds + step_seconds,
                refit_seconds=refit_seconds,
            )
            fitted_end = end
        i = j - fitted_end - 1
        value = fit.path[i] if fit.in_use and 0 <= i < len(fit.path) else None
        out.append((value, fit))
    return out


@dataclass
class SeasonalSchedule:
    """The seasonal forecast as the controller's refresher would have held it at each time of
    a replay (the bench's, the backtest's): refitted every ``refit_seconds`` on at most 14 days
    of the windows that ended before the refit, never a later one.

    Attributes:
        values: demand per window of ``step_seconds``, oldest first (see
            :func:`fit_seasonal`); window ``origin`` starts at replay time ``start_at``.
        origin: the index of the window that starts at ``start_at``.
        horizon_seconds: the horizon each fit's check scores, seconds.
        interval_seconds: the control interval, added to the horizon when read.
        start_at: the replay time at which window ``origin`` starts, seconds.
    """

    values: Sequence[float | None]
    origin: int
    horizon_seconds: float
    interval_seconds: float
    step_seconds: float = 600.0
    refit_seconds: float = 3600.0
    start_at: float = 0.0
    fits: dict[int, SeasonalForecast] = field(default_factory=dict)

    def __call__(self, now: float) -> SeasonalForecast | None:
        """The fit of the last refit at or before ``now`` (None before any window ended)."""
        k = math.floor((now - self.start_at) / self.refit_seconds)
        end = self.origin + math.floor(k * self.refit_seconds / self.step_seconds) - 1
        if end < 0:
            return None
        end = min(end, len(self.values) - 1)
        fit = self.fits.get(end)
        if fit is None:
            keep = round(14 * DAY_SECONDS / self.step_seconds) + 1
            fit = fit_seasonal(
                self.values[max(0, end + 1 - keep) : end + 1],
                self.step_seconds,
                self.start_at + (end + 1 - self.origin) * self.step_seconds,
                horizon_seconds=self.horizon_seconds,
                ahead_seconds=self.refit_seconds + self.horizon_seconds + self.step_seconds,
                refit_seconds=self.refit_seconds,
            )
            fit = replace(fit, interval_seconds=self.interval_seconds)
            self.fits[end] = fit
        return fit
