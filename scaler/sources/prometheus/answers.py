"""The answers of Prometheus' instant-query API, checked and parsed.

:func:`parse_vector` checks a ``status: success`` body's shape and returns its series;
:func:`parse_sample_value` reads one sample value exactly as Prometheus writes it. An answer
that does not have the API's shape is a :class:`BadResponse`, which the source reports as the
query's ``bad_response`` status, never as data. One malformed series in a well-formed vector
(a bad sample value, a label map that is not one) is not: it is a :class:`BadSeries` with the
labels that could be read, so that only the target it belongs to is affected.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from scaler.core.signals import SignalStatus
from scaler.sources.promql import QueryKind

__all__ = [
    "Answer",
    "BadResponse",
    "BadSeries",
    "QueryOutcome",
    "Series",
    "parse_sample_value",
    "parse_vector",
    "short_detail",
]

_DETAIL_MAX = 300
# What Prometheus writes for a finite float (strconv.FormatFloat 'f'/'e' forms).
_NUMBER_RE = re.compile(r"^[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?$")

#: One series of an instant vector: its labels and its value.
Series = tuple[dict[str, str], float]
_STR_ONLY = frozenset({str})


@dataclass(frozen=True, slots=True)
class QueryOutcome:
    """How one instant query of the cycle went.

    Attributes:
        kind: which query.
        status: ``ok`` on a well-formed success answer, else the failure reason
            (``transport``, ``timeout``, ``http_error``, ``query_error``, ``bad_response``).
        detail: explanation of a failure (Prometheus ``errorType: error`` for query errors).
        series: series in a successful answer.
        duration_seconds: wall time of the HTTP request.
        query: the PromQL sent.
        warnings: ``warnings`` Prometheus attached to a successful answer.
    """

    kind: QueryKind
    status: SignalStatus
    detail: str = ""
    series: int = 0
    duration_seconds: float = 0.0
    query: str = ""
    warnings: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        """True when the answer was a well-formed success."""
        return self.status is SignalStatus.OK


@dataclass(frozen=True, slots=True)
class BadSeries:
    """One malformed series of a well-formed vector.

    Attributes:
        labels: the labels that are strings (empty when the label map is not an object):
            enough, usually, to tell whose series it is.
        detail: what is wrong, e.g. ``result[3]: sample value 'lots' is not a number``.
    """

    labels: dict[str, str]
    detail: str


@dataclass(frozen=True, slots=True)
class Answer:
    """One query's outcome and, when it succeeded, its series (empty otherwise).

    ``bad`` holds the malformed series of a successful answer (see :class:`BadSeries`).
    """

    outcome: QueryOutcome
    series: list[Series]
    bad: tuple[BadSeries, ...] = ()


class BadResponse(ValueError):
    """The answer is not the Prometheus API's JSON shape, or does not match the query sent."""


def parse_sample_value(raw: object) -> float:
    """Parse a Prometheus sample value string.

    Prometheus encodes sample values as JSON strings: decimal numbers, ``"NaN"``,
    ``"+Inf"`` and ``"-Inf"``. Those three are matched explicitly (``float()`` would also
    accept spellings like ``"nan"``, ``"infinity"`` or ``"1_0"`` that Prometheus never sends).

    Returns:
        The float; NaN and +/-inf for the special strings.

    Raises:
        ValueError: not a string, or not a number Prometheus would write.
    """
    if not isinstance(raw, str):
        raise ValueError(f"sample value {raw!r} is not a string")
    if raw == "NaN":
        return math.nan
    if raw in ("+Inf", "Inf"):
        return math.inf
    if raw == "-Inf":
        return -math.inf
    if not _NUMBER_RE.match(raw):
        raise ValueError(f"sample value {raw!r} is not a number")
    value = float(raw)
    if not math.isfinite(value):
        raise ValueError(f"sample value {raw!r} overflows a float")
    return value


def parse_vector(body: Any) -> tuple[list[Series], list[BadSeries], tuple[str, ...]]:
    """Check the ``status: success`` body's shape and return its (labels, value) series.

    Returns:
        ``(series, bad, warnings)``: the vector's well-formed series, its malformed ones (a
        result item that is not an object, a label map with a non-string value, a value that
        is not ``[timestamp, "number"]``) and the ``warnings`` Prometheus attached.

    Raises:
        BadResponse: the body is not an instant vector (no ``data``, another ``resultType``,
            a ``result`` that is not a list).
    """
    data = body.get("data")
    if not isinstance(data, dict):
        raise BadResponse("'data' is missing or not an object")
    if data.get("resultType") != "vector":
        raise BadResponse(f"resultType {data.get('resultType')!r}, expected 'vector'")
    result = data.get("result")
    if not isinstance(result, list):
        raise BadResponse("'data.result' is not a list")
    out: list[Series] = []
    bad: list[BadSeries] = []
    for i, item in enumerate(result):
        if not isinstance(item, dict):
            bad.append(BadSeries({}, f"result[{i}] is not an object"))
            continue
        metric = item.get("metric")
        value = item.get("value")
        # map(type, ...) keeps the check in C: answers carry 10^4-10^5 series.
        if not isinstance(metric, dict) or not (
            _STR_ONLY.issuperset(map(type, metric))
            and _STR_ONLY.issuperset(map(type, metric.values()))
        ):
            bad.append(BadSeries(_string_labels(metric), f"result[{i}].metric is not a label map"))
            continue
        if (
            not isinstance(value, list)
            or len(value) != 2
            or isinstance(value[0], bool)
            or not isinstance(value[0], int | float)
        ):
            bad.append(BadSeries(dict(metric), f'result[{i}].value is not [timestamp, "value"]'))
            continue
        try:
            out.append((dict(metric), parse_sample_value(value[1])))
        except ValueError as err:
            bad.append(BadSeries(dict(metric), f"result[{i}]: {err}"))
    warnings = body.get("warnings") or []
    return out, bad, tuple(str(w) for w in warnings) if isinstance(warnings, list) else ()


def _string_labels(metric: object) -> dict[str, str]:
    """The string-valued labels of a label map that is not entirely one."""
    if not isinstance(metric, dict):
        return {}
    return {k: v for k, v in metric.items() if isinstance(k, str) and isinstance(v, str)}


def short_detail(text: str) -> str:
    """``text`` on one line, cut to 300 characters (a detail for logs and outcomes)."""
    text = " ".join(text.split())
    return text if len(text) <= _DETAIL_MAX else text[: _DETAIL_MAX - 3] + "..."
