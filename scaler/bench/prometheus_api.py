"""The emulated Prometheus behind the real :class:`~scaler.sources.prometheus.PrometheusSource`.

The benchmark does not re-implement how vllm-scaler reads its signals: it runs the production
source (query plan, answer parsing, per-pod filtering by readiness, ok/idle/nan/partial
statuses, the TTFT quantile computed from bucket rates) against an ``httpx.MockTransport``
that answers each of the plan's instant queries from a :class:`~scaler.bench.tsdb.Tsdb`, in
the JSON shape of ``/api/v1/query``: the per-pod queries by their exact text, and the second
round's TTFT query (built from their answers) by the pods it names, with how many histograms
have each bound (all: the replicas share one layout). The emulated Prometheus has classic
histograms and no recording rules.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qs

import httpx

from scaler.bench.tsdb import Tsdb
from scaler.config.policy import TargetPolicy
from scaler.sources.prometheus.backend import NATIVE_HISTOGRAM_PROBE
from scaler.sources.promql import (
    COST_METRICS,
    HISTOGRAM_LABEL,
    KV_METRICS,
    LAYOUT_LABEL,
    LAYOUT_SERIES,
    METRIC_LABEL,
    PREFIX_CACHE_HITS_METRICS,
    SELECTOR_LABEL,
    TARGET_LABEL,
    THROUGHPUT_METRICS,
    TTFT_BUCKET_METRIC,
    HistogramKind,
    QueryKind,
    asleep_group,
    build_query_plan,
)

# The pod alternation of the TTFT query's selector, as a PromQL string's content.
_PODS_RE = re.compile(r'pod=~"((?:[^"\\]|\\.)*)"')

__all__ = ["prometheus_transport"]


def _value(x: float) -> str:
    # Prometheus writes sample values as strings: "NaN", "+Inf", or a decimal number.
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "+Inf" if x > 0 else "-Inf"
    return repr(float(x))


def prometheus_transport(
    tsdb: Tsdb,
    target: TargetPolicy,
    *,
    namespace: str,
    rate_window_seconds: float,
    clock: Callable[[], float],
) -> httpx.MockTransport:
    """An httpx transport answering the instant queries of ``target``'s plan from ``tsdb``.

    Args:
        tsdb: the scraped series (all of them belong to ``target``'s workload).
        target: the one target the source reads.
        namespace: the pods' ``namespace`` label.
        rate_window_seconds: ``rate()`` window W of the TTFT and throughput queries, seconds.
        clock: the virtual "now", seconds (the evaluation time of each query).

    An unknown query is answered with Prometheus' ``bad_data`` error (HTTP 400).
    """
    plan = build_query_plan([target], rate_window_seconds=rate_window_seconds)
    kinds = {q: k for k, q in plan.queries.items()}
    gid = plan.selector_group[target.key]

    def per_pod(kind: QueryKind, t: float) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        if kind is QueryKind.TTFT_RATE:
            for pod, rate in sorted(tsdb.ttft_count_rates(t, rate_window_seconds).items()):
                labels = {"namespace": namespace, "pod": pod, SELECTOR_LABEL: gid}
                labels[HISTOGRAM_LABEL] = HistogramKind.CLASSIC
                out.append({"metric": labels, "value": [t, _value(rate)]})
            return out
        if kind is QueryKind.THROUGHPUT:
            counters = (*THROUGHPUT_METRICS, PREFIX_CACHE_HITS_METRICS[0], *COST_METRICS)
            for pod, rates in sorted(tsdb.counter_rates(t, rate_window_seconds).items()):
                for metric, v in zip(counters, rates, strict=True):
                    labels = {"namespace": namespace, "pod": pod, SELECTOR_LABEL: gid}
                    labels[METRIC_LABEL] = metric
                    out.append({"metric": labels, "value": [t, _value(v)]})
            return out
        for pod, s in sorted(tsdb.instant(t).items()):
            labels = {"namespace": namespace, "pod": pod, SELECTOR_LABEL: gid}
            if kind is QueryKind.WAITING:
                v = s.waiting
            elif kind is QueryKind.RUNNING:
                v = s.running
                asleep = {**labels, SELECTOR_LABEL: asleep_group(gid)}
                out.append({"metric": asleep, "value": [t, _value(s.asleep)]})
            else:
                labels["__name__"] = KV_METRICS[0]
                v = s.kv_usage
            out.append({"metric": labels, "value": [t, _value(v)]})
        return out

    def buckets(query: str, t: float) -> list[dict[str, Any]]:
        """``sum by (le) (rate(bucket{pods}[W]))`` of the pods the query names, tagged."""
        m = _PODS_RE.search(query)
        if m is None:
            return []
        pattern = re.compile(m.group(1).replace('\\"', '"').replace("\\\\", "\\"))
        pods = {p for p in tsdb.series if pattern.fullmatch(p)}
        rates = tsdb.ttft_rates(t, rate_window_seconds, pods)
        if rates is None:
            return []
        out: list[dict[str, Any]] = [
            {
                "metric": {TARGET_LABEL: target.key, "le": _value(le)},
                "value": [t, _value(v)],
            }
            for le, v in rates
        ]
        if f"count by (le) (rate({TTFT_BUCKET_METRIC}" in query:
            # how many histograms have each bound: every replica has the one layout
            n = float(tsdb.ttft_histograms(t, rate_window_seconds, pods))
            labels: dict[str, str] = {TARGET_LABEL: target.key, LAYOUT_LABEL: LAYOUT_SERIES}
            out += [
                {"metric": {**labels, "le": _value(le)}, "value": [t, _value(n)]} for le, _ in rates
            ]
        return out

    def answer(query: str, t: float) -> list[dict[str, Any]] | None:
        if query == NATIVE_HISTOGRAM_PROBE:  # the source's probe: the functions exist
            return []
        kind = kinds.get(query)
        if kind is not None:
            return per_pod(kind, t)
        if TTFT_BUCKET_METRIC in query:
            return buckets(query, t)
        return None

    def handler(request: httpx.Request) -> httpx.Response:
        form = parse_qs(request.content.decode())
        query = form.get("query", [""])[0]
        result = answer(query, clock())
        if result is None:
            body = {"status": "error", "errorType": "bad_data", "error": "unknown query"}
            return httpx.Response(400, content=json.dumps(body).encode())
        data = {"resultType": "vector", "result": result}
        return httpx.Response(200, content=json.dumps({"status": "success", "data": data}).encode())

    return httpx.MockTransport(handler)
