"""The demo's lines for the controller's JSON log events, its count of failed control cycles
and its exit code."""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import io
import json

import pytest

from scaler.sim.demo import (
    FAILED_CYCLES_EXIT_CODE,
    count_failed_cycles,
    demo_exit_code,
    format_event,
    pump_controller_log,
)
from scaler.sim.report import format_summary, summarize, summary_json


def test_a_non_decision_event_reads_key_value() -> None:
    event = {
        "event": "started",
        "level": "info",
        "timestamp": "2026-01-01T00:00:04+00:00",
        "targets": ["llm/Deployment/vllm"],
        "metrics_port": None,
        "prometheus": {"url": "http://127.0.0.1:9090", "headers": []},
    }
    start = 1767225600.0  # 2026-01-01T00:00:00Z
    assert format_event(event, start) == (
        "    +4s info: started targets=llm/Deployment/vllm metrics_port=none "
        "prometheus.url=http://127.0.0.1:9090 prometheus.headers=none"
    )


async def test_the_controller_log_is_printed_and_its_failed_cycles_counted() -> None:
    stream = asyncio.StreamReader()
    lines = [
        {"event": "started", "level": "info", "targets": ["llm/Deployment/vllm"]},
        {"event": "cycle_failed", "level": "error", "failures_in_a_row": 1, "exception": "E"},
        {"event": "scaled", "level": "info"},
        {"event": "cycle_failed", "level": "error", "failures_in_a_row": 2, "exception": "E"},
        {"event": "target_read_failed", "level": "error", "outcome": "not_found"},
    ]
    for line in lines:
        stream.feed_data((json.dumps(line) + "\n").encode())
    stream.feed_data(b"not json\n")
    stream.feed_eof()
    out = io.StringIO()
    seen: collections.Counter[str] = collections.Counter()
    await pump_controller_log(stream, out, 0.0, seen)
    assert seen == {"started": 1, "cycle_failed": 2, "scaled": 1, "target_read_failed": 1}
    # a cycle that could not read its target failed too, though it raised nothing
    assert count_failed_cycles(seen) == 3
    assert out.getvalue() == (
        "info: started targets=llm/Deployment/vllm\n"
        "error: cycle_failed failures_in_a_row=1 exception=E\n"
        "error: cycle_failed failures_in_a_row=2 exception=E\n"
        "error: target_read_failed outcome=not_found\n"
        "  not json\n"
    )


@pytest.mark.parametrize(
    ("stop_signal", "early", "controller", "failed", "expected"),
    [
        pytest.param(None, None, 0, 0, (0, ""), id="a clean run"),
        pytest.param(None, None, None, None, (0, ""), id="no controller"),
        pytest.param(
            None,
            None,
            0,
            2,
            (
                3,
                "2 control cycle(s) of the controller failed (cycle_failed, target_read_failed, "
                "scale_failed above): exit code 3",
            ),
            id="failed cycles",
        ),
        pytest.param(
            None,
            2,
            2,
            1,
            (1, "controller exited early with code 2; the run ended without it"),
            id="an early exit comes first",
        ),
        pytest.param(
            None, None, -9, 1, (1, "controller exited with code -9"), id="a controller error"
        ),
        pytest.param(2, None, 0, 4, (130, ""), id="a signal comes first"),
    ],
)
def test_the_exit_code_names_the_most_serious_outcome(
    stop_signal: int | None,
    early: int | None,
    controller: int | None,
    failed: int | None,
    expected: tuple[int, str],
) -> None:
    assert FAILED_CYCLES_EXIT_CODE == 3
    assert (
        demo_exit_code(
            stop_signal=stop_signal,
            early_exit_code=early,
            controller_exit_code=controller,
            failed_cycles=failed,
        )
        == expected
    )


def test_the_summary_counts_failed_cycles_when_a_controller_ran() -> None:
    s = summarize([], [], (), start=0.0, slo_ttft_seconds=2.0, window_seconds=10.0)
    assert "failed cycles" not in format_summary(s, title="t")  # no controller
    assert summary_json(s, None)["failed_cycles"] is None
    s = dataclasses.replace(s, failed_cycles=2)
    assert format_summary(s, title="t").splitlines()[-1] == (
        "failed cycles   2 (control cycles that ended with an exception or could not read or "
        "scale the target: cycle_failed, target_read_failed, scale_failed in the controller's "
        "log)"
    )
    assert summary_json(s, None)["failed_cycles"] == 2


def test_the_capacity_signal_shows_demand_and_target_per_replica_with_its_unit() -> None:
    """Its value is the forecast demand per replica, not the capacity (the decision's message
    says the capacity): named so, beside the usable capacity per replica it is compared with,
    as recommend's table shows value / target."""
    event = {
        "event": "decision",
        "timestamp": "2026-01-01T00:05:33+00:00",
        "current": 1,
        "desired": 2,
        "reason": "scale_up",
        "ready": 1,
        "starting": 0,
        "terminating": 0,
        "signals": {"ttft_p95": 0.49, "capacity": 16500.22},
        "signal_targets": {"ttft_p95": 2.0, "capacity": 11880.0},
        "message": "m",
    }
    line = format_event(event, 1767225600.0).splitlines()[0]
    assert line.endswith("| ttft_p95=0.49s demand=16.5k/replica target=11.9k tok/s")
    learning = {**event, "signals": {"capacity": "learning"}, "signal_targets": {}}
    assert format_event(learning, 1767225600.0).splitlines()[0].endswith("| capacity=learning")
