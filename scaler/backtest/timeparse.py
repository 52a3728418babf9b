"""Time and duration arguments of ``vllm-scaler backtest``, and times as it prints them.

Accepted times (all converted to Unix seconds, UTC):

- RFC 3339 with an offset: ``2025-05-01T12:00:00Z``, ``2025-05-01T14:00:00.5+02:00``
  (a time without an offset is rejected: it would depend on the machine's time zone);
- ``now``, ``now-6h``, ``now-1h30m`` (also ``now+10m``);
- a bare duration meaning "that long ago": ``2h`` (or ``2h ago``) is ``now-2h``;
- Unix seconds: ``1746100800`` or ``1746100800.5``.

Durations use Prometheus' units ``ms``, ``s``, ``m``, ``h``, ``d`` (24 h), ``w`` (7 d),
``y`` (365 d),
optionally combined largest first (``1h30m``); decimals are allowed (``1.5h``).

A time must fall between 1970-01-01T00:00:00Z and 9999-12-31T23:59:59Z (what a date can be
written as, and printed back in messages and reports); a duration must be finite.
"""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime

from scaler.config.durations import DurationError, unit_duration

__all__ = ["TimeParseError", "parse_duration", "parse_time", "rfc3339"]

_DURATION = re.compile(r"^(?:\d+(?:\.\d+)?(?:ms|s|m|h|d|w|y))+$")
_UNIX = re.compile(r"^\d+(?:\.\d+)?$")
_RELATIVE = re.compile(r"^now\s*(?:([+-])\s*(\S+))?$")
#: The latest time accepted, Unix seconds (the last second a date can be written for).
_LATEST = datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC).timestamp()


class TimeParseError(ValueError):
    """A time or duration argument is not in an accepted form; the message says which are."""


def parse_duration(text: str) -> float:
    """Parse a duration such as ``15s``, ``1h30m`` or ``1.5d`` into seconds.

    Raises:
        TimeParseError: not a duration with units, units not largest first, or too large for
            a float (the message names the value and the forms expected).
    """
    total = _duration_seconds(text)
    if not math.isfinite(total):
        raise TimeParseError(f"value {text!r}: expected a finite duration (15s, 6h, 1h30m)")
    return total


def _duration_seconds(text: str) -> float:
    """:func:`parse_duration` without its finiteness check (``inf`` for a duration too large
    for a float: a time that far off is refused as out of range): the command line's one
    grammar of durations with units (:func:`scaler.config.durations.unit_duration`)."""
    try:
        return unit_duration(text)
    except DurationError as err:
        raise TimeParseError(str(err)) from None


def parse_time(text: str, *, now: float) -> float:
    """Parse a time argument into Unix seconds.

    Args:
        text: RFC 3339 with an offset, ``now``, ``now-<duration>``, ``<duration>`` (ago),
            ``<duration> ago`` or Unix seconds (see the module docstring).
        now: the current time, Unix seconds (relative forms count from it).

    Raises:
        TimeParseError: the text is none of the accepted forms, or names a time before
            1970-01-01T00:00:00Z or after 9999-12-31T23:59:59Z.
    """
    seconds = _parse_time(text, now=now)
    if not 0 <= seconds <= _LATEST:
        raise TimeParseError(
            f"value {text!r}: expected a time from 1970-01-01T00:00:00Z to 9999-12-31T23:59:59Z"
        )
    return seconds


def _parse_time(text: str, *, now: float) -> float:
    s = text.strip()
    low = s.lower()
    rel = _RELATIVE.match(low)
    if rel:
        sign, dur = rel.groups()
        if sign is None:
            return now
        try:
            seconds = _duration_seconds(dur)
        except TimeParseError:
            raise TimeParseError(
                f"value {text!r}: expected now{sign}<duration>, a number with a unit ms, s, m, "
                "h, d, w or y (now-6h, now-1h30m)"
            ) from None
        return now - seconds if sign == "-" else now + seconds
    ago = low.removesuffix("ago").strip()
    if _DURATION.match(ago):
        return now - _duration_seconds(ago)
    if _UNIX.match(s):
        return float(s)
    try:
        when = datetime.fromisoformat(s)
    except ValueError:
        when = None
    if when is None or "T" not in s.upper():
        raise TimeParseError(
            f"value {text!r}: expected a time: RFC 3339 (2025-05-01T12:00:00Z), now, now-6h, "
            "a duration ago (2h or 2h ago) or Unix seconds"
        )
    if when.tzinfo is None:
        raise TimeParseError(
            f"value {text!r}: expected a UTC offset: add Z or +hh:mm (RFC 3339), e.g. {s}Z"
        )
    return when.timestamp()


def rfc3339(seconds: float) -> str:
    """Unix ``seconds`` as RFC 3339 in UTC with a ``Z`` (``2025-05-01T12:00:00Z``; a fraction
    of a second is kept: ``2025-05-01T12:00:00.250000Z``).

    Raises:
        ValueError, OverflowError: a time no date can be written for (outside what
            :func:`parse_time` accepts).
    """
    return datetime.fromtimestamp(seconds, UTC).isoformat().replace("+00:00", "Z")
