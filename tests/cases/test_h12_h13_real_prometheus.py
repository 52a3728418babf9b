"""h12 (a counter reset inside the rate window) and h13 (OpenMetrics `_created` series and
exemplars) against a REAL Prometheus scraping vLLM expositions (Debian's binary)."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import AsyncIterator, Callable

import pytest
import pytest_asyncio

from scaler.config.vocabulary import SignalName
from scaler.core.signals import SignalStatus
from scaler.sim.exposition import VllmMetrics
from scaler.sim.prometheus_server import wait_for_series
from tests.cases.hunt import case_text, read_source
from tests.support.fakeprom import snapshot, target
from tests.support.scraped_pods import scraped_pods

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="module")]

RATE_WINDOW = 4.0
KEY = "llm/Deployment/vllm"
STEADY, RESTARTED = "vllm-5c4d9-std00", "vllm-5c4d9-rst00"
OM_A, OM_B = "vllm-7f8e2-om000", "vllm-7f8e2-om001"
PROMPT_PER_S, GENERATION_PER_S = 500.0, 100.0
OPENMETRICS = "application/openmetrics-text; version=1.0.0; charset=utf-8"


class Pod:
    """A busy vLLM pod whose counters grow with the wall clock; ``restart`` starts them again
    from 0 (a container restart in the same pod)."""

    def __init__(self, start: float) -> None:
        self.m = VllmMetrics()
        self.origin = start
        self.restarted = threading.Event()

    def restart(self) -> None:
        self.origin = time.monotonic()
        self.restarted.set()

    def render(self) -> bytes:
        t = time.monotonic() - self.origin
        m = self.m
        m.num_requests_waiting, m.num_requests_running, m.kv_cache_usage = 3, 4, 0.4
        m.prompt_tokens, m.generation_tokens = int(t * PROMPT_PER_S), int(t * GENERATION_PER_S)
        m.request_success["stop"] = int(t * 2)
        return m.render()


_SAMPLE = re.compile(r"^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(?P<labels>\{[^}]*\})? (?P<value>\S+)$")


def openmetrics(render: Callable[[], bytes], start: float) -> Callable[[], bytes]:
    """The exposition in OpenMetrics: ``_created`` for every counter and histogram, an
    exemplar on each TTFT bucket, first tokens at 4 per second of about 0.3 s."""

    def body() -> bytes:
        t = time.monotonic() - start
        out: list[str] = []
        families: dict[str, str] = {}
        for line in render().decode().splitlines():
            if line.startswith("# TYPE "):
                _, _, name, kind = line.split(" ", 3)
                families[name] = kind
                family = name.removesuffix("_total") if kind == "counter" else name
                out.append(f"# TYPE {family} {kind}")
                continue
            if line.startswith("#") or not line:
                continue
            out.append(line)
        for name, kind in families.items():
            if kind == "counter":
                family = name.removesuffix("_total")
                out.append(f'{family}_created{{engine="0"}} {start + 1.7e9:.1f}')
        n = int(t * 4)
        out.append("# TYPE vllm:time_to_first_token_seconds histogram")
        for le, share in (("0.1", 0.0), ("0.5", 1.0), ("+Inf", 1.0)):
            exemplar = f' # {{trace_id="t{n}"}} 0.3 {time.time():.3f}' if share else ""
            out.append(
                f'vllm:time_to_first_token_seconds_bucket{{engine="0",le="{le}"}} '
                f"{int(n * share)}{exemplar}"
            )
        out.append(f'vllm:time_to_first_token_seconds_count{{engine="0"}} {n}')
        out.append(f'vllm:time_to_first_token_seconds_sum{{engine="0"}} {n * 0.3:.1f}')
        out.append(f'vllm:time_to_first_token_seconds_created{{engine="0"}} {1.7e9 + start:.1f}')
        out.append("# EOF")
        return ("\n".join(out) + "\n").encode()

    return body


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def prometheus(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[tuple[str, Pod]]:
    start = time.monotonic()
    steady, restarted = Pod(start), Pod(start)
    bodies: dict[str, Callable[[], bytes]] = {STEADY: steady.render, RESTARTED: restarted.render}
    for name in (OM_A, OM_B):
        bodies[name] = openmetrics(Pod(start).render, start)
    tmp = tmp_path_factory.mktemp("prometheus")
    async with scraped_pods(
        tmp,
        bodies,
        rate_window_seconds=RATE_WINDOW,
        content_types={OM_A: OPENMETRICS, OM_B: OPENMETRICS},
    ) as url:
        yield url, restarted


async def test_h12_a_counter_reset_in_the_window_reads_the_true_rate(
    prometheus: tuple[str, Pod],
) -> None:
    """h12: rate() corrects the reset: about the true rates, ok, neither frozen nor hung."""
    case_text("h12-counter-reset-in-the-window.md")
    url, pod = prometheus
    pod.restart()
    await wait_for_series(
        url,
        f'resets(vllm:generation_tokens_total{{pod="{RESTARTED}"}}[{RATE_WINDOW:g}s]) > 0',
        timeout=15,
    )
    [result] = await read_source(url, [target()], {KEY: snapshot([STEADY, RESTARTED])})
    tr = result.targets[KEY]
    tp = tr.throughput
    assert tp.status is SignalStatus.OK, tp
    for name in (STEADY, RESTARTED):
        rates = tp.pods[name]
        assert rates.generation_tokens_per_second == pytest.approx(GENERATION_PER_S, rel=0.4)
        assert rates.prompt_tokens_per_second == pytest.approx(PROMPT_PER_S, rel=0.4)
    assert tr.stalled == {}


async def test_h13_created_series_and_exemplars_are_not_read_as_data(
    prometheus: tuple[str, Pod],
) -> None:
    """h13: over OpenMetrics, `_created` and exemplars change no reading."""
    case_text("h13-openmetrics-created-and-exemplars.md")
    url, _ = prometheus
    created = await wait_for_series(url, "vllm:generation_tokens_created", timeout=10)
    assert {s["metric"]["pod"] for s in created} >= {OM_A, OM_B}  # they are there
    [result] = await read_source(url, [target()], {KEY: snapshot([OM_A, OM_B])})
    assert all(o.ok for o in result.queries.values()), result.queries
    tr = result.targets[KEY]
    queue = tr.signals[SignalName.QUEUE_DEPTH]
    assert (queue.status, queue.value) == (SignalStatus.OK, 6.0), queue
    kv = tr.signals[SignalName.KV_CACHE_USAGE]
    assert kv.status is SignalStatus.OK and kv.value == pytest.approx(0.8), kv
    assert tr.throughput.status is SignalStatus.OK
    rates = tr.throughput.pods[OM_A]
    assert rates.generation_tokens_per_second == pytest.approx(GENERATION_PER_S, rel=0.4)
    ttft = tr.signals[SignalName.TTFT_P95]
    assert ttft.status is SignalStatus.OK and ttft.value is not None, ttft
    assert 0.1 < ttft.value <= 0.5
