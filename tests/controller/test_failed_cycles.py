"""A control cycle that fails with an exception is not a completed one.

The real composition root runs against the Kubernetes stand-in with its controller's cycles
scripted (fail or complete, one at a time, on a fake monotonic clock); the probes and
``/metrics`` are read over real HTTP: a failed cycle is counted
(``vllm_scaler_cycle_failures_total``), logged with the failures in a row, and liveness fails
once no cycle has completed for three intervals (at least 60 s), as for a stuck loop.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import time
from pathlib import Path

import httpx
import pytest
import structlog
from prometheus_client.parser import text_string_to_metric_families

from scaler.config.policy import parse_policy
from scaler.config.settings import Settings
from scaler.controller.app import RunOptions, serve
from scaler.controller.loop import Controller
from scaler.sim.kubeapi import KubeApiServer, KubeStore, write_kubeconfig
from scaler.telemetry.logging import configure_logging
from tests.support.clock import FakeClock
from tests.support.policies import SERVE_POLICY as POLICY


class ScriptedCycles:
    """Stands in for ``Controller.run_cycle``: each cycle waits for the test's word."""

    def __init__(self) -> None:
        self.script: asyncio.Queue[str] = asyncio.Queue()
        self.waiting = asyncio.Event()

    async def run_cycle(self) -> list[object]:
        self.waiting.set()
        action = await self.script.get()
        if action == "fail":
            raise RuntimeError("a bug in the cycle")
        return []

    async def step(self, action: str) -> None:
        """Run one cycle (``fail`` or ``complete``) and wait until the loop asks for the next."""
        self.waiting.clear()
        await self.script.put(action)
        await asyncio.wait_for(self.waiting.wait(), timeout=30)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _counters(text: str) -> dict[str, float]:
    return {
        s.name: s.value
        for fam in text_string_to_metric_families(text)
        for s in fam.samples
        if s.name in ("vllm_scaler_cycles_total", "vllm_scaler_cycle_failures_total")
    }


async def test_failed_cycles_are_counted_and_fail_liveness(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    cycles = ScriptedCycles()

    async def run_cycle(_controller: Controller) -> list[object]:
        return await cycles.run_cycle()

    monkeypatch.setattr(Controller, "run_cycle", run_cycle)
    store = KubeStore(time.time)
    store.add_deployment("llm", "vllm", 1, {"app": "vllm"})
    store.add_pod("llm", "vllm-p0", {"app": "vllm"}, ready=True)
    mono = FakeClock(0.0)
    port = _free_port()
    saved = structlog.get_config()
    configure_logging("json", "info")
    try:
        async with KubeApiServer(store, token="kube-token") as kube:
            settings = Settings(
                prometheus_url=f"http://127.0.0.1:{_free_port()}",  # refused: not the point
                prometheus_timeout_seconds=1,
                kubeconfig=write_kubeconfig(
                    tmp_path / "kc", server_url=kube.url, token="kube-token"
                ),
                in_cluster=False,
                leader_election=False,
                metrics_address="127.0.0.1",
                metrics_port=port,
                control_interval_seconds=0.001,  # the loop goes straight to the next cycle
            )
            task = asyncio.create_task(
                serve(settings, parse_policy(POLICY), RunOptions(), monotonic=mono)
            )
            base = f"http://127.0.0.1:{port}"
            try:
                await asyncio.wait_for(cycles.waiting.wait(), timeout=30)
                async with httpx.AsyncClient() as client:

                    async def probe(path: str) -> tuple[int, str]:
                        r = await client.get(base + path)
                        return r.status_code, r.text.strip()

                    async def counters() -> dict[str, float]:
                        return _counters((await client.get(base + "/metrics")).text)

                    assert await probe("/readyz") == (503, "no control cycle ended yet")
                    assert await counters() == {
                        "vllm_scaler_cycles_total": 0.0,
                        "vllm_scaler_cycle_failures_total": 0.0,
                    }
                    await cycles.step("fail")
                    assert await probe("/healthz") == (
                        200,
                        "ok: started 0 s ago; 1 cycle(s) failed since (cycle_failed in the log)",
                    )
                    assert await probe("/readyz") == (200, "ok")  # its metrics are worth a scrape
                    mono.advance(30)
                    await cycles.step("fail")
                    mono.advance(30)
                    await cycles.step("fail")
                    assert (await probe("/healthz"))[0] == 200  # 60 s: the limit itself
                    mono.advance(1)
                    assert await probe("/healthz") == (
                        503,
                        "no control cycle completed for 61 s (started then); 3 cycle(s) failed "
                        "since (cycle_failed in the log); the limit is 60 s (3 control "
                        "intervals of 0.001 s, at least 60 s)",
                    )
                    assert await counters() == {
                        "vllm_scaler_cycles_total": 0.0,
                        "vllm_scaler_cycle_failures_total": 3.0,
                    }
                    await cycles.step("complete")
                    assert await probe("/healthz") == (
                        200,
                        "ok: the last control cycle completed 0 s ago",
                    )
                    mono.advance(5)
                    await cycles.step("fail")
                    assert await probe("/healthz") == (
                        200,
                        "ok: the last control cycle completed 5 s ago; 1 cycle(s) failed since "
                        "(cycle_failed in the log)",
                    )
                    assert (await counters())["vllm_scaler_cycle_failures_total"] == 4.0
            finally:
                os.kill(os.getpid(), signal.SIGTERM)  # stops after the cycle in progress
                cycles.script.put_nowait("complete")
                code = await asyncio.wait_for(task, timeout=30)
    finally:
        structlog.configure(**saved)
    assert code == 0  # a clean stop; the failures are in the metrics and the log
    events = [json.loads(line) for line in capsys.readouterr().err.splitlines() if line]
    failed = [e for e in events if e.get("event") == "cycle_failed"]
    assert [e["failures_in_a_row"] for e in failed] == [1, 2, 3, 1]
    assert all("RuntimeError: a bug in the cycle" in e["exception"] for e in failed)
