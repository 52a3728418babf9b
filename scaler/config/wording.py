"""What a pydantic validation error expected, in the project's words: ``expected a number >
0``, not pydantic's ``Input should be greater than 0``.

Used by the policy file's errors (:mod:`scaler.config.policy_errors`) and the settings'
(:mod:`scaler.config.settings`), which put it after the field and the value:
``<field>: value <v>: <expectation>``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from scaler.config.vocabulary import DNS_LABEL, DNS_SUBDOMAIN

__all__ = [
    "counted",
    "expectation",
    "in_seconds",
    "percent_hint",
    "seconds_expectation",
    "unit_hint",
]


def counted(count: int, noun: str, plural: str | None = None, *, thousands: bool = False) -> str:
    """``count`` and ``noun`` in the number it takes: ``1 step``, ``2 steps``, ``0 steps``;
    ``plural`` where it is not ``noun + "s"``; with ``thousands``, ``1,200 steps``."""
    number = f"{count:,}" if thousands else str(count)
    return f"{number} {noun if count == 1 else plural or noun + 's'}"


#: Error types whose expectation needs no context.
_PLAIN = {
    "float_parsing": "expected a number",
    "float_type": "expected a number",
    "int_parsing": "expected a whole number",
    "int_type": "expected a whole number",
    "int_from_float": "expected a whole number",
    "bool_parsing": "expected true or false",
    "bool_type": "expected true or false",
    "string_type": "expected text",
    "path_type": "expected a path",
    "model_type": "expected a mapping",
    "model_attributes_type": "expected a mapping",
    "dict_type": "expected a mapping",
    "list_type": "expected a list",
    "finite_number": "expected a finite number",
    "missing": "required field missing",
}

#: Bounds of numbers: error type -> the comparison it asks for.
_BOUNDS = {
    "greater_than": ("gt", ">"),
    "greater_than_equal": ("ge", ">="),
    "less_than": ("lt", "<"),
    "less_than_equal": ("le", "<="),
}


#: The patterns of names, in words (Kubernetes' and Prometheus' naming rules).
_PATTERN_WORDS = {
    DNS_LABEL: "a Kubernetes name: lowercase letters, digits and "
    "'-', starting and ending with a letter or digit",
    DNS_SUBDOMAIN: "a Kubernetes name: lowercase letters, digits, '-' "
    "and '.', starting and ending with a letter or digit",
    r"^[a-zA-Z_][a-zA-Z0-9_]*$": "a Prometheus label name: letters, digits and '_', not "
    "starting with a digit",
}


def _number(value: object) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def expectation(error: Mapping[str, Any]) -> str:
    """The expectation of one entry of ``ValidationError.errors()``: ``expected ...`` for the
    kinds pydantic words as ``Input should ...``; a custom validator's message as it is
    (without pydantic's ``Value error,`` prefix)."""
    kind = str(error.get("type", ""))
    ctx = error.get("ctx") or {}
    value = error.get("input")
    if kind in ("int_type", "int_from_float") and isinstance(value, float) and value.is_integer():
        # 2.0 is whole, yet not an integer in YAML or JSON (nor to the Kubernetes API)
        return f"expected a whole number without a decimal point ({int(value)}, not {value!r})"
    if kind in _PLAIN:
        return _PLAIN[kind]
    if kind in _BOUNDS:
        key, sign = _BOUNDS[kind]
        if key in ctx:
            return f"expected a number {sign} {_number(ctx[key])}"
    if kind == "literal_error" and "expected" in ctx:
        return f"expected one of {ctx['expected'].replace(' or ', ', ')}"
    if kind == "string_pattern_mismatch" and "pattern" in ctx:
        words = _PATTERN_WORDS.get(str(ctx["pattern"]))
        return f"expected {words}" if words else f"expected text matching {ctx['pattern']}"
    if kind == "url_parsing":
        return f"expected a URL such as http://prometheus:9090 ({ctx.get('error', 'invalid')})"
    if kind == "url_scheme":
        return f"expected a URL whose scheme is {ctx.get('expected_schemes', 'http or https')}"
    if kind == "too_short" and ctx.get("min_length") == 1:
        return "expected at least one item"
    if kind == "too_short" and "min_length" in ctx:
        return f"expected at least {ctx['min_length']} items"
    if kind == "string_too_long" and "max_length" in ctx:
        return f"expected at most {ctx['max_length']} characters"
    msg = str(error.get("msg", "")).removeprefix("Value error, ").removeprefix("Assertion failed, ")
    return msg.replace("Input should be", "expected").rstrip(".")


#: How a field's description starts when the field holds a 0-1 ratio, where a percent is the
#: likely mistake (the policy's ``target_ratio``, ``target_utilization``, ``quantile``).
RATIO_DESCRIPTION = "0-1 ratio"


#: What the description of a scale-up tolerance says it is: a value between 1 and 2 is then
#: likely the ratio itself (1.5 for "scale up above 1.5 times the target"), not a percent.
BAND_ABOVE_ONE = "the band above a value/target ratio of 1"


#: The least value of a 0-1 ratio field read as a percent (80 for 0.8); below it, a value
#: above 1 is rather a ratio out of range (a quantile of 1.5) than a percent of one or two.
_PERCENT_FROM = 5


def percent_hint(description: str | None, value: object) -> str:
    """`` (a 0-1 ratio, not a percent: 80% is 0.8)`` when ``value`` of a field described as a
    0-1 ratio (:data:`RATIO_DESCRIPTION`) looks like a percent (5 to 100), `` (a 0-1 ratio)``
    for another value above 1; for a band above 1 (:data:`BAND_ABOVE_ONE`) and a value between
    1 and 2, what the tolerance of that ratio is (1.5: 0.5); else ``""``."""
    text = description or ""
    if not text.startswith(RATIO_DESCRIPTION) or not isinstance(value, int | float):
        return ""
    if BAND_ABOVE_ONE in text and 1 < value < 2:
        return (
            f" (a 0-1 ratio: {BAND_ABOVE_ONE}, not the ratio itself: to scale up above "
            f"{value:g} times the target, {value - 1:g})"
        )
    if _PERCENT_FROM <= value <= 100:
        return f" (a 0-1 ratio, not a percent: {value:g}% is {value / 100:g})"
    if value > 1:  # 1.5 is no likely percent of a quantile or a utilization: no conversion
        return " (a 0-1 ratio)"
    return ""


#: A name that carries its unit (``target_seconds``, ``max_tokens_per_second``,
#: ``target_ratio``, ``max_percent_per_period``).
_UNIT_IN_NAME = re.compile(r"_seconds?$|_ratio$|percent")
_NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)")


def unit_hint(name: str, description: str | None, value: str) -> str:
    """What to write instead of a number with a unit (``2000ms``, ``10%``, ``5req``) in a
    field that takes a plain number: the field's unit as its name or its description gives
    it; a percent in a 0-1 ratio converted (``10%`` is 0.1)."""
    text = description or ""
    if text.startswith(RATIO_DESCRIPTION):
        number = _NUMBER.match(value.strip())
        if value.strip().endswith("%") and number:
            percent = float(number.group())
            return f" (a 0-1 ratio, not a percent: {percent:g}% is {percent / 100:g})"
        return " (a plain number: a 0-1 ratio)"
    if _UNIT_IN_NAME.search(name) or not text:
        return f" (a plain number: the unit is in the field's name, {name})"
    return f" (a plain number: {text})"


#: A field whose value is a number of seconds, as the policy file (``period_seconds``) or the
#: resource (``stabilizationWindowSeconds``, HPA's spelling) names it.
_SECONDS_NAME = re.compile(r"(?:_s|S)econds$")


def in_seconds(name: str) -> bool:
    """Whether field ``name`` holds a number of seconds (its name ends in ``_seconds`` or
    ``Seconds``)."""
    return bool(_SECONDS_NAME.search(name))


def _plain(seconds: float) -> str:
    """A number of seconds as it is best written: ``30``, ``0.5``, ``31536000``."""
    return str(int(seconds)) if seconds.is_integer() and abs(seconds) < 1e15 else repr(seconds)


def seconds_expectation(value: object) -> str:
    """What a seconds field expected of ``value``, a value that is no number: a duration
    written as text (``"30s"``, ``"2m"``, ``"1h30m"``, ``"500ms"``: the command line's grammar,
    :mod:`scaler.config.durations`) converted, ``expected a number of seconds; write 30``; a
    number in quotes (``"30"``), ``expected a number of seconds, without quotes; write 30``;
    anything else ``expected a number of seconds, such as 30``.

    The policy keeps durations as numbers of seconds, the unit in the field's name, as HPA's
    ``stabilizationWindowSeconds`` does: the message gives the number to write instead.
    """
    from scaler.config.durations import DurationError, parse_duration

    if isinstance(value, str):
        try:
            seconds = parse_duration(value)
        except DurationError:
            seconds = math.nan
        if math.isfinite(seconds):
            try:
                float(value)
            except ValueError:
                return f"expected a number of seconds; write {_plain(seconds)}"
            return f"expected a number of seconds, without quotes; write {_plain(seconds)}"
    return "expected a number of seconds, such as 30"
