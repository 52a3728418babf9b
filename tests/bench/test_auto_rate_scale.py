"""``bench --rate-scale auto`` on a small trace of one's own: what was read and the estimate are
said before the search, and a trace too light to reach the peak without mostly copied requests
is refused at once instead of being multiplied by dozens."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

import scaler.bench.runner as runner
from scaler.bench.report import format_table
from scaler.bench.runner import MAX_AUTO_RATE_SCALE, BenchOptions, run_bench
from scaler.cli import app


def _trace(tmp_path: Path, name: str, rows: list[tuple[float, int, int]]) -> Path:
    path = tmp_path / name
    lines = ["TIMESTAMP,ContextTokens,GeneratedTokens"]
    lines += [f"{t:g},{p},{o}" for t, p, o in rows]
    path.write_text("\n".join(lines) + "\n")
    return path


def _small(tmp_path: Path) -> Path:
    # 100 requests over 49.5 s, 1,000-token prompts and 100-token answers.
    return _trace(tmp_path, "small.csv", [(i * 0.5, 1000, 100) for i in range(100)])


def test_auto_refuses_a_trace_it_would_multiply_beyond_the_cap(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app, ["bench", "--trace", str(_small(tmp_path)), "--no-plot", "--jobs", "1"]
    )
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("vllm-scaler: --rate-scale auto: the trace is too light: ")
    assert "the busiest minute has 100 requests: 8 replicas need about x" in lines[0]
    assert f"above x{MAX_AUTO_RATE_SCALE:g}, the most auto multiplies a trace by" in lines[0]
    assert "pass --rate-scale N to replay at a scale you choose" in lines[0]


def test_a_trace_spanning_no_time_is_refused(tmp_path: Path) -> None:
    one = _trace(tmp_path, "one.csv", [(0.0, 1000, 100)])
    for scale in ("auto", "1"):
        result = CliRunner().invoke(
            app, ["bench", "--trace", str(one), "--no-plot", "--rate-scale", scale]
        )
        assert result.exit_code == 2
        assert result.output == (
            "vllm-scaler: --trace: one.csv: 1 request(s) over 0 s: nothing to autoscale "
            "(expected arrivals spread over time)\n"
        )


def test_a_trace_whose_every_request_is_rejected_is_refused(tmp_path: Path) -> None:
    """Nothing fits the context: a table of NaN shares would say nothing; one line says why."""
    too_long = _trace(tmp_path, "long.csv", [(t, 40_000, 100) for t in (0.0, 1.0, 2.0)])
    for scale in ("auto", "1"):
        result = CliRunner().invoke(
            app, ["bench", "--trace", str(too_long), "--no-plot", "--rate-scale", scale]
        )
        assert result.exit_code == 2
        assert result.output == (
            "vllm-scaler: --trace: long.csv: all 3 request(s) are longer than the model's "
            "context (prompt + output > 32768 tokens), rejected at once: nothing to serve "
            "(expected requests that fit)\n"
        )


def test_what_was_read_is_said_before_the_search(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[str] = []
    said_before_search: list[str] = []

    def search(*args: object, **kwargs: object) -> float:
        said_before_search.extend(seen)
        return 1.0

    monkeypatch.setattr(runner, "auto_rate_scale", search)
    # Heavy enough that the estimate is under the cap: 1,000 requests over 50 s.
    heavy = _trace(tmp_path, "heavy.csv", [(i * 0.05, 1000, 100) for i in range(1000)])
    result = run_bench(
        BenchOptions(trace=str(heavy), min_peak_replicas=2, jobs=1), progress=seen.append
    )
    assert len(said_before_search) == 1
    first = said_before_search[0]
    assert first.startswith("read heavy.csv: 1000 requests over 50 s")
    assert (
        "rate scale auto: one replica serves about " in first
        and " requests/s of this mix as recorded (x1, a first estimate)" in first
    )
    assert "the busiest minute has 1000 requests: 2 replicas need about x" in first
    # the trace is read once: the report opens with the read line of the replayed trace
    assert [line for line in seen if line.startswith("read ")] == [first]
    assert seen[1].startswith(
        "rate scale x1 (auto): 1000 requests; the smallest at which the busiest minute needs "
        "2 replicas; simulating the "
    ), seen[1]
    assert result.rate_scale == 1.0 and result.rate_scale_auto
    sustains = next(line for line in format_table(result).splitlines() if "sustains" in line)
    assert f"{result.capacity.rate:.2f} req/s " in sustains
    assert (
        "on this mix at x1 (measured on the replayed trace, TTFT only; drives KPA's target: "
        in (sustains)
    )


def test_a_rate_scale_that_leaves_no_requests_is_refused_naming_it(tmp_path: Path) -> None:
    """A table of NaN shares and a capacity measured on nothing said nothing: one line."""
    for scale, left in (("1e-9", 0), ("0.015", 1)):
        result = CliRunner().invoke(
            app,
            ["bench", "--trace", str(_small(tmp_path)), "--no-plot", "--rate-scale", scale,
             "--minutes", "3", "--seed", "3"],
        )  # fmt: skip
        assert result.exit_code == 2, result.output
        assert result.stderr.splitlines()[-1] == (
            f"vllm-scaler: --rate-scale {scale}: small.csv: {left} request(s) left at rate "
            f"x{float(scale):g} (of 100 at x1): nothing to autoscale (expected a rate scale "
            "that keeps requests spread over time)"
        )


def test_auto_at_its_lowest_scale_says_what_the_busiest_minute_needs_there(
    tmp_path: Path,
) -> None:
    """2,000 requests in 2 s: even x0.25 needs more than 8 replicas. The estimate read a busiest
    "minute" of 2 s as 60 s long (an estimate above the search's answer), and the result line
    claimed 8."""
    dense = _trace(tmp_path, "dense.csv", [(i, 1000, 100) for i in range(2000)])
    result = CliRunner().invoke(
        app, ["bench", "--trace", str(dense), "--time-unit", "ms", "--no-plot", "--jobs", "1"]
    )
    assert result.exit_code == 0, result.output
    read, chosen = result.stderr.splitlines()[:2]
    assert "8 replicas need about x0.25 or less (the lowest scale auto takes); searching" in read
    match = re.fullmatch(
        r"rate scale x0\.25 \(auto\): \d+ requests; the lowest auto takes, and even there the "
        r"busiest minute needs (\d+) replicas, more than 8 \(pass --rate-scale N below x0\.25 "
        r"for fewer\); simulating the 8 rows on 3 routing seeds in 1 process",
        chosen,
    )
    assert match is not None, chosen
    assert int(match[1]) > 8
    assert f"every row's maximum {2 * int(match[1])} replicas" in result.stdout
