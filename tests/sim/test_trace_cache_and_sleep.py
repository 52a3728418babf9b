"""Traces that drive the prefix cache (block hashes, a stated hit rate) and sleep events, through
the loader and the benchmark's loop."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scaler.bench.simulate import Simulation
from scaler.sim.engine import ReplicaModel
from scaler.sim.trace import (
    SleepEvent,
    Trace,
    TraceRequest,
    load_trace,
    parse_hashes,
    to_sim_request,
    with_prefix_hits,
)


class _Hold:
    """A controller that keeps ``spec.replicas``."""

    name = "hold"
    interval_seconds = 60
    reads_prometheus = False

    def observe(self, ctx: object) -> None: ...

    def decide(self, ctx: object) -> int:
        return int(ctx.fleet.spec_replicas)  # type: ignore[attr-defined]

    def close(self) -> None: ...


def _mooncake(path: Path, rows: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_a_mooncake_trace_drives_the_prefix_cache(tmp_path: Path) -> None:
    # Mooncake's format: ms timestamps, input/output lengths, one hash per 512 tokens.
    path = _mooncake(
        tmp_path / "mooncake.jsonl",
        [
            {"timestamp": 0, "input_length": 2000, "output_length": 5, "hash_ids": [1, 2, 3, 4]},
            {"timestamp": 4000, "input_length": 2000, "output_length": 5, "hash_ids": [1, 2, 3, 9]},
            {"timestamp": 8000, "input_length": 1500, "output_length": 5, "hash_ids": [7, 8, 6]},
        ],
    )
    trace = load_trace(
        path,
        time_column="timestamp",
        prompt_column="input_length",
        output_column="output_length",
        time_unit="ms",
        hash_column="hash_ids",
    )
    assert trace.hash_block_tokens == 512
    assert [r.block_hashes for r in trace.requests] == [(1, 2, 3, 4), (1, 2, 3, 9), (7, 8, 6)]
    sim = Simulation(trace, _Hold(), model=ReplicaModel(model_load_seconds=0), initial_replicas=1)
    run = sim.finish()
    hits = [r.prefix_hit_tokens for r in sorted(run.requests, key=lambda r: r.id)]
    assert hits == [0, 1536, 0]
    assert to_sim_request(trace, 1, 4.0).hash_block_tokens == 512


def test_bad_hashes_name_the_line_and_value(tmp_path: Path) -> None:
    path = _mooncake(
        tmp_path / "bad.jsonl",
        [{"t": 0, "p": 10, "o": 1, "h": [1, "x"]}],
    )
    with pytest.raises(ValueError, match=r"line 1 column 'h': bad block hash 'x'"):
        load_trace(path, time_column="t", prompt_column="p", output_column="o", hash_column="h")
    assert parse_hashes("3 4,5", "here") == (3, 4, 5)
    assert parse_hashes("[6, 7]", "here") == (6, 7)
    assert parse_hashes("", "here") == ()
    with pytest.raises(ValueError, match="here: bad block hashes"):
        parse_hashes("[6, 7", "here")


def test_a_stated_hit_rate_follows_its_schedule() -> None:
    base = Trace(
        tuple(TraceRequest(float(t), 1000, 10) for t in (0, 100, 599, 600, 900)),
        "x",
        "x",
        1000.0,
    )
    hits = with_prefix_hits(base, [(0.0, 0.8), (600.0, 0.1)])
    assert [r.cached_tokens for r in hits.requests] == [800, 800, 800, 100, 100]
    assert "prefix hits 80% from 0 min, 10% from 10 min" in hits.description
    # A window cut at 300 s, replayed twice as fast: replay second 150 is source second 600.
    shifted = with_prefix_hits(base, [(0.0, 0.8), (600.0, 0.1)], start_seconds=300, compress=2)
    assert [r.cached_tokens for r in shifted.requests] == [800, 800, 100, 100, 100]
    with pytest.raises(ValueError, match="prefix hit share"):
        with_prefix_hits(base, [(0.0, 1.5)])


def test_sleeping_replicas_serve_nothing_and_count_apart() -> None:
    requests = tuple(TraceRequest(t * 0.5, 500, 50) for t in range(240))
    trace = Trace(
        requests,
        "x",
        "x",
        120.0,
        sleep_events=(SleepEvent(30.0, 2, 1), SleepEvent(90.0, 2, 0)),
    )
    sim = Simulation(trace, _Hold(), model=ReplicaModel(model_load_seconds=0), initial_replicas=3)
    sim.run_until(40)
    asleep = [p for p in sim.fleet.pods.values() if p.sleeping]
    steps = [p.engine.steps for p in asleep]
    sim.run_until(89)
    # Nothing reached them while they slept: no step, nothing queued.
    assert len(asleep) == 2 and [p.engine.steps for p in asleep] == steps
    assert all(p.engine.in_flight == 0 for p in asleep)
    run = sim.finish()
    sleeping = {s.t: s.sleeping for s in run.samples}
    assert sleeping[29.0] == 0 and sleeping[31.0] == 2 and sleeping[91.0] == 2
    assert sleeping[93.0] == 0  # a level-1 wake-up takes 2 s
    assert all(s.ready == 3 for s in run.samples if s.t < 120)
    assert all(r.done for r in run.requests)
    late = [r for r in run.requests if 31.0 <= r.arrival < 90.0]
    assert late and all(r.first_scheduled_at is not None for r in late)
