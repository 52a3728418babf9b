"""Case 22 on a REAL Prometheus storing vLLM's TTFT as a native histogram.

Prometheus stores native histograms when a target serves the protobuf exposition and they
are turned on: Debian's 2.42 with ``--enable-feature=native-histograms``, Prometheus 3.16 (built
from its module) with the setting ``scrape_native_histograms`` (from 3.9 the flag does
nothing); then no ``_bucket``/``_count`` series exist. Every test runs on both.
Fake pods serve their TTFT histogram that way (``tests/support/native_exposition.py``), and
the source reads it with the exact PromQL it uses in production.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
import pytest_asyncio
from aiohttp import web

from scaler.config.policy import TargetPolicy, WorkloadRef
from scaler.config.vocabulary import SignalName
from scaler.core.signals import SignalStatus
from scaler.sim.prometheus_server import PrometheusServer, wait_for_series, write_file_sd
from scaler.sources.prometheus import PrometheusSource, check_configured_queries
from tests.support.fakeprom import case_file, snapshot
from tests.support.prometheus_versions import PROMETHEUS_VERSIONS, prometheus_binary

pytest.importorskip("google.protobuf", reason="the protobuf exposition needs the dev extra")
from tests.support.native_exposition import NativeVllmPod

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="module")]

WINDOW = 4.0  # four scrapes of 1 s
TTFT = SignalName.TTFT_P95
NATIVE = "vllm:time_to_first_token_seconds (native histogram)"


def sts(name: str) -> TargetPolicy:
    return TargetPolicy(
        workload=WorkloadRef(api_version="apps/v1", kind="StatefulSet", namespace="llm", name=name)
    )


@pytest_asyncio.fixture(scope="module", loop_scope="module", params=PROMETHEUS_VERSIONS)
async def prometheus(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[PrometheusServer]:
    binary = prometheus_binary(request.param)
    pods = [
        NativeVllmPod("vllm-0", index=3, per_scrape=10),  # first tokens in (4, 8] s
        NativeVllmPod("vllm-1", index=3, per_scrape=10),
        NativeVllmPod("vllm-70b-0", index=5, per_scrape=10),  # another workload: (16, 32] s
        NativeVllmPod("idle-0", index=3, per_scrape=0),  # no first token in the window
    ]
    runners = []
    tmp = tmp_path_factory.mktemp("native")
    try:
        for pod in pods:
            app = web.Application()
            app.router.add_get("/metrics", pod.handle)
            runner = web.AppRunner(app)
            await runner.setup()
            await web.TCPSite(runner, "127.0.0.1", 0).start()
            pod.port = runner.addresses[0][1]
            runners.append(runner)
        sd = tmp / "targets.json"
        write_file_sd(
            sd, [([f"127.0.0.1:{p.port}"], {"namespace": "llm", "pod": p.name}) for p in pods]
        )
        server = PrometheusServer(
            tmp / "prom",
            scrape_interval_seconds=1.0,
            sd_file=sd,
            binary=binary,
            native_histograms=True,
        )
        async with server:
            try:
                await wait_for_series(
                    server.url,
                    f"histogram_count(rate(vllm:time_to_first_token_seconds[{WINDOW:g}s]))",
                    timeout=30,
                    min_series=len(pods),
                )
            except TimeoutError:
                pytest.fail("no native histogram rates; log:\n" + server.log_tail())
            yield server
    finally:
        for runner in runners:
            await runner.cleanup()


async def test_case_22_ttft_is_read_from_the_native_histogram_of_the_targets_pods(
    prometheus: PrometheusServer,
) -> None:
    """Case 22: with only a native TTFT histogram, TTFT is read from it (and idle is idle)."""
    case_file("22-native-histograms.md")
    busy, idle = sts("vllm"), sts("idle")
    snaps = {busy.key: snapshot(["vllm-0", "vllm-1"]), idle.key: snapshot(["idle-0"])}
    async with httpx.AsyncClient() as client:
        source = PrometheusSource(
            client, base_url=prometheus.url, timeout_seconds=5, rate_window_seconds=WINDOW
        )
        # the classic series do not exist: the native histogram is what Prometheus stored
        classic = await client.post(
            f"{prometheus.url}/api/v1/query",
            data={"query": "count(vllm:time_to_first_token_seconds_bucket)"},
        )
        assert classic.json()["data"]["result"] == []
        result = await source.read([busy, idle], snaps)
        problems = await check_configured_queries(source, [busy, idle], snaps)
    assert all(o.ok for o in result.queries.values()), result.queries
    r = result.readings(busy.key)[TTFT]
    assert r.status is SignalStatus.OK, r
    # inside the (4, 8] bucket (where inside is the server's interpolation: 2.42's is linear);
    # the neighbour's first tokens, in (16, 32], are not the target's
    assert r.value is not None and 4.0 < r.value <= 8.0
    assert result.targets[busy.key].ttft_metric == NATIVE
    assert result.targets[busy.key].ttft_query == "raw"
    i = result.readings(idle.key)[TTFT]
    assert i.status is SignalStatus.IDLE and i.value == 0.0
    assert result.targets[idle.key].ttft_metric == NATIVE
    assert [p for p in problems if p.signal is TTFT] == []
