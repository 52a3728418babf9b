"""The seasonal forecast's goals on the replays (scaler/bench/seasonal.py): on ServeGen
m-small, trained on the first week, its MAPE on day 8 is at least 20% below the same hour
yesterday's; on m-mid (little daily pattern) it switches itself off; the synthetic shape with
bursts shorter than a model load has them where the module says."""

from __future__ import annotations

import pytest

from scaler.bench.seasonal import run_seasonal_goal
from scaler.sim.servegen import DEFAULT_DIR
from scaler.sim.synthetic import SHAPES, daily_bursts_rate

needs_servegen = pytest.mark.skipif(
    not (DEFAULT_DIR / "m-small").is_dir(), reason=f"no ServeGen data at {DEFAULT_DIR}"
)


def test_daily_bursts_are_shorter_than_a_model_load_and_repeat_daily() -> None:
    assert daily_bursts_rate(9 * 3600 + 50) == 10.0
    assert daily_bursts_rate(9 * 3600 + 100) < 2.0  # over after 100 s (a model load: 120 s)
    assert daily_bursts_rate(4 * 3600) == pytest.approx(1.0)
    assert daily_bursts_rate(16 * 3600) == pytest.approx(3.0)
    for t in (3600.0, 9 * 3600 + 50, 18 * 3600 + 30):
        assert daily_bursts_rate(t - 86400) == daily_bursts_rate(t) == daily_bursts_rate(t + 86400)
    assert SHAPES["daily-bursts"].duration_seconds == 2 * 86400


@pytest.mark.slow
@needs_servegen
def test_m_small_day8_beats_the_same_hour_yesterday_by_20_percent() -> None:
    g = run_seasonal_goal("servegen:m-small:day8", simulate=False)
    # in use for most of the day: from 19:00 a refit finds the season no better than the
    # recent level on one held-out day (7.5% vs 7.4%) and switches it off, as the per-day check
    # says (without that check m-mid's day 12 turns it on, at a MAPE worse than the naive one's)
    assert g.windows_in_use > 0.5 * g.windows
    assert g.mape <= 0.8 * g.naive_mape


@pytest.mark.slow
@needs_servegen
def test_m_mid_switches_itself_off() -> None:
    g = run_seasonal_goal("servegen:m-mid:day8", simulate=False)
    assert g.windows_in_use == 0
    assert all(n.startswith("seasonal forecast off") for n in g.notes)


def test_the_bench_prices_the_forecast_as_the_live_signal_does() -> None:
    """The forecast of a requests/s history is priced at each read with the controller's
    fitted prices: with decode fitted at a quarter of the profile's price, the path is the
    fitted price of a request, not the profile's (priced once with the profile, the bench
    asked for several times the replicas the live signal's learned capacity stood for)."""
    import math
    import random
    from types import SimpleNamespace

    from scaler.bench.runner import default_policy
    from scaler.bench.seasonal import PricedSchedule
    from scaler.core.capacity import CapacityMemory, demand_of, priced_policy
    from scaler.core.cost_fit import CostFit
    from scaler.core.observation import PodLoad, ThroughputReading
    from scaler.core.seasonal import SeasonalSchedule
    from scaler.core.signals import SignalStatus

    day = 144
    rng = random.Random(3)  # noise: a noiseless history makes the same hour yesterday exact
    rate = [
        (10 + 8 * math.sin(2 * math.pi * i / day)) * rng.uniform(0.95, 1.05) for i in range(8 * day)
    ]
    policy = default_policy().targets[0]
    schedule = SeasonalSchedule(rate, 7 * day, horizon_seconds=165.0, interval_seconds=15.0)
    priced = PricedSchedule(schedule, policy, prompt_tokens=1000.0, output_tokens=250.0)
    fit = schedule(3600.0)
    assert fit is not None and fit.in_use
    load = ThroughputReading(SignalStatus.OK, {"all": PodLoad(1.0, 1000.0, 250.0)})
    profile = demand_of(policy, load)[0]
    before = priced(3600.0)
    assert before is not None  # no controller yet: the profile's prices
    assert before.path == pytest.approx([v * profile for v in fit.path])
    memory = CapacityMemory(
        unit="work", fit=CostFit(decode_measured=1000.0, decode_priced=4000.0, windows=60)
    )
    priced.controller = SimpleNamespace(state=SimpleNamespace(capacity=memory))  # type: ignore[assignment]
    fitted = demand_of(priced_policy(policy, memory), load)[0]
    after = priced(3600.0)
    assert after is not None and fitted < 0.6 * profile
    assert after.path == pytest.approx([v * fitted for v in fit.path])
