"""``serve`` as a pod runs it: leader election on, SIGTERM, and secrets kept out of the logs.

The real composition root runs against the Kubernetes stand-in and a Prometheus stand-in
that rejects the request and echoes its credentials back (as some proxies do); the process
gets a real SIGTERM after its first cycle, or in the middle of one that waits on Prometheus.
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import signal
import socket
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import httpx
import pytest
import structlog
from aiohttp import web

from scaler.actuators.kubernetes import build_api_client
from scaler.actuators.lease import LeaseClient
from scaler.config.policy import parse_policy
from scaler.config.settings import Settings, redact_url
from scaler.controller.app import RunOptions, serve
from scaler.controller.leader import LeaderElectionConfig, LeaderElector
from scaler.controller.lease_state import STATE_ANNOTATION
from scaler.sim.kubeapi import KubeApiServer, KubeStore, write_kubeconfig
from scaler.telemetry.logging import configure_logging
from tests.support.clock import FakeClock
from tests.support.policies import SERVE_POLICY as POLICY

TOKEN = "tok-SECRET-4242-rotating"
BASIC = "Basic c2VjcmV0LXVzZXI6cGFzcw=="


class EchoingPrometheus:
    """Answers every query 401 with the request's credentials in the body."""

    def __init__(self) -> None:
        self.asked = asyncio.Event()
        self.headers: list[dict[str, str]] = []

    async def handle(self, request: web.Request) -> web.Response:
        self.headers.append(dict(request.headers))
        form = await request.post()
        if "scaler_selector" in str(form.get("query", "")):  # a cycle's query, not a start probe
            self.asked.set()
        return web.Response(
            status=401,
            text=f"denied: Authorization={request.headers.get('Authorization')} "
            f"proxy={request.headers.get('Proxy-Authorization')}",
        )


async def _listen(handle: Callable[[web.Request], Awaitable[web.Response]]) -> web.AppRunner:
    """A Prometheus stand-in answering /api/v1/query with ``handle``, on a free port."""
    app = web.Application()
    app.router.add_post("/api/v1/query", handle)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    return runner


def _leader_settings(
    tmp_path: Path, kube_url: str, prometheus_url: str, **extra: object
) -> Settings:
    """A pod's settings: leader election on, the Lease vllm-scaler/vllm-scaler, one cycle an
    hour (only the first runs in a test)."""
    return Settings(
        prometheus_url=prometheus_url,
        kubeconfig=write_kubeconfig(tmp_path / "kc", server_url=kube_url, token="kube-token"),
        in_cluster=False,
        leader_election=True,
        lease_namespace="vllm-scaler",
        lease_identity="pod-a_1234",
        metrics_port=0,
        control_interval_seconds=3600,
        **extra,  # type: ignore[arg-type]
    )


async def test_sigterm_releases_the_lease_and_exits_0_without_leaking_secrets(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = KubeStore(time.time)
    store.add_deployment("llm", "vllm", 2, {"app": "vllm"})
    for i in range(2):
        store.add_pod("llm", f"vllm-p{i}", {"app": "vllm"}, ready=True)
    prom = EchoingPrometheus()
    runner = await _listen(prom.handle)
    token = tmp_path / "token"
    token.write_text(TOKEN + "\n")
    saved = structlog.get_config()
    try:
        async with KubeApiServer(store, token="kube-token") as kube:
            settings = _leader_settings(
                tmp_path,
                kube.url,
                f"http://127.0.0.1:{runner.addresses[0][1]}",
                prometheus_bearer_token_file=token,
                prometheus_headers=f"X-Scope-OrgID=tenant-a,Proxy-Authorization={BASIC}",
            )
            kubeconfig = settings.kubeconfig
            configure_logging("json", "debug")
            rounds = _Rounds()
            task = asyncio.create_task(
                serve(settings, parse_policy(POLICY), RunOptions(output="json"), out=rounds)
            )
            await asyncio.wait_for(rounds.printed.wait(), timeout=30)
            assert prom.asked.is_set()
            os.kill(os.getpid(), signal.SIGTERM)  # after the first cycle
            code = await asyncio.wait_for(task, timeout=30)
            lease = store.get_object("coordination.k8s.io", "leases", "vllm-scaler", "vllm-scaler")
            # another replica acquires at once, without waiting for the lease to expire
            api = await build_api_client(kubeconfig=kubeconfig, in_cluster=False)
            try:
                other = LeaderElector(
                    LeaderElectionConfig(namespace="vllm-scaler", name="vllm-scaler", identity="b"),
                    LeaseClient(api, clock=time.time),
                    clock=time.time,
                )
                assert await other.try_acquire_or_renew()
            finally:
                await api.close()
    finally:
        structlog.configure(**saved)
        await runner.cleanup()
    assert code == 0
    assert lease["spec"]["holderIdentity"] == ""
    assert STATE_ANNOTATION in lease["metadata"]["annotations"]  # the finished cycle's state
    assert prom.headers[0]["Authorization"] == f"Bearer {TOKEN}"
    assert prom.headers[0]["X-Scope-OrgID"] == "tenant-a"
    assert prom.headers[0]["Proxy-Authorization"] == BASIC
    logs = capsys.readouterr().err
    for event in ('"leader_acquired"', '"query_failed"', '"leader_released"', '"stopped"'):
        assert event in logs, event
    assert "denied: Authorization=Bearer *** proxy=***" in logs  # echoed, then masked
    assert TOKEN not in logs and "SECRET" not in logs
    assert "c2VjcmV0" not in logs


def test_redact_url_hides_the_password() -> None:
    assert redact_url("https://user:pw@thanos:9090/x") == "https://user:***@thanos:9090/x"
    assert redact_url("http://prom:9090") == "http://prom:9090"


class _Rounds(io.StringIO):
    """``serve``'s output: each printed round sets :attr:`printed`."""

    def __init__(self) -> None:
        super().__init__()
        self.printed = asyncio.Event()

    def flush(self) -> None:
        super().flush()
        self.printed.set()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_probes_of_a_running_controller_during_a_prometheus_outage(
    tmp_path: Path,
) -> None:
    """During a Prometheus outage cycles complete: ready and live. Liveness fails only when
    no cycle completes for three intervals (here the loop waits out its hour-long interval
    while the fake monotonic clock moves on), readiness never follows it."""
    store = KubeStore(time.time)
    store.add_deployment("llm", "vllm", 2, {"app": "vllm"})
    for i in range(2):
        store.add_pod("llm", f"vllm-p{i}", {"app": "vllm"}, ready=True)
    mono = FakeClock(0.0)
    rounds = _Rounds()
    metrics_port = _free_port()
    async with KubeApiServer(store, token="kube-token") as kube:
        settings = Settings(
            prometheus_url=f"http://127.0.0.1:{_free_port()}",  # nothing listens: refused
            prometheus_timeout_seconds=1,
            kubeconfig=write_kubeconfig(tmp_path / "kc", server_url=kube.url, token="kube-token"),
            in_cluster=False,
            leader_election=False,
            metrics_address="127.0.0.1",
            metrics_port=metrics_port,
            control_interval_seconds=3600,
        )
        options = RunOptions(output="json")
        task = asyncio.create_task(
            serve(settings, parse_policy(POLICY), options, out=rounds, monotonic=mono)
        )
        try:
            await asyncio.wait_for(rounds.printed.wait(), timeout=30)
            [report] = json.loads(rounds.getvalue())
            assert report["reason"] == "no_valid_signals"  # Prometheus is down
            base = f"http://127.0.0.1:{metrics_port}"
            async with httpx.AsyncClient() as client:
                assert (await client.get(f"{base}/readyz")).status_code == 200
                assert (await client.get(f"{base}/healthz")).status_code == 200
                mono.advance(3 * 3600 + 1)  # no cycle completed for three intervals
                health = await client.get(f"{base}/healthz")
                assert health.status_code == 503
                assert "no control cycle completed for 10801 s" in health.text
                assert (await client.get(f"{base}/readyz")).status_code == 200
        finally:
            if not task.done():
                os.kill(os.getpid(), signal.SIGTERM)  # serve handles it: a clean stop
        assert await asyncio.wait_for(task, timeout=30) == 0


class HangingPrometheus:
    """Answers the start probes (an empty vector) but never a cycle's query: a Prometheus
    that has stopped answering, within the client's (long) timeout."""

    def __init__(self) -> None:
        self.asked = asyncio.Event()
        self.answered_cycle_queries = 0
        self._never = asyncio.Event()

    async def handle(self, request: web.Request) -> web.Response:
        form = await request.post()
        if "scaler_selector" in str(form.get("query", "")):
            self.asked.set()
            await self._never.wait()
            self.answered_cycle_queries += 1
        return web.json_response(
            {"status": "success", "data": {"resultType": "vector", "result": []}}
        )

    def unblock(self) -> None:
        self._never.set()


async def test_sigterm_cancels_an_in_flight_query_and_releases_the_lease(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A query that waits (here forever; in a cluster, up to the Prometheus timeout, and
    several of them one after another) does not hold the stop up: SIGTERM cancels the cycle,
    the Lease is released and serve returns 0 while the query is still unanswered."""
    store = KubeStore(time.time)
    store.add_deployment("llm", "vllm", 2, {"app": "vllm"})
    store.add_pod("llm", "vllm-p0", {"app": "vllm"}, ready=True)
    prom = HangingPrometheus()
    runner = await _listen(prom.handle)
    saved = structlog.get_config()
    try:
        async with KubeApiServer(store, token="kube-token") as kube:
            settings = _leader_settings(
                tmp_path,
                kube.url,
                f"http://127.0.0.1:{runner.addresses[0][1]}",
                prometheus_timeout_seconds=300,
            )
            configure_logging("json", "info")
            task = asyncio.create_task(serve(settings, parse_policy(POLICY), RunOptions()))
            await asyncio.wait_for(prom.asked.wait(), timeout=30)
            os.kill(os.getpid(), signal.SIGTERM)  # the cycle waits on its query
            code = await asyncio.wait_for(task, timeout=30)
            answered = prom.answered_cycle_queries
            lease = store.get_object("coordination.k8s.io", "leases", "vllm-scaler", "vllm-scaler")
    finally:
        structlog.configure(**saved)
        prom.unblock()  # the server's shutdown waits for its handlers
        await runner.cleanup()
    assert code == 0
    assert answered == 0  # serve returned with the query unanswered: it was cancelled
    assert lease["spec"]["holderIdentity"] == ""
    events = [json.loads(line)["event"] for line in capsys.readouterr().err.splitlines()]
    assert events[-3:] == ["cycle_cancelled", "stopped", "leader_released"], events


async def test_a_lease_release_that_hangs_is_given_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The release on the way out is bounded (RELEASE_TIMEOUT_SECONDS): an API server that
    does not answer leaves the Lease to expire on its own instead of holding up the stop."""
    from scaler.controller import app as app_module

    release_cancelled = asyncio.Event()

    async def hanging_release(self: LeaderElector) -> bool:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            release_cancelled.set()
            raise
        return True

    monkeypatch.setattr(LeaderElector, "release", hanging_release)
    monkeypatch.setattr(app_module, "RELEASE_TIMEOUT_SECONDS", 0.01)  # it never answers
    store = KubeStore(time.time)
    store.add_deployment("llm", "vllm", 2, {"app": "vllm"})
    rounds = _Rounds()
    async with KubeApiServer(store, token="kube-token") as kube:
        settings = _leader_settings(
            tmp_path,
            kube.url,
            f"http://127.0.0.1:{_free_port()}",  # nothing listens: refused
            prometheus_timeout_seconds=1,
        )
        task = asyncio.create_task(
            serve(settings, parse_policy(POLICY), RunOptions(output="json"), out=rounds)
        )
        await asyncio.wait_for(rounds.printed.wait(), timeout=30)
        os.kill(os.getpid(), signal.SIGTERM)
        assert await asyncio.wait_for(task, timeout=30) == 0
    assert release_cancelled.is_set()
