"""Credentials never reach a log line, also on error paths where a server echoes them.

``tests/controller/test_serve_lifecycle.py`` covers the Prometheus bearer token file and
secret headers through ``serve``; this covers the Kubernetes token (a 401/403 body echoing
the request's Authorization header) and a password in the Prometheus URL's user-info (httpx
turns it into a Basic Authorization header, echoed back in a 401 body).
"""

from __future__ import annotations

import base64
from pathlib import Path

import httpx
import pytest
import structlog
from aiohttp import web

from scaler.actuators.kubernetes import KubeConfigError, KubernetesActuator, build_api_client
from scaler.config.secrets import mask
from scaler.controller.loop import Controller
from scaler.sim.kubeapi import write_kubeconfig
from scaler.sources.prometheus import PrometheusSource
from scaler.telemetry.logging import configure_logging
from scaler.telemetry.metrics import ScalerMetrics
from tests.support.controller_harness import T0, FakeClock, case_policy

KUBE_TOKEN = "kube-sa-token-Zq81xK0pPw"
PROM_USER = "scaler"
PROM_PASSWORD = "prom-pw-7Hd0aQ2m"


async def echo(request: web.Request) -> web.Response:
    """Refuse every request, echoing its credentials (some proxies and gateways do)."""
    return web.Response(
        status=403 if request.path.startswith("/api") and "query" not in request.path else 401,
        content_type="application/json",
        text='{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Forbidden",'
        f'"message":"denied for Authorization={request.headers.get("Authorization")}",'
        '"code":403}',
    )


async def test_echoed_credentials_are_masked_in_every_log_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", echo)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    port = runner.addresses[0][1]
    saved = structlog.get_config()
    configure_logging("json", "debug")
    clock = FakeClock(T0)
    try:
        kubeconfig = write_kubeconfig(
            tmp_path / "kc", server_url=f"http://127.0.0.1:{port}", token=KUBE_TOKEN
        )
        api = await build_api_client(kubeconfig=kubeconfig, in_cluster=False)
        async with httpx.AsyncClient() as http:
            source = PrometheusSource(
                http,
                base_url=f"http://{PROM_USER}:{PROM_PASSWORD}@127.0.0.1:{port}",
                timeout_seconds=5,
                rate_window_seconds=60,
            )
            policy = case_policy()
            controller = Controller(
                policy=policy,
                source=source,
                actuator=KubernetesActuator(api, clock=clock),
                metrics=ScalerMetrics(),
                clock=clock,
            )
            [report] = await controller.run_cycle()  # the target read is refused
            assert report.action == "read_failed"
            assert KUBE_TOKEN in report.error  # the echo did carry it...
            # ...and a query with the password in the URL is refused with it echoed
            t = policy.targets[0]
            result = await source.read([t], {})
            detail = next(iter(result.queries.values())).detail
            basic = base64.b64encode(f"{PROM_USER}:{PROM_PASSWORD}".encode()).decode()
            assert "Authorization=Basic ***" in detail  # masked where it is built
            assert basic not in detail
            structlog.get_logger("vllm_scaler").error("query_detail", detail=detail)
        await api.close()
    finally:
        structlog.configure(**saved)
        await runner.cleanup()
    logs = capsys.readouterr().err
    assert '"target_read_failed"' in logs and '"query_detail"' in logs
    assert "Authorization=Bearer ***" in logs
    assert "Authorization=Basic ***" in logs
    assert KUBE_TOKEN not in logs
    assert PROM_PASSWORD not in logs
    assert basic not in logs


@pytest.mark.parametrize(
    "userinfo", ["kube-user-alone-Wc31", "admin:kube-user-alone-Wc31"], ids=["user", "password"]
)
async def test_user_info_in_the_cluster_server_url_is_masked(tmp_path: Path, userinfo: str) -> None:
    """A kubeconfig's ``server`` may carry user-info, a user name alone too (a proxy's token):
    it is refused at start, the message names the URL without its credential, and any other
    message that names that URL is masked."""
    server = f"https://{userinfo}@[::1]:6443"
    kubeconfig = write_kubeconfig(tmp_path / "kc", server_url=server, token=KUBE_TOKEN)
    with pytest.raises(KubeConfigError) as err:
        await build_api_client(kubeconfig=kubeconfig, in_cluster=False)
    shown = server.replace("kube-user-alone-Wc31", "***")
    assert f"server: value {shown!r} holds user-info" in str(err.value)
    assert "kube-user-alone-Wc31" not in str(err.value)
    assert mask(f"cannot reach {server}") == (
        f"cannot reach {server.replace('kube-user-alone-Wc31', '***')}"
    )
