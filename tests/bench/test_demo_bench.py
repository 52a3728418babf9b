"""The bench's side of the demo: the capacity seed from a profile of one replica, the fleet the
first minute needs, and the same slice replayed under vllm-scaler and under KEDA."""

from __future__ import annotations

import pytest

from scaler.bench.capacity import accepted, minute_need, probe_capacity
from scaler.bench.demo import KEDA_LABEL, DemoBench, keda_controller, profile_seed
from scaler.bench.hpa import HpaBehavior, HpaRules
from scaler.config.policy import load_policy
from scaler.sim.catalog import open_trace
from scaler.sim.demo import EXAMPLE_POLICY
from scaler.sim.engine import ReplicaModel
from scaler.sim.trace import Trace

MODEL = ReplicaModel(model_load_seconds=20.0)


@pytest.fixture(scope="module")
def trace() -> Trace:
    """Two minutes of the conversation trace, compressed 3x: 40 s of about 5 requests/s."""
    return open_trace(
        "conv", time_column="TIMESTAMP", prompt_column="ContextTokens",
        output_column="GeneratedTokens", time_unit="auto", start_seconds=16 * 60,
        duration_seconds=120.0, compress=3.0, rate_scale=0.6, seed=0,
    )  # fmt: skip


def test_the_seed_is_the_rate_one_replica_serves_at_the_target_times_the_mix(trace: Trace) -> None:
    seed = profile_seed(trace, MODEL, 2.0)
    rate = probe_capacity(trace, MODEL, 2.0).rate
    mix = accepted(trace.requests, MODEL)
    assert seed.requests_per_second == rate
    mean_prompt = sum(r.prompt_tokens for r in mix) / len(mix)
    mean_output = sum(r.output_tokens for r in mix) / len(mix)
    assert seed.prompt_tokens_per_second == round(rate * mean_prompt)
    assert seed.generation_tokens_per_second == round(rate * mean_output)
    assert 1 < rate < 20  # a 7B replica serves a few conversational requests a second


def test_the_fleet_starts_with_what_the_first_minute_needs(trace: Trace) -> None:
    bench = DemoBench(MODEL, 2.0, "random", 0, 1, 5.0)
    first = [r for r in trace.requests if r.arrival_seconds < 60]
    assert bench.starting_replicas(trace) == minute_need(first, MODEL, 2.0) > 1


def test_keda_runs_the_hpa_with_the_demo_s_times() -> None:
    keda = keda_controller(max_replicas=8, interval_seconds=5, scale_down_window_seconds=60)
    assert keda.name == KEDA_LABEL
    assert (keda.interval_seconds, keda.threshold, keda.cached_metrics) == (5, 5.0, False)
    assert (keda.hpa.min_replicas, keda.hpa.max_replicas) == (1, 8)
    assert keda.hpa.behavior == HpaBehavior(
        scale_up=HpaRules(0.0, 4, 100.0, 5), scale_down=HpaRules(60, 0, 100.0, 5)
    )


def test_both_replays_run_the_same_requests_from_the_same_fleet(trace: Trace) -> None:
    bench = DemoBench(MODEL, 2.0, "random", 0, 1, 5.0)
    policy = load_policy(EXAMPLE_POLICY)
    replays = bench.replays(trace, policy, 3)
    assert [r.label for r in replays] == ["vllm-scaler (replay)", KEDA_LABEL]
    for replay in replays:
        assert len(replay.run.requests) == len(trace.requests)
        assert replay.run.samples[0].spec_replicas == 3
        assert max(s.spec_replicas for s in replay.run.samples) <= 8  # the policy's maximum
    again = bench.replays(trace, policy, 3)  # virtual time: the same on every run
    assert [r.run.scale_events for r in again] == [r.run.scale_events for r in replays]
