"""Case files of ../shared/cases, at the source level, against a fake Prometheus over HTTP.

Each test feeds the case's Prometheus answers (``R[...]``) through ``PrometheusSource.read``
and asserts the readings the decision core will get. The replica decisions of the cases are
the core's tests; here only what the source must name and count.
"""

from __future__ import annotations

import math
import socket
from collections.abc import Callable

from scaler.config.vocabulary import SignalName
from scaler.core.signals import SignalStatus
from scaler.sources.prometheus import DropReason, PrometheusSource, check_configured_queries
from scaler.sources.promql import QueryKind
from tests.support.fakeprom import (
    FakePrometheus,
    R,
    Reply,
    Ttft,
    case_file,
    fleet,
    kv,
    per_pod,
    pods,
    query_timed_out,
    sample,
    snapshot,
    target,
    ttft_answers,
)

Q = SignalName.QUEUE_DEPTH
KV = SignalName.KV_CACHE_USAGE
TTFT = SignalName.TTFT_P95
KEY = "llm/Deployment/vllm"
SourceFactory = Callable[..., PrometheusSource]


async def test_case_01_empty_results_are_empty_never_zero(
    fake_prom: FakePrometheus, make_source: SourceFactory
) -> None:
    """Case 01: an empty answer is 'empty', never a value of zero."""
    case_file("01-empty-result-is-not-zero.md")
    # every query answers R[] (the fake's default) while 6 pods are ready
    result = await make_source().read([target()], {KEY: snapshot(pods(6))})
    readings = result.readings(KEY)
    assert set(readings) == {Q, KV, TTFT}
    for r in readings.values():
        assert r.status is SignalStatus.EMPTY, r
        assert r.value is None
        assert not r.status.usable_for_scale_up
    assert readings[Q].pods_missing == 6
    assert all(o.ok and o.series == 0 for o in result.queries.values())
    assert result.targets[KEY].pods_unscraped == frozenset(pods(6))


async def test_case_02a_nan_queue_is_nan(
    fake_prom: FakePrometheus, make_source: SourceFactory
) -> None:
    """Case 02a: a NaN sample is 'nan', never a number."""
    case_file("02-nan-inf-overflow.md")
    fake_prom.set(waiting=R(sample("pod-0", "NaN")), running=per_pod({"pod-0": "1"}))
    result = await make_source().read([target()], {KEY: snapshot(pods(4))})
    r = result.readings(KEY)[Q]
    assert r.status is SignalStatus.NAN
    assert r.value is None
    assert "pod-0" in r.detail


async def test_case_02b_inf_kv_is_inf(
    fake_prom: FakePrometheus, make_source: SourceFactory
) -> None:
    """Case 02b: a +Inf sample is 'inf', never a number."""
    case_file("02-nan-inf-overflow.md")
    fake_prom.set(kv_cache=kv({"pod-0": "+Inf"}))
    r = (await make_source().read([target()], {KEY: snapshot(pods(4))})).readings(KEY)[KV]
    assert r.status is SignalStatus.INF
    assert r.value is None


async def test_case_02_negative_and_minus_inf(
    fake_prom: FakePrometheus, make_source: SourceFactory
) -> None:
    """Case 02: a negative or -Inf sample is invalid ('negative', 'inf')."""
    fake_prom.set(
        waiting=per_pod({"pod-0": "1", "pod-1": "-1"}),
        kv_cache=kv({"pod-0": "-Inf", "pod-1": "0.5"}),
    )
    readings = (await make_source().read([target()], {KEY: snapshot(pods(2))})).readings(KEY)
    assert readings[Q].status is SignalStatus.NEGATIVE
    assert "pod-1" in readings[Q].detail
    assert readings[KV].status is SignalStatus.INF


async def test_case_02c_huge_finite_value_read_exactly(
    fake_prom: FakePrometheus, make_source: SourceFactory
) -> None:
    """Case 02c: a huge finite sample is read exactly, as a float."""
    case_file("02-nan-inf-overflow.md")
    fake_prom.set(
        waiting=R(sample("pod-0", "214748365")),
        running=R(sample("pod-0", "1")),
        **ttft_answers("214748365", "4"),
    )
    readings = (await make_source().read([target()], {KEY: snapshot(["pod-0"])})).readings(KEY)
    assert readings[Q].status is SignalStatus.OK
    assert readings[Q].value == 214748365.0
    assert isinstance(readings[Q].value, float)
    assert readings[TTFT].status is SignalStatus.OK
    assert readings[TTFT].value == 214748365.0


async def test_case_02c_series_without_pod_label_is_dropped_not_counted(
    fake_prom: FakePrometheus, make_source: SourceFactory
) -> None:
    """Case 02c: a per-pod series without a pod label is dropped and counted, not read as load."""
    # The case's literal {"metric":{}} on a per-pod query cannot be matched to a pod.
    fake_prom.set(waiting=R({"metric": {}, "value": [1718000000, "214748365"]}))
    result = await make_source().read([target()], {KEY: snapshot(["pod-0"])})
    assert result.readings(KEY)[Q].status is SignalStatus.EMPTY
    dropped = result.targets[KEY].dropped
    assert [d.reason for d in dropped] == [DropReason.NO_POD_LABEL]


async def test_case_03_idle_ttft_nan_with_zero_rate_is_idle(
    fake_prom: FakePrometheus, make_source: SourceFactory
) -> None:
    """Case 03: a NaN TTFT with a request rate of exactly 0 is 'idle' (valid)."""
    case_file("03-idle-ttft-nan.md")
    four = pods(4)
    fake_prom.set(**fleet(four, waiting="0", running="0", kv_cache="0.0"))
    readings = (await make_source().read([target()], {KEY: snapshot(four)})).readings(KEY)
    assert readings[TTFT].status is SignalStatus.IDLE
    assert readings[TTFT].status.usable_for_scale_down
    assert readings[TTFT].value == 0.0
    assert readings[Q].status is SignalStatus.OK and readings[Q].value == 0.0
    assert readings[KV].status is SignalStatus.OK and readings[KV].value == 0.0


async def test_case_03_ttft_nan_while_requests_flow_is_nan(
    fake_prom: FakePrometheus, make_source: SourceFactory
) -> None:
    """Case 03: a NaN TTFT while requests flow is 'nan' (invalid)."""
    case_file("03-idle-ttft-nan.md")
    fake_prom.set(running=per_pod(dict.fromkeys(pods(4), "1")), **ttft_answers("NaN", "3.2"))
    r = (await make_source().read([target()], {KEY: snapshot(pods(4))})).readings(KEY)[TTFT]
    assert r.status is SignalStatus.NAN
    assert not r.status.usable_for_scale_down
    assert "3.2" in r.detail


async def test_case_03_ttft_nan_with_unknown_rate_is_nan(
    fake_prom: FakePrometheus, make_source: SourceFactory
) -> None:
    """Case 03: with the request rate unknown (its query failed), TTFT is that failure."""
    fake_prom.set(ttft_rate=Reply("boom", status=500))
    r = (await make_source().read([target()], {KEY: snapshot(pods(4))})).readings(KEY)[TTFT]
    assert r.status is SignalStatus.HTTP_ERROR
    assert not r.status.usable_for_scale_up
    assert r.detail.startswith("ttft_rate query: HTTP 500")


async def test_case_04_connection_refused_is_transport(http_client: object) -> None:
    """Case 04: a refused connection is 'transport' for every signal, never zero."""
    case_file("04-outage-then-partial.md")
    import httpx

    with socket.socket() as s:  # a port with nothing listening
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    async with httpx.AsyncClient() as client:
        source = PrometheusSource(
            client, base_url=f"http://127.0.0.1:{port}", timeout_seconds=2, rate_window_seconds=60
        )
        result = await source.read([target()], {KEY: snapshot(pods(9))})
    assert {o.status for o in result.queries.values()} == {SignalStatus.TRANSPORT}
    for r in result.readings(KEY).values():
        assert r.status is SignalStatus.TRANSPORT
        assert r.value is None


async def test_case_04_stalled_prometheus_is_timeout(
    fake_prom: FakePrometheus, make_source: SourceFactory
) -> None:
    """Case 04: a Prometheus that does not answer in time is 'timeout'."""
    case_file("04-outage-then-partial.md")
    for kind in QueryKind:
        fake_prom.answers[kind] = Reply(R(), stall=True)
    timeout = 1.0  # room for a loaded CI machine's event loop, short enough for the test
    result = await make_source(timeout_seconds=timeout).read([target()], {KEY: snapshot(pods(9))})
    assert {o.status for o in result.queries.values()} == {SignalStatus.TIMEOUT}
    assert {r.status for r in result.readings(KEY).values()} == {SignalStatus.TIMEOUT}
    # the signals' queries are asked at once, each bounded by the timeout: asked in turn,
    # each given up before the next, no two would be awaited together
    first_round = {QueryKind.WAITING, QueryKind.RUNNING, QueryKind.KV_CACHE, QueryKind.TTFT_RATE}
    assert first_round <= set(fake_prom.peak_in_flight)


async def test_case_04_single_series_after_restart_is_partial(
    fake_prom: FakePrometheus, make_source: SourceFactory
) -> None:
    """Case 04: one series for nine ready pods after a restart is 'partial'."""
    case_file("04-outage-then-partial.md")
    fake_prom.set(waiting=R(sample("pod-3", "0")), running=R(sample("pod-3", "0")))
    result = await make_source().read([target()], {KEY: snapshot(pods(9))})
    r = result.readings(KEY)[Q]
    assert r.status is SignalStatus.PARTIAL
    assert r.value == 0.0
    assert (r.pods_with_data, r.pods_missing) == (1, 8)
    assert not r.status.usable_for_scale_down
    assert result.targets[KEY].pods_missing[Q] == frozenset(pods(9)) - {"pod-3"}


async def test_case_05_query_error_keeps_error_text(
    fake_prom: FakePrometheus, make_source: SourceFactory
) -> None:
    """Case 05: a query error is 'query_error' and keeps Prometheus' error text."""
    case_file("05-one-signal-missing.md")
    five = pods(5)
    # requests flow: the bucket query is sent, and fails
    failing = {"ttft_rate": Ttft("1.0", "4"), "ttft_buckets": query_timed_out()}
    fake_prom.set(**fleet(five, waiting="0", kv_cache="0.10", ttft=failing))
    result = await make_source().read([target()], {KEY: snapshot(five)})
    readings = result.readings(KEY)
    assert readings[TTFT].status is SignalStatus.QUERY_ERROR
    assert "timeout: query timed out in expression evaluation" in readings[TTFT].detail
    assert result.queries[QueryKind.TTFT_BUCKETS].status is SignalStatus.QUERY_ERROR
    assert readings[Q].status is SignalStatus.OK and readings[Q].value == 0.0
    assert readings[KV].status is SignalStatus.OK
    assert math.isclose(readings[KV].value or 0, 0.5)
    assert readings[KV].pods_with_data == 5


async def test_case_07_old_kv_name_only_is_found_and_reported(
    fake_prom: FakePrometheus, make_source: SourceFactory
) -> None:
    """Case 07: the old KV-cache name alone is found and reported as the metric used."""
    case_file("07-renamed-kv-metric.md")
    four = pods(4)
    fake_prom.set(
        waiting=per_pod(dict(zip(four, ["2", "0", "1", "3"], strict=True))),
        running=per_pod(dict.fromkeys(four, "1")),
        kv_cache=kv(dict.fromkeys(four, "0.25"), name="vllm:gpu_cache_usage_perc"),
    )
    result = await make_source().read([target()], {KEY: snapshot(four)})
    readings = result.readings(KEY)
    assert readings[KV].status is SignalStatus.OK
    assert readings[KV].value == 1.0
    assert readings[KV].source_metric == "vllm:gpu_cache_usage_perc"
    assert result.targets[KEY].kv_metric == "vllm:gpu_cache_usage_perc"
    assert readings[Q].value == 6.0
    # both names are asked for in the one KV query, new name first
    kv_query = result.queries[QueryKind.KV_CACHE].query
    assert "vllm:kv_cache_usage_perc|vllm:gpu_cache_usage_perc" in kv_query


async def test_case_07_new_name_preferred_when_both_exported(
    fake_prom: FakePrometheus, make_source: SourceFactory
) -> None:
    """Case 07: when a pod exports both KV-cache names the new one is used."""
    fake_prom.set(
        kv_cache=R(
            sample("pod-0", "0.9", __name__="vllm:gpu_cache_usage_perc"),
            sample("pod-0", "0.3", __name__="vllm:kv_cache_usage_perc"),
            sample("pod-1", "0.2", __name__="vllm:gpu_cache_usage_perc"),
        )
    )
    result = await make_source().read([target()], {KEY: snapshot(pods(2))})
    r = result.readings(KEY)[KV]
    assert r.status is SignalStatus.OK
    assert math.isclose(r.value or 0, 0.5)  # pod-0 new name 0.3 + pod-1 old name 0.2
    assert r.source_metric == "vllm:kv_cache_usage_perc,vllm:gpu_cache_usage_perc"


async def test_case_07_neither_kv_name_while_scraped_is_absent(
    fake_prom: FakePrometheus, make_source: SourceFactory
) -> None:
    """Case 07: neither KV-cache name while pods are scraped is 'absent', logged as an error."""
    case_file("07-renamed-kv-metric.md")
    four = pods(4)
    fake_prom.set(
        waiting=per_pod(dict(zip(four, ["2", "0", "1", "3"], strict=True))),
        running=per_pod(dict.fromkeys(four, "1")),
    )
    source = make_source()
    result = await source.read([target()], {KEY: snapshot(four)})
    readings = result.readings(KEY)
    assert readings[KV].status is SignalStatus.ABSENT
    assert readings[KV].value is None
    assert result.targets[KEY].kv_metric == ""
    assert readings[Q].status is SignalStatus.OK and readings[Q].value == 6.0
    assert readings[TTFT].status is SignalStatus.ABSENT

    # the dry-run check fails loudly on it, naming the query
    problems = await check_configured_queries(source, [target()], {KEY: snapshot(four)})
    by_signal = {p.signal: p for p in problems}
    assert set(by_signal) == {KV, TTFT}
    assert by_signal[KV].status is SignalStatus.ABSENT
    assert "vllm:gpu_cache_usage_perc" in by_signal[KV].query
    assert " or " not in by_signal[KV].query  # this target's expression only
    assert str(by_signal[KV]) == (
        f"{KEY}: signal kv_cache_usage has no series (absent): its pods' "
        "vllm:num_requests_running series exist, so the metric of this signal is missing or "
        f"renamed; the query that returned nothing: {by_signal[KV].query}"
    )


async def test_case_07_dry_run_check_without_any_series(
    fake_prom: FakePrometheus, make_source: SourceFactory
) -> None:
    """Case 07: the start-up check names each configured query that returns no series."""
    case_file("07-renamed-kv-metric.md")
    problems = await check_configured_queries(make_source(), [target()], {KEY: snapshot(pods(2))})
    assert {(p.signal, p.status) for p in problems} == {
        (Q, SignalStatus.EMPTY),
        (KV, SignalStatus.EMPTY),
        (TTFT, SignalStatus.EMPTY),
    }
    by_signal = {p.signal: p.detail for p in problems}
    assert "none of its 2 pods (selector app=vllm in namespace llm)" in by_signal[Q]
    # both representations of the TTFT histogram are named
    assert "vllm:time_to_first_token_seconds_bucket" in by_signal[TTFT]
    assert "vllm:time_to_first_token_seconds (native histogram)" in by_signal[TTFT]


async def test_dry_run_check_passes_when_every_query_has_series(
    fake_prom: FakePrometheus, make_source: SourceFactory
) -> None:
    pod = "vllm-7d9f8-x2x2x"  # a pod the API lists for the target, ready or not
    fake_prom.set(**fleet([pod], waiting="1", kv_cache="0.1"))
    snaps = {KEY: snapshot([], not_ready=[pod])}
    assert await check_configured_queries(make_source(), [target()], snaps) == []
    other = {KEY: snapshot(["vllm-7d9f8-other"])}  # the series are not this target's pods
    problems = await check_configured_queries(make_source(), [target()], other)
    assert {p.signal for p in problems} == {Q, KV, TTFT}


async def test_case_11_terminating_pod_series_dropped_and_counted(
    fake_prom: FakePrometheus, make_source: SourceFactory
) -> None:
    """Case 11: the series of a terminating pod is dropped and counted."""
    case_file("11-stale-series-deleted-pods.md")
    fake_prom.set(waiting=per_pod({"pod-a": "0", "pod-b": "1", "pod-c": "30"}))
    snap = snapshot(["pod-a", "pod-b"], terminating=["pod-c"])
    result = await make_source().read([target()], {KEY: snap})
    r = result.readings(KEY)[Q]
    assert r.status is SignalStatus.OK
    assert r.value == 1.0
    assert r.pods_with_data == 2
    dropped = result.targets[KEY].dropped
    assert [(d.pod, d.reason, d.query) for d in dropped] == [
        ("pod-c", DropReason.TERMINATING, QueryKind.WAITING)
    ]


async def test_case_11_deleted_pod_series_dropped_and_counted(
    fake_prom: FakePrometheus, make_source: SourceFactory
) -> None:
    """Case 11: the series of a deleted pod is dropped and counted."""
    case_file("11-stale-series-deleted-pods.md")
    # pod-c no longer exists: the API listed it for the target a cycle ago, so its lingering
    # series are the target's gone pod's; other pods of the namespace are not this target's,
    # whatever their names (vllm-70b-0 fits a Deployment vllm's pod-name pattern).
    gone = "vllm-5c4d9-ccccc"
    fake_prom.set(
        waiting=per_pod({"pod-a": "0", "pod-b": "1", gone: "30", "vllm-70b-0": "9"}),
        kv_cache=kv({"pod-a": "0.1", "pod-b": "0.2", gone: "0.99", "vllm-70b-0": "0.9"}),
    )
    source = make_source()
    await source.read([target()], {KEY: snapshot(["pod-a", "pod-b"], terminating=[gone])})
    result = await source.read([target()], {KEY: snapshot(["pod-a", "pod-b"])})
    readings = result.readings(KEY)
    assert readings[Q].value == 1.0
    assert math.isclose(readings[KV].value or 0, 0.3)
    assert {(d.pod, d.reason, d.query) for d in result.targets[KEY].dropped} == {
        (gone, DropReason.GONE, QueryKind.WAITING),
        (gone, DropReason.GONE, QueryKind.KV_CACHE),
    }


async def test_case_11_not_ready_pod_series_dropped(
    fake_prom: FakePrometheus, make_source: SourceFactory
) -> None:
    """Case 11: the series of a pod that is not Ready is dropped."""
    fake_prom.set(waiting=per_pod({"pod-a": "2", "pod-new": "50"}))
    snap = snapshot(["pod-a"], not_ready=["pod-new"])
    result = await make_source().read([target()], {KEY: snap})
    assert result.readings(KEY)[Q].value == 2.0
    assert [d.reason for d in result.targets[KEY].dropped] == [DropReason.NOT_READY]


async def test_case_12_one_pod_without_series_is_partial(
    fake_prom: FakePrometheus, make_source: SourceFactory
) -> None:
    """Case 12: a ready pod without series makes a per-pod signal 'partial'."""
    case_file("12-one-pod-scrape-fails.md")
    fake_prom.set(
        waiting=per_pod({"pod-0": "25", "pod-1": "30", "pod-2": "28"}),
        running=per_pod({"pod-0": "4", "pod-1": "4", "pod-2": "4"}),
    )
    result = await make_source().read([target()], {KEY: snapshot(pods(4))})
    r = result.readings(KEY)[Q]
    assert r.status is SignalStatus.PARTIAL
    assert r.status.usable_for_scale_up and not r.status.usable_for_scale_down
    assert r.value == 83.0
    assert (r.pods_with_data, r.pods_missing) == (3, 1)
    assert result.targets[KEY].pods_missing[Q] == {"pod-3"}
    assert result.targets[KEY].pods_unscraped == {"pod-3"}


async def test_http_503_without_json_is_http_error(
    fake_prom: FakePrometheus, make_source: SourceFactory
) -> None:
    fake_prom.set(waiting=Reply("Service Unavailable", status=503))
    result = await make_source().read([target()], {KEY: snapshot(pods(2))})
    r = result.readings(KEY)[Q]
    assert r.status is SignalStatus.HTTP_ERROR
    assert "503" in r.detail
    assert result.queries[QueryKind.WAITING].status is SignalStatus.HTTP_ERROR
    assert result.readings(KEY)[KV].status is SignalStatus.EMPTY  # other queries unaffected


async def test_garbage_json_is_bad_response(
    fake_prom: FakePrometheus, make_source: SourceFactory
) -> None:
    fake_prom.set(
        waiting=Reply("{not json"),
        kv_cache=Reply({"status": "success", "data": {"resultType": "vector", "result": 3}}),
        ttft_rate=R({"metric": {"pod": "pod-0"}, "value": [1718000000, 0.5]}),  # not a string
        running=Reply({"hello": "world"}),
    )
    result = await make_source().read([target()], {KEY: snapshot(pods(2))})
    readings = result.readings(KEY)
    assert readings[Q].status is SignalStatus.BAD_RESPONSE
    assert readings[KV].status is SignalStatus.BAD_RESPONSE
    assert readings[TTFT].status is SignalStatus.BAD_RESPONSE
    assert result.queries[QueryKind.RUNNING].status is SignalStatus.BAD_RESPONSE


async def test_non_numeric_value_string_is_bad_response(
    fake_prom: FakePrometheus, make_source: SourceFactory
) -> None:
    fake_prom.set(waiting=per_pod({"pod-0": "3", "pod-1": "lots"}))
    r = (await make_source().read([target()], {KEY: snapshot(pods(2))})).readings(KEY)[Q]
    assert r.status is SignalStatus.BAD_RESPONSE
    assert "lots" in r.detail


async def test_no_ready_pods_is_empty(
    fake_prom: FakePrometheus, make_source: SourceFactory
) -> None:
    fake_prom.set(waiting=per_pod({"pod-0": "5"}))
    snap = snapshot([], not_ready=["pod-0"])
    r = (await make_source().read([target()], {KEY: snap})).readings(KEY)[Q]
    assert r.status is SignalStatus.EMPTY
    assert r.detail == "no ready pods"


async def test_disabled_signals_are_neither_read_nor_queried(
    fake_prom: FakePrometheus, make_source: SourceFactory
) -> None:
    t = target(signals={"kv_cache_usage": {"enabled": False}, "ttft_p95": {"enabled": False}})
    result = await make_source().read([t], {KEY: snapshot(pods(1))})
    assert set(result.readings(KEY)) == {Q}
    assert sorted(fake_prom.kinds_asked()) == sorted(
        [QueryKind.WAITING, QueryKind.RUNNING, QueryKind.THROUGHPUT]
    )


async def test_query_count_is_constant_in_the_number_of_targets(
    fake_prom: FakePrometheus, make_source: SourceFactory
) -> None:
    many = [target(f"m{i}") for i in range(20)]
    snaps = {t.key: snapshot([f"{t.workload.name}-5d8f-p{j}" for j in range(3)]) for t in many}
    scraped = [p.name for s in snaps.values() for p in s.pods]
    fake_prom.set(running=per_pod(dict.fromkeys(scraped, "1")), **ttft_answers("1.0", "60"))
    await make_source().read(many[:1], {many[0].key: snaps[many[0].key]})
    sent_for_one = len(fake_prom.requests)
    fake_prom.requests.clear()
    # a fresh source: a source that read one target before sends that read's TTFT query
    # early, then again for all twenty (tests/sources/test_early_queries.py)
    result = await make_source().read(many, snaps)
    # five per-pod queries, then one TTFT query for every target with requests
    assert len(fake_prom.requests) == sent_for_one == result.queries_sent == 6
    assert fake_prom.kinds_asked()[-1] is QueryKind.TTFT_BUCKETS
    assert all(r["query"] for r in fake_prom.requests)  # POST form field 'query'
    assert all(r["timeout"] == "5s" for r in fake_prom.requests)


async def test_shared_selector_does_not_count_other_targets_pods_as_dropped(
    fake_prom: FakePrometheus, make_source: SourceFactory
) -> None:
    a = target("a", prometheus_matchers={"namespace": "llm"})
    b = target("b", prometheus_matchers={"namespace": "llm"})
    fake_prom.set(waiting=per_pod({"a-0": "1", "b-0": "2", "gone-0": "9"}))
    snaps = {a.key: snapshot(["a-0"]), b.key: snapshot(["b-0"])}
    result = await make_source().read([a, b], snaps)
    assert result.readings(a.key)[Q].value == 1.0
    assert result.readings(b.key)[Q].value == 2.0
    for key in (a.key, b.key):
        assert [(d.pod, d.reason) for d in result.targets[key].dropped] == [
            ("gone-0", DropReason.UNKNOWN_POD)
        ]


async def test_series_of_a_same_named_pod_in_another_namespace_is_not_counted(
    fake_prom: FakePrometheus, make_source: SourceFactory
) -> None:
    fake_prom.set(
        waiting=R(
            sample("pod-0", "1", namespace="llm"),
            sample("pod-0", "50", namespace="other"),
        )
    )
    result = await make_source().read([target()], {KEY: snapshot(["pod-0"])})
    assert result.readings(KEY)[Q].value == 1.0
    assert result.targets[KEY].dropped == ()  # another namespace's pod: not ours at all


async def test_a_backend_without_native_histogram_functions_gets_classic_queries_only(
    fake_prom: FakePrometheus, make_source: SourceFactory
) -> None:
    """VictoriaMetrics rejects histogram_count: asked once, the request-rate query leaves it out."""
    fake_prom.native_functions = False
    four = pods(4)
    fake_prom.set(running=per_pod(dict.fromkeys(four, "1")), **ttft_answers("1.0", "4"))
    source = make_source()
    for _ in range(2):
        result = await source.read([target()], {KEY: snapshot(four)})
        assert result.readings(KEY)[TTFT].status is SignalStatus.OK
        assert result.readings(KEY)[TTFT].value == 1.0
    assert source.native_histograms is False and fake_prom.probes == 1
    rate_queries = [r["query"] for r in fake_prom.requests if "_count" in r["query"]]
    assert len(rate_queries) == 2 and not any("histogram_count" in q for q in rate_queries)
