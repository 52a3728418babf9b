"""What the query backend supports, asked once by every command that reads it.

Prometheus-compatible backends differ in the functions they know: VictoriaMetrics' MetricsQL
has no ``histogram_count`` (VictoriaMetrics issue 5346; ``histogram_fraction`` came in
1.137), Prometheus before 2.40 has no native-histogram functions. A query that names an
unknown function fails as a whole, so the functions only some backends have are asked about
once, with :data:`NATIVE_HISTOGRAM_PROBE`, and every query is built from the answer
(:func:`~scaler.sources.promql.build_query_plan`'s ``native_histograms``): the controller
(``run``, ``recommend``: :class:`~scaler.sources.prometheus.PrometheusSource`) and the
backtest (:class:`~scaler.backtest.history.PrometheusRangeClient`) ask the same question and
read its answer with :func:`native_histograms_from`. The dashboards use none of these
functions (a test pins that), so they need no question.
"""

from __future__ import annotations

import re

from scaler.core.signals import SignalStatus

__all__ = [
    "NATIVE_HISTOGRAM_FUNCTIONS",
    "NATIVE_HISTOGRAM_PROBE",
    "OPTIONAL_FUNCTIONS",
    "lacked_function",
    "native_histograms_from",
]

#: The native-histogram functions the TTFT queries use beside ``histogram_quantile`` (which
#: every backend has, for classic histograms too).
NATIVE_HISTOGRAM_FUNCTIONS: tuple[str, ...] = ("histogram_count", "histogram_fraction")
#: Every function a query of vllm-scaler may use that some Prometheus-compatible backend lacks.
OPTIONAL_FUNCTIONS: tuple[str, ...] = NATIVE_HISTOGRAM_FUNCTIONS
#: One instant query naming each native-histogram function: a backend that lacks any of them
#: refuses the whole expression, naming it; one that has them answers an empty vector.
NATIVE_HISTOGRAM_PROBE = "histogram_count(vector(0)) or histogram_fraction(0, 1, vector(0))"

# Prometheus, Thanos, Mimir: 'unknown function with name "f"'; MetricsQL: 'unknown func "f"';
# others: 'function "f" is not supported'. Not the function's name alone: VictoriaMetrics
# echoes the query in every error, a timeout of the probe included.
_LACKS = (
    re.compile(r'unknown func(?:tion)?(?: with name)? \\?"(?P<name>\w+)\\?"'),
    re.compile(r'func(?:tion)? \\?"?(?P<name>\w+)\\?"? (?:is )?(?:not supported|unsupported)'),
)


def lacked_function(detail: str) -> str | None:
    """The function a backend's error says it does not know (``histogram_count`` in
    VictoriaMetrics' ``unknown func "histogram_count"`` or Prometheus' ``unknown function
    with name "histogram_count"``), or None when the error says no such thing."""
    for pattern in _LACKS:
        m = pattern.search(detail)
        if m is not None:
            return m["name"]
    return None


def native_histograms_from(status: SignalStatus, detail: str) -> bool | None:
    """Whether the backend has the native-histogram functions, from the answer to
    :data:`NATIVE_HISTOGRAM_PROBE`: True on a success, False on a query error that names one
    of them as unknown, None when the answer says neither (an outage, a refusal: ask again)."""
    if status is SignalStatus.OK:
        return True
    if status is SignalStatus.QUERY_ERROR and lacked_function(detail) is not None:
        return False
    return None
