"""The replica's lean export (the benchmark's fast path) against its full one: the families the
benchmark's emulated Prometheus reads hold the same values in both."""

from __future__ import annotations

import random

import pytest

from scaler.sim.engine import ReplicaEngine, ReplicaModel, SimRequest
from scaler.sim.exposition import VllmMetrics


def _serve(full: bool) -> VllmMetrics:
    """Ten minutes of Poisson arrivals (1.5 requests/s, prompts 200-8,000 tokens, answers
    1-400) on one replica, every step run on its own."""
    rng = random.Random(7)
    metrics = VllmMetrics()
    engine = ReplicaEngine(ReplicaModel(), metrics=metrics, decode_runs=False, full_metrics=full)
    t = 0.0
    for j in range(900):
        t += rng.expovariate(1.5)
        engine.advance_to(t)
        engine.submit(SimRequest(j, t, rng.randint(200, 8000), rng.randint(1, 400)), t)
    engine.advance_to(t + 600.0)
    return metrics


def test_the_lean_export_records_the_phase_times_the_cost_fit_reads() -> None:
    """``vllm:request_prefill_time_seconds`` and ``..._decode_time_seconds``: a lean export
    that left them at zero read as work done in no time, and drove the fitted prices of every
    benchmark run to their lower bound (a quarter of the profile's decode price)."""
    full, lean = _serve(True), _serve(False)
    assert full.prefill_time.count == lean.prefill_time.count == 900
    assert lean.prefill_time.sum == pytest.approx(full.prefill_time.sum, rel=1e-9)
    assert lean.decode_time.sum == pytest.approx(full.decode_time.sum, rel=1e-9)
    # a replica this loaded spends minutes in each phase, summed over its requests
    assert lean.prefill_time.sum > 60.0
    assert lean.decode_time.sum > 600.0
    # what the lean export still leaves out
    assert lean.e2e_latency.count == 0 and full.e2e_latency.count == 900
