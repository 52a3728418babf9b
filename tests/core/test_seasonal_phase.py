"""The seasonal phase in decide(): the seasonal forecast raises the recommendation by max for
a scale-up and is never the reason for a scale-down (scaler/core/seasonal.py, decide.py)."""

from __future__ import annotations

import dataclasses

from scaler.core.observation import Observation
from scaler.core.reasons import PhaseName
from scaler.core.seasonal import SeasonalForecast
from scaler.core.signals import SignalStatus
from scaler.core.state import Recommendation, TargetState
from tests.core.builders import decide
from tests.core.capacity_fleet import fleet_observation
from tests.core.test_capacity import capacity_policy

#: A seeded estimate of 10,000 tokens/s per replica (the toy fleet's boundary).
POLICY = capacity_policy(
    seed_prompt_tokens_per_second=10_000.0, seed_generation_tokens_per_second=0.0
)
STATE = TargetState(recommendations=(Recommendation(-600.0, 4),))


def forecast(demand: float, *, in_use: bool = True) -> SeasonalForecast:
    """A fit at t=0 whose path holds ``demand`` for the next two hours (10-minute windows)."""
    return SeasonalForecast(0.0, 600.0, (demand,) * 12, None, in_use, "test", 7 * 86400.0, 15.0)


def with_season(
    demand: float, *, in_use: bool = True, throughput_status: SignalStatus = SignalStatus.OK
) -> Observation:
    """The toy fleet's 4 replicas serving 20,000 tokens/s, with a seasonal forecast."""
    o = fleet_observation(4, 20_000.0, throughput_status=throughput_status)
    return dataclasses.replace(o, seasonal=forecast(demand, in_use=in_use))


def test_a_forecast_rise_raises_the_recommendation_before_the_demand_comes() -> None:
    plain = decide(POLICY, fleet_observation(4, 20_000.0), STATE, 0.0)
    d = decide(POLICY, with_season(60_000.0), STATE, 0.0)
    per_replica = 10_000.0 * POLICY.signals.capacity.target_utilization
    need = -(-60_000.0 // per_replica)
    assert plain.recommended_replicas <= 4
    assert d.seasonal is not None and d.seasonal.raised
    assert d.seasonal.replicas == need
    assert d.recommended_replicas == need
    assert d.desired_replicas > plain.desired_replicas
    by = {p.name: p for p in d.phases}
    assert by[PhaseName.SEASONAL].replicas == need
    assert "seasonal forecast: demand 6e+04" in d.message


def test_a_forecast_fall_is_never_the_reason_for_a_scale_down() -> None:
    plain = decide(POLICY, fleet_observation(4, 20_000.0), STATE, 0.0)
    d = decide(POLICY, with_season(100.0), STATE, 0.0)
    assert d.seasonal is not None and not d.seasonal.raised
    assert (d.recommended_replicas, d.desired_replicas) == (
        plain.recommended_replicas,
        plain.desired_replicas,
    )
    assert "seasonal" not in d.message


def test_a_forecast_switched_off_asks_for_nothing() -> None:
    plain = decide(POLICY, fleet_observation(4, 20_000.0), STATE, 0.0)
    d = decide(POLICY, with_season(60_000.0, in_use=False), STATE, 0.0)
    assert d.seasonal is not None and d.seasonal.replicas is None
    assert d.desired_replicas == plain.desired_replicas


def test_no_raise_without_a_usable_throughput_reading_or_past_the_path() -> None:
    d = decide(POLICY, with_season(60_000.0, throughput_status=SignalStatus.EMPTY), STATE, 0.0)
    assert d.seasonal is not None and not d.seasonal.raised
    assert d.desired_replicas == 4
    stale = decide(POLICY, with_season(60_000.0), STATE, 3 * 3600.0)
    assert stale.seasonal is not None and stale.seasonal.replicas is None
