"""structlog set-up: readable lines on a terminal, JSON lines elsewhere (in a cluster)."""

from __future__ import annotations

import contextlib
import logging
import sys
from collections.abc import Iterator, Mapping, MutableMapping
from typing import Any, Literal

import structlog

from scaler.telemetry.redact import redacting

__all__ = ["configure_logging", "flatten_fields", "format_fields"]


def _flat_value(value: object) -> object:
    """A scalar as it reads in a ``key=value`` pair: a list of scalars is comma-joined,
    None and an empty list are ``none``, a boolean is ``true``/``false``."""
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | tuple | set | frozenset):
        items = sorted(value, key=str) if isinstance(value, set | frozenset) else value
        return ",".join(str(_flat_value(v)) for v in items) or "none"
    return value


def flatten_fields(fields: Mapping[str, Any], prefix: str = "") -> dict[str, object]:
    """``fields`` with nested mappings as dotted keys (``prometheus.url``) and every value a
    scalar (see :func:`_flat_value`), for the ``key=value`` lines people read; JSON logs keep
    the nesting."""
    out: dict[str, object] = {}
    for key, value in fields.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(flatten_fields(value, prefix=f"{name}.") if value else {name: "none"})
        else:
            out[name] = _flat_value(value)
    return out


_LOGFMT = structlog.processors.LogfmtRenderer(bool_as_flag=False)


def format_fields(fields: Mapping[str, Any]) -> str:
    """``fields`` as one logfmt line, ``key=value`` pairs (values with spaces quoted), nested
    mappings flattened by :func:`flatten_fields`: the text form of a log event's fields."""
    return str(_LOGFMT(None, "", flatten_fields(fields)))


def _flatten_for_people(
    _logger: object, _method: str, event_dict: MutableMapping[str, Any]
) -> MutableMapping[str, Any]:
    # the event name, level and timestamp stay as they are for the console renderer's columns
    kept = {k: event_dict.pop(k) for k in ("event", "level", "timestamp") if k in event_dict}
    exception = event_dict.pop("exception", None)
    flat: dict[str, Any] = {**kept, **flatten_fields(event_dict)}
    if exception is not None:
        flat["exception"] = exception
    return flat


def configure_logging(
    fmt: Literal["auto", "json", "text", "console"] = "auto", level: str = "info"
) -> None:
    """Configure structlog for the process.

    ``auto`` renders for people when stderr is a terminal and JSON lines otherwise; ``text``
    is ``console``. Every event gets an ISO-8601 UTC timestamp and its level. Text lines give
    every field as ``key=value``, nested ones as dotted keys (``prometheus.url=...``), never a
    Python dict. Lines go to stderr through :func:`~scaler.telemetry.redact.redacting`:
    secrets are masked there, in the rendered line (tracebacks included), as in everything
    else the process prints.
    """
    use_json = fmt == "json" or (fmt == "auto" and not sys.stderr.isatty())
    renderers: list[structlog.typing.Processor] = (
        [structlog.processors.JSONRenderer()]
        if use_json
        else [_flatten_for_people, structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty())]
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.StackInfoRenderer(),
            structlog.processors.format_exc_info,
            *renderers,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(
            logging.getLevelNamesMapping()[level.upper()]
        ),
        logger_factory=structlog.PrintLoggerFactory(file=redacting(sys.stderr)),
        cache_logger_on_first_use=False,
    )


@contextlib.contextmanager
def silenced() -> Iterator[None]:
    """Drop every log event below CRITICAL while inside (structlog's global configuration,
    restored after): for replays in virtual time, whose source logs every absent or
    warming-up signal as the controller does."""
    saved = structlog.get_config()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.CRITICAL))
    try:
        yield
    finally:
        structlog.configure(**saved)
