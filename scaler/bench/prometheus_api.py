"""The emulated Prometheus behind the real :class:`~scaler.sources.prometheus.PrometheusSource`.

The benchmark does not re-implement how vllm-scaler reads its signals: it runs the production
source (query plan, answer parsing, per-pod filtering by readiness, ok/idle/nan/partial
statuses) against an ``httpx.MockTransport`` that answers each of the plan's instant queries
from a :class:`~scaler.bench.tsdb.Tsdb`, in the JSON shape of ``/api/v1/query``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qs

import httpx

from scaler.bench.promql import histogram_quantile
from scaler.bench.tsdb import Tsdb
from scaler.config.policy import TargetPolicy
from scaler.sources.promql import (
    KV_METRICS,
    METRIC_LABEL,
    SELECTOR_LABEL,
    TARGET_LABEL,
    THROUGHPUT_METRICS,
    QueryKind,
    build_query_plan,
)

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
    quantile = target.signals.ttft_p95.quantile

    def answer(kind: QueryKind, t: float) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        if kind is QueryKind.THROUGHPUT:
            for pod, triple in sorted(tsdb.counter_rates(t, rate_window_seconds).items()):
                for metric, v in zip(THROUGHPUT_METRICS, triple, strict=True):
                    labels = {"namespace": namespace, "pod": pod, SELECTOR_LABEL: gid}
                    labels[METRIC_LABEL] = metric
                    out.append({"metric": labels, "value": [t, _value(v)]})
            return out
        if kind.per_pod:
            for pod, s in sorted(tsdb.instant(t).items()):
                labels = {"namespace": namespace, "pod": pod, SELECTOR_LABEL: gid}
                if kind is QueryKind.WAITING:
                    v = s.waiting
                elif kind is QueryKind.RUNNING:
                    v = s.running
                else:
                    labels["__name__"] = KV_METRICS[0]
                    v = s.kv_usage
                out.append({"metric": labels, "value": [t, _value(v)]})
            return out
        rates = tsdb.ttft_rates(t, rate_window_seconds)
        if rates is None:
            return out
        v = histogram_quantile(quantile, rates[0]) if kind is QueryKind.TTFT_QUANTILE else rates[1]
        out.append({"metric": {TARGET_LABEL: target.key}, "value": [t, _value(v)]})
        return out

    def handler(request: httpx.Request) -> httpx.Response:
        form = parse_qs(request.content.decode())
        query = form.get("query", [""])[0]
        kind = kinds.get(query)
        if kind is None:
            body = {"status": "error", "errorType": "bad_data", "error": "unknown query"}
            return httpx.Response(400, content=json.dumps(body).encode())
        data = {"resultType": "vector", "result": answer(kind, clock())}
        return httpx.Response(200, content=json.dumps({"status": "success", "data": data}).encode())

    return httpx.MockTransport(handler)
