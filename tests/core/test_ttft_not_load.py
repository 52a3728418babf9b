"""TTFT's proportional ask while the capacity signal sees a fleet that is neither loaded nor
busy: a breach there is one pod's head-of-line wait, not the load, and more replicas do not
fix it; TTFT adds one replica at most (see :mod:`scaler.core.decide`, rule 1)."""

from __future__ import annotations

import dataclasses

import pytest

from scaler.config.policy import TargetPolicy
from scaler.config.vocabulary import SignalName
from scaler.core.observation import Observation, PodLoad, ThroughputReading
from scaler.core.reasons import Reason
from scaler.core.signals import SignalReading, SignalStatus
from tests.core.builders import decide
from tests.core.capacity_fleet import fleet_observation
from tests.support.policies import case_target

#: A replica serves 10k weighted tokens/s at the TTFT target (the seed); sized at 0.85 of it.
CAPACITY = 10_000.0


def _policy() -> TargetPolicy:
    """Queue depth and TTFT on (KV off), the capacity signal seeded at 10k tokens/s."""
    return case_target(
        max_replicas=30,
        signals={
            "queue_depth": {"target_per_replica": 10},
            "kv_cache_usage": {"enabled": False},
            "ttft_p95": {"target_seconds": 2.0},
            "capacity": {
                "enabled": True,
                "seed_prompt_tokens_per_second": CAPACITY,
                "seed_generation_tokens_per_second": 0,
            },
        },
    )


def _breach(replicas: int, per_replica: float, *, waiting: tuple[float, ...]) -> Observation:
    """``replicas`` ready pods serving ``per_replica`` tokens/s each with TTFT p95 at 5.3 s,
    ``waiting[i]`` requests waiting on pod ``i``."""
    obs = fleet_observation(replicas, per_replica * replicas)
    assert obs.throughput is not None
    loads = {
        name: dataclasses.replace(load, waiting=waiting[i])
        for i, (name, load) in enumerate(obs.throughput.pods.items())
    }
    signals: dict[SignalName, SignalReading] = {
        SignalName.TTFT_P95: SignalReading(SignalName.TTFT_P95, SignalStatus.OK, 5.3),
        SignalName.QUEUE_DEPTH: SignalReading(
            SignalName.QUEUE_DEPTH, SignalStatus.OK, sum(waiting), pods_with_data=replicas
        ),
    }
    reading = ThroughputReading(SignalStatus.OK, dict[str, PodLoad](loads))
    return dataclasses.replace(obs, signals=signals, throughput=reading)


def test_a_breach_on_a_calm_fleet_below_its_utilization_adds_one_replica_not_four() -> None:
    """Seed 3 of synthetic:ramp at 3,210 s: 4 replicas at utilization 0.38, no request
    waiting anywhere, TTFT p95 5.3 s from two 22.5k-token prompts that met on one pod. TTFT's
    proportional rule asks for ceil(2 x 4) = 8; the fleet grows by one replica only."""
    d = decide(_policy(), _breach(4, 3_800.0, waiting=(0, 0, 0, 0)), None, 0.0)
    ttft = next(e for e in d.signals if e.name is SignalName.TTFT_P95)
    assert d.capacity is not None and d.capacity.utilization == pytest.approx(0.38)
    assert ttft.ratio == pytest.approx(2.65)
    assert (ttft.demand_replicas, ttft.desired_replicas) == (8, 5)
    assert (d.desired_replicas, d.driving_signal, d.reason) == (
        5,
        SignalName.TTFT_P95,
        Reason.SCALE_UP,
    )
    assert d.message == (
        "scale up 4 -> 5 (ttft_p95 5.3 vs target 2, ratio 2.65); ttft_p95 asks for "
        "ceil(2.00 x 4 ready) = 8, 1 replica more at most: the fleet is not loaded "
        "(utilization 0.38 of the capacity signal's target 0.85, 0 of 4 ready pods busy)"
    )


@pytest.mark.parametrize(
    ("per_replica", "waiting", "why"),
    [
        pytest.param(3_800.0, (1, 1, 0, 0), "half the pods busy", id="busy-fleet"),
        pytest.param(9_000.0, (0, 0, 0, 0), "utilization 1.06", id="loaded-fleet"),
    ],
)
def test_a_breach_on_a_busy_or_loaded_fleet_still_doubles_it_at_once(
    per_replica: float, waiting: tuple[float, ...], why: str
) -> None:
    """The safety net for a wrong capacity estimate: with half the ready pods busy, or the
    measured utilization at the target, TTFT's breach scales up at once (2 x 4 ready)."""
    d = decide(_policy(), _breach(4, per_replica, waiting=waiting), None, 0.0)
    assert (d.desired_replicas, d.driving_signal, d.reason) == (
        8,
        SignalName.TTFT_P95,
        Reason.SCALE_UP,
    ), why
