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

import httpx
import pytest
import pytest_asyncio

from scaler.config.vocabulary import SignalName
from scaler.core.signals import SignalStatus
from scaler.sim.exposition import VllmMetrics
from scaler.sources.prometheus import STALL_POLLS, PrometheusSource, StallKind
from scaler.sources.promql import QueryKind
from tests.support.fakeprom import snapshot, target
from tests.support.scraped_pods import scraped_pods

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


def _render(m: VllmMetrics, update: Callable[[], None] | None = None) -> Callable[[], bytes]:
    def render() -> bytes:
        if update is not None:
            update()
        return m.render()

    return render


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def prometheus(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[str]:
    start = time.monotonic()
    pods = {name: VllmMetrics() for name in (BUSY, FROZEN, IDLE)}
    frozen = pods[FROZEN]  # every request aborted: the gauges kept their last values
    frozen.num_requests_waiting, frozen.num_requests_running = 15, 106
    frozen.kv_cache_usage = 0.904
    frozen.prompt_tokens, frozen.generation_tokens = 123456, 45678
    frozen.request_success["abort"] = 640
    bodies = {name: _render(m) for name, m in pods.items()}
    bodies[BUSY] = _render(pods[BUSY], _busy(pods[BUSY], start))
    tmp = tmp_path_factory.mktemp("prometheus")
    async with scraped_pods(tmp, bodies, rate_window_seconds=RATE_WINDOW) as url:
        yield url


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
