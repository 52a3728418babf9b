"""h12 (a counter reset inside the rate window) and h13 (OpenMetrics `_created` series and
exemplars) against a REAL Prometheus scraping vLLM expositions (Debian's binary)."""

from __future__ import annotations

import re
import time
from collections.abc import AsyncIterator, Callable

import pytest
import pytest_asyncio

from scaler.config.vocabulary import SignalName
from scaler.controller.observe import observe
from scaler.core.signals import SignalStatus
from scaler.sim.exposition import VllmMetrics
from scaler.sim.prometheus_server import wait_for_series
from scaler.sources.prometheus import STALL_POLLS
from tests.cases.hunt import read_source
from tests.support.fakeprom import case_file, snapshot, target
from tests.support.scraped_pods import scraped_pods

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="module")]

RATE_WINDOW = 4.0
KEY = "llm/Deployment/vllm"
STEADY, RESTARTED = "vllm-5c4d9-std00", "vllm-5c4d9-rst00"
OM_A, OM_B = "vllm-7f8e2-om000", "vllm-7f8e2-om001"
DP = "vllm-3b1a0-dp000"
SLEEPER, AWAKE = "vllm-9d2c4-slp00", "vllm-9d2c4-awk00"
PROMPT_PER_S, GENERATION_PER_S = 500.0, 100.0
OPENMETRICS = "application/openmetrics-text; version=1.0.0; charset=utf-8"


class Pod:
    """A busy vLLM pod whose counters grow with the wall clock and whose first tokens take
    0.3 s, 4 a second; ``restart`` starts the counters again from 0 (a container restart in
    the same pod); ``engine`` its data-parallel rank (the ``engine`` label)."""

    def __init__(self, start: float, *, engine: int = 0, waiting: int = 3, kv: float = 0.4):
        self.m = VllmMetrics()
        self.origin = start
        self.engine = engine
        self.waiting, self.kv = waiting, kv

    def restart(self) -> None:
        self.origin = time.monotonic()
        self.m.ttft = type(self.m.ttft)(self.m.ttft.bounds)

    def render(self) -> bytes:
        t = time.monotonic() - self.origin
        m = self.m
        m.num_requests_waiting, m.num_requests_running = self.waiting, 4
        m.kv_cache_usage = self.kv
        m.prompt_tokens, m.generation_tokens = int(t * PROMPT_PER_S), int(t * GENERATION_PER_S)
        m.request_success["stop"] = int(t * 2)
        m.ttft.observe(0.3, int(t * 4) - m.ttft.count)
        body = m.render().decode()
        return body.replace('engine="0"', f'engine="{self.engine}"').encode()


def families(body: bytes) -> list[tuple[str, str, list[str]]]:
    """(name, type, sample lines) per metric family of a text-format exposition."""
    out: list[tuple[str, str, list[str]]] = []
    for line in body.decode().splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ", 3)
            out.append((name, kind, []))
        elif line and not line.startswith("#"):
            out[-1][2].append(line)
    return out


def data_parallel(*engines: Pod) -> Callable[[], bytes]:
    """One pod running several engines: each family's samples of every engine together."""

    def body() -> bytes:
        merged: dict[str, tuple[str, list[str]]] = {}
        for e in engines:
            for name, kind, samples in families(e.render()):
                merged.setdefault(name, (kind, []))[1].extend(samples)
        lines = [
            line
            for name, (kind, samples) in merged.items()
            for line in (f"# TYPE {name} {kind}", *samples)
        ]
        return ("\n".join(lines) + "\n").encode()

    return body


def _sleep_state(awake: bool) -> str:
    states = {"awake": awake, "weights_offloaded": not awake, "discard_all": False}
    lines = ["# TYPE vllm:engine_sleep_state gauge"]
    lines += [
        f'vllm:engine_sleep_state{{engine="0",sleep_state="{state}"}} {int(on)}'
        for state, on in states.items()
    ]
    return "\n".join(lines) + "\n"


def asleep() -> Callable[[], bytes]:
    """A pod whose engine sleeps (level 1: weights offloaded): its gauges do not move, it
    produces nothing, 5 requests wait on it (a router sent them)."""
    m = VllmMetrics()
    m.num_requests_waiting, m.prompt_tokens, m.generation_tokens = 5, 1000, 400
    return lambda: m.render() + _sleep_state(False).encode()


def awake(pod: Pod) -> Callable[[], bytes]:
    return lambda: pod.render() + _sleep_state(True).encode()


_LABELS = re.compile(r"^(?P<name>[^{ ]+)(?P<labels>\{[^}]*\})? ")


def openmetrics(pod: Pod, start: float) -> Callable[[], bytes]:
    """The pod's exposition in OpenMetrics: each counter's family named without ``_total``,
    a ``_created`` sample in every counter and histogram family, an exemplar on each
    histogram bucket, ``# EOF``."""

    def body() -> bytes:
        out: list[str] = []
        created = f"{1.7e9 + start:.1f}"
        for name, kind, samples in families(pod.render()):
            family = name.removesuffix("_total") if kind == "counter" else name
            out.append(f"# TYPE {family} {kind}")
            seen: set[str] = set()
            for line in samples:
                if kind == "histogram" and "_bucket{" in line:
                    line += f' # {{trace_id="abc"}} 0.3 {time.time():.3f}'
                out.append(line)
                m = _LABELS.match(line)
                if kind in ("counter", "histogram") and m:
                    labels = re.sub(r',?le="[^"]*"', "", m["labels"] or "").replace("{,", "{")
                    if labels not in seen:
                        seen.add(labels)
                        out.append(f"{family}_created{labels} {created}")
        out.append("# EOF")
        return ("\n".join(out) + "\n").encode()

    return body


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def prometheus(
    tmp_path_factory: pytest.TempPathFactory,
) -> AsyncIterator[tuple[str, Pod]]:
    start = time.monotonic()
    restarted = Pod(start)
    bodies: dict[str, Callable[[], bytes]] = {
        STEADY: Pod(start).render,
        RESTARTED: restarted.render,
        OM_A: openmetrics(Pod(start), start),
        OM_B: openmetrics(Pod(start), start),
        DP: data_parallel(Pod(start, waiting=3, kv=0.2), Pod(start, engine=1, waiting=5, kv=0.7)),
        SLEEPER: asleep(),
        AWAKE: awake(Pod(start)),
    }
    tmp = tmp_path_factory.mktemp("prometheus")
    kinds = {OM_A: OPENMETRICS, OM_B: OPENMETRICS}
    async with scraped_pods(
        tmp, bodies, rate_window_seconds=RATE_WINDOW, content_types=kinds
    ) as url:
        yield url, restarted


async def test_h12_a_counter_reset_in_the_window_reads_the_true_rate(
    prometheus: tuple[str, Pod],
) -> None:
    """h12: rate() corrects the reset: about the true rates, ok, neither frozen nor hung."""
    case_file("h12-counter-reset-in-the-window.md")
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
    case_file("h13-openmetrics-created-and-exemplars.md")
    url, _ = prometheus
    created = await wait_for_series(
        url,
        "vllm:generation_tokens_created or vllm:time_to_first_token_seconds_created",
        timeout=10,
    )
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


async def test_h15_a_data_parallel_pod_reads_as_one_replica_of_its_engines(
    prometheus: tuple[str, Pod],
) -> None:
    """h15: two engines in one pod: queue 3 + 5, KV the fuller engine's, throughput and TTFT
    over both (one replica, never a duplicate series)."""
    case_file("h15-data-parallel-engines-in-one-pod.md")
    url, _ = prometheus
    [result] = await read_source(url, [target()], {KEY: snapshot([DP])})
    assert all(o.ok for o in result.queries.values()), result.queries
    tr = result.targets[KEY]
    queue = tr.signals[SignalName.QUEUE_DEPTH]
    assert (queue.status, queue.value) == (SignalStatus.OK, 8.0), queue
    kv = tr.signals[SignalName.KV_CACHE_USAGE]
    assert kv.status is SignalStatus.OK and kv.value == pytest.approx(0.7), kv
    rates = tr.throughput.pods[DP]
    assert rates.generation_tokens_per_second == pytest.approx(2 * GENERATION_PER_S, rel=0.4)
    ttft = tr.signals[SignalName.TTFT_P95]
    assert ttft.status is SignalStatus.OK and ttft.value is not None, ttft
    assert 0.25 < ttft.value <= 0.5


async def test_h17_an_engine_in_sleep_mode_is_asleep_not_hung(
    prometheus: tuple[str, Pod],
) -> None:
    """h17: the sleeping pod is reported asleep, never hung; its queue still counts; it is
    not serving capacity for TTFT's rule."""
    case_file("h17-vllm-sleep-mode.md")
    url, _ = prometheus
    snap = snapshot([SLEEPER, AWAKE])
    results = await read_source(url, [target()], {KEY: snap}, reads=STALL_POLLS + 1)
    tr = results[-1].targets[KEY]
    assert tr.stalled == {}, tr.stalled  # not hung, not frozen
    queue = tr.signals[SignalName.QUEUE_DEPTH]
    assert (queue.status, queue.value) == (SignalStatus.OK, 8.0), queue  # 5 + 3
    assert tr.sleeping == frozenset({SLEEPER})
    counts = observe(target(), snap, tr, None).replicas
    assert (counts.ready, counts.sleeping, counts.serving) == (2, 1, 1)
