"""The seasonal forecast's history read from a REAL Prometheus (Debian's 2.42, then
Prometheus 3 built from its module): five days of two fleets' vLLM counters are backfilled
with ``promtool tsdb create-blocks-from openmetrics`` (the way an operator imports history),
the server is started on those blocks, and the range queries of
``scaler/sources/prometheus/demand_history.py`` read them over the 14 days the controller asks
for. The fleet with a daily pattern gets a forecast in use, the fleet without one a forecast
that switches itself off, both through the controller's refresher (the fits it runs hourly).

Each 10-minute window has one request rate (prompt, generated and prefix-cache-hit tokens in
fixed proportions to it), sampled every 30 s, so the busiest minute of a window is its rate.
"""

from __future__ import annotations

import math
import random
import re
import shutil
import subprocess
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import httpx
import pytest

from scaler.config.policy import TargetPolicy
from scaler.controller.seasonal import SeasonalRefresher
from scaler.core.capacity import demand_of
from scaler.core.observation import PodLoad, ThroughputReading
from scaler.core.signals import SignalStatus
from scaler.sim.prometheus_server import PrometheusServer
from scaler.sources.prometheus.demand_history import HistoryRead, read_demand_history
from tests.core.test_capacity import capacity_policy
from tests.support.prometheus_versions import PROMETHEUS_VERSIONS, prometheus_binary

pytestmark = [pytest.mark.e2e]

DAY = 86400.0
STEP = 600.0
SCRAPE = 30.0
DAYS = 5
PROMPT, GENERATED, HITS = 500.0, 100.0, 200.0  # tokens per request


def target(name: str) -> TargetPolicy:
    base = capacity_policy(unit="work")
    return base.model_copy(update={"workload": base.workload.model_copy(update={"name": name})})


DAILY, FLAT = target("daily"), target("flat")


def window_rates(kind: str, windows: int, seed: int = 0) -> list[float]:
    """Requests/s per window: a daily curve (trough 1, peak 3 at 20:00) on a level that drifts
    from day to day, or no season at all (a drifting level with noise around it). The last two
    windows are equal: Prometheus 2's subquery also evaluates the step's start, the previous
    window's last minute."""
    rng = random.Random(f"{kind}:{seed}")
    level, out = 0.0, []
    for w in range(windows):
        if kind == "daily":
            level = 0.995 * level + rng.gauss(0, 0.02)
            hour = (w * STEP % DAY) / 3600
            out.append((2 + math.cos(2 * math.pi * (hour - 20) / 24)) * math.exp(level))
        else:
            level = 0.97 * (level + rng.gauss(0, 0.08))
            out.append(2 * math.exp(level + rng.gauss(0, 0.3)))
    out[-1] = out[-2]
    return out


def openmetrics(start: float, rates: dict[str, list[float]]) -> Iterator[str]:
    """The fleets' counters every 30 s from ``start``, time-ordered; the increment over
    ``(s - 30, s]`` is at the rate of the window holding ``s - 30``."""
    per = {
        'vllm:request_success_total{finished_reason="stop",': 1.0,
        "vllm:prompt_tokens_total{": PROMPT,
        "vllm:generation_tokens_total{": GENERATED,
        "vllm:prefix_cache_hits_total{": HITS,
    }
    totals = {(fleet, m): 0.0 for fleet in rates for m in per}
    samples = int(len(next(iter(rates.values()))) * STEP / SCRAPE)
    for k in range(samples + 1):
        s = start + k * SCRAPE
        for fleet, series in rates.items():
            pod = f"{fleet}-5d8f7c9b6-x2x4z"
            for metric, tokens in per.items():
                if k:
                    totals[fleet, metric] += series[int((k - 1) * SCRAPE // STEP)] * tokens * SCRAPE
                labels = f'namespace="llm",pod="{pod}"}}'
                yield f"{metric}{labels} {totals[fleet, metric]:.3f} {s:.0f}\n"
    yield "# EOF\n"


@pytest.fixture(scope="module")
def end_at() -> float:
    """The last window's end: an hour-aligned half hour at least an hour ago (backfilled
    blocks must not overlap the head a starting Prometheus opens)."""
    return math.floor(time.time() / 3600) * 3600 - 5400


@pytest.fixture(scope="module")
def rates() -> dict[str, list[float]]:
    windows = round(DAYS * DAY / STEP)
    return {"daily": window_rates("daily", windows), "flat": window_rates("flat", windows)}


@pytest.fixture(scope="module")
def blocks(
    tmp_path_factory: pytest.TempPathFactory, end_at: float, rates: dict[str, list[float]]
) -> Path:
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("no promtool (Debian's prometheus package ships it)")
    tmp = tmp_path_factory.mktemp("backfill")
    source = tmp / "history.om"
    with source.open("w") as f:
        f.writelines(openmetrics(end_at - DAYS * DAY, rates))
    out = tmp / "data"
    subprocess.run(
        [promtool, "tsdb", "create-blocks-from", "openmetrics", "-q", str(source), str(out)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    assert any(out.iterdir())
    return out


@pytest.fixture(scope="module", params=PROMETHEUS_VERSIONS)
def prometheus(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, blocks: Path
) -> Iterator[PrometheusServer]:
    binary = prometheus_binary(request.param)
    work = tmp_path_factory.mktemp("prometheus")
    shutil.copytree(blocks, work / "data")
    with PrometheusServer(work, sd_file=work / "none.json", binary=binary) as server:
        yield server


async def read(
    server: PrometheusServer, targets: Sequence[TargetPolicy], end: float
) -> HistoryRead:
    async with httpx.AsyncClient() as client:
        return await read_demand_history(
            client,
            server.url,
            targets,
            end=end,
            history_seconds=14 * DAY,
            step_seconds=STEP,
            timeout_seconds=30.0,
        )


def test_the_fleets_pod_names_are_the_targets() -> None:
    for t in (DAILY, FLAT):
        assert re.fullmatch(t.pod_name_regex(), f"{t.workload.name}-5d8f7c9b6-x2x4z")


async def test_range_queries_read_the_backfilled_days_as_the_live_signals_work(
    prometheus: PrometheusServer, end_at: float, rates: dict[str, list[float]]
) -> None:
    got = await read(prometheus, [DAILY, FLAT], end_at)
    assert got.errors == (), prometheus.log_tail()
    h = got.histories[DAILY.key]
    assert h is not None and got.histories[FLAT.key] is not None
    assert (h.step_seconds, h.end_at, len(h.values)) == (STEP, end_at, 14 * 144 + 1)
    # nine days before the fleet existed are no data; its five days are all there
    first = next(i for i, v in enumerate(h.values) if v is not None)
    assert first == 9 * 144 + 1
    assert all(v is not None for v in h.values[first:])
    # the last window's busiest minute, priced with its prefix-cache hits taken off
    r = rates["daily"][-1]
    load = PodLoad(r, PROMPT * r, GENERATED * r, cached_prompt_tokens_per_second=HITS * r)
    expected = demand_of(DAILY, ThroughputReading(SignalStatus.OK, {"p": load}))[0]
    assert h.values[-1] == pytest.approx(expected, rel=1e-3)
    # the daily curve is there: the evening peak about three times the morning trough
    day = [v for v in h.values[-144:] if v is not None]
    assert 2.4 < max(day) / min(day) < 3.6


async def test_the_forecast_is_in_use_for_the_daily_fleet_and_off_for_the_flat_one(
    prometheus: PrometheusServer, end_at: float
) -> None:
    async def reader(targets: Sequence[TargetPolicy], now: float) -> HistoryRead:
        return await read(prometheus, targets, now)

    refresher = SeasonalRefresher(reader, clock=lambda: end_at)
    try:
        await refresher.prime([DAILY, FLAT])
    finally:
        await refresher.aclose()
    daily, flat = refresher.forecast(DAILY.key), refresher.forecast(FLAT.key)
    assert daily is not None and flat is not None
    assert daily.in_use, daily.note
    assert daily.history_seconds == pytest.approx(DAYS * DAY)  # from its first window on
    assert daily.path and daily.check is not None and daily.check.ratio < 0.95
    assert not flat.in_use and flat.path == ()
    assert flat.note.startswith("seasonal forecast off"), flat.note
