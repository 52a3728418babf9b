"""Bad input to ``vllm-scaler bench`` and ``bench-scale``: one line naming the option, exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from scaler.cli import app


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(["--slo-ttft", "0"], "--slo-ttft: value 0: expected a number > 0", id="slo"),
        pytest.param(
            ["--rate-scale", "-1"], "--rate-scale: value -1: expected a number > 0", id="rate"
        ),
        pytest.param(
            ["--rate-scale", "fast"],
            "--rate-scale: expected a number or 'auto', got 'fast'",
            id="rate-word",
        ),
        pytest.param(["--minutes", "0"], "--minutes: value 0: expected a number > 0", id="minutes"),
        pytest.param(
            ["--trace", "synthetic:flash", "--minutes", "1e308", "--rate-scale", "1"],
            "--minutes: value 1e+308: expected a number > 0 and <= 10080",
            id="minutes-beyond-a-week",
        ),
        pytest.param(
            ["--model-load-seconds", "-5"], "--model-load-seconds: value -5", id="model-load"
        ),
        pytest.param(["--min-peak-replicas", "0"], "--min-peak-replicas: value 0", id="peak"),
        pytest.param(
            ["--trace", "/nonexistent.csv"],
            "--trace: /nonexistent.csv: no such file (expected 'code' or 'conv'",
            id="no-file",
        ),
        pytest.param(
            ["--trace", "conv", "--start-minute", "999"],
            "--trace: no requests in minutes 999",
            id="empty-window",
        ),
        pytest.param(
            ["--trace", "synthetic:wave"],
            "--trace: unknown synthetic shape 'wave' (expected one of synthetic:ramp",
            id="unknown-shape",
        ),
        pytest.param(
            ["--routing", "sticky"],
            "--routing: expected one of random, round-robin, least-request, got 'sticky'",
            id="routing",
        ),
        pytest.param(
            ["--time-unit", "h"],
            "--time-unit: expected one of auto, s, ms, us, ns, got 'h'",
            id="time-unit",
        ),
    ],
)
def test_bench_rejects_bad_options(args: list[str], message: str) -> None:
    result = CliRunner().invoke(app, ["bench", *args])
    assert result.exit_code == 2
    assert message in result.output
    assert "Traceback" not in result.output


def test_bench_names_the_columns_options_and_the_policy_option(tmp_path: Path) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text("a,b,c\n1,2,3\n")
    result = CliRunner().invoke(app, ["bench", "--trace", str(bad)])
    assert result.exit_code == 2 and "--time-column" in result.output
    policy = tmp_path / "p.yaml"
    policy.write_text("targets: [\n")
    result = CliRunner().invoke(app, ["bench", "--policy", str(policy)])
    assert result.exit_code == 2
    [line] = result.output.strip().splitlines()
    assert line.startswith("vllm-scaler: --policy: ") and "not valid YAML" in line


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(["--cycles", "0"], "--cycles: value 0: expected a number >= 1", id="cycles"),
        pytest.param(
            ["--scrape-interval", "0"],
            "--scrape-interval: value 0: expected a number > 0",
            id="scrape-interval",
        ),
        pytest.param(["--targets", "0"], "--targets: value 0", id="targets"),
        pytest.param(["--pods", "-1"], "--pods: value -1", id="pods"),
        pytest.param(
            ["--targets", "2", "--namespaces", "5"],
            "--namespaces: value 5: expected at most",
            id="namespaces",
        ),
        pytest.param(
            ["--output", "xml"], "--output: value 'xml': expected one of text, json", id="output"
        ),
    ],
)
def test_bench_scale_rejects_bad_options(args: list[str], message: str) -> None:
    result = CliRunner().invoke(app, ["bench-scale", *args])
    assert result.exit_code == 2
    assert message in result.output
    assert "Traceback" not in result.output


def test_a_plot_that_fails_late_keeps_the_figures(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import scaler.bench.report as report

    def full_disk(*args: object) -> Path:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(report, "plot_bench", full_disk)
    trace = tmp_path / "t.csv"
    rows = [f"{i * 0.5:g},1000,100" for i in range(100)]
    trace.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n" + "\n".join(rows) + "\n")
    result = CliRunner().invoke(
        app,
        ["bench", "--trace", str(trace), "--rate-scale", "1", "--jobs", "1", "-o", "json",
         "--plot", str(tmp_path / "b.png")],
    )  # fmt: skip
    assert result.exit_code == 1
    assert "vllm-scaler: --plot: [Errno 28] No space left on device" in result.stderr
    doc = json.loads(result.stdout)
    assert doc["plot"] is None
    assert doc["policies"][0]["name"] == "vllm-scaler"
    assert doc["policies"][0]["requests"] == 100
