"""The replica model's true capacity (what a learned capacity is held to) and the headroom
frontier harness, through the real replays."""

from __future__ import annotations

from pathlib import Path

import pytest

from scaler.bench.frontier import plot_frontier, run_frontier, setting_value, with_setting
from scaler.bench.runner import BenchOptions, default_policy
from scaler.bench.truth import segments, true_capacity, windows
from scaler.sim.catalog import open_trace
from scaler.sim.engine import ReplicaModel
from scaler.sim.trace import with_prefix_hits

MODEL = ReplicaModel()


def test_the_truth_prices_what_a_request_costs() -> None:
    short = open_trace("synthetic:mix-shift", duration_seconds=1200.0)
    long = open_trace("synthetic:mix-shift", start_seconds=1200.0, duration_seconds=1200.0)
    a = true_capacity(short.requests, MODEL, 2.0, 0.1)
    b = true_capacity(long.requests, MODEL, 2.0, 0.1)
    # Ten times the prompt: several times fewer requests, and fewer weighted tokens too (the
    # KV cache holds long contexts: the weighting does not price it).
    assert a.requests_per_second > 4 * b.requests_per_second
    assert a.weighted(16) > 2 * b.weighted(16)
    assert a.ttft_p95_seconds <= 2.0 and a.itl_p95_seconds <= 0.1


def test_cache_hits_raise_the_truth_of_a_prefill_heavy_mix() -> None:
    base = open_trace("synthetic:cache-shift", start_seconds=1500.0, duration_seconds=600.0)
    hot = with_prefix_hits(base, [(0.0, 0.8)])
    cold = with_prefix_hits(base, [(0.0, 0.1)])
    warm = true_capacity(hot.requests, MODEL, 2.0, 0.1)
    cool = true_capacity(cold.requests, MODEL, 2.0, 0.1)
    assert warm.requests_per_second > 1.8 * cool.requests_per_second
    # the prompt tokens computed are what the cache leaves
    assert warm.computed_prompt_tokens_per_second == pytest.approx(
        0.2 * warm.prompt_tokens_per_second, rel=0.05
    )


def test_segments_split_at_the_shifts() -> None:
    t = open_trace("synthetic:mix-shift")
    assert [(s.start_seconds, s.end_seconds, s.after) for s in segments(t)] == [
        (0.0, 1200.0, "start"),
        (1200.0, 2400.0, "mix"),
        (2400.0, 3600.0, "mix"),
    ]
    plain = open_trace("conv")
    assert segments(plain) == windows(plain.duration_seconds, 2)


def test_a_setting_is_named_by_its_path_and_checked_as_a_policy_file_is() -> None:
    target = default_policy(8).targets[0]
    assert setting_value(target, "signals.capacity.headroom") == 1.0
    assert with_setting(target, "signals.capacity.headroom", 2.5).signals.capacity.headroom == 2.5
    with pytest.raises(ValueError, match=r"signals\.capacity has no field .standing."):
        with_setting(target, "signals.capacity.standing", 0.2)
    with pytest.raises(ValueError, match="'capacity' is a section, not a value"):
        setting_value(target, "signals.capacity")
    with pytest.raises(ValueError, match=r"signals.capacity.target_utilization' = 2"):
        with_setting(target, "signals.capacity.target_utilization", 2.0)


def test_the_frontier_runs_each_value_on_every_seed_and_marks_the_default(
    tmp_path: Path,
) -> None:
    options = BenchOptions(
        trace="synthetic:flash", start_seconds=480.0, duration_seconds=360.0, rate_scale=2.0,
        routing_seeds=2, references=False,
    )  # fmt: skip
    frontier = run_frontier(options, "signals.capacity.headroom", [0.0, 3.0])
    assert [p.value for p in frontier.points] == [0.0, 3.0, 1.0]  # the default added
    assert [p.default for p in frontier.points] == [False, False, True]
    assert all(len(p.row.runs) == 2 for p in frontier.points)
    # more standing headroom: no fewer GPU-hours
    by = {p.value: p for p in frontier.points}
    assert by[3.0].gpu_hours >= by[0.0].gpu_hours
    png = plot_frontier(frontier, tmp_path / "f.png")
    assert png.stat().st_size > 10_000
