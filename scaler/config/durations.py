"""The one duration grammar of the command line: ``90``, ``90s``, ``5m``, ``1.5m``, ``1h``,
``1h30m``, ``500ms``.

A bare number is seconds. Otherwise a number with a unit, Prometheus' units ``ms``, ``s``,
``m``, ``h``, ``d`` (24 h), ``w`` (7 d) and ``y`` (365 d), optionally combined largest first
(``1h30m``); decimals are allowed (``1.5m`` is 90 s). Every option and variable whose value is
seconds takes it (``--interval``, ``--prometheus-timeout-seconds``, ``backtest --step``, the
``*-seconds`` options of ``sim`` and ``bench``), as do the durations inside ``backtest``'s
times (``now-1h30m``). Ranges are checked by the option itself, after the conversion.
"""

from __future__ import annotations

import math
import re

import typer

__all__ = ["DURATION_FORMS", "DurationError", "duration_option", "parse_duration", "unit_duration"]

_UNIT_SECONDS: dict[str, float] = {
    "ms": 0.001,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
    "d": 86400.0,
    "w": 604800.0,
    "y": 31536000.0,  # 365 d, as Prometheus reads it
}
_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w|y)")
_WITH_UNITS = re.compile(r"^(?:\d+(?:\.\d+)?(?:ms|s|m|h|d|w|y))+$")
#: The forms an error names.
DURATION_FORMS = (
    "seconds (90) or a number with a unit ms, s, m, h, d, w or y (90s, 5m, 1.5m, 1h30m)"
)


class DurationError(ValueError):
    """Not a duration; the message names the value and the forms expected."""


def unit_duration(text: str) -> float:
    """Seconds of a duration written with units (``15s``, ``1h30m``, ``1.5d``); ``inf`` for
    one too large for a float.

    Raises:
        DurationError: no unit, or units not from largest to smallest once each.
    """
    s = text.strip()
    if not _WITH_UNITS.match(s):
        raise DurationError(
            f"value {text!r}: expected a duration, a number with a unit ms, s, m, h, d, w or y "
            "(15s, 6h, 1h30m)"
        )
    total = 0.0
    last_unit = math.inf
    for number, unit in _PART.findall(s):
        size = _UNIT_SECONDS[unit]
        if size >= last_unit:
            raise DurationError(
                f"value {text!r}: expected a duration with its units from largest to smallest, "
                "once each (1h30m)"
            )
        last_unit = size
        total += float(number) * size
    return total


def parse_duration(text: str) -> float:
    """Seconds of a duration in the command line's grammar (the module docstring): a bare
    number (any float Python reads, so that a range check can name ``-5`` or ``nan`` as
    given) or a number with units, with an optional sign.

    Raises:
        DurationError: neither (the message names the value and :data:`DURATION_FORMS`).
    """
    s = text.strip()
    try:
        return float(s)
    except ValueError:
        pass
    sign = -1.0 if s.startswith("-") else 1.0
    try:
        return sign * unit_duration(s.lstrip("+-"))
    except DurationError:
        raise DurationError(f"value {text!r}: expected a duration: {DURATION_FORMS}") from None


def duration_option(value: str | float) -> float:
    """The parser of a seconds option (typer's ``parser=``): :func:`parse_duration` of the
    text (a default that is a number already passes through).

    Raises:
        typer.BadParameter: not a duration (the message names the value and the forms).
    """
    if isinstance(value, int | float):
        return float(value)
    try:
        return parse_duration(value)
    except DurationError as err:
        raise typer.BadParameter(str(err)) from None
