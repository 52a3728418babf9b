"""The backtest replays the seasonal forecast as it would have been at each step, from the
history before that step only (scaler/backtest/replay.py, seasonal_schedule)."""

from __future__ import annotations

import math

from scaler.backtest.replay import seasonal_schedule
from scaler.core.observation import PodLoad, ThroughputReading
from scaler.core.signals import SignalStatus
from tests.core.test_seasonal_phase import POLICY

DAY = 86400.0
STEP = 300.0


def reading(t: float, scale: float = 1.0) -> ThroughputReading:
    hour = (t % DAY) / 3600
    level = (2 + math.cos(2 * math.pi * (hour - 20) / 24)) * (1 + 0.1 * math.sin(t / (3 * DAY)))
    load = PodLoad(level, 1000 * level * scale, 0.0)
    return ThroughputReading(SignalStatus.OK, {"p": load})


def test_the_forecast_at_each_step_reads_only_the_history_before_it() -> None:
    times = [1_000_000.0 + i * STEP for i in range(int(4 * DAY / STEP))]
    base = seasonal_schedule(
        POLICY, times, [reading(t) for t in times], horizon_seconds=135.0, interval_seconds=15.0
    )
    cut = times[len(times) - 40]
    changed = seasonal_schedule(
        POLICY,
        times,
        [reading(t, 5.0 if t >= cut else 1.0) for t in times],
        horizon_seconds=135.0,
        interval_seconds=15.0,
    )
    early = times[: int(3 * DAY / STEP)]
    assert all(base(t) is None or not base(t).in_use for t in early[:-12])  # under 3 days: off
    late = [t for t in times if t < cut - 3600]
    fits = [(base(t), changed(t)) for t in late[-24:]]
    assert all(a is not None and b is not None and a.path == b.path for a, b in fits)
    last = base(times[-1])
    assert last is not None and last.in_use, last.note
