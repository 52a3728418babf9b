"""No command prints a secret, whatever a server echoes back.

Each command that reads Prometheus runs as its own process (the real entry point) against a
loopback server that refuses every request and echoes the credentials it got: the bearer
token from the token file (rotated after each request it sees), every header value, the
password of the URL's user-info (decoded from the Basic header) and the Kubernetes token. The
echo lands in response bodies and, through the clients, in exception texts; the commands
print it in logs, start-up errors and one-line failures. The test asserts that the echo did
reach the output (the tenant header, which is no secret, is there) and that no credential
did, in any of its printed forms.

Every other command is checked through its usage errors: each echoes an ``--output`` value
it refuses, which here is the token the environment configures.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import signal
import socket
import sys
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

import pytest
from aiohttp import web
from typer.testing import CliRunner

from scaler.cli import app
from scaler.sim.kubeapi import KubeApiServer, KubeStore, write_kubeconfig
from scaler.sources.prometheus.backend import NATIVE_HISTOGRAM_PROBE
from tests.support.processes import run_scaler

TOKEN = "prom-token-Xk29fQ"
API_KEY = "api-key-77Hq0z"
TENANT = "tenant-visible-7"
USER, PASSWORD = "scaler", "url-pass/w0rd+9"
#: A user name alone in the URL's user-info: sent as Basic with an empty password, it is how
#: some proxies carry a token.
URL_TOKEN = "tok3nSECRET-url-5Jv"
KUBE_TOKEN = "kube-token-Pq81mZ"
#: The password of a URL given without its scheme (``user:password@host``): invalid, it is
#: refused at start, and the refusal must not print it.
BARE_PASSWORD = "bare-pw-9Zx4"
POLICY = """\
targets:
  - workload: {apiVersion: apps/v1, kind: Deployment, namespace: llm, name: vllm}
    max_replicas: 4
"""


#: The start-up probe's query (PrometheusSource.probe).
PROBE = NATIVE_HISTOGRAM_PROBE


@dataclass
class Echo:
    """Refuses everything, echoing the request's credentials; rotates the token file."""

    token_file: Path
    tokens_seen: list[str] = field(default_factory=list)
    url: str = ""

    async def handle(self, request: web.Request) -> web.Response:
        auth = request.headers.get("Authorization", "")
        password = ""
        if auth.startswith("Basic "):
            password = base64.b64decode(auth[6:]).decode().partition(":")[2]
        if auth.startswith("Bearer ") and request.path.startswith("/api/v1/"):
            self.tokens_seen.append(auth[7:])
            # Rotate, as a projected service-account token is: the next request must
            # carry (and the output must mask) a token the process has not seen yet.
            self.token_file.write_text(f"{TOKEN}-r{len(self.tokens_seen)}\n")
        kube = not request.path.startswith("/api/v1/")
        if request.method == "POST" and (await request.post()).get("query") == PROBE:
            # the start-up probe passes, so that the queries and the targets are read and
            # their refusals, echoing the credentials, are printed
            return web.json_response(
                {"status": "success", "data": {"resultType": "vector", "result": []}}
            )
        body = (
            f"denied: Authorization={auth} X-Api-Key={request.headers.get('X-Api-Key')} "
            f"X-Scope-OrgID={request.headers.get('X-Scope-OrgID')} password={password}"
        )
        if kube:  # the Kubernetes API's Status shape
            text = json.dumps({"kind": "Status", "status": "Failure", "message": body, "code": 403})
            return web.Response(status=403, text=text, content_type="application/json")
        return web.Response(status=401, text=body)


@pytest.fixture
async def echo(tmp_path: Path) -> AsyncIterator[Echo]:
    server = Echo(tmp_path / "token")
    server.token_file.write_text(TOKEN + "\n")
    aio = web.Application()
    aio.router.add_route("*", "/{tail:.*}", server.handle)
    runner = web.AppRunner(aio)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    server.url = f"http://127.0.0.1:{runner.addresses[0][1]}"
    yield server
    await runner.cleanup()


def _secrets(echo: Echo) -> list[str]:
    """Every credential in the forms it may be printed in."""
    basic = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
    user_only = base64.b64encode(f"{URL_TOKEN}:".encode()).decode()
    values = [TOKEN, *echo.tokens_seen, API_KEY, PASSWORD, KUBE_TOKEN, basic]
    values += [URL_TOKEN, user_only]
    return values + [quote(v, safe="") for v in values]


def _env(echo: Echo, tmp_path: Path, *, auth: str, kube_url: str = "") -> dict[str, str]:
    """The process environment: the token file (``token``) or the URL's user-info (``url``,
    or ``user`` for a user name alone), and two extra headers, one a credential, one a
    tenant id. The Kubernetes API is the echo too unless ``kube_url`` is given."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("VLLM_SCALER_")}
    url = echo.url
    if auth == "url":
        url = url.replace("http://", f"http://{USER}:{quote(PASSWORD, safe='')}@")
    elif auth == "user":
        url = url.replace("http://", f"http://{URL_TOKEN}@")
    else:
        env["VLLM_SCALER_PROMETHEUS_BEARER_TOKEN_FILE"] = str(echo.token_file)
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY)
    kubeconfig = write_kubeconfig(
        tmp_path / "kc", server_url=kube_url or echo.url, token=KUBE_TOKEN
    )
    env.update(
        VLLM_SCALER_PROMETHEUS_URL=url,
        VLLM_SCALER_PROMETHEUS_HEADERS=f"X-Api-Key={API_KEY},X-Scope-OrgID={TENANT}",
        VLLM_SCALER_POLICY_FILE=str(policy),
        VLLM_SCALER_KUBECONFIG=str(kubeconfig),
        VLLM_SCALER_IN_CLUSTER="false",
        VLLM_SCALER_METRICS_PORT="0",
    )
    return env


AUTH = [
    pytest.param("token", id="token-file"),
    pytest.param("url", id="url-user-info"),
    pytest.param("user", id="url-user-name-alone"),
]


@pytest.mark.parametrize("auth", AUTH)
@pytest.mark.parametrize(
    ("args", "code", "echoed"),
    [
        pytest.param(["recommend", "--once"], 1, "Prometheus queries fail", id="recommend"),
        pytest.param(
            ["backtest", "--start", "now-1h", "--no-plot", "--no-progress"],
            1,
            "refused the query: HTTP 401 Unauthorized: denied",
            id="backtest",
        ),
        pytest.param(
            ["dashboards", "--out", "{tmp}/d", "--previews", "{tmp}/p"],
            1,
            "/ answered HTTP 401 Unauthorized: ",
            id="dashboards-previews",
        ),
    ],
)
async def test_a_command_that_fails_on_an_echo_prints_no_secret(
    echo: Echo, tmp_path: Path, auth: str, args: list[str], code: int, echoed: str
) -> None:
    env = _env(echo, tmp_path, auth=auth)
    returned, out = await run_scaler([a.replace("{tmp}", str(tmp_path)) for a in args], env)
    assert returned == code, out
    assert echoed in out
    assert f"X-Scope-OrgID={TENANT}" in out  # the server's echo is printed...
    assert "X-Api-Key=***" in out  # ...masked
    if auth == "token":
        assert "Authorization=Bearer ***" in out
        assert echo.tokens_seen and echo.tokens_seen[0] == TOKEN
    elif auth == "url":
        assert "Authorization=Basic ***" in out and "password=***" in out
    else:  # the user name alone is sent (Basic, empty password), and masked
        assert "prometheus http://***@127.0.0.1:" in out
        assert "Authorization=Basic *** " in out and "password=" in out
    for secret in _secrets(echo):
        assert secret not in out, secret
    if args[0] == "recommend":
        assert "Authorization=Bearer *** X-Api-Key=None X-Scope-OrgID=None" in out  # kube


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize(
    ("args", "unreachable"),
    [
        pytest.param(["recommend", "--once"], "", id="recommend"),
        pytest.param(
            ["backtest", "--start", "now-1h", "--no-plot", "--no-progress"],
            "cannot be reached",
            id="backtest",
        ),
        pytest.param(
            ["dashboards", "--out", "{tmp}/d", "--previews", "{tmp}/p"],
            "cannot be reached",
            id="dashboards-previews",
        ),
        pytest.param(["recommend", "--prometheus-url", "{ftp}"], "expected", id="invalid-url"),
        *(
            pytest.param(
                [command, "--prometheus-url", "{bare}"], "expected", id=f"{command}-no-scheme"
            )
            for command in ("run", "recommend", "backtest")
        ),
    ],
)
async def test_a_user_name_alone_in_a_url_is_printed_by_no_error_path(
    tmp_path: Path, args: list[str], unreachable: str
) -> None:
    """The Prometheus URL and the cluster's server URL carry a user name alone; nothing
    answers there. Every message about them names the URL with ``***`` for the user name."""
    port = _closed_port()
    url = f"http://{URL_TOKEN}@127.0.0.1:{port}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("VLLM_SCALER_")}
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY)
    kubeconfig = write_kubeconfig(
        tmp_path / "kc",
        server_url=f"http://{KUBE_TOKEN}@127.0.0.1:{port}",
        token="kube-bearer-Lm40",
    )
    env.update(
        VLLM_SCALER_PROMETHEUS_URL=url,
        VLLM_SCALER_POLICY_FILE=str(policy),
        VLLM_SCALER_KUBECONFIG=str(kubeconfig),
        VLLM_SCALER_IN_CLUSTER="false",
        VLLM_SCALER_METRICS_PORT="0",
    )
    shown = [
        a.replace("{tmp}", str(tmp_path))
        .replace("{ftp}", "ftp" + url[4:])
        .replace("{bare}", f"{USER}:{BARE_PASSWORD}@127.0.0.1:{port}")
        for a in args
    ]
    returned, out = await run_scaler(shown, env)
    assert returned != 0, out
    assert f"***@127.0.0.1:{port}" in out  # the URL is named...
    if unreachable:
        assert unreachable in out
    user_only = base64.b64encode(f"{URL_TOKEN}:".encode()).decode()
    for secret in (URL_TOKEN, KUBE_TOKEN, user_only, "tok3nSECRET", BARE_PASSWORD):
        assert secret not in out, secret  # ...never its user name


@pytest.mark.parametrize("auth", AUTH)
async def test_run_masks_every_echo_in_its_json_log_lines(
    echo: Echo, tmp_path: Path, auth: str
) -> None:
    """``run`` with ``--output json``: every line is JSON, the token rotates between cycles,
    and neither the first token nor a rotated one is printed. The Kubernetes side is the
    stand-in (a target that cannot be read is not queried)."""
    store = KubeStore(time.time)
    store.add_deployment("llm", "vllm", 1, {"app": "vllm"})
    store.add_pod("llm", "vllm-0", {"app": "vllm"}, ready=True)
    kube = KubeApiServer(store, token=KUBE_TOKEN)
    await kube.start()
    env = _env(echo, tmp_path, auth=auth, kube_url=kube.url)
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "scaler", "run", "--log-format", "json", "--interval", "0.2",
        env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert proc.stderr is not None
    lines: list[str] = []
    failed = 0
    try:
        async with asyncio.timeout(120):
            while failed < 15:  # three cycles of five queries
                raw = await proc.stderr.readline()
                assert raw, "run exited early:\n" + "".join(lines)
                lines.append(raw.decode())
                failed += json.loads(raw)["event"] == "query_failed"
    finally:
        proc.send_signal(signal.SIGTERM)
        rest, _ = await asyncio.wait_for(proc.communicate(), timeout=60)
        await kube.stop()
    lines += rest.decode().splitlines(keepends=True)
    events = [json.loads(line) for line in lines]  # every line is one JSON object
    assert proc.returncode == 0
    started = next(e for e in events if e["event"] == "started")
    assert started["prometheus"]["headers"] == ["X-Api-Key", "X-Scope-OrgID"]
    assert (
        started["prometheus"]["auth"]
        == ("bearer token file" if auth == "token" else "basic (user-info in the URL)")
        + " and header X-Api-Key"
    )  # the credential header named, its value never
    if auth == "user":
        assert started["prometheus"]["url"] == echo.url.replace("http://", "http://***@") + "/"
    out = "".join(lines)
    assert "X-Api-Key=***" in out and f"X-Scope-OrgID={TENANT}" in out
    if auth == "token":
        assert len(set(echo.tokens_seen)) >= 2  # rotated tokens were sent and echoed
    for secret in _secrets(echo):
        assert secret not in out, secret


COMMANDS = [
    pytest.param(["run"], id="run"),
    pytest.param(["recommend"], id="recommend"),
    pytest.param(["check-policy", "policy.yaml"], id="check-policy"),
    pytest.param(["backtest"], id="backtest"),
    pytest.param(["dashboards"], id="dashboards"),
    pytest.param(["sim"], id="sim"),
    pytest.param(["bench"], id="bench"),
    pytest.param(["bench-scale"], id="bench-scale"),
]


@pytest.mark.parametrize("command", COMMANDS)
def test_every_commands_usage_errors_pass_through_the_masking(
    tmp_path: Path, command: list[str]
) -> None:
    """The secret the environment configures is masked in any command's output, although
    this command does not read it: here it is echoed by the refusal of ``--output``."""
    token = tmp_path / "token"
    token.write_text("env-token-Zr55w\n")
    env = {"VLLM_SCALER_PROMETHEUS_BEARER_TOKEN_FILE": str(token)}
    result = CliRunner().invoke(app, [*command, "--output", "env-token-Zr55w"], env=env)
    assert result.exit_code == 2, result.output
    assert "***" in result.output
    assert "env-token-Zr55w" not in result.output


def test_sim_keeps_a_real_prometheus_credentials_from_its_own_controller() -> None:
    from scaler.sim.demo import controller_environment

    env = {
        "VLLM_SCALER_PROMETHEUS_BEARER_TOKEN_FILE": "/run/token",
        "VLLM_SCALER_PROMETHEUS_HEADERS": f"X-Api-Key={API_KEY}",
        "VLLM_SCALER_PROMETHEUS_CA_FILE": "/etc/ca.pem",
        "VLLM_SCALER_PROMETHEUS_CLIENT_CERT_FILE": "/etc/cert.pem",
        "VLLM_SCALER_PROMETHEUS_CLIENT_KEY_FILE": "/etc/key.pem",
        "VLLM_SCALER_LOG_LEVEL": "debug",
        "PATH": "/usr/bin",
    }
    assert controller_environment(env) == {"VLLM_SCALER_LOG_LEVEL": "debug", "PATH": "/usr/bin"}


ARGV_PASSWORD = "argv-pw-Tq83n"
ARGV_TOKEN = "argv-token-Hc61v"
JSON_TOKEN = "json-token-Wd27k"


@pytest.mark.parametrize(
    ("args", "shown"),
    [
        pytest.param(
            ["recommend", "--once", f"--prometheus-url=http://u:{ARGV_PASSWORD}@h:9090",
             f"http://u:{ARGV_PASSWORD}@h:9090"],
            "got unexpected extra argument(s) (http://u:***@h:9090)",
            id="url-option-and-extra-argument",
        ),
        pytest.param(
            ["recommend", "--once", f"http://u:{ARGV_PASSWORD}@h:9090"],
            "got unexpected extra argument(s) (http://u:***@h:9090)",
            id="url-as-extra-argument-alone",
        ),
        pytest.param(
            ["run", "--prometheus-url", f"http://u:{ARGV_PASSWORD}@h:9090",
             "--interval", ARGV_PASSWORD],
            "(--interval): value '***': expected a duration",
            id="url-password-as-another-value",
        ),
        pytest.param(
            ["recommend", "--once", "--prometheus-headers", f"X-Api-Key={ARGV_TOKEN}",
             "--interval", ARGV_TOKEN],
            "(--interval): value '***': expected a duration",
            id="header-value",
        ),
        pytest.param(
            ["recommend", "--once", f"--prometheus-headers={{\"X-Api-Key\": \"{ARGV_TOKEN}\"}}",
             "--interval", ARGV_TOKEN],
            "(--interval): value '***': expected a duration",
            id="header-value-json",
        ),
        pytest.param(
            ["dashboards", "--prometheus-url", f"http://u:{ARGV_PASSWORD}@h:9090",
             "--minutes", ARGV_PASSWORD],
            "--minutes: value '***': expected a number",
            id="dashboards",
        ),
        pytest.param(
            ["recommend", "--once", "--prometheus-headers", "Authorization=Bearer", ARGV_TOKEN],
            "got unexpected extra argument(s) (***)",
            id="unquoted-authorization-header",
        ),
        pytest.param(
            ["recommend", "--prometheus-headers", "{Authorization:", "Bearer", JSON_TOKEN + "}"],
            "got unexpected extra argument(s) (Bearer ***)",
            id="unquoted-json-object",
        ),
        pytest.param(
            ["backtest", "--prometheus-headers", "X-Scope-OrgID=t1,X-Api-Key=Key", ARGV_TOKEN,
             "--step", ARGV_TOKEN],
            "got unexpected extra argument(s) (***)",
            id="unquoted-header-value-with-a-space",
        ),
    ],
)  # fmt: skip
def test_a_secret_given_on_the_command_line_is_masked_in_its_usage_error(
    args: list[str], shown: str
) -> None:
    """A credential given as an option (or by mistake as an argument of its own) is known
    before the command line is parsed: the usage error that echoes it masks it."""
    env = {k: "" for k in os.environ if k.startswith("VLLM_SCALER_")}
    result = CliRunner().invoke(app, args, env=env)
    assert result.exit_code == 2, result.output
    assert shown in result.output
    assert ARGV_PASSWORD not in result.output
    assert ARGV_TOKEN not in result.output
    assert JSON_TOKEN not in result.output
