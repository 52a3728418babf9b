"""Every command's ``--help`` states each default once, and its usage line and metavars read
as a person writes them (no ``{path}`` placeholder, no ``list[str]``)."""

from __future__ import annotations

import re
from typing import Any

import pytest
import typer

from scaler.cli import app

GROUP: Any = typer.main.get_command(app)
COMMANDS = sorted(GROUP.commands)


def _context(name: str) -> Any:
    command = GROUP.commands[name]
    return command.make_context(name, ["--help"], resilient_parsing=True)


def test_every_command_is_checked() -> None:
    assert {"run", "recommend", "check-policy", "backtest", "bench", "sim"} <= set(COMMANDS)


@pytest.mark.parametrize("name", COMMANDS)
def test_each_option_states_its_default_once(name: str) -> None:
    ctx = _context(name)
    for param in GROUP.commands[name].get_params(ctx):
        record = param.get_help_record(ctx)
        if record is None:
            continue
        text = " ".join(record[1].split())
        assert len(re.findall(r"default:", text, re.IGNORECASE)) <= 1, (param.opts, text)


@pytest.mark.parametrize("name", COMMANDS)
def test_usage_and_metavars_have_no_placeholders(name: str) -> None:
    ctx = _context(name)
    command = GROUP.commands[name]
    usage = " ".join(command.collect_usage_pieces(ctx))
    assert "{" not in usage and "}" not in usage, usage
    for param in command.get_params(ctx):
        record = param.get_help_record(ctx)
        if record is not None:
            assert not re.search(r"\w\[\w", record[0]), record[0]  # list[str], dict[...]


def test_the_examples_of_the_report() -> None:
    ctx = _context("check-policy")
    assert GROUP.commands["check-policy"].collect_usage_pieces(ctx) == [
        "[OPTIONS]",
        "[POLICY_FILE]",  # default: VLLM_SCALER_POLICY_FILE
    ]
    progress = next(p for p in GROUP.commands["backtest"].get_params(ctx) if p.name == "progress")
    assert progress.get_help_record(ctx)[1] == (
        "Progress bar on stderr (default: when stderr is a terminal)."
    )


def test_recommend_json_help_says_one_array_per_round() -> None:
    """Without --once, recommend prints a round at each interval: not one JSON document."""
    ctx = _context("recommend")
    output = next(p for p in GROUP.commands["recommend"].get_params(ctx) if p.name == "output")
    text = " ".join(output.get_help_record(ctx)[1].split())
    assert text.startswith(
        "text (for people) or json: a JSON array per round (one object per target), one array "
        "after another until stopped; with --once, one array, one JSON document. Messages on "
        "stderr."
    ), text
