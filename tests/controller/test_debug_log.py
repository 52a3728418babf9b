"""``--log-level debug`` adds, each cycle, one event per query (its status, series found and
duration) and one per target (what each signal read)."""

from __future__ import annotations

import logging
from typing import Any

import structlog
from structlog.testing import capture_logs

from tests.support.controller_harness import KEY, Harness, HarnessFactory
from tests.support.fakeprom import pods, uniform_answers


async def _two_busy_pods_idle_ttft(make_harness: HarnessFactory) -> Harness:
    """Two ready pods, 3 waiting and KV cache 0.25 each, no request in the TTFT window (a NaN
    quantile at a zero request rate)."""
    two = pods(2)
    answers = uniform_answers(
        two, waiting="3", running="1", kv_cache="0.25", ttft_p95="NaN", ttft_rate="0"
    )
    return await make_harness(replicas=2, ready=two, answers=answers)


async def _cycle_logs(h: Harness, level: int) -> list[dict[str, Any]]:
    """The events one control cycle logs at ``level`` and above (another test may have left
    a less verbose level configured)."""
    saved = structlog.get_config()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(level))
    try:
        with capture_logs() as events:
            await h.controller.run_cycle()
    finally:
        structlog.configure(**saved)
    return events


async def test_a_cycle_logs_each_query_and_each_targets_readings_at_debug(
    make_harness: HarnessFactory,
) -> None:
    h = await _two_busy_pods_idle_ttft(make_harness)
    events = await _cycle_logs(h, logging.DEBUG)  # --log-level debug
    debug = [e for e in events if e["log_level"] == "debug"]
    queries = [e for e in debug if e["event"] == "query"]
    assert queries and {e["status"] for e in queries} == {"ok"}
    assert all(e["duration_seconds"] >= 0 and e["http_status"] == 200 for e in queries)
    assert {e["query"] for e in queries} >= {"waiting", "kv_cache"}
    [readings] = [e for e in debug if e["event"] == "target_readings"]
    assert readings["target"] == KEY
    assert readings["signals"]["queue_depth"] == 6.0  # the sum over both ready pods
    assert readings["signals"]["kv_cache_usage"] == 0.5
    assert readings["signals"]["ttft_p95"] == "idle"


async def test_an_idle_ttft_is_logged_and_shown_as_its_status_not_zero_seconds(
    make_harness: HarnessFactory,
) -> None:
    """No requests in the window (a NaN quantile at a zero request rate): the decision log,
    and the demo's line built from it, say ``idle`` as the text report does, never ``0.00s``."""
    from scaler.sim.demo import format_event

    h = await _two_busy_pods_idle_ttft(make_harness)
    events = await _cycle_logs(h, logging.INFO)  # run's default level
    [decision] = [e for e in events if e["event"] == "decision"]
    assert decision["signals"] == {
        "queue_depth": 3.0,  # per ready replica
        "kv_cache_usage": 0.25,
        "ttft_p95": "idle",
        "capacity": "learning",
    }
    # a target only beside a measured value (none for idle or learning)
    assert decision["signal_targets"] == {"queue_depth": 10.0, "kv_cache_usage": 0.8}
    line = format_event(decision, 0.0)
    assert line.endswith(
        "| queue_depth=3.00 kv_cache_usage=0.25 ttft_p95=idle capacity=learning"
    ), line
