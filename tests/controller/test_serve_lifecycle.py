"""``serve`` as a pod runs it: leader election on, SIGTERM, and secrets kept out of the logs.

The real composition root runs against the Kubernetes stand-in and a Prometheus stand-in
that rejects the request and echoes its credentials back (as some proxies do); the process
gets a real SIGTERM in the middle of its first cycle.
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import signal
import socket
import time
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
from scaler.controller.loop import STATE_ANNOTATION
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


async def test_sigterm_releases_the_lease_and_exits_0_without_leaking_secrets(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = KubeStore(time.time)
    store.add_deployment("llm", "vllm", 2, {"app": "vllm"})
    for i in range(2):
        store.add_pod("llm", f"vllm-p{i}", {"app": "vllm"}, ready=True)
    prom = EchoingPrometheus()
    app = web.Application()
    app.router.add_post("/api/v1/query", prom.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    token = tmp_path / "token"
    token.write_text(TOKEN + "\n")
    saved = structlog.get_config()
    try:
        async with KubeApiServer(store, token="kube-token") as kube:
            kubeconfig = write_kubeconfig(tmp_path / "kc", server_url=kube.url, token="kube-token")
            settings = Settings(
                prometheus_url=f"http://127.0.0.1:{runner.addresses[0][1]}",
                prometheus_bearer_token_file=token,
                prometheus_headers=f"X-Scope-OrgID=tenant-a,Proxy-Authorization={BASIC}",
                kubeconfig=kubeconfig,
                in_cluster=False,
                leader_election=True,
                lease_namespace="vllm-scaler",
                lease_identity="pod-a_1234",
                metrics_port=0,
                control_interval_seconds=3600,
            )
            configure_logging("json", "debug")
            task = asyncio.create_task(serve(settings, parse_policy(POLICY), RunOptions()))
            await asyncio.wait_for(prom.asked.wait(), timeout=30)
            os.kill(os.getpid(), signal.SIGTERM)  # mid-cycle: it finishes, then stops
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
