"""Kubernetes API faults through the real controller and actuator.

Writes: each failed PATCH of the scale subresource is a ``scale_failed`` error log, a
``vllm_scaler_scale_failures_total{outcome}`` increment and a ``FailedRescale`` Warning Event;
nothing is retried within the cycle (409 excepted: one re-read and retry), and the next cycle
decides again from a fresh read. Reads: a target that cannot be read is skipped for the cycle
(``read_failed``, ``vllm_scaler_target_read_errors_total{outcome}``), never decided on stale
data. Outcome mapping per status is pinned in ``tests/kube/test_actuator.py``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp import web

from scaler.actuators.kubernetes import (
    ApiFailure,
    KubeApiError,
    KubernetesActuator,
    build_api_client,
)
from scaler.controller.loop import Controller
from scaler.core.observation import WorkloadSnapshot
from scaler.sim.kubeapi import write_kubeconfig
from scaler.telemetry.metrics import ScalerMetrics
from tests.faults.helpers import busy, names
from tests.support.controller_harness import KEY, NS, TOKEN, Harness, HarnessFactory

PODS = names(2)
SCALE = "/deployments/vllm/scale$"


def failed_rescale_events(h: Harness) -> list[dict[str, object]]:
    return [e for e in h.store.events(NS) if e["reason"] == "FailedRescale"]


@pytest.mark.parametrize(
    ("status", "times", "retry_after", "outcome"),
    [
        pytest.param(403, 1, None, "forbidden", id="403 forbidden"),
        pytest.param(404, 1, None, "not_found", id="404 not found"),
        pytest.param(409, 2, None, "conflict", id="409 twice: stale after the re-read"),
        pytest.param(429, 1, 7, "throttled", id="429 with Retry-After"),
        pytest.param(500, 1, None, "server_error", id="500"),
        pytest.param(503, 1, 3, "server_error", id="503 with Retry-After"),
        pytest.param(422, 1, None, "invalid", id="422 invalid"),
    ],
)
async def test_failed_write_is_reported_and_retried_next_cycle(
    make_harness: HarnessFactory, status: int, times: int, retry_after: int | None, outcome: str
) -> None:
    h = await make_harness(replicas=2, ready=PODS, answers=busy(PODS))
    h.store.inject_fault("PATCH", SCALE, status, times=times, retry_after=retry_after)
    r = await h.cycle()
    assert r.decision is not None and r.decision.desired_replicas == 6
    assert r.action == outcome and r.error
    assert h.replicas() == 2
    assert h.count("vllm_scaler_scale_failures_total", target=KEY, outcome=outcome) == 1
    [event] = failed_rescale_events(h)
    assert event["type"] == "Warning"
    message = str(event["message"])
    assert "cannot scale llm/Deployment/vllm from 2 to 6" in message
    if retry_after is not None:
        assert f"retry after {retry_after}s" in message
    patches = len(h.patches())
    assert patches == times  # no retry loop within the cycle (409: one re-read and retry)

    r = await h.next_cycle()  # the fault is gone: the next cycle writes
    assert r.action == "scaled" and h.replicas() == 6
    assert h.count("vllm_scaler_scale_actions_total", target=KEY, direction="up") == 1


@pytest.mark.parametrize(
    ("path", "status", "outcome"),
    [
        pytest.param(SCALE, 403, "forbidden", id="scale 403"),
        pytest.param(SCALE, 404, "not_found", id="scale 404"),
        pytest.param(SCALE, 429, "throttled", id="scale 429"),
        pytest.param(SCALE, 500, "server_error", id="scale 500"),
        pytest.param("/pods$", 503, "server_error", id="pod list 503"),
        pytest.param("/deployments/vllm$", 403, "forbidden", id="annotations read 403"),
    ],
)
async def test_failed_read_skips_the_target_for_the_cycle(
    make_harness: HarnessFactory, path: str, status: int, outcome: str
) -> None:
    h = await make_harness(replicas=2, ready=PODS, answers=busy(PODS))
    # a throttled read waits out a short Retry-After and is sent again: a long one skips it
    h.store.inject_fault("GET", path, status, retry_after=30 if status == 429 else None)
    r = await h.cycle()
    assert r.action == "read_failed" and r.decision is None and r.error
    assert h.count("vllm_scaler_target_read_errors_total", target=KEY, outcome=outcome) == 1
    assert h.writes() == [] and h.replicas() == 2
    r = await h.next_cycle()
    assert r.action == "scaled" and h.replicas() == 6


# --------------------------------------------------------- timeouts and dropped connections


@contextlib.asynccontextmanager
async def stalling_api() -> AsyncIterator[str]:
    """An API server that accepts every request and never answers."""
    release = asyncio.Event()

    async def stall(request: web.Request) -> web.Response:
        await release.wait()
        return web.Response(status=503)

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", stall)
    runner = web.AppRunner(app, shutdown_timeout=0.1)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    try:
        yield f"http://127.0.0.1:{runner.addresses[0][1]}"
    finally:
        release.set()
        await runner.cleanup()


@contextlib.asynccontextmanager
async def dropping_api() -> AsyncIterator[str]:
    """A TCP server that reads the request and closes the connection without an answer."""

    async def drop(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(Exception):
            await reader.read(1024)
        writer.close()

    server = await asyncio.start_server(drop, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.close()
        await server.wait_closed()


SERVERS = {"timeout": stalling_api, "dropped_connection": dropping_api}


@pytest.mark.parametrize("fault", sorted(SERVERS))
async def test_unanswered_api_is_transport_and_the_cycle_goes_on(
    make_harness: HarnessFactory, tmp_path: Path, fault: str
) -> None:
    h = await make_harness(replicas=2, ready=PODS, answers=busy(PODS))
    async with SERVERS[fault]() as url:
        kubeconfig = write_kubeconfig(tmp_path / f"kc-{fault}", server_url=url, token=TOKEN)
        api = await build_api_client(kubeconfig=kubeconfig, in_cluster=False)
        try:
            actuator = KubernetesActuator(api, clock=h.clock, request_timeout=0.3)
            with pytest.raises(KubeApiError) as info:
                await actuator.read(h.policy.targets[0].workload)
            assert info.value.outcome is ApiFailure.TRANSPORT
            snap = WorkloadSnapshot(NS, 2, 2, "app=vllm", "1")
            result = await actuator.scale(h.policy.targets[0].workload, 6, current=snap)
            assert result.outcome is ApiFailure.TRANSPORT and not result.ok
            assert "cannot reach the API server" in result.message

            metrics = ScalerMetrics()
            controller = Controller(
                policy=h.policy, source=h.source, actuator=actuator, metrics=metrics, clock=h.clock
            )
            [report] = await asyncio.wait_for(controller.run_cycle(), timeout=10)
            assert report.action == "read_failed"
            sample = metrics.registry.get_sample_value(
                "vllm_scaler_target_read_errors_total", {"target": KEY, "outcome": "transport"}
            )
            assert sample == 1
            assert metrics.registry.get_sample_value("vllm_scaler_cycles_total") == 1
        finally:
            await api.close()
