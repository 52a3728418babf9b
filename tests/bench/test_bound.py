"""The lower bound on GPU time: a hand-checked case and its proof's assumptions."""

from __future__ import annotations

import pytest

from scaler.bench.bound import gpu_seconds_lower_bound
from scaler.sim.engine import ReplicaModel
from scaler.sim.trace import Trace, TraceRequest

MODEL = ReplicaModel(prefill_tokens_per_second=10_000.0)


def _trace(requests: list[tuple[float, int]], duration: float) -> Trace:
    return Trace(tuple(TraceRequest(t, p, 10) for t, p in requests), "hand", "hand", duration)


def test_an_idle_trace_costs_one_replica_for_the_whole_window() -> None:
    assert gpu_seconds_lower_bound(_trace([(1.0, 100)], 600.0), MODEL, 2.0) == 600.0


def test_a_burst_needs_its_prefill_work_inside_its_slo_window() -> None:
    # 50 prompts of 10,000 tokens (1 s of prefill each) at t = 61: 50 s of work that has to
    # happen inside [61, 63]. The 5 s partition [60, 65) holds it: 50 instead of 5 seconds;
    # the other 175 s of the window need one replica: 225 s. With 99%, none of the 50 may
    # miss (floor(0.5) = 0).
    burst = [(61.0, 10_000)] * 50
    assert gpu_seconds_lower_bound(_trace(burst, 180.0), MODEL, 2.0) == pytest.approx(225.0)


def test_the_allowed_misses_remove_the_largest_work() -> None:
    # 200 requests: 2 may miss. Remove the two 30 s prompts rather than two 1 s ones.
    burst = [(61.0, 10_000)] * 198 + [(61.5, 300_000)] * 2
    model = ReplicaModel(prefill_tokens_per_second=10_000.0, max_model_len=400_000,
                         kv_cache_blocks=40_000)  # fmt: skip
    bound = gpu_seconds_lower_bound(_trace(burst, 180.0), model, 2.0)
    assert bound == pytest.approx(180.0 - 5.0 + 198.0)
    assert gpu_seconds_lower_bound(_trace(burst, 180.0), model, 2.0, share=1.0) == (
        pytest.approx(180.0 - 5.0 + 258.0)
    )


def test_requests_whose_slo_window_leaves_the_trace_do_not_count() -> None:
    late = [(179.0, 10_000)] * 50  # [179, 181] is not inside [0, 180]
    assert gpu_seconds_lower_bound(_trace(late, 180.0), MODEL, 2.0) == 180.0


def test_rejected_requests_do_not_count() -> None:
    too_long = [(61.0, 40_000)] * 50  # above the default 32,768-token context
    assert gpu_seconds_lower_bound(_trace(too_long, 180.0), ReplicaModel(), 2.0) == 180.0
