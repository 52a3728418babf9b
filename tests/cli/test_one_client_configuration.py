"""One Prometheus client configuration: the controller's httpx client, the previews' blocking
httpx client and the backtest's prometheus-api-client session, built from one
``PrometheusSettings``, all reach a Prometheus that requires mutual TLS, a bearer token and a
tenant header, and each re-reads the token file (rotation)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
from aiohttp import web

from scaler.backtest.history import HistoryError, PrometheusRangeClient
from scaler.config.settings import PrometheusSettings
from scaler.sources.prometheus import client_for, sync_client_for
from tests.support.tls import make_certificates, mutual_tls_server_context

TENANT = "team-a"
VECTOR = {"status": "success", "data": {"resultType": "vector", "result": []}}
MATRIX = {"status": "success", "data": {"resultType": "matrix", "result": []}}


@dataclass
class Tenanted:
    """Answers only with the tenant header; records what each request carried."""

    url: str = ""
    seen: list[tuple[str, str | None, str | None]] = field(default_factory=list)

    async def handle(self, request: web.Request) -> web.Response:
        self.seen.append(
            (
                request.path,
                request.headers.get("Authorization"),
                request.headers.get("X-Scope-OrgID"),
            )
        )
        if request.headers.get("X-Scope-OrgID") != TENANT:
            return web.Response(status=401, text="no org id")
        return web.json_response(MATRIX if request.path.endswith("query_range") else VECTOR)


@pytest.fixture
async def prometheus(tmp_path: Path) -> AsyncIterator[tuple[Tenanted, dict[str, Path]]]:
    certs = make_certificates(tmp_path)
    server = Tenanted()
    app = web.Application()
    app.router.add_route("*", "/api/v1/{api}", server.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    ssl_context = mutual_tls_server_context(certs)
    await web.TCPSite(runner, "127.0.0.1", 0, ssl_context=ssl_context).start()
    server.url = f"https://127.0.0.1:{runner.addresses[0][1]}"
    yield server, certs
    await runner.cleanup()


def _settings(
    server: Tenanted, token: Path, certs: dict[str, Path], *, mtls: bool
) -> PrometheusSettings:
    """Token file, CA and tenant header; the client certificate too with ``mtls``."""
    token.write_text("tok-1\n")
    client = (
        {
            "prometheus_client_cert_file": certs["cli"],
            "prometheus_client_key_file": certs["cli-key"],
        }
        if mtls
        else {}
    )
    return PrometheusSettings(
        prometheus_url=server.url,
        prometheus_bearer_token_file=token,
        prometheus_ca_file=certs["ca"],
        prometheus_headers=f"X-Scope-OrgID={TENANT}",
        prometheus_timeout_seconds=5,
        **client,  # type: ignore[arg-type]
    )


async def test_every_client_of_the_settings_sends_the_same_credentials(
    prometheus: tuple[Tenanted, dict[str, Path]], tmp_path: Path
) -> None:
    server, certs = prometheus
    token = tmp_path / "token"
    settings = _settings(server, token, certs, mtls=True)
    query = f"{server.url}/api/v1/query"
    async with client_for(settings) as http:
        assert (await http.post(query, data={"query": "up"})).status_code == 200
    token.write_text("tok-2\n")  # rotated: the next request must carry it

    def blocking() -> None:
        with sync_client_for(settings) as http:
            assert http.post(query, data={"query": "up"}).status_code == 200
        token.write_text("tok-3\n")
        backtest = PrometheusRangeClient(settings)
        try:
            now = time.time()
            assert backtest("up", now - 60, now, 15) == []
        finally:
            backtest.close()

    await asyncio.to_thread(blocking)
    assert server.seen == [
        ("/api/v1/query", "Bearer tok-1", TENANT),  # controller (httpx, async)
        ("/api/v1/query", "Bearer tok-2", TENANT),  # previews (httpx, blocking)
        ("/api/v1/query_range", "Bearer tok-3", TENANT),  # backtest (prometheus-api-client)
    ]


async def test_without_the_client_certificate_every_client_is_refused(
    prometheus: tuple[Tenanted, dict[str, Path]], tmp_path: Path
) -> None:
    """The certificate is what lets them in: none of them falls back to plain TLS."""
    server, certs = prometheus
    settings = _settings(server, tmp_path / "token", certs, mtls=False)
    query = f"{server.url}/api/v1/query"

    def blocking() -> str:
        with sync_client_for(settings) as http, pytest.raises(httpx.TransportError):
            http.post(query, data={"query": "up"})
        backtest = PrometheusRangeClient(settings)
        try:
            with pytest.raises(HistoryError) as err:
                backtest("up", time.time() - 60, time.time(), 15)
        finally:
            backtest.close()
        return str(err.value)

    message = await asyncio.to_thread(blocking)
    # the cause in a few words (the server closes the TLS connection: how the client sees
    # it depends on timing), not urllib3's chain
    assert message.startswith(f"Prometheus at {server.url} cannot be reached: transport: ")
    assert "Max retries" not in message and "ConnectionPool" not in message
    assert server.seen == []
