"""The seasonal forecasts' refresh (scaler/controller/seasonal.py) and the demand history's
range query (scaler/sources/prometheus/demand_history.py): batched per target, a gap is a
gap, an outage keeps the last fit, fits run off the loop at start and then hourly.

The range query is answered here by an HTTP handler speaking Prometheus' query_range answer
(httpx.MockTransport), for the faults and the arithmetic; tests/sources/test_demand_history_real.py
reads days of history backfilled into a real Prometheus (both versions).
"""

from __future__ import annotations

import asyncio
import math
import re
from collections.abc import Sequence
from urllib.parse import parse_qs

import httpx
import pytest

from scaler.config.policy import TargetPolicy
from scaler.controller.seasonal import SeasonalRefresher, SeasonalSettings
from scaler.core.capacity import demand_of
from scaler.core.observation import PodLoad, ThroughputReading
from scaler.core.signals import SignalStatus
from scaler.sources.prometheus.demand_history import (
    DemandHistory,
    HistoryRead,
    read_demand_history,
)
from tests.core.test_capacity import capacity_policy

STEP = 600.0
DAY = 86400.0
END = 30 * DAY  # epoch seconds of the last step (aligned)
POLICY = capacity_policy()


def curve(t: float) -> float:
    """Requests/s with a daily curve and a level that drifts from day to day."""
    hour = (t % DAY) / 3600
    return (2 + math.cos(2 * math.pi * (hour - 20) / 24)) * (1 + 0.1 * math.sin(t / (3 * DAY)))


def prometheus(
    fail: bool = False, gap_at: float | None = None, computed: float | None = None
) -> httpx.MockTransport:
    """Answers every query_range with each tagged sub-query's values: requests, 500 prompt
    and 100 generated tokens per request; with ``computed``, that many prompt tokens per
    request computed (the rest prefix-cache hits) under the current hit counter's tag."""
    per = {
        "vllm:request_success_total": 1.0,
        "vllm:prompt_tokens_total": 500.0,
        "vllm:generation_tokens_total": 100.0,
    }
    if computed is not None:
        per["vllm:prefix_cache_hits_total"] = computed

    def handle(request: httpx.Request) -> httpx.Response:
        if fail:
            return httpx.Response(503, text="unavailable")
        assert request.url.path == "/api/v1/query_range"
        form = {k: v[0] for k, v in parse_qs(request.content.decode()).items()}
        start, end, step = float(form["start"]), float(form["end"]), float(form["step"])
        n = int((end - start) / step) + 1
        result = []
        query = form["query"]
        assert query.count("clamp_min(sum(rate(vllm:prompt_tokens_total") == 2 * query.count(
            "max_over_time(sum(rate(vllm:request_success_total"
        )  # the computed prompt tokens under both hit counters' names
        for i in range(len(set(re.findall(r'"scaler_target", "(t\d+)"', query)))):
            for metric, tokens in per.items():
                values = [
                    [start + k * step, str(curve(start + k * step) * tokens)]
                    for k in range(n)
                    if start + k * step != gap_at
                ]
                labels = {"scaler_target": f"t{i}", "scaler_metric": metric}
                result.append({"metric": labels, "values": values})
        body = {"status": "success", "data": {"resultType": "matrix", "result": result}}
        return httpx.Response(200, json=body)

    return httpx.MockTransport(handle)


async def read(transport: httpx.MockTransport, targets: Sequence[TargetPolicy]) -> HistoryRead:
    async with httpx.AsyncClient(transport=transport) as client:
        return await read_demand_history(
            client,
            "http://prometheus:9090",
            targets,
            end=END + 17.0,
            history_seconds=14 * DAY,
            step_seconds=STEP,
            timeout_seconds=5.0,
        )


async def test_history_is_the_capacity_signals_demand_per_step_with_gaps_as_gaps() -> None:
    other = POLICY.model_copy(
        update={"workload": POLICY.workload.model_copy(update={"name": "other"})}
    )
    got = await read(prometheus(gap_at=END - STEP), [POLICY, other])
    assert got.errors == ()
    h = got.histories[POLICY.key]
    assert h is not None and got.histories[other.key] is not None
    assert (h.step_seconds, h.end_at, len(h.values)) == (STEP, END, 14 * 144 + 1)
    assert h.values[-2] is None  # the gap
    load = PodLoad(curve(END), 500 * curve(END), 100 * curve(END))
    expected = demand_of(POLICY, ThroughputReading(SignalStatus.OK, {"p": load}))[0]
    assert h.values[-1] == pytest.approx(expected)


async def test_history_prices_the_computed_prompt_tokens_as_the_live_signal_does() -> None:
    """Prefix-cache hits are not work: with 300 of 500 prompt tokens computed the history is
    the live signal's pricing of a reading whose hits are the other 200, below the one that
    counts every prompt token."""
    work = capacity_policy(unit="work")  # the default unit (weighted tokens ignore hits)
    got = await read(prometheus(computed=300.0), [work])
    h = got.histories[work.key]
    assert h is not None and h.values[-1] is not None
    r = curve(END)
    cached = PodLoad(r, 500 * r, 100 * r, cached_prompt_tokens_per_second=200 * r)
    expected = demand_of(work, ThroughputReading(SignalStatus.OK, {"p": cached}))[0]
    every = demand_of(work, ThroughputReading(SignalStatus.OK, {"p": PodLoad(r, 500 * r, 100 * r)}))
    assert h.values[-1] == pytest.approx(expected)
    assert expected < 0.9 * every[0]


async def test_an_outage_names_the_targets_and_leaves_their_history_none() -> None:
    got = await read(prometheus(fail=True), [POLICY])
    assert got.histories == {POLICY.key: None}
    assert len(got.errors) == 1 and POLICY.key in got.errors[0] and "503" in got.errors[0]


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


async def test_fits_at_start_then_hourly_and_an_outage_keeps_the_last_fit() -> None:
    clock = Clock(END)
    outage = False
    reads: list[float] = []

    async def reader(targets: Sequence[TargetPolicy], end: float) -> HistoryRead:
        reads.append(end)
        return await read(prometheus(fail=outage), targets)

    refresher = SeasonalRefresher(
        reader, clock=clock, settings=SeasonalSettings(interval_seconds=15.0)
    )
    try:
        task = refresher.poke([POLICY])
        assert task is not None and refresher.forecast(POLICY.key) is None  # not waited for
        await task
        first = refresher.forecast(POLICY.key)
        assert first is not None
        assert first.in_use, first.note
        assert first.interval_seconds == 15.0
        clock.now += 1800
        assert refresher.poke([POLICY]) is None  # not due for an hour
        clock.now += 1800
        outage = True
        task = refresher.poke([POLICY])
        assert task is not None
        await task
        assert refresher.forecast(POLICY.key) is first  # the outage kept the last fit
        assert refresher.errors and "503" in refresher.errors[0]
        assert reads == [END, END + 3600]
    finally:
        await refresher.aclose()


def repriced(policy: TargetPolicy, decode_factor: float) -> TargetPolicy:
    """``policy`` with its decode price times ``decode_factor`` (as the price fit moves it)."""
    cap = policy.signals.capacity
    cost = cap.cost.model_copy(
        update={"decode_seconds_per_token": cap.cost.decode_seconds_per_token * decode_factor}
    )
    signals = policy.signals.model_copy(update={"capacity": cap.model_copy(update={"cost": cost})})
    return policy.model_copy(update={"signals": signals})


async def test_a_price_that_moved_makes_the_refit_due_after_five_minutes_not_an_hour() -> None:
    """The history is priced at the refit: a price fit that moved decode by more than 10%
    since the last fit refits it once ``min_refit_seconds`` (300 s) have passed, not an hour
    later; a move within 10% waits for the hour."""
    clock = Clock(END)
    reads: list[float] = []

    async def reader(targets: Sequence[TargetPolicy], end: float) -> HistoryRead:
        reads.append(end)
        return await read(prometheus(), targets)

    refresher = SeasonalRefresher(reader, clock=clock)
    try:
        task = refresher.poke([POLICY])
        assert task is not None
        await task
        clock.now += 200
        assert refresher.poke([repriced(POLICY, 0.25)]) is None  # under five minutes
        clock.now += 100
        assert refresher.poke([repriced(POLICY, 1.05)]) is None  # within 10%: the hour
        task = refresher.poke([repriced(POLICY, 0.25)])
        assert task is not None
        await task
        clock.now += 300
        assert refresher.poke([repriced(POLICY, 0.25)]) is None  # fitted at those prices
        assert reads == [END, END + 300]
    finally:
        await refresher.aclose()


async def test_a_fit_that_fails_keeps_the_last_and_the_task_never_raises() -> None:
    async def broken(targets: Sequence[TargetPolicy], end: float) -> HistoryRead:
        raise RuntimeError("reader bug")

    refresher = SeasonalRefresher(broken, clock=Clock(END))
    try:
        task = refresher.poke([POLICY])
        assert task is not None
        await asyncio.wait_for(task, 5)
        assert refresher.forecast(POLICY.key) is None
        assert "reader bug" in refresher.errors[0]
    finally:
        await refresher.aclose()


def test_history_dataclass_shape() -> None:
    h = DemandHistory((1.0, None), STEP, END)
    assert h.values[1] is None


def test_recommend_line_json_and_metrics_show_the_forecast() -> None:
    from scaler.controller.report import decision_json, seasonal_line
    from scaler.telemetry.metrics import ScalerMetrics
    from tests.core.builders import decide
    from tests.core.test_seasonal_phase import POLICY as SEEDED
    from tests.core.test_seasonal_phase import STATE, with_season

    d = decide(SEEDED, with_season(60_000.0), STATE, 0.0)
    line = seasonal_line(d)
    assert line.startswith("  seasonal: test; asks ")
    assert "(raised the recommendation)" in line
    doc = decision_json(d)["seasonal"]
    assert doc["in_use"] is True and doc["raised"] is True and doc["demand"] == 60_000.0
    m = ScalerMetrics()
    m.record_seasonal(SEEDED.key, d)
    assert m.seasonal_in_use.labels(SEEDED.key)._value.get() == 1
    assert m.seasonal_forecast.labels(SEEDED.key)._value.get() == 60_000.0
    assert m.seasonal_horizon.labels(SEEDED.key)._value.get() == d.seasonal.horizon_seconds  # type: ignore[union-attr]
    off = decide(SEEDED, with_season(60_000.0, in_use=False), STATE, 0.0)
    assert seasonal_line(off) == "  seasonal: test\n"
