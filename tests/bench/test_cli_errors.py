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
        pytest.param(
            ["--slo-ttft-seconds", "0"],
            "--slo-ttft-seconds: value 0: expected a number > 0",
            id="slo",
        ),
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


def _tiny_trace(tmp_path: Path) -> list[str]:
    """The options of ``bench`` on a trace of three requests in 2.5 s (a run of a second)."""
    trace = tmp_path / "my.csv"
    trace.write_text("ts,prompt,out\n0,100,20\n1000,200,30\n2500,300,40\n")
    return [
        "bench", "--trace", str(trace), "--time-column", "ts", "--prompt-column", "prompt",
        "--output-column", "out", "--time-unit", "ms", "--rate-scale", "1", "--jobs", "1",
    ]  # fmt: skip


FORMATS = "a file name ending in one of .png, .svg, .pdf, "


@pytest.mark.parametrize("name", ["p.xyz", "noext", "p.", "dirplot/", "p.png/"])
def test_a_plot_name_matplotlib_cannot_write_is_refused_before_the_run(
    tmp_path: Path, name: str
) -> None:
    plot = f"{tmp_path}/{name}"
    result = CliRunner().invoke(app, [*_tiny_trace(tmp_path), "--plot", plot])
    assert result.exit_code == 2
    assert result.stdout == ""
    # one line: the trace was not even read (its summary would come first on stderr)
    [line] = result.stderr.splitlines()
    prefix = f"vllm-scaler: --plot: value '{plot}': expected {FORMATS}"
    assert line.startswith(prefix), line
    # a trailing slash names a directory, whatever the name before it
    assert line.endswith(", but it names a directory") == name.endswith("/")
    listed = line.removeprefix(f"vllm-scaler: --plot: value '{plot}': expected ")
    assert ".eps, " in listed and ".xyz" not in listed
    assert sorted(p.name for p in tmp_path.iterdir()) == ["my.csv"]  # nothing written


def test_an_existing_directory_as_the_plot_is_refused(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, [*_tiny_trace(tmp_path), "--plot", str(tmp_path)])
    assert result.exit_code == 2
    [line] = result.stderr.splitlines()
    assert line.startswith(f"vllm-scaler: --plot: value '{tmp_path}': expected {FORMATS}")
    assert line.endswith(", but it names a directory")


def test_plot_and_no_plot_together_are_refused(tmp_path: Path) -> None:
    plot = str(tmp_path / "p.png")
    result = CliRunner().invoke(app, [*_tiny_trace(tmp_path), "--plot", plot, "--no-plot"])
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        f"vllm-scaler: --plot: value '{plot}': expected either --plot or --no-plot, not both"
    ]


def test_the_plot_extension_chooses_the_format(tmp_path: Path) -> None:
    plot = tmp_path / "p.SVG"
    result = CliRunner().invoke(app, [*_tiny_trace(tmp_path), "--plot", str(plot), "-o", "json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["plot"] == str(plot)
    assert plot.read_text().lstrip().startswith("<?xml") and "<svg" in plot.read_text()


def test_any_late_plot_failure_keeps_the_figures_on_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import scaler.bench.report as report

    def unsupported(*args: object) -> Path:
        raise ValueError("Format 'xyz' is not supported (supported formats: eps, png)\nmore")

    monkeypatch.setattr(report, "plot_bench", unsupported)
    result = CliRunner().invoke(app, [*_tiny_trace(tmp_path), "--plot", str(tmp_path / "b.png")])
    assert result.exit_code == 1
    assert "Traceback" not in result.stderr
    assert result.stderr.splitlines()[-1] == (
        "vllm-scaler: --plot: ValueError: Format 'xyz' is not supported (supported formats: "
        "eps, png)"
    )
    assert result.stdout.startswith("read my.csv: 3 requests over 2.5 s")
    assert "goals for vllm-scaler:" in result.stdout
    assert "\nplot " not in result.stdout  # no plot to point to


@pytest.mark.parametrize("option", ["--slo-ttft-seconds", "--slo-ttft"])
def test_bench_takes_the_slo_as_sim_names_it_and_by_its_older_name(
    tmp_path: Path, option: str
) -> None:
    result = CliRunner().invoke(
        app, [*_tiny_trace(tmp_path), "--no-plot", "-o", "json", option, "3.5"]
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["slo_ttft_seconds"] == 3.5
    refused = CliRunner().invoke(app, [*_tiny_trace(tmp_path), option, "-1"])
    assert refused.exit_code == 2
    assert refused.stderr.splitlines() == [
        f"vllm-scaler: {option}: value -1: expected a number > 0 and <= 3600"
    ]


def test_the_slo_is_documented_under_the_name_sim_uses() -> None:
    help_text = CliRunner().invoke(app, ["bench", "--help"]).stdout
    assert "--slo-ttft-seconds" in help_text
    assert "--slo-ttft " not in help_text  # the older name is hidden
    sim_help = CliRunner().invoke(app, ["sim", "--help"]).stdout
    assert "--slo-ttft-seconds" in sim_help


def test_both_names_of_the_slo_are_refused_together(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app, [*_tiny_trace(tmp_path), "--slo-ttft", "1", "--slo-ttft-seconds", "2"]
    )
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        "vllm-scaler: --slo-ttft: value 1: expected either --slo-ttft-seconds or its older name "
        "--slo-ttft, not both"
    ]
