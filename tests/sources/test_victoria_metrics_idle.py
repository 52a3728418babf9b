"""VictoriaMetrics (MetricsQL) drops NaN from query results and has no native-histogram
functions. The source computes the TTFT quantile itself from the bucket rates, so no NaN
quantile is ever asked for: a request rate of exactly 0 is idle (the bucket query is not even
sent), never an absent signal that would block scale-down or fail the start-up check; and
the unknown ``histogram_count`` is left out of its queries."""

from __future__ import annotations

from collections.abc import Callable

from scaler.core.signals import SignalName, SignalStatus
from scaler.sources.prometheus import PrometheusSource, check_configured_queries
from tests.support.fakeprom import FakePrometheus, R, Ttft, kv, per_pod, pods, snapshot, target

TTFT = SignalName.TTFT_P95
KEY = "llm/Deployment/vllm"
SourceFactory = Callable[..., PrometheusSource]


def _idle_fleet(fake_prom: FakePrometheus, rate: str) -> list[str]:
    four = pods(4)
    fake_prom.native_functions = False  # as VictoriaMetrics answers
    fake_prom.set(
        ttft_rate=Ttft("1.0", rate),
        ttft_buckets=R(),  # no bucket rates at all
        waiting=per_pod(dict.fromkeys(four, "0")),
        running=per_pod(dict.fromkeys(four, "0")),
        kv_cache=kv(dict.fromkeys(four, "0.0")),
    )
    return four


async def test_no_quantile_with_zero_request_rate_is_idle(
    fake_prom: FakePrometheus, make_source: SourceFactory
) -> None:
    four = _idle_fleet(fake_prom, "0")
    result = await make_source().read([target()], {KEY: snapshot(four)})
    r = result.readings(KEY)[TTFT]
    assert (r.status, r.value) == (SignalStatus.IDLE, 0.0)
    assert r.status.usable_for_scale_down
    assert await check_configured_queries(make_source(), [target()], {KEY: snapshot(four)}) == []


async def test_no_bucket_rates_while_requests_flow_is_no_reading(
    fake_prom: FakePrometheus, make_source: SourceFactory
) -> None:
    four = _idle_fleet(fake_prom, "2.5")
    r = (await make_source().read([target()], {KEY: snapshot(four)})).readings(KEY)[TTFT]
    assert r.status is SignalStatus.EMPTY
    assert not r.status.usable_for_scale_down
