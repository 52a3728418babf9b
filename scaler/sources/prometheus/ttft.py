"""TTFT's instance of the latency histograms' two rounds (:mod:`.histograms`), under the names
the backtest and the tests use: :func:`plan_ttft`, :func:`read_ttft`, :func:`history_ttft_plan`
and :func:`ttft_metric_name` are :mod:`.histograms`' functions for the ``ttft_p95`` spec."""

from __future__ import annotations

from functools import partial

from scaler.config.vocabulary import SignalName
from scaler.sources.prometheus.histograms import (
    MIN_SCRAPES_PER_WINDOW,
    HistogramPlan,
    HistogramRoute,
    histogram_metric_name,
    history_histogram_plan,
    plan_histogram,
    read_histogram,
)
from scaler.sources.promql import HistogramKind

__all__ = [
    "MIN_SCRAPES_PER_WINDOW",
    "TtftPlan",
    "TtftRoute",
    "history_ttft_plan",
    "plan_ttft",
    "read_ttft",
    "ttft_metric_name",
]

_SPEC = SignalName.TTFT_P95.spec
#: TTFT's second round and each target's route (:class:`.histograms.HistogramPlan`).
TtftPlan = HistogramPlan
#: How one target's TTFT is read (:class:`.histograms.HistogramRoute`).
TtftRoute = HistogramRoute


def ttft_metric_name(representation: HistogramKind | None) -> str:
    """The TTFT metric as reported: the classic bucket series, or the native histogram's own
    name (:func:`.histograms.histogram_metric_name`)."""
    return histogram_metric_name(_SPEC, representation)


#: TTFT's second round (:func:`.histograms.plan_histogram` of the ``ttft_p95`` spec).
plan_ttft = partial(plan_histogram, _SPEC)
#: TTFT's question for history (:func:`.histograms.history_histogram_plan`).
history_ttft_plan = partial(history_histogram_plan, _SPEC)
#: TTFT's reading of one target (:func:`.histograms.read_histogram`).
read_ttft = partial(read_histogram, _SPEC)
