"""Property-based tests of the Prometheus answer parsing: any answer gives readings with a
named status (never a traceback, never an unusable value passed on as usable)."""

from __future__ import annotations

import asyncio
import json
import math
from typing import Any
from urllib.parse import parse_qs

import httpx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scaler.core.signals import SignalStatus
from scaler.sources.prometheus import PrometheusSource, parse_sample_value
from scaler.sources.promql import (
    HISTOGRAM_LABEL,
    NATIVE_PART_LABEL,
    POD_GROUP_LABEL,
    SELECTOR_LABEL,
    TARGET_LABEL,
    THROUGHPUT_METRICS,
    QueryKind,
    build_query_plan,
)
from tests.support.fakeprom import snapshot, target

TARGET = target()
PODS = ["pod-0", "pod-1", "pod-2"]
SNAP = snapshot(PODS, terminating=["pod-9"], not_ready=["pod-8"])
KINDS = {q: k for k, q in build_query_plan([TARGET], rate_window_seconds=60).queries.items()}

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=12),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=10,
)
sample_strings = st.one_of(
    st.sampled_from(
        ["NaN", "+Inf", "-Inf", "Inf", "nan", "inf", "1e400", "-0", "0", "1_0", " 1", "0x10", ""]
    ),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.text(max_size=10),
)


@settings(max_examples=500)
@given(raw=st.one_of(json_values, sample_strings))
def test_parse_sample_value_gives_a_float_or_a_value_error(raw: Any) -> None:
    try:
        value = parse_sample_value(raw)
    except ValueError as err:
        assert "sample value" in str(err)
        return
    assert isinstance(value, float)
    if isinstance(raw, str) and raw not in ("NaN", "+Inf", "-Inf", "Inf"):
        assert math.isfinite(value)


def _labels(kind: QueryKind) -> st.SearchStrategy[dict[str, str]]:
    tag = {TARGET_LABEL: TARGET.key} if not kind.per_pod else {SELECTOR_LABEL: "s0"}
    return st.fixed_dictionaries(
        {k: st.just(v) for k, v in tag.items()},
        optional={
            "pod": st.sampled_from([*PODS, "pod-8", "pod-9", "gone", ""]),
            "namespace": st.sampled_from(["llm", "other", ""]),
            "__name__": st.sampled_from(
                ["vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc", "x"]
            ),
            HISTOGRAM_LABEL: st.sampled_from(["classic", "native", "recorded", "x"]),
            "le": st.sampled_from(["0.5", "1.0", "+Inf", "x", ""]),
            NATIVE_PART_LABEL: st.sampled_from(["quantile", "count", "fraction", "x"]),
            POD_GROUP_LABEL: st.sampled_from(["pod", "other"]),
            "scaler_metric": st.sampled_from([*THROUGHPUT_METRICS, "x"]),
        },
    )


def _vector(kind: QueryKind) -> st.SearchStrategy[dict[str, Any]]:
    item = st.fixed_dictionaries(
        {
            "metric": _labels(kind),
            "value": st.tuples(st.just(1718000000.0), sample_strings).map(list),
        }
    )
    return st.fixed_dictionaries(
        {
            "status": st.just("success"),
            "data": st.fixed_dictionaries(
                {"resultType": st.just("vector"), "result": st.lists(item, max_size=5)}
            ),
        }
    )


# Per query: a well-formed vector with arbitrary labels and values, any JSON, or any bytes.
answers = st.fixed_dictionaries(
    {
        kind: st.tuples(
            st.sampled_from([200, 200, 200, 400, 422, 500, 503]),
            st.one_of(
                _vector(kind).map(json.dumps),
                json_values.map(json.dumps),
                st.binary(max_size=40).map(lambda b: b.decode("latin-1")),
            ),
        )
        for kind in QueryKind
    }
)


def _read(replies: dict[QueryKind, tuple[int, str]]) -> Any:
    def handler(request: httpx.Request) -> httpx.Response:
        # the second round's TTFT query is built from the first round's answers
        query = parse_qs(request.content.decode())["query"][0]
        kind = KINDS.get(query, QueryKind.TTFT_BUCKETS)
        status, body = replies[kind]
        return httpx.Response(status, content=body.encode("utf-8", "surrogatepass"))

    async def go() -> Any:
        async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as http:
            source = PrometheusSource(
                http, base_url="http://prom", timeout_seconds=5, rate_window_seconds=60
            )
            return await source.read([TARGET], {TARGET.key: SNAP})

    return asyncio.run(go())


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(replies=answers)
def test_any_answer_gives_named_statuses_and_usable_values_only_when_usable(
    replies: dict[QueryKind, tuple[int, str]],
) -> None:
    result = _read(replies)
    assert set(result.queries) >= {k for k in KINDS.values() if k.per_pod}
    for outcome in result.queries.values():
        assert outcome.status in SignalStatus
        if not outcome.ok:
            assert outcome.detail  # every failure says why
    readings = result.targets[TARGET.key].signals
    assert set(readings) == set(TARGET.signals.queried())  # capacity: from the throughput
    for r in readings.values():
        if r.status.usable_for_scale_up:
            assert r.value is not None and math.isfinite(r.value) and r.value >= 0
        else:
            assert r.value is None and r.detail
        if r.status is SignalStatus.OK and r.name.per_pod:
            assert r.pods_missing == 0 and r.pods_with_data == len(PODS)
    tp = result.targets[TARGET.key].throughput
    assert tp.status in SignalStatus and (tp.status is SignalStatus.OK or tp.detail)
    for rates in tp.pods.values():
        for v in (rates.requests_per_second, rates.tokens_per_second):
            assert math.isfinite(v) and v >= 0
    assert result.targets[TARGET.key].stalled == {}  # one read is never a stall
