"""The command line's seams: one duration grammar for every option in seconds, one meaning of
``-o`` (the report's format; ``run``'s log format is ``--log-format``), and commands imported
only when they run (``vllm-scaler --help`` imports none of their dependencies)."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from scaler.cli import COMMANDS, app
from scaler.config.durations import DurationError, parse_duration

GROUP: Any = typer.main.get_command(app)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("90", 90.0), ("90s", 90.0), ("5m", 300.0), ("1.5m", 90.0), ("1h", 3600.0),
        ("1h30m", 5400.0), ("500ms", 0.5), ("2d", 172800.0), (" 15s ", 15.0), ("0.25", 0.25),
        ("-5", -5.0), ("-1m", -60.0),
    ],
)  # fmt: skip
def test_the_grammar(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


def test_a_bare_number_is_read_as_python_reads_it_so_that_ranges_can_name_it() -> None:
    assert math.isnan(parse_duration("nan"))
    assert parse_duration("1e3") == 1000.0


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("5x", "expected a duration: seconds (90) or a number with a unit"),
        ("m", "expected a duration: seconds (90)"),
        ("1m1h", "expected a duration: seconds (90)"),
        ("", "expected a duration"),
    ],
)
def test_what_is_no_duration_says_the_forms(text: str, expected: str) -> None:
    with pytest.raises(DurationError) as err:
        parse_duration(text)
    assert str(err.value).startswith(f"value {text!r}: {expected}")
    assert "(90s, 5m, 1.5m, 1h30m)" in str(err.value)


def _ctx(name: str) -> Any:
    return GROUP.commands[name].make_context(name, ["--help"], resilient_parsing=True)


#: The options in seconds of each command, by parameter name.
SECONDS = {
    "run": {"control_interval_seconds", "prometheus_timeout_seconds", "lease_duration_seconds",
            "lease_renew_deadline_seconds", "lease_retry_period_seconds",
            "resource_crd_retry_seconds"},
    "recommend": {"control_interval_seconds", "prometheus_timeout_seconds",
                  "resource_crd_retry_seconds"},
    "sim": {"interval", "model_load_seconds", "tail_seconds", "slo_ttft_seconds"},
    "bench": {"slo_ttft_seconds", "slo_ttft", "slo_itl_seconds", "model_load_seconds"},
    "backtest": {"model_load_seconds", "prometheus_timeout_seconds"},
    "bench-scale": {"scrape_interval"},
    "dashboards": {"prometheus_timeout_seconds"},
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(SECONDS))
def test_every_option_in_seconds_takes_the_grammar(name: str) -> None:
    ctx = _ctx(name)
    params = {p.name: p for p in GROUP.commands[name].get_params(ctx)}
    timed = {n for n in params if n.endswith("_seconds") or n in ("interval", "scrape_interval")}
    timed |= {n for n in params if n == "slo_ttft"}
    assert timed == SECONDS[name]
    for n in timed:
        assert params[n].process_value(ctx, "1.5m") == 90.0, n
        with pytest.raises(typer.BadParameter, match="expected a duration"):
            params[n].process_value(ctx, "soon")


def test_an_interval_given_as_a_duration_is_its_seconds(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[Any] = []

    def serve(settings: Any, *_: Any, **__: Any) -> None:
        seen.append(settings)

    monkeypatch.setattr("scaler.cli.controller._serve", serve)
    monkeypatch.setattr("scaler.cli.controller._policy", lambda settings: None)
    result = CliRunner().invoke(app, ["recommend", "--interval", "1.5m"])
    assert result.exit_code == 0, result.output
    result = CliRunner().invoke(
        app,
        ["run"],
        env={
            "VLLM_SCALER_CONTROL_INTERVAL_SECONDS": "2m",
            "VLLM_SCALER_LEASE_DURATION_SECONDS": "1m",
        },
    )
    assert result.exit_code == 0, result.output
    assert [s.control_interval_seconds for s in seen] == [90.0, 120.0]
    assert seen[1].lease_duration_seconds == 60.0


def test_a_backtest_step_reads_the_same_grammar(tmp_path: Path) -> None:
    policy = tmp_path / "p.yaml"
    policy.write_text(
        "targets:\n  - workload: {apiVersion: apps/v1, kind: Deployment, namespace: llm, name: v}\n"
    )
    args = ["backtest", "--policy", str(policy), "--start", "now-1h", "--end", "now",
            "--prometheus-url", "http://127.0.0.1:9", "--no-plot"]  # fmt: skip
    result = CliRunner().invoke(app, [*args, "--step", "1.5m"])
    assert "41 steps of 90 s from" in result.stderr
    result = CliRunner().invoke(app, [*args, "--step", "1.5s"])
    assert result.exit_code == 2
    assert "--step: value '1.5s': expected a whole number of seconds >= 1" in result.stderr


# ----------------------------------------------------------------------- -o


def test_o_is_the_report_format_of_every_command_but_run() -> None:
    for name in sorted(GROUP.commands):
        ctx = _ctx(name)
        short = [p for p in GROUP.commands[name].get_params(ctx) if "-o" in p.opts]
        assert len(short) == 1, name
        (option,) = short
        if name == "run":
            assert option.hidden and option.name == "log_format__deprecated"
        else:
            assert option.name == "output" and not option.hidden, name
            assert "--output" in option.opts and "json" in option.get_help_record(ctx)[1]


def test_run_logs_in_the_format_of_log_format_and_its_older_name_warns(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: list[Any] = []
    monkeypatch.setattr("scaler.cli.controller._serve", lambda settings, *_, **__: None)
    monkeypatch.setattr("scaler.cli.controller._policy", lambda settings: None)
    monkeypatch.setattr(
        "scaler.telemetry.logging.configure_logging", lambda fmt, level: seen.append(fmt)
    )
    new = CliRunner().invoke(app, ["run", "--log-format", "json"])
    assert new.exit_code == 0 and new.stderr == ""
    old = CliRunner().invoke(app, ["run", "-o", "text"], env={"VLLM_SCALER_LOG_FORMAT": "json"})
    assert old.exit_code == 0
    assert old.stderr == (
        "vllm-scaler: warning: run --output/-o is the older name of --log-format (everywhere "
        "else --output is a report's format); use --log-format\n"
    )
    assert seen == ["json", "text"]  # the older option is an option: over the variable


# --------------------------------------------------------------- lazy imports

#: What no listing of the commands needs.
HEAVY = (
    "pydantic", "scaler.config.settings", "structlog", "httpx", "kubernetes_asyncio",
    "scaler.sim", "scaler.bench", "scaler.controller", "scaler.sources", "matplotlib",
)  # fmt: skip


def _imported_by(args: list[str]) -> set[str]:
    code = (
        "import sys\n"
        f"sys.argv = ['vllm-scaler', *{args!r}]\n"
        "from scaler.cli import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "print(' '.join(sorted(sys.modules)), file=sys.stderr)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    return set(done.stderr.split())


def test_the_list_of_commands_imports_none_of_them() -> None:
    modules = _imported_by(["--help"])
    assert "scaler.cli" in modules
    assert [m for m in HEAVY if m in modules] == []


def test_a_commands_help_imports_what_its_options_need_and_no_other_command() -> None:
    modules = _imported_by(["recommend", "--help"])
    assert "scaler.config.settings" in modules  # its options are the settings'
    assert [m for m in HEAVY[2:] if m in modules] == []


@pytest.mark.parametrize("limit", [30, 45, 80])
def test_the_list_shows_what_each_command_says_of_itself(limit: int) -> None:
    """The first lines kept beside the lazy commands are the commands' own."""
    for entry in COMMANDS:
        command = GROUP.commands[entry.name]
        listed = typer.core.TyperCommand(name="-", help=entry.help).get_short_help_str(limit)
        assert listed == command.get_short_help_str(limit), entry.name


def test_the_help_lists_every_command_in_order() -> None:
    result = CliRunner().invoke(app, ["--help"], terminal_width=100)
    assert result.exit_code == 0
    listed = [
        line.split()[0] for line in result.output.split("Commands:")[1].splitlines() if line.strip()
    ]
    assert listed == [c.name for c in COMMANDS]
    assert "run           Run the controller loop: read Prometheus, decide, patch the" in (
        result.output
    )
