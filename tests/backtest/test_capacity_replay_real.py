"""The backtest learns a replica's capacity from history, as the live loop does, against a
REAL Prometheus scraping two vLLM expositions (:mod:`scaler.sim.exposition`) over HTTP.

Two pods serve a steady load for the whole run: per pod 2 finished requests, 1,000 prompt
tokens and 100 generated tokens per second, 2 requests waiting (busy), and every first token
after 1.0 s (TTFT p95 0.99 s from vLLM's buckets: within a 1.5 s target and above half of it,
so the fleet is near its capacity). A replica then serves at least 1,000 + 16 x 100 = 2,600
weighted tokens/s within the SLO: the first sample starts the estimate there, with no seed.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable

import pytest
import pytest_asyncio

from scaler.backtest.history import PrometheusRangeClient, make_grid
from scaler.backtest.pipeline import run_backtest
from scaler.backtest.report import TargetBacktest
from scaler.config.policy import Policy, parse_policy
from scaler.config.settings import PrometheusSettings
from scaler.core.observation import PodInfo, WorkloadSnapshot
from scaler.core.signals import SignalStatus
from scaler.sim.exposition import VllmMetrics
from scaler.sim.prometheus_server import wait_for_series
from tests.support.live_at import live_decisions
from tests.support.policies import case_target_doc
from tests.support.scraped_pods import scraped_pods

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="module")]

RATE_WINDOW = 8.0  # 8 samples a window at 1 s scrapes: a late scrape under load moves a rate little
#: The history the backtest replays: four rate windows from the first whole window.
HISTORY_SECONDS = 4 * RATE_WINDOW
PODS = ("vllm-5c4d9-aaaa0", "vllm-5c4d9-bbbb0")
REQUESTS_PER_S, PROMPT_PER_S, GENERATION_PER_S = 2.0, 1000.0, 100.0
#: One replica's weighted tokens/s (prompt + 16 x generated, the default weight).
PER_REPLICA = PROMPT_PER_S + 16 * GENERATION_PER_S
POLICY = {
    "rate_window_seconds": RATE_WINDOW,
    "targets": [
        case_target_doc(
            signals={
                "queue_depth": {"target_per_replica": 8},
                "kv_cache_usage": {"target_ratio": 0.8},
                "ttft_p95": {"target_seconds": 1.5},
                # on, no seed: learned from the history alone, in weighted tokens (the figures
                # here are token rates)
                "capacity": {"unit": "weighted_tokens"},
            },
            scale_down={"stabilization_window_seconds": 10, "period_seconds": 10},
        )
    ],
}


def _steady(start: float) -> Callable[[], bytes]:
    """A pod's ``/metrics`` body at each scrape: counters grown with the time since ``start``."""
    m = VllmMetrics()

    def render() -> bytes:
        t = time.monotonic() - start
        m.num_requests_waiting, m.num_requests_running, m.kv_cache_usage = 2, 8, 0.5
        m.request_success["stop"] = int(t * REQUESTS_PER_S)
        m.prompt_tokens = int(t * PROMPT_PER_S)
        m.generation_tokens = int(t * GENERATION_PER_S)
        m.ttft.observe(1.0, int(t * REQUESTS_PER_S) - m.ttft.count)
        return m.render()

    return render


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def history(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[tuple[str, float]]:
    """Prometheus' URL and the time from which every pod has a whole rate window of data."""
    start = time.monotonic()
    bodies = {name: _steady(start) for name in PODS}
    tmp = tmp_path_factory.mktemp("prometheus")
    async with scraped_pods(tmp, bodies, rate_window_seconds=RATE_WINDOW) as url:
        ready = time.time()
        # four windows of steady history: until every pod has a sample at or after its end
        await wait_for_series(
            url,
            f"timestamp(vllm:num_requests_running) >= {ready + HISTORY_SECONDS:.3f}",
            timeout=HISTORY_SECONDS + 30,
            min_series=len(PODS),
        )
        yield url, ready


def _snapshot(_at: float) -> WorkloadSnapshot:
    """Both pods ready for an hour at every step, as the Kubernetes API lists them."""
    pods = tuple(PodInfo(p, True, False, 3600.0, ready_seconds=3500.0) for p in PODS)
    return WorkloadSnapshot("llm", len(pods), len(pods), "", "", pods)


def _backtest(url: str, policy: Policy, start: float, end: float) -> list[TargetBacktest]:
    client = PrometheusRangeClient(PrometheusSettings(prometheus_url=url))
    try:
        return run_backtest(
            client, policy, policy.targets, make_grid(start, end, 1), model_load_seconds=30
        )
    finally:
        client.close()


async def test_a_backtest_learns_the_capacity_and_decides_as_the_live_loop(
    history: tuple[str, float],
) -> None:
    url, ready = history
    policy = parse_policy(POLICY)
    (bt,) = await asyncio.to_thread(_backtest, url, policy, ready, ready + HISTORY_SECONDS)
    steps = bt.result.steps
    views = [st.capacity for st in steps]
    assert all(v is not None for v in views)
    # learned from nothing at the first step, then one sample per rate window at most
    first = views[0]
    assert first is not None and first.sample is not None and first.sample.within_slo
    last = views[-1]
    assert last is not None and last.capacity_tokens_per_second is not None
    assert last.capacity_tokens_per_second == pytest.approx(PER_REPLICA, rel=0.05)
    assert 1 <= last.samples <= 1 + len(steps) // int(RATE_WINDOW)
    assert last.demand_tokens_per_second == pytest.approx(len(PODS) * PER_REPLICA, rel=0.05)
    # 2 x 2,600 demand, plus 4 waiting requests' work over the horizon, at 0.85 utilization
    # of 2,600 per replica: 3 replicas (queue depth alone, 4 waiting for 8 per replica, asks 1)
    assert {st.recommended for st in steps[2:]} == {3}
    assert max(st.policy_replicas for st in steps) == 3
    assert "capacity" in next(st.message for st in steps if st.policy_replicas == 3)

    live = await live_decisions(url, policy, steps, _snapshot, model_load_seconds=30)
    for st, d in zip(steps, live, strict=True):
        assert d.capacity is not None and st.capacity is not None
        assert st.capacity.capacity_tokens_per_second == d.capacity.capacity_tokens_per_second
        assert st.capacity.demand_tokens_per_second == d.capacity.demand_tokens_per_second
        assert st.capacity.samples == d.capacity.samples
        assert (st.recommended, st.policy_replicas, st.reason) == (
            d.recommended_replicas,
            d.desired_replicas,
            d.reason,
        )
    assert all(st.signals[n].status is SignalStatus.OK for st in steps for n in st.signals)
