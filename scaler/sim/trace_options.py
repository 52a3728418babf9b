"""The command-line options that say how to read a trace file, shared by ``sim`` and
``bench`` so that both read the same files the same way."""

from __future__ import annotations

from typing import Annotated

import typer

from scaler.sim.trace import TIME_UNIT_HELP

__all__ = [
    "OutputColumnOpt",
    "PromptColumnOpt",
    "TimeColumnOpt",
    "TimeUnitOpt",
    "trace_error_hint",
]

TimeColumnOpt = Annotated[str, typer.Option(help="Arrival time column (trace files).")]
PromptColumnOpt = Annotated[str, typer.Option(help="Prompt tokens column (trace files).")]
OutputColumnOpt = Annotated[str, typer.Option(help="Output tokens column (trace files).")]
TimeUnitOpt = Annotated[str, typer.Option(help=TIME_UNIT_HELP)]


def trace_error_hint(message: str) -> str:
    """What to add to a trace file's error: for columns missing from the header (or from a
    JSON line's keys), the options that name them; else ''."""
    if "missing column" in message and "on this line" not in message:
        return " (name them with --time-column, --prompt-column, --output-column)"
    return ""
