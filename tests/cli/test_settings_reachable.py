"""Every setting is an option (of ``run``; the Prometheus ones of every command that reads
Prometheus) and a row of the generated settings reference, and the reference names no other."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from scaler.cli import app
from scaler.config.cli_options import OPTION_ONLY, PROMETHEUS_FIELDS, option_names
from scaler.config.settings import Settings, env_name

DOCS = Path(__file__).resolve().parents[2] / "docs"


def _reference() -> str:
    """The settings reference as docs/hooks.py generates it for docs/settings.md (its
    commands read from the command line)."""
    spec = importlib.util.spec_from_file_location("docs_hooks", DOCS / "hooks.py")
    assert spec is not None and spec.loader is not None
    hooks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hooks)
    return str(hooks.REFERENCES["settings"]())


def _table_rows() -> list[tuple[list[str], list[str], list[str]]]:
    """(variables, options, commands) of each row of the generated settings reference."""
    rows = []
    for line in _reference().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 5 and cells[0].startswith("`VLLM_SCALER_"):
            variables = re.findall(r"`([A-Z_]+)`", cells[0])
            options = re.findall(r"`(--[a-z-]+)", cells[1])
            commands = re.findall(r"`([a-z-]+)`", cells[2])
            rows.append((variables, options, commands))
    return rows


def test_the_reference_lists_every_setting_and_only_settings() -> None:
    documented = {v for variables, _, _ in _table_rows() for v in variables}
    assert documented == {env_name(f) for f in Settings.model_fields}


def test_the_reference_names_the_commands_that_take_each_setting() -> None:
    commands = {variables[0]: used for variables, _, used in _table_rows()}
    for field in PROMETHEUS_FIELDS:
        assert {"run", "recommend", "backtest", "dashboards"} <= set(commands[env_name(field)])
    assert commands[env_name("lease_name")] == ["run"]
    assert commands[env_name("control_interval_seconds")] == ["recommend", "run"]


def test_every_documented_option_is_an_option_of_run() -> None:
    result = CliRunner().invoke(app, ["run", "--help"], terminal_width=200)
    assert result.exit_code == 0
    shown = set(re.findall(r"--[a-z-]+", result.output))
    documented = {o for _, options, _ in _table_rows() for o in options}
    assert documented <= shown
    assert {option_names(f)[0].split("/")[0] for f in Settings.model_fields} <= documented


@pytest.mark.parametrize(
    "command",
    [
        pytest.param("run", id="run"),
        pytest.param("recommend", id="recommend"),
        pytest.param("backtest", id="backtest"),
        pytest.param("dashboards", id="dashboards"),
    ],
)
def test_every_command_that_reads_prometheus_takes_every_prometheus_setting(
    command: str,
) -> None:
    result = CliRunner().invoke(app, [command, "--help"], terminal_width=200)
    assert result.exit_code == 0
    for field in PROMETHEUS_FIELDS:
        assert option_names(field)[0] in result.output, (command, field)
        assert env_name(field) in result.output, (command, field)


def test_the_options_of_run_without_a_variable_are_named_option_only_in_the_readme() -> None:
    run = typer.main.get_command(app).commands["run"]  # type: ignore[attr-defined]
    option_only = {
        p.opts[0]
        for p in run.params
        if p.param_type_name == "option"
        and not p.envvar
        and "--help" not in p.opts
        and not p.hidden  # run --output, the log format's older name
    }
    assert option_only == {"--dry-run"}
    assert option_only <= set(OPTION_ONLY.values())  # the unknown-variable warning names them
    text = (DOCS / "run.md").read_text(encoding="utf-8")
    paragraph = text[text.index("Every setting is an option of `run`") :].split("\n\n")[0]
    for option in option_only:
        assert f"`{option}` is a command-line option only" in paragraph, paragraph


def test_the_log_level_default_of_each_command_is_the_one_help_and_readme_state() -> None:
    """``run`` logs from ``info``, ``recommend`` (whose report is its output) from
    ``warning``: its ``--help`` and the settings page say so."""
    row = next(line for line in _reference().splitlines() if "`VLLM_SCALER_LOG_LEVEL`" in line)
    assert row.strip("|").split("|")[3].strip() == "`info`"
    notes = (DOCS / "settings.md").read_text(encoding="utf-8")
    assert "`LOG_LEVEL`: `recommend` defaults to `warning`" in notes
    for command, level in (("run", "info"), ("recommend", "warning")):
        result = CliRunner().invoke(app, [command, "--help"], terminal_width=200)
        shown = " ".join(result.output.split())
        assert f"VLLM_SCALER_LOG_LEVEL; default: ({level})]" in shown, (command, shown)
