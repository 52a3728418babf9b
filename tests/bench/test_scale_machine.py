"""The scale benchmark's machine floor: the cores scraping takes and the shortest cycle left."""

from __future__ import annotations

import os

import pytest

from scaler.bench.scale import format_result
from scaler.bench.scale.machine import (
    Background,
    background_cores,
    cycle_floor,
    cycle_work,
    machine_cores,
    process_cpu_seconds,
)
from scaler.bench.scale.report import ScaleFigures, ScaleResult


def test_process_cpu_seconds_reads_this_process_and_grows_with_work() -> None:
    before = process_cpu_seconds(os.getpid())
    total = sum(sum(range(10_000)) for _ in range(3_000))  # CPU, not sleep: ~0.3 s of it
    assert total > 0
    assert process_cpu_seconds(os.getpid()) > before  # a bounded check, never a wait
    assert 1 <= machine_cores() <= (os.cpu_count() or 1)


def test_process_cpu_seconds_of_a_gone_process_raises() -> None:
    with pytest.raises(OSError):
        process_cpu_seconds(2**22 + 12_345)  # above pid_max's default ceiling


async def test_background_is_each_process_cpu_over_the_wall_time_measured() -> None:
    cpu = {10: 100.0, 20: 5.0, 21: 1.0}
    now = [1000.0]

    async def sleep(seconds: float) -> None:  # the fake clock moves; the processes work
        now[0] += seconds
        cpu[10] += 0.5 * seconds
        cpu[20] += 0.25 * seconds
        cpu[21] += 0.05 * seconds

    got = await background_cores(
        10, [20, 21], 20.0, cpu=cpu.__getitem__, clock=lambda: now[0], sleep=sleep
    )
    assert got == Background(prometheus_cores=0.5, others_cores=pytest.approx(0.3), seconds=20.0)
    assert got.cores == pytest.approx(0.8)


def test_cycle_work_is_prometheus_beyond_its_background_plus_the_controller() -> None:
    # 10 cycles over 30 s: Prometheus 27 CPU-s, of which 0.5 cores x 30 s background
    assert cycle_work(27.0, 30.0, 10, 1.1, 0.5) == pytest.approx(1.2 + 1.1)
    # Prometheus below its background (noise) adds nothing, never a negative share
    assert cycle_work(10.0, 30.0, 10, 1.1, 0.5) == pytest.approx(1.1)
    with pytest.raises(ValueError, match="cycles must be at least 1, got 0"):
        cycle_work(1.0, 1.0, 0, 1.0, 0.5)


def test_cycle_floor_spreads_the_work_over_the_cores_left() -> None:
    assert cycle_floor(2.3, 2, 0.7) == pytest.approx(2.3 / 1.3)
    assert cycle_floor(1.0, 2, 2.5) == pytest.approx(10.0)  # a tenth of a core at least


def _report(p95: float, floor: float) -> str:
    figures = ScaleFigures(
        "vllm-scaler, recording rules", 6, 25, p95 - 0.5, p95, p95, 0.0, 0,
        controller_cpu_p50_seconds=1.1, work_per_cycle_seconds=2.6, cycle_floor_seconds=floor,
    )  # fmt: skip
    result = ScaleResult(
        1000, 8, 50, 224_000, 15.0, 170.0, 2600.0, (figures,), 80.0,
        cores=2, background_cores=0.7, background_prometheus_cores=0.5,
    )  # fmt: skip
    return format_result(result)


def test_report_gives_the_work_and_floor_and_says_when_the_machine_rules_out_the_goal() -> None:
    text = _report(3.8, 2.0)
    row = next(line for line in text.splitlines() if line.startswith("vllm-scaler, recording"))
    assert row.split()[-4:-2] == ["2.600", "2.000"]
    assert (
        "spread over the 1.30 of 2 cores the scraping leaves (0.70 cores: Prometheus 0.50, "
        "the exposition server 0.20)"
    ) in text
    assert "p95 <= 1 s: NOT met (and cannot be on this machine with this work: floor 2.000 s)" in (
        text
    )
    # a floor under the goal: the cycle time, not the machine, is what misses it
    assert "p95 <= 1 s: NOT met;" in _report(3.8, 0.8)
    assert "p95 <= 1 s: met;" in _report(0.9, 0.8)
