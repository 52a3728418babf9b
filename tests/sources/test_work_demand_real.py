"""The capacity signal's demand in seconds of replica work through the real path: a REAL
Prometheus scraping the simulator's vLLM exposition (:mod:`scaler.sim.exposition`), the
production source, :func:`~scaler.controller.observe.observe` and the capacity signal.

Four pods, each a mix the issue names: short prompts, long prompts (the mix shift), prompts
mostly found in the prefix cache (the cache-hit shift) and a replica in vLLM's sleep mode.
What a replica serves is one number in seconds of work per second; what changes with the mix
or the cache-hit rate is the demand each request brings, read from vLLM's own counters.
"""

from __future__ import annotations

import math
import time
from collections.abc import AsyncIterator, Callable

import httpx
import pytest
import pytest_asyncio

from scaler.controller.observe import observe
from scaler.core.capacity import CapacityMemory, demand_of
from scaler.core.cost_fit import cost_window
from scaler.core.observation import ThroughputReading
from scaler.core.signals import SignalStatus
from scaler.core.sizing import evaluate_capacity
from scaler.sim.exposition import VllmMetrics
from scaler.sources.prometheus import PrometheusSource
from tests.support.fakeprom import snapshot, target
from tests.support.scraped_pods import scraped_pods

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="module")]

RATE_WINDOW = 4.0
KEY = "llm/Deployment/vllm"
SHORT, LONG, CACHED, ASLEEP = (
    "vllm-5c4d9-shrt0", "vllm-5c4d9-long0", "vllm-5c4d9-cach0", "vllm-5c4d9-slep0",
)  # fmt: skip
#: per pod: requests/s, prompt tokens and generated tokens per request, share of the prompt
#: found in the prefix cache
MIXES = {
    SHORT: (2.0, 400, 200, 0.0),
    LONG: (2.0, 5000, 150, 0.0),
    CACHED: (2.0, 2000, 24, 0.8),
}


#: What the pods' prefill costs, seconds per computed prompt token (1.5x the profile's).
PREFILL_SECONDS_PER_TOKEN = 1.5 * 4.7e-5


def _busy(m: VllmMetrics, start: float, mix: tuple[float, int, int, float]) -> Callable[[], bytes]:
    rps, prompt, output, hit = mix

    def render() -> bytes:
        t = time.monotonic() - start
        m.num_requests_waiting, m.num_requests_running, m.kv_cache_usage = 1, 8, 0.5
        m.request_success["stop"] = int(t * rps)
        m.prompt_tokens = int(t * rps * prompt)
        m.generation_tokens = int(t * rps * output)
        m.prefix_cache_queries = m.prompt_tokens
        m.prefix_cache_hits = int(t * rps * prompt * hit)
        # the phase histograms' sums: prefill at 1.5x the default profile's price of the
        # prompt tokens computed, decode at 30 ms per output token
        m.prefill_time.sum = t * rps * prompt * (1 - hit) * PREFILL_SECONDS_PER_TOKEN
        m.prefill_time.count = m.request_success["stop"]
        m.decode_time.sum = t * rps * output * 0.030
        m.decode_time.count = m.request_success["stop"]
        return m.render()

    return render


def _asleep() -> Callable[[], bytes]:
    """Level 1 (weights offloaded): counters still, two requests waiting on it."""
    m = VllmMetrics()
    m.num_requests_waiting, m.prompt_tokens, m.generation_tokens = 2, 1000, 400
    m.sleep_level = 1
    return m.render


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def prometheus(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[str]:
    start = time.monotonic()
    bodies = {name: _busy(VllmMetrics(), start, mix) for name, mix in MIXES.items()}
    bodies[ASLEEP] = _asleep()
    async with scraped_pods(
        tmp_path_factory.mktemp("prometheus"), bodies, rate_window_seconds=RATE_WINDOW
    ) as url:
        yield url


async def _read(url: str) -> tuple[object, object]:
    snap = snapshot([SHORT, LONG, CACHED, ASLEEP])
    async with httpx.AsyncClient() as client:
        source = PrometheusSource(
            client, base_url=url, timeout_seconds=5, rate_window_seconds=RATE_WINDOW
        )
        result = await source.read([target()], {KEY: snap})
    return snap, result.targets[KEY]


def _expected_work(mix: tuple[float, int, int, float]) -> float:
    """Seconds of work per second the mix brings at the default cost (the signal's formula
    on the rates the pod was built with)."""
    rps, prompt, output, hit = mix
    cost = target().signals.capacity.cost
    return cost.work_seconds(rps * prompt * (1 - hit), rps * output, prompt + output / 2)


async def test_the_mix_and_the_cache_hits_change_the_demand_a_request_brings(
    prometheus: str,
) -> None:
    """Per pod, the demand read through Prometheus is the work its mix brings: a long-prompt
    request about 5 times a short one's, a prompt 80% found in the prefix cache a fifth of
    its prefill, within the rate extrapolation of a real Prometheus (5%)."""
    snap, tr = await _read(prometheus)
    obs = observe(target(), snap, tr, None)  # type: ignore[arg-type]
    reading = obs.throughput
    assert reading is not None
    per_request = {}
    for name, mix in MIXES.items():
        pod = reading.pods[name]
        demand, per = demand_of(target(), ThroughputReading(SignalStatus.OK, {name: pod}))
        assert demand == pytest.approx(_expected_work(mix), rel=0.05), name
        assert per is not None
        per_request[name] = per
    # the prefix-cache hits are read and left out of the prompt tokens computed
    cached = reading.pods[CACHED]
    assert cached.cached_prompt_tokens_per_second == pytest.approx(
        0.8 * cached.prompt_tokens_per_second, rel=0.05
    )
    assert cached.computed_prompt_tokens_per_second == pytest.approx(
        0.2 * cached.prompt_tokens_per_second, rel=0.1
    )
    assert reading.pods[SHORT].cached_prompt_tokens_per_second == 0.0
    # long prompts bring several times the work per request that short ones do
    assert 4 < per_request[LONG] / per_request[SHORT] < 12
    # at 80% hits a request brings less than half the work it would with none
    cost = target().signals.capacity.cost
    uncached = cost.work_seconds(2000, 24, 2012)
    assert per_request[CACHED] < 0.5 * uncached


async def test_a_sleeping_replica_is_no_capacity_and_is_kept_beside_the_awake(
    prometheus: str,
) -> None:
    """The pod in sleep mode is read as sleeping (no query more), counted apart, never a
    capacity sample, and the capacity signal asks for it on top of the awake replicas that
    serve the demand, saying so."""
    snap, tr = await _read(prometheus)
    assert tr.sleeping == frozenset({ASLEEP})  # type: ignore[attr-defined]
    assert tr.stalled == {}  # type: ignore[attr-defined]  # asleep, not hung
    policy = target(
        signals={
            "ttft_p95": {"target_seconds": 2.0},
            "capacity": {
                "enabled": True,
                "seed_prompt_tokens_per_second": 20_000.0,
                "seed_generation_tokens_per_second": 1000.0,
            },
        }
    )
    obs = observe(policy, snap, tr, None)  # type: ignore[arg-type]
    assert (obs.replicas.ready, obs.replicas.sleeping) == (4, 1)
    evaluation, view, memory = evaluate_capacity(
        policy, obs, CapacityMemory(), None, 1000.0, window_seconds=RATE_WINDOW
    )
    assert view.sample is None  # never learned from a fleet with a replica asleep
    assert memory.estimate is not None and memory.estimate.samples == 8  # the seed only
    c = memory.estimate.tokens_per_second
    u = policy.signals.capacity.target_utilization
    assert view.forecast_tokens_per_second is not None
    awake_needed = math.ceil(view.forecast_tokens_per_second / (c * u) - 1e-9)
    assert evaluation.desired_replicas == awake_needed + 1
    assert "+1 asleep" in evaluation.detail


async def test_the_phase_histograms_reach_the_price_fit_through_prometheus(
    prometheus: str,
) -> None:
    """The prefill and decode phase sums are read per pod (the throughput query) and a pod
    slower at prefill than the profile teaches the fit so: a long-prompt window shows 1.5x
    the profile's prefill price, a short-prompt one is not used for it (its prompts share
    steps)."""
    snap, tr = await _read(prometheus)
    obs = observe(target(), snap, tr, None)  # type: ignore[arg-type]
    reading = obs.throughput
    assert reading is not None
    for name, (rps, prompt, output, hit) in MIXES.items():
        pod = reading.pods[name]
        expected = rps * prompt * (1 - hit) * PREFILL_SECONDS_PER_TOKEN
        assert pod.prefill_seconds_per_second == pytest.approx(expected, rel=0.05), name
        assert pod.decode_seconds_per_second == pytest.approx(rps * output * 0.03, rel=0.05)
    cost = target().signals.capacity.cost
    long = cost_window(cost, ThroughputReading(SignalStatus.OK, {LONG: reading.pods[LONG]}), 60)
    assert long is not None and long.prefill_measured is not None
    assert long.prefill_priced is not None
    assert long.prefill_measured / long.prefill_priced == pytest.approx(1.5, rel=0.05)
    short = cost_window(cost, ThroughputReading(SignalStatus.OK, {SHORT: reading.pods[SHORT]}), 60)
    assert short is not None and short.prefill_measured is None
