"""structlog set-up: readable lines on a terminal, JSON lines elsewhere (in a cluster)."""

from __future__ import annotations

import logging
import sys
from typing import Literal

import structlog

from scaler.telemetry.redact import redacting


def configure_logging(
    fmt: Literal["auto", "json", "text", "console"] = "auto", level: str = "info"
) -> None:
    """Configure structlog for the process.

    ``auto`` renders for people when stderr is a terminal and JSON lines otherwise; ``text``
    is ``console``. Every event gets an ISO-8601 UTC timestamp and its level. Lines go to
    stderr through :func:`~scaler.telemetry.redact.redacting`: secrets are masked there, in
    the rendered line (tracebacks included), as in everything else the process prints.
    """
    use_json = fmt == "json" or (fmt == "auto" and not sys.stderr.isatty())
    renderer: structlog.typing.Processor = (
        structlog.processors.JSONRenderer()
        if use_json
        else structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty())
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.StackInfoRenderer(),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(
            logging.getLevelNamesMapping()[level.upper()]
        ),
        logger_factory=structlog.PrintLoggerFactory(file=redacting(sys.stderr)),
        cache_logger_on_first_use=False,
    )
