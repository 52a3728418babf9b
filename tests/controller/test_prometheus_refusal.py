"""A Prometheus that refuses the requests (HTTP 401, 403, 500) is named as such at start.

The start-up probe is the first query: its failure is one line with the URL (never its
password), the HTTP status with its reason phrase and the server's message, and what a 401 or
403 means with the kind of authentication sent. ``run`` logs it and runs on (its cycles hold);
``recommend`` stops with exit code 1. The server is real HTTP; the Kubernetes side is the
stand-in.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
import structlog
from aiohttp import web

from scaler.config.policy import parse_policy
from scaler.config.settings import Settings
from scaler.controller.app import RunOptions, StartupError, serve
from scaler.core.signals import SignalStatus
from scaler.sim.kubeapi import KubeApiServer, KubeStore, write_kubeconfig
from scaler.sources.prometheus import PrometheusSource, QueryOutcome, probe_problem
from scaler.sources.promql import QueryKind
from scaler.telemetry.logging import configure_logging
from tests.support.fakeprom import snapshot
from tests.support.policies import SERVE_POLICY as POLICY
from tests.support.policies import case_target

PASSWORD = "pw-SECRET-31337"


class Refusing:
    """Answers every query with one status and body."""

    def __init__(self) -> None:
        self.status = 401
        self.body = "denied"
        self.url = ""

    async def handle(self, _request: web.Request) -> web.Response:
        return web.Response(status=self.status, text=self.body)


@pytest.fixture
async def refusing() -> AsyncIterator[Refusing]:
    server = Refusing()
    app = web.Application()
    app.router.add_post("/api/v1/query", server.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    server.url = f"127.0.0.1:{runner.addresses[0][1]}"
    yield server
    await runner.cleanup()


async def _serve(refusing: Refusing, tmp_path: Path, options: RunOptions) -> int:
    store = KubeStore(time.time)
    store.add_deployment("llm", "vllm", 1, {"app": "vllm"})
    store.add_pod("llm", "vllm-p0", {"app": "vllm"}, ready=True)
    async with KubeApiServer(store, token="kube-token") as kube:
        settings = Settings(
            prometheus_url=f"http://scaler:{PASSWORD}@{refusing.url}",
            kubeconfig=write_kubeconfig(tmp_path / "kc", server_url=kube.url, token="kube-token"),
            in_cluster=False,
            leader_election=False,
            metrics_port=0,
        )
        return await serve(settings, parse_policy(POLICY), options)


async def test_run_logs_the_refusal_first_and_runs_on(
    refusing: Refusing, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    saved = structlog.get_config()
    configure_logging("json", "info")
    try:
        assert await _serve(refusing, tmp_path, RunOptions(once=True)) == 0
    finally:
        structlog.configure(**saved)
    err = capsys.readouterr().err
    events = [json.loads(line) for line in err.splitlines() if line.startswith("{")]
    first = events[0]
    assert first["event"] == "prometheus_probe_failed"
    assert first["http_status"] == 401
    assert first["url"] == f"http://scaler:***@{refusing.url}/"
    assert first["message"] == (
        f"Prometheus at http://scaler:***@{refusing.url}/ answered HTTP 401 Unauthorized: "
        "denied; Prometheus (or the proxy in front of it) did not accept the credentials, or "
        "got none (authentication: basic (user-info in the URL))"
    )
    assert "scrape_interval_unknown" not in err and "not a matrix answer" not in err
    assert "started" in [e["event"] for e in events]  # the loop runs on and holds
    assert PASSWORD not in err


@pytest.mark.parametrize(
    ("status", "body", "said"),
    [
        pytest.param(
            403,
            "tenant team-b may not query",
            "HTTP 403 Forbidden: tenant team-b may not query; the credentials were accepted "
            "but may not query (the token's or the tenant's permissions, the proxy's access "
            "rules) (authentication: basic (user-info in the URL))",
            id="403",
        ),
        pytest.param(
            500,
            '{"status":"error","errorType":"internal","error":"storage is closed"}',
            "HTTP 500 Internal Server Error: internal: storage is closed (HTTP 500)",
            id="500 with Prometheus' error",
        ),
    ],
)
async def test_recommend_stops_at_start_naming_the_status(
    refusing: Refusing, tmp_path: Path, status: int, body: str, said: str
) -> None:
    refusing.status, refusing.body = status, body
    with pytest.raises(StartupError) as err:
        await _serve(refusing, tmp_path, RunOptions(dry_run=True, once=True, check_queries=True))
    assert err.value.exit_code == 1
    assert str(err.value) == f"Prometheus at http://scaler:***@{refusing.url}/ answered {said}"


@pytest.mark.parametrize(
    ("outcome", "expected"),
    [
        pytest.param(
            QueryOutcome(
                QueryKind.TTFT_RATE,
                SignalStatus.TRANSPORT,
                "ConnectError: refused",
                http_status=None,
            ),
            "Prometheus at http://p/ cannot be reached: transport: ConnectError: refused",
            id="unreachable",
        ),
        pytest.param(
            QueryOutcome(
                QueryKind.TTFT_RATE,
                SignalStatus.BAD_RESPONSE,
                "not a Prometheus API answer: <html>login</html>",
                http_status=200,
            ),
            "Prometheus at http://p/ does not answer as Prometheus' HTTP API: bad_response: "
            "not a Prometheus API answer: <html>login</html> (check the URL and its path prefix)",
            id="a login page",
        ),
        pytest.param(
            QueryOutcome(
                QueryKind.TTFT_RATE,
                SignalStatus.HTTP_ERROR,
                "HTTP 401 Unauthorized: no token",
                http_status=401,
            ),
            "Prometheus at http://p/ answered HTTP 401 Unauthorized: no token; Prometheus (or "
            "the proxy in front of it) did not accept the credentials, or got none "
            "(authentication: none)",
            id="401 without credentials",
        ),
    ],
)
def test_probe_problem_names_each_kind_of_failure(outcome: QueryOutcome, expected: str) -> None:
    assert probe_problem(outcome, "http://p/", "none") == expected


async def test_the_scrape_interval_probe_names_the_status_too(
    refusing: Refusing, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every query path reports an HTTP status as such (it once said "not a matrix answer")."""
    saved = structlog.get_config()
    configure_logging("json", "info")
    try:
        async with httpx.AsyncClient() as client:
            source = PrometheusSource(
                client,
                base_url=f"http://{refusing.url}",
                timeout_seconds=5,
                rate_window_seconds=60,
            )
            target = case_target()
            found = await source.probe_scrape_intervals(
                [target], {target.key: snapshot(["vllm-p0"], namespace=target.workload.namespace)}
            )
    finally:
        structlog.configure(**saved)
    assert found == {}
    [event] = [json.loads(line) for line in capsys.readouterr().err.splitlines()]
    assert event["event"] == "scrape_interval_unknown"
    assert event["error"] == "http_error: HTTP 401 Unauthorized: denied"
    assert event["url"] == f"http://{refusing.url}/api/v1/query"
