"""A server's answer cut short in a detail never shows the start of a secret it echoed.

Details quote at most 300 characters of an answer. Cut before masking, a credential echoed
across the cut no longer matches its registered forms and all but its last characters would
be printed. Each command runs as its own process (the real entry point) against a loopback
server echoing the request's Authorization header (the bearer token file's token, or the
Basic form of the URL's user-info) in a long body: an HTML page, or Prometheus' JSON error.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import signal
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp import web

from scaler.sim.kubeapi import KubeApiServer, KubeStore, write_kubeconfig
from tests.support.processes import run_scaler

TOKEN = "eyJhbGciOiJIUzI1NiJ9.SecretPayloadThatIsLong.Signature0123456789"
USER, PASSWORD = "alice", "EchoPassw0rd55"
POLICY = """\
targets:
  - workload: {apiVersion: apps/v1, kind: Deployment, namespace: llm, name: vllm}
    max_replicas: 4
"""


async def _html(request: web.Request) -> web.Response:
    """A web page (not Prometheus' API) whose text echoes the credential where the detail
    is cut: its last 3 characters are past the cut."""
    auth = request.headers.get("Authorization", "")
    text = f"<html>{'x' * (248 - len(auth))} your credentials: {auth} {'y' * 400}"
    return web.Response(text=text, content_type="text/html")


async def _error(request: web.Request) -> web.Response:
    """Prometheus' JSON error (HTTP 500) whose message ends in the echoed credential, cut
    before its last 2 characters."""
    auth = request.headers.get("Authorization", "")
    error = f"{'x' * (283 - len(auth))} got {auth}"
    body = {"status": "error", "errorType": "internal", "error": error}
    return web.Response(status=500, text=json.dumps(body), content_type="application/json")


@pytest.fixture
async def echo_url(request: pytest.FixtureRequest) -> AsyncIterator[str]:
    """The echoing server, its body given by the test (:data:`ECHOES`)."""
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", request.param)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    yield f"http://127.0.0.1:{runner.addresses[0][1]}"
    await runner.cleanup()


@pytest.fixture
async def kube_url() -> AsyncIterator[str]:
    """The Kubernetes API stand-in, with the target's Deployment and one ready pod."""
    store = KubeStore(time.time)
    store.add_deployment("llm", "vllm", 1, {"app": "vllm"})
    store.add_pod("llm", "vllm-0", {"app": "vllm"}, ready=True)
    kube = KubeApiServer(store, token="kube-token-Lw30")
    await kube.start()
    yield kube.url
    await kube.stop()


def _env(url: str, kube_url: str, tmp_path: Path, auth: str) -> dict[str, str]:
    """The environment: the token file (``token``) or the URL's user-info (``url``)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("VLLM_SCALER_")}
    if auth == "token":
        (tmp_path / "token").write_text(TOKEN + "\n")
        env["VLLM_SCALER_PROMETHEUS_BEARER_TOKEN_FILE"] = str(tmp_path / "token")
    else:
        url = url.replace("http://", f"http://{USER}:{PASSWORD}@")
    (tmp_path / "policy.yaml").write_text(POLICY)
    env.update(
        VLLM_SCALER_PROMETHEUS_URL=url,
        VLLM_SCALER_POLICY_FILE=str(tmp_path / "policy.yaml"),
        VLLM_SCALER_KUBECONFIG=str(
            write_kubeconfig(tmp_path / "kc", server_url=kube_url, token="kube-token-Lw30")
        ),
        VLLM_SCALER_IN_CLUSTER="false",
        VLLM_SCALER_METRICS_PORT="0",
    )
    return env


#: Each body with one credential form per command: both bodies and both forms are met by
#: every command (the masking itself is one function, tested on its own in test_redact).
ECHOES = pytest.mark.parametrize(
    ("echo_url", "auth"),
    [pytest.param(_html, "token", id="html-token"), pytest.param(_error, "url", id="json-url")],
    indirect=["echo_url"],
)


@ECHOES
@pytest.mark.parametrize(
    "args",
    [
        pytest.param(["recommend", "--once"], id="recommend"),
        pytest.param(["backtest", "--start", "now-1h", "--no-plot", "--no-progress"], id="bt"),
    ],
)
async def test_an_echoed_credential_cut_short_is_masked(
    echo_url: str, kube_url: str, tmp_path: Path, auth: str, args: list[str]
) -> None:
    returned, out = await run_scaler(args, _env(echo_url, kube_url, tmp_path, auth))
    assert returned != 0, out
    _assert_masked(out, auth)


@ECHOES
async def test_run_logs_an_echoed_credential_cut_short_masked(
    echo_url: str, kube_url: str, tmp_path: Path, auth: str
) -> None:
    """``run`` logs the failed queries (JSON lines) and goes on: read until one names the
    echo, then stop it."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "scaler", "run", "--log-format", "json", "--interval", "0.2",
        env=_env(echo_url, kube_url, tmp_path, auth),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert proc.stderr is not None
    lines: list[str] = []
    try:
        async with asyncio.timeout(120):
            while not any(" got " in line or "credentials:" in line for line in lines):
                raw = await proc.stderr.readline()
                assert raw, "run exited early:\n" + "".join(lines)
                lines.append(json.dumps(json.loads(raw)))  # every line is one JSON object
    finally:
        proc.send_signal(signal.SIGTERM)
        rest, _ = await asyncio.wait_for(proc.communicate(), timeout=60)
    _assert_masked("".join(lines) + rest.decode(), auth)


def _assert_masked(out: str, auth: str) -> None:
    """The echo is printed with its credential masked; no start of a credential is."""
    scheme = "Bearer" if auth == "token" else "Basic"
    assert f"got {scheme} ***" in out or f"your credentials: {scheme} *** yyy" in out, out
    basic = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
    for secret in (TOKEN, PASSWORD, basic):
        assert secret[:12] not in out, secret
