"""h18: an instant-query lookback shorter than the scrape interval (REAL Prometheus servers
with and without ``--query.lookback-delta``; the start-up checks the controller runs)."""

from __future__ import annotations

import re
import time
from pathlib import Path

import httpx
import pytest

from scaler.sources.prometheus import PrometheusSource, check_lookback, check_rate_window
from tests.cases.hunt import busy_exposition
from tests.support.fakeprom import case_file, snapshot, target
from tests.support.scraped_pods import scraped_pods

pytestmark = [pytest.mark.e2e]

KEY = "llm/Deployment/vllm"
PODS = ["vllm-5c4d9-lb000", "vllm-5c4d9-lb001"]


async def problems(tmp: Path, *flags: str) -> list[str]:
    start = time.monotonic()
    bodies = {p: busy_exposition(start) for p in PODS}
    async with (
        scraped_pods(tmp, bodies, rate_window_seconds=4.0, extra_args=flags) as url,
        httpx.AsyncClient() as client,
    ):
        source = PrometheusSource(client, base_url=url, timeout_seconds=5, rate_window_seconds=4)
        await check_rate_window(source, [target()], {KEY: snapshot(PODS)})
        assert source.scrape_intervals[KEY] == pytest.approx(1.0, abs=0.2)
        return [str(p) for p in await check_lookback(source, source.scrape_intervals)]


async def test_h18_a_lookback_shorter_than_two_scrapes_is_reported(tmp_path: Path) -> None:
    """h18: --query.lookback-delta=1s against pods scraped every second: named, with the fix."""
    case_file("h18-lookback-shorter-than-the-scrape.md")
    [message] = await problems(tmp_path, "--query.lookback-delta=1s")
    assert message.startswith(f"{KEY}: the query backend's lookback (1s, --query.lookback-delta)")
    found = re.search(r"scraped every ([\d.]+)s\).* at least ([\d.]+)s", message)
    assert found, message
    assert float(found[1]) == pytest.approx(1.0, abs=0.2)
    assert float(found[2]) == pytest.approx(2 * float(found[1]))


async def test_h18_the_default_lookback_is_not_reported(tmp_path: Path) -> None:
    """h18: Prometheus' default lookback (5m) spans the scrapes: nothing to report."""
    case_file("h18-lookback-shorter-than-the-scrape.md")
    assert await problems(tmp_path) == []
