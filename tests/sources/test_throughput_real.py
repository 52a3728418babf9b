"""The throughput query and the stall detector against a REAL Prometheus scraping the
simulator's vLLM exposition (scaler.sim.exposition: the three counters as vLLM exports them,
``request_success`` per ``finished_reason``).

Three pods: one busy (counters growing with the wall clock), one frozen as in case 17 (15
waiting, 106 running, 90.4% KV cache, counters that stopped), one idle (zeros). Prometheus
(Debian's binary) scrapes them every second through file-based service discovery.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import httpx
import pytest
import pytest_asyncio
from aiohttp import web

from scaler.config.vocabulary import SignalName
from scaler.core.signals import SignalStatus
from scaler.sim.exposition import CONTENT_TYPE, VllmMetrics
from scaler.sim.prometheus_server import (
    PrometheusNotInstalledError,
    PrometheusServer,
    find_prometheus_binary,
    wait_for_series,
    write_file_sd,
)
from scaler.sources.prometheus import STALL_POLLS, PrometheusSource, StallKind
from scaler.sources.promql import QueryKind
from tests.support.fakeprom import snapshot, target

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="module")]

RATE_WINDOW = 4.0
KEY = "llm/Deployment/vllm"
BUSY, FROZEN, IDLE = "vllm-5c4d9-busy0", "vllm-5c4d9-froz0", "vllm-5c4d9-idle0"
# the busy pod's rates per second: finished requests (two reasons), prompt and generated tokens
STOP_PER_S, LENGTH_PER_S, PROMPT_PER_S, GENERATION_PER_S = 1.5, 0.5, 900.0, 300.0


def _busy(m: VllmMetrics, start: float) -> Callable[[], None]:
    def update() -> None:
        t = time.monotonic() - start
        m.num_requests_waiting, m.num_requests_running, m.kv_cache_usage = 3, 10, 0.6
        m.request_success["stop"] = int(t * STOP_PER_S)
        m.request_success["length"] = int(t * LENGTH_PER_S)
        m.prompt_tokens = int(t * PROMPT_PER_S)
        m.generation_tokens = int(t * GENERATION_PER_S)

    return update


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def prometheus(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[str]:
    try:
        find_prometheus_binary()
    except PrometheusNotInstalledError as err:
        pytest.skip(str(err))
    start = time.monotonic()
    pods = {name: VllmMetrics() for name in (BUSY, FROZEN, IDLE)}
    frozen = pods[FROZEN]  # every request aborted: the gauges kept their last values
    frozen.num_requests_waiting, frozen.num_requests_running = 15, 106
    frozen.kv_cache_usage = 0.904
    frozen.prompt_tokens, frozen.generation_tokens = 123456, 45678
    frozen.request_success["abort"] = 640
    updates = {BUSY: _busy(pods[BUSY], start)}
    runners, groups = [], []
    for name, m in pods.items():

        async def metrics(_: web.Request, name: str = name, m: VllmMetrics = m) -> web.Response:
            if name in updates:
                updates[name]()
            return web.Response(body=m.render(), headers={"Content-Type": CONTENT_TYPE})

        app = web.Application()
        app.router.add_get("/metrics", metrics)
        runner = web.AppRunner(app)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        runners.append(runner)
        groups.append(([f"127.0.0.1:{runner.addresses[0][1]}"], {"namespace": "llm", "pod": name}))
    tmp = Path(tmp_path_factory.mktemp("prometheus"))
    sd = tmp / "sd" / "targets.json"
    write_file_sd(sd, groups)
    try:
        async with PrometheusServer(tmp / "prom", scrape_interval_seconds=1.0, sd_file=sd) as prom:
            try:
                # a full window of samples: rate() of a younger series extrapolates short
                await wait_for_series(
                    prom.url,
                    f"count_over_time(vllm:generation_tokens_total[{RATE_WINDOW:g}s])"
                    f" >= {int(RATE_WINDOW)}",
                    timeout=30,
                    min_series=3,
                )
            except TimeoutError:
                pytest.fail("Prometheus never scraped the pods; log:\n" + prom.log_tail())
            yield prom.url
    finally:
        for runner in runners:
            await runner.cleanup()


async def test_real_rates_per_pod_and_a_frozen_pod_left_out(prometheus: str) -> None:
    snaps = {KEY: snapshot([BUSY, FROZEN, IDLE])}
    async with httpx.AsyncClient() as client:
        source = PrometheusSource(
            client, base_url=prometheus, timeout_seconds=5, rate_window_seconds=RATE_WINDOW
        )
        results = [await source.read([target()], snaps) for _ in range(STALL_POLLS)]
    assert all(o.ok for r in results for o in r.queries.values())
    # the first round's five per-pod queries; no pod finished a first token in the window, so
    # the second round (TTFT buckets, only for targets with TTFT requests) is not sent
    assert results[-1].queries_sent == 5 and QueryKind.THROUGHPUT in results[-1].queries
    assert QueryKind.TTFT_BUCKETS not in results[-1].queries
    tr = results[-1].targets[KEY]

    tp = tr.throughput
    assert tp.status is SignalStatus.OK
    busy = tp.pods[BUSY]
    assert busy.requests_per_second == pytest.approx(STOP_PER_S + LENGTH_PER_S, rel=0.35)
    assert busy.prompt_tokens_per_second == pytest.approx(PROMPT_PER_S, rel=0.2)
    assert busy.generation_tokens_per_second == pytest.approx(GENERATION_PER_S, rel=0.2)
    assert tp.pods[FROZEN].tokens_per_second == 0.0  # a counter that stopped: exactly 0
    assert tp.pods[IDLE].tokens_per_second == 0.0

    assert {pod: s.kind for pod, s in tr.stalled.items()} == {FROZEN: StallKind.FROZEN}
    assert [set(r.targets[KEY].stalled) for r in results[:-1]] == [set()] * (STALL_POLLS - 1)
    queue = tr.signals[SignalName.QUEUE_DEPTH]
    assert (queue.status, queue.value) == (SignalStatus.FROZEN, 3.0)  # busy 3 + idle 0
    kv = tr.signals[SignalName.KV_CACHE_USAGE]
    assert kv.status is SignalStatus.FROZEN and kv.value == pytest.approx(0.6)
