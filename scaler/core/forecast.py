"""The demand forecast over the model-load horizon (pure: no I/O, no clock reads).

The target's demand (weighted tokens per second, :mod:`scaler.core.capacity`) is smoothed
with Holt's linear method: a level and a trend, updated once per control cycle, plus the
demand's burstiness, an exponentially weighted mean square of the one-step forecast errors.
The forecast for a horizon ``h`` (the time a replica started now needs to become Ready) is
the highest demand expected until then, with headroom for the bursts seen recently::

    peak(h) = level + min(max(trend, 0) x h, MAX_RISE x level) + headroom x sqrt(burstiness)

A falling trend is never extrapolated: capacity is removed for a drop that has been observed,
not for one that is predicted. The forecast also notes since when the demand has fallen
without a rise (``falling_since``: the trend negative at every update, the level never more
than one standard deviation of the burstiness above its lowest point since, ``trough``), the
level's last high (``high_at``, ``high``: the last update whose level was at or above the
high before it, or rose more than one standard deviation above its lowest point since,
``low``), and :meth:`DemandForecast.fall_seconds` how fast the demand falls against its noise:
together they let the scale-down window follow a steady fall
(:func:`scaler.core.decide.down_window_seconds`). The high dates a fall from where the level
turned: the trend follows a change of slope only over its time constant, so after a rise it
turns negative minutes after the level did.

Cycles are not evenly spaced (a skipped cycle, a Prometheus outage, a new leader), so each
smoothing factor is derived from a time constant ``tau`` and the interval ``dt`` since the
last update: ``alpha = 1 - exp(-dt / tau)``; after a long gap the level jumps to the new value
and the old trend fades. Only valid demand readings update the forecast: an outage leaves it
where it was, never at zero.

Why not a library (statsmodels' ``ExponentialSmoothing``, the usual choice): it fits its
parameters by maximum likelihood over a stored series on each call, so the controller would
keep the whole history per target (here three numbers per target travel with the decision
state on the Lease), run an optimiser per target per cycle (1,000 targets every 15 s), assume
evenly spaced samples, and ship statsmodels with SciPy in the controller image for ten lines
of textbook recursion (Holt 1957; Hyndman and Athanasopoulos, "Forecasting: Principles and
Practice", section 8.2). The time constants are chosen by mechanism instead of fitted (and
checked on the first half of every benchmark trace): the level follows the demand over two
rate windows, so a burst shorter than a model load does not move it much; the trend over five,
so that it takes a lasting ramp to make one; the burstiness remembers a quarter of an hour, so
that a target with recurring bursts keeps standing headroom for them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

__all__ = [
    "BURST_TAU_SECONDS",
    "LEVEL_TAU_SECONDS",
    "MAX_RISE",
    "TREND_TAU_SECONDS",
    "DemandForecast",
    "observe_demand",
]

#: Time constant of the level, seconds: two rate windows. A burst shorter than a model load
#: (over before a replica started for it could serve) moves the level by less than half;
#: the burstiness keeps standing headroom for such bursts instead.
LEVEL_TAU_SECONDS = 120.0
#: Time constant of the trend, seconds: five rate windows, so that noise does not make a trend
#: and a ramp that lasts does.
TREND_TAU_SECONDS = 300.0
#: Time constant of the burstiness (mean square of the one-step errors), seconds.
BURST_TAU_SECONDS = 900.0
#: The trend may add at most this share of the level over the horizon: a step read through the
#: ``rate()`` window looks like a steep ramp for one window, and extrapolated over a model
#: load it would ask for several times the step.
MAX_RISE = 0.5
#: Updates before the trend is extrapolated at all.
_WARM_SAMPLES = 4
#: The longest interval one update's error is weighted for in the burstiness, seconds.
_BURST_DT_CAP_SECONDS = 60.0


def _factor(dt: float, tau: float) -> float:
    return 1.0 - math.exp(-dt / tau) if dt > 0 else 0.0


@dataclass(frozen=True, slots=True)
class DemandForecast:
    """The smoothed demand of one target (weighted tokens per second).

    Attributes:
        level: the smoothed demand, tokens/s.
        trend: its slope, tokens/s per second.
        burstiness: exponentially weighted mean square of the one-step forecast errors,
            (tokens/s) squared.
        at: controller time of the last update, seconds.
        samples: updates so far (the trend and burstiness mean little before a few).
        falling_since: controller time, seconds, from which the demand has fallen without a
            rise: every update since has left the trend negative and the level at most one
            standard deviation of the burstiness above ``trough`` (None: not falling).
        trough: the lowest level since ``falling_since``, tokens/s (None: not falling).
        high_at: controller time, seconds, of the demand's last high: the last update whose
            level was at or above the high before it or rose more than one standard deviation
            of the burstiness above its lowest point since (None: a state saved without it).
        high: the level at ``high_at``, tokens/s (None with ``high_at``).
        low: the lowest level since ``high_at``, tokens/s (None with ``high_at``).
    """

    level: float
    trend: float
    burstiness: float
    at: float
    samples: int = 1
    falling_since: float | None = None
    trough: float | None = None
    high_at: float | None = None
    high: float | None = None
    low: float | None = None

    def peak(self, horizon_seconds: float, headroom: float) -> float:
        """The highest demand expected within ``horizon_seconds``, plus ``headroom`` standard
        deviations of the burstiness; tokens/s, never negative. The trend counts only after a
        few updates, and adds at most :data:`MAX_RISE` of the level."""
        rise = max(0.0, self.trend) * max(0.0, horizon_seconds)
        if self.samples < _WARM_SAMPLES:
            rise = 0.0
        rise = min(rise, MAX_RISE * self.level)
        return max(0.0, self.level + rise + headroom * math.sqrt(max(0.0, self.burstiness)))

    def fall_seconds(self) -> float | None:
        """Seconds the trend takes to lower the demand by one standard deviation of its
        burstiness (the one-step errors), when the demand is falling; None when it is not
        falling or the trend has had too few updates to mean anything.

        A small value is a fall faster than the demand's own noise: a recommendation older
        than it answered a demand that has since dropped by more than that noise.
        """
        if self.samples < _WARM_SAMPLES or self.trend >= 0:
            return None
        return self.burst_std / -self.trend

    def fallen(self) -> bool:
        """The level lies more than one standard deviation of the burstiness below its last
        high (False for a state saved without the high): a drop larger than the noise."""
        return self.high is not None and self.high - self.level > self.burst_std

    @property
    def burst_std(self) -> float:
        """The standard deviation of the one-step errors, tokens/s (the burstiness' root)."""
        return math.sqrt(max(0.0, self.burstiness))


def observe_demand(
    forecast: DemandForecast | None,
    demand: float,
    now: float,
    *,
    level_tau: float = LEVEL_TAU_SECONDS,
    trend_tau: float = TREND_TAU_SECONDS,
    burst_tau: float = BURST_TAU_SECONDS,
) -> DemandForecast:
    """Holt's update with one valid demand reading (tokens/s) at ``now`` (seconds).

    A first reading starts the level at it, with no trend and no burstiness. A reading at or
    before the last update's time (a clock that went back) restarts the interval from ``now``
    without moving the estimate's time forward.

    Raises:
        ValueError: ``demand`` is negative or not finite (the caller passes valid readings only).
    """
    if not math.isfinite(demand) or demand < 0:
        raise ValueError(f"demand must be a finite number >= 0, got {demand!r}")
    if forecast is None:
        return DemandForecast(
            level=demand, trend=0.0, burstiness=0.0, at=now, high_at=now, high=demand, low=demand
        )
    dt = now - forecast.at
    if dt <= 0:
        return replace(forecast, at=now)
    predicted = forecast.level + forecast.trend * dt
    error = demand - predicted
    a = _factor(dt, level_tau)
    b = _factor(dt, trend_tau)
    # One error per update, however long the gap before it (an outage, a new leader): a jump
    # across a gap weighs as one burst, not as a quarter of an hour of them.
    g = _factor(min(dt, _BURST_DT_CAP_SECONDS), burst_tau)
    level = predicted + a * error
    trend = forecast.trend + b * ((level - forecast.level) / dt - forecast.trend)
    burstiness = forecast.burstiness + g * (error * error - forecast.burstiness)
    level = max(0.0, level)
    # The last high: a new one at a level at or above it, or at a rise beyond the noise
    # known so far above the lowest level since it (the demand coming back).
    high_at, high, low = now, level, level
    if (
        forecast.high is not None
        and forecast.high_at is not None
        and forecast.low is not None
        and level < forecast.high
        and level <= forecast.low + forecast.burst_std
    ):
        high_at, high, low = forecast.high_at, forecast.high, min(forecast.low, level)
    falling_since, trough = None, None
    if trend < 0:
        # A fall goes on while the level stays within the noise known so far above its
        # lowest point; a rise beyond it (a burst on the way down) starts a new one.
        falling_since, trough = now, level
        if (
            forecast.trend < 0
            and forecast.falling_since is not None
            and forecast.trough is not None
            and level <= forecast.trough + forecast.burst_std
        ):
            falling_since, trough = forecast.falling_since, min(forecast.trough, level)
    return DemandForecast(
        level=level,
        trend=trend,
        burstiness=burstiness,
        at=now,
        samples=forecast.samples + 1,
        falling_since=falling_since,
        trough=trough,
        high_at=high_at,
        high=high,
        low=low,
    )
