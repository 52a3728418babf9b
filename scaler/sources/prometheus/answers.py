"""The answers of Prometheus' instant-query API, checked and parsed.

:func:`parse_vector` checks a ``status: success`` body's shape and returns its series;
:func:`parse_sample_value` reads one sample value exactly as Prometheus writes it. An answer
that does not have the API's shape is a :class:`BadResponse`, which the source reports as the
query's ``bad_response`` status, never as data. One malformed series in a well-formed vector
(a bad sample value, a label map that is not one) is not: it is a :class:`BadSeries` with the
labels that could be read, so that only the target it belongs to is affected.
"""

from __future__ import annotations

import contextlib
import gc
import http
import json
import math
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pydantic_core

from scaler.config.secrets import shortened
from scaler.core.signals import SignalStatus
from scaler.sources.promql import QueryKind

__all__ = [
    "Answer",
    "AnswerError",
    "BadResponse",
    "BadSeries",
    "QueryOutcome",
    "Series",
    "answer_problem",
    "cause_detail",
    "decode_json",
    "error_answer_detail",
    "http_status_text",
    "not_prometheus_detail",
    "parse_sample_value",
    "parse_vector",
    "partial_warnings",
    "paused_gc",
    "short_detail",
]

_DETAIL_MAX = 300
#: How much of a long detail's start is kept; the rest of :data:`_DETAIL_MAX` is its end.
_DETAIL_HEAD = 100
# What Prometheus writes for a finite float (strconv.FormatFloat 'f'/'e' forms).
_NUMBER_RE = re.compile(r"^[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?$")
# The characters of those forms. A string of only these that float() reads as a finite number
# is one _NUMBER_RE accepts too (float() takes no other spelling made of them), so the fast
# path below needs no regex; anything else goes the exact way.
_NUMBER_CHARS = "0123456789+-.eE"

#: One series of an instant vector: its labels and its value.
Series = tuple[dict[str, str], float]
_STR_ONLY = frozenset({str})
_TIMESTAMP_TYPES = frozenset({int, float})  # not bool (a subclass of int)


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
        warnings: ``warnings`` Prometheus attached to a successful answer (and, from
            VictoriaMetrics, a warning of its own for ``isPartial: true``).
        http_status: the HTTP status of the answer (None when none came).
    """

    kind: QueryKind
    status: SignalStatus
    detail: str = ""
    series: int = 0
    duration_seconds: float = 0.0
    query: str = ""
    warnings: tuple[str, ...] = ()
    http_status: int | None = None

    @property
    def ok(self) -> bool:
        """True when the answer was a well-formed success."""
        return self.status is SignalStatus.OK

    @property
    def partial(self) -> tuple[str, ...]:
        """The warnings that say the answer may lack data (:func:`partial_warnings`)."""
        return partial_warnings(self.warnings)


#: How Prometheus' own evaluation notes begin: they say how a result was computed (a counter
#: without ``_total``, a histogram fixed for monotonicity), not that data is missing.
_EVALUATION_NOTES = ("PromQL info:", "PromQL warning:")
#: The warning that stands for VictoriaMetrics' ``isPartial: true``.
VM_PARTIAL = (
    "isPartial: true (VictoriaMetrics: some storage nodes did not answer, the result may lack "
    "series)"
)


def partial_warnings(warnings: tuple[str, ...]) -> tuple[str, ...]:
    """The warnings of a successful answer that say its data may be incomplete: every warning
    but Prometheus' evaluation notes (``PromQL info: ...``, ``PromQL warning: ...``).

    A query front end answers ``success`` with warnings when a part of the data could not be
    read: Thanos' partial responses (``No StoreAPIs matched for this query``, a store or
    receiver ``Unavailable``), Mimir's and Cortex's query front ends, Prometheus' remote read,
    VictoriaMetrics cluster's ``isPartial`` (:data:`VM_PARTIAL`). What is missing is not said
    per series, so the whole answer counts as partial."""
    return tuple(w for w in warnings if not w.startswith(_EVALUATION_NOTES))


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


@contextlib.contextmanager
def paused_gc() -> Iterator[None]:
    """No cyclic garbage collection inside the block.

    Meant for synchronous code; :meth:`~scaler.sources.prometheus.PrometheusSource.read`
    also holds it across its awaits (other tasks then run without cyclic collection for
    that long). A nested block leaves the collector paused; when the blocks of two tasks
    overlap, it runs again once the one that paused it ends.

    Decoding and splitting an answer allocate a few hundred thousand containers that all
    survive it; each 700 allocations start a collection, and the full ones walk the whole
    heap, which made up a quarter of the controller's CPU per cycle at 1,000 targets. The
    block creates no cycles, so nothing is left for the collector; it runs again after.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def decode_json(content: bytes) -> Any:
    """The JSON document in ``content``, as :func:`json.loads` reads it, decoded without
    garbage collection (:func:`paused_gc`).

    Decoded by pydantic-core's parser (``from_json``), which keeps one copy of each repeated
    string: an answer names the same namespaces, label names and counters tens of thousands
    of times, so the decoded answer holds about a third less memory, and decoding takes
    about half the time. Content it refuses (not UTF-8, such as UTF-16, or a lone surrogate
    escape) is read by :func:`json.loads`, which decides: the same documents are read, with
    the same values, as by the standard decoder alone.

    Raises:
        ValueError: the content is not JSON (:class:`json.JSONDecodeError`, or
            :class:`UnicodeDecodeError` for bytes of no Unicode encoding).
    """
    with paused_gc():
        try:
            return pydantic_core.from_json(content, cache_strings="all")
        except ValueError:
            return json.loads(content)


def _fast_value(raw: object) -> float | None:
    """``raw`` as a finite float when it is a plain decimal number, else None (then
    :func:`parse_sample_value` decides: NaN, infinities and malformed values)."""
    if raw.__class__ is not str or not raw or raw.strip(_NUMBER_CHARS):
        return None
    try:
        value = float(raw)
    except ValueError:
        return None
    return value if value - value == 0.0 else None  # finite: inf - inf and NaN are NaN


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
    fast = _fast_value(raw)
    if fast is not None:
        return fast
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
        is not ``[timestamp, "number"]``) and the ``warnings`` Prometheus attached. A
        well-formed series' label map is the body's own dict (not copied: the body is
        decoded for this call only); its value is what :func:`parse_sample_value` returns.

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
    append = out.append
    for i, item in enumerate(result):
        # The usual series first, with as few steps as can be (10^4-10^5 per answer): a plain
        # label map of strings and [timestamp, "finite number"]. Anything else, and every
        # special or malformed value, takes the full checks below.
        if item.__class__ is dict:
            metric = item.get("metric")
            value = item.get("value")
            if (
                metric.__class__ is dict
                and value.__class__ is list
                and len(value) == 2
                and value[0].__class__ in _TIMESTAMP_TYPES
                and _STR_ONLY.issuperset(map(type, metric))
                and _STR_ONLY.issuperset(map(type, metric.values()))
            ):
                raw = value[1]  # _fast_value, inlined: it runs once per series
                if raw.__class__ is str and raw and not raw.strip(_NUMBER_CHARS):
                    try:
                        number = float(raw)
                    except ValueError:
                        pass
                    else:
                        if number - number == 0.0:
                            append((metric, number))
                            continue
        _checked_series(i, item, out, bad)
    warnings = body.get("warnings") or []
    said = tuple(str(w) for w in warnings) if isinstance(warnings, list) else ()
    if body.get("isPartial") is True:  # VictoriaMetrics cluster, -search.denyPartialResponse off
        said += (VM_PARTIAL,)
    return out, bad, said


def _checked_series(i: int, item: object, out: list[Series], bad: list[BadSeries]) -> None:
    """Append result item ``i`` to ``out``, or to ``bad`` with what is wrong with it."""
    if not isinstance(item, dict):
        bad.append(BadSeries({}, f"result[{i}] is not an object"))
        return
    metric = item.get("metric")
    value = item.get("value")
    # map(type, ...) keeps the check in C: answers carry 10^4-10^5 series.
    if not isinstance(metric, dict) or not (
        _STR_ONLY.issuperset(map(type, metric)) and _STR_ONLY.issuperset(map(type, metric.values()))
    ):
        bad.append(BadSeries(_string_labels(metric), f"result[{i}].metric is not a label map"))
        return
    if (
        not isinstance(value, list)
        or len(value) != 2
        or isinstance(value[0], bool)
        or not isinstance(value[0], int | float)
    ):
        bad.append(BadSeries(dict(metric), f'result[{i}].value is not [timestamp, "value"]'))
        return
    try:
        out.append((dict(metric), parse_sample_value(value[1])))
    except ValueError as err:
        bad.append(BadSeries(dict(metric), f"result[{i}]: {err}"))


def _string_labels(metric: object) -> dict[str, str]:
    """The string-valued labels of a label map that is not entirely one."""
    if not isinstance(metric, dict):
        return {}
    return {k: v for k, v in metric.items() if isinstance(k, str) and isinstance(v, str)}


def short_detail(text: str) -> str:
    """``text`` masked, on one line, cut to 300 characters (a detail for logs and outcomes):
    see :func:`~scaler.config.secrets.shortened` (a secret is masked before the cut)."""
    return shortened(text, _DETAIL_MAX)


def cause_detail(text: str) -> str:
    """A backend's error message as :func:`short_detail` gives it, except that a longer one
    keeps its start and its end, with ``...`` between: the end is the cause.

    Backends wrap errors outer to inner (Go's ``outer: inner: cause``), and what makes a
    message long is the query it echoes, sometimes twice (VictoriaMetrics: ``error when
    executing query="<query>" ...: cannot execute "<query>": unknown func
    "histogram_count"``). Cut at 300 from the start, the cause was the part lost. Masking
    comes before the cut (:func:`~scaler.config.secrets.shortened`)."""
    flat = shortened(text, len(text) + 1)  # masked, on one line
    if len(flat) <= _DETAIL_MAX:
        return flat
    head = shortened(flat, _DETAIL_HEAD)  # ends in '...' (or '***...' in a secret's start)
    return f"{head} {flat[-(_DETAIL_MAX - _DETAIL_HEAD - 1) :].lstrip()}"


def http_status_text(status_code: int) -> str:
    """``401 Unauthorized``: the code with its standard reason phrase (RFC 9110), when known."""
    try:
        return f"{status_code} {http.HTTPStatus(status_code).phrase}"
    except ValueError:
        return str(status_code)


def error_answer_detail(status_code: int, text: str) -> str:
    """What an error answer of Prometheus' HTTP API says, on one line, the same for every
    command: ``errorType: error (HTTP 422)`` for the API's own error body, else
    ``HTTP 401 Unauthorized: <the body>`` (a proxy's page, a plain-text refusal)."""
    try:
        body = json.loads(text)
    except ValueError:
        body = None
    if isinstance(body, dict) and body.get("status") == "error":
        return cause_detail(
            f"{body.get('errorType', '?')}: {body.get('error', '')} (HTTP {status_code})"
        )
    return f"HTTP {http_status_text(status_code)}: {short_detail(text) or '-'}"


def answer_problem(
    status_code: int, body: Any, text: Callable[[], str]
) -> tuple[SignalStatus, str] | None:
    """What is wrong with an HTTP answer to a query of Prometheus' API, the same for every
    command, or None for a success: Prometheus' own error (``query_error``), another HTTP
    error status (``http_error``), or a body that is not the API's (``bad_response``, e.g. a
    proxy's login page or a web server's welcome page: the URL or its path prefix is wrong).

    Args:
        status_code: the HTTP status.
        body: the decoded JSON body, None when it was not JSON.
        text: the body as text (called only for a problem, so a success is not decoded twice).
    """
    is_prom = isinstance(body, dict) and body.get("status") in ("success", "error")
    if is_prom and body["status"] == "error":
        # Prometheus' own error (400 bad_data, 422 execution, 503 timeout/canceled...).
        return SignalStatus.QUERY_ERROR, error_answer_detail(status_code, text())
    if not 200 <= status_code < 300:
        return SignalStatus.HTTP_ERROR, error_answer_detail(status_code, text())
    if not is_prom:
        return SignalStatus.BAD_RESPONSE, not_prometheus_detail(text())
    return None


def not_prometheus_detail(text: str) -> str:
    """The detail of a ``bad_response``: a body (``text``) that is not Prometheus' API."""
    return f"not a Prometheus API answer: {short_detail(text) or '(empty body)'}"


class AnswerError(Exception):
    """A query failed (see :func:`answer_problem`); the fields of a failed outcome, so that
    the message is built as every command builds it
    (:func:`~scaler.sources.prometheus.check.problem_line`)."""

    def __init__(self, status: SignalStatus, detail: str, http_status: int | None = None) -> None:
        super().__init__(f"{status}: {detail}")
        self.status = status
        self.detail = detail
        self.http_status = http_status
