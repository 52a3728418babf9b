"""h06: readings older than they look, against a REAL Prometheus: one pod's exposition
carries sample timestamps 150 s old at every scrape (a delayed pipeline delivers them so)."""

from __future__ import annotations

import re
import time
from collections.abc import AsyncIterator, Callable

import pytest
import pytest_asyncio

from scaler.config.vocabulary import SignalName
from scaler.core.signals import SignalStatus
from tests.cases.hunt import busy_exposition, read_source
from tests.support.fakeprom import case_file, snapshot, target
from tests.support.scraped_pods import scraped_pods

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="module")]

RATE_WINDOW = 4.0
KEY = "llm/Deployment/vllm"
FRESH = ["vllm-5c4d9-cur00", "vllm-5c4d9-cur01"]
LAGGING = "vllm-5c4d9-lag00"
LAG_SECONDS = 150.0
_SAMPLE = re.compile(r"^[a-zA-Z_:][^ ]* [^ ]+$")


def _delayed(body: Callable[[], bytes], lag: float) -> Callable[[], bytes]:
    """``body`` with every sample stamped ``lag`` seconds in the past (milliseconds)."""

    def render() -> bytes:
        stamp = f" {int((time.time() - lag) * 1000)}"
        lines = [
            line + stamp if _SAMPLE.match(line) else line for line in body().decode().splitlines()
        ]
        return ("\n".join(lines) + "\n").encode()

    return render


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def prometheus(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[str]:
    start = time.monotonic()
    bodies = {name: busy_exposition(start, waiting=4) for name in FRESH}
    bodies[LAGGING] = _delayed(busy_exposition(start, waiting=30), LAG_SECONDS)
    tmp = tmp_path_factory.mktemp("prometheus")
    async with scraped_pods(tmp, bodies, rate_window_seconds=RATE_WINDOW, current_pods=2) as url:
        yield url


async def test_h06_a_pod_whose_samples_lag_is_left_out_and_named(prometheus: str) -> None:
    """h06: the lagging pod's 30 waiting are not read as current: queue 8, partial, named."""
    case_file("h06-readings-older-than-they-look.md")
    [result] = await read_source(prometheus, [target()], {KEY: snapshot([*FRESH, LAGGING])})
    assert all(o.ok for o in result.queries.values()), result.queries
    tr = result.targets[KEY]
    queue = tr.signals[SignalName.QUEUE_DEPTH]
    assert (queue.status, queue.value) == (SignalStatus.PARTIAL, 8.0), queue
    assert queue.pods_missing == 1
    found = re.search(r"up to (\d+) s old", queue.detail)
    assert found and LAG_SECONDS <= int(found[1]) <= LAG_SECONDS + 5, queue.detail
    assert LAGGING in queue.detail and "remote-write backlog" in queue.detail
    kv = tr.signals[SignalName.KV_CACHE_USAGE]
    assert kv.status is SignalStatus.PARTIAL and kv.value == pytest.approx(0.8)


async def test_h06_current_pods_read_as_before(prometheus: str) -> None:
    """h06: a target of current pods only is ok, its ages far below the limit."""
    case_file("h06-readings-older-than-they-look.md")
    [result] = await read_source(prometheus, [target()], {KEY: snapshot(FRESH)})
    queue = result.targets[KEY].signals[SignalName.QUEUE_DEPTH]
    assert (queue.status, queue.value) == (SignalStatus.OK, 8.0), queue
