"""``recommend --once`` when both Kubernetes and Prometheus are down: each error on its own
``vllm-scaler:`` line, and the transport failures in plain words (no ``ssl:default`` for a
plain-http address); a signal without series said once, in one line."""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from scaler.sources.promql import QueryKind, build_query_plan
from tests.support.controller_harness import KEY, HarnessFactory
from tests.support.fakeprom import idle_without_ttft, pods
from tests.support.policies import case_policy, case_target_doc
from tests.support.processes import run_scaler


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port  # nothing listens there once the socket is closed: connection refused


#: The kubeconfig's token: never printed.
KUBE_TOKEN = "kube-token-7d41c9e2"


def _kubeconfig(path: Path, server: str) -> Path:
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": server}}],
                "users": [{"name": "u", "user": {"token": KUBE_TOKEN}}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )
    return path


def _unreachable(server: str, kubeconfig: Path) -> str:
    """The line naming an API server that refuses connections, for kubeconfig context x."""
    return (
        f"vllm-scaler: the Kubernetes API server at {server} cannot be reached: connection "
        f"refused (context 'x' of kubeconfig {kubeconfig}); check that it is the cluster meant "
        "(another: --context NAME, VLLM_SCALER_KUBE_CONTEXT) and that the cluster is up "
        f"(kubectl --kubeconfig {kubeconfig} --context x cluster-info), or, in a pod, use its "
        "ServiceAccount (--in-cluster, VLLM_SCALER_IN_CLUSTER=true)"
    )


async def _recommend(tmp_path: Path, kube: str, prom: str) -> tuple[int, list[str], Path]:
    """``recommend --once`` in a process of its own (the command configures logging for the
    whole process; this test's loop serves the stand-ins meanwhile) against ``kube`` and
    ``prom``: its exit code, its stderr's lines and the kubeconfig."""
    policy = tmp_path / "policy.yaml"
    policy.write_text(yaml.safe_dump({"targets": [case_target_doc()]}))
    kubeconfig = _kubeconfig(tmp_path / "kc", kube)
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "scaler", "recommend", "--once", "--policy", str(policy),
        "--no-in-cluster", "--prometheus-url", prom, "--kubeconfig", str(kubeconfig),
        env={k: v for k, v in os.environ.items() if not k.startswith("VLLM_SCALER_")},
        stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = (b.decode() for b in await asyncio.wait_for(proc.communicate(), timeout=60))
    assert "Traceback" not in err and KUBE_TOKEN not in err + out
    assert out == ""
    return proc.returncode or 0, err.splitlines(), kubeconfig


async def test_kubernetes_and_prometheus_down_are_two_prefixed_errors(tmp_path: Path) -> None:
    kube = f"http://127.0.0.1:{_closed_port()}"
    prom = f"http://127.0.0.1:{_closed_port()}"
    returned, lines, kubeconfig = await _recommend(tmp_path, kube, prom)
    assert returned == 1, lines
    assert lines[1:] == [
        _unreachable(kube, kubeconfig),
        f"vllm-scaler: Prometheus at {prom}/ cannot be reached: transport: ConnectError: All "
        "connection attempts failed",
    ]
    assert "ssl:default" not in "\n".join(lines)


async def test_an_unreachable_kubernetes_api_is_one_line_naming_the_server(
    make_harness: HarnessFactory, tmp_path: Path
) -> None:
    """Prometheus answers; the API server refuses connections: one error naming the server,
    the kubeconfig's context and what to check, not each target's failed read."""
    h = await make_harness(replicas=1)
    kube = f"https://127.0.0.1:{_closed_port()}"
    returned, lines, kubeconfig = await _recommend(tmp_path, kube, h.prom.url)
    assert returned == 1, lines
    assert lines == [
        f"vllm-scaler: prometheus {h.prom.url}/ (auth: none; headers: none; CA: system; client "
        "certificate: none; timeout 10s)",
        _unreachable(kube, kubeconfig),
    ]
    # Prometheus was asked whether it answers, and no signal's query: the start stopped there
    assert (h.fake.probes, h.fake.requests) == (1, [])


@pytest.mark.parametrize("command", [["recommend", "--once"], ["run"], ["backtest"]])
async def test_an_encrypted_client_key_is_a_usage_error_without_a_prompt(
    tmp_path: Path, command: list[str]
) -> None:
    """OpenSSL asks for a passphrase on the terminal: ``Enter PEM pass phrase:`` twice, then
    EINVAL on a closed input (a traceback), or waits forever on a terminal."""
    if shutil.which("openssl") is None:
        pytest.skip("openssl CLI not installed (needed to make a test certificate)")
    cert, key = tmp_path / "ec.pem", tmp_path / "ek.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-keyout", str(key), "-out",
         str(cert), "-subj", "/CN=a", "-days", "1", "-passout", "pass:x1234"],
        check=True, capture_output=True,
    )  # fmt: skip
    env = {k: v for k, v in os.environ.items() if not k.startswith("VLLM_SCALER_")}
    returned, out = await run_scaler(
        [*command, "--prometheus-client-cert-file", str(cert),
         "--prometheus-client-key-file", str(key)],
        env,
    )  # fmt: skip
    assert returned == 2, out
    assert out == (
        "vllm-scaler: VLLM_SCALER_PROMETHEUS_CLIENT_KEY_FILE (--prometheus-client-key-file): "
        f"value '{key}': the key is encrypted (a passphrase); expected an unencrypted PEM "
        f"private key matching {cert}\n"
    )


def test_sim_on_a_real_control_plane_without_go_stops_at_start_saying_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from typer.testing import CliRunner

    from scaler.cli import app
    from scaler.sim import kube_real
    from scaler.sim.controlplane import GoNotFoundError

    def no_go(*_: object, **__: object) -> None:
        raise GoNotFoundError("no Go toolchain found to build the test servers; install Go")

    monkeypatch.setattr(kube_real, "ensure_binary", no_go)
    args = ["sim", "--kube", "real", "--minutes", "0.2", "--no-compare", "--no-profile-seed",
            "--initial-replicas", "1", "--workdir", str(tmp_path / "demo")]  # fmt: skip
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 1, result.output
    assert result.stderr.splitlines()[-1] == (
        "vllm-scaler: --kube real: no Go toolchain found to build the test servers; install Go"
    )


async def test_a_signal_without_series_is_one_line_printed_once(
    make_harness: HarnessFactory, tmp_path: Path
) -> None:
    """Pods scraped without a TTFT histogram: not a log line and then the start-up error, nor
    a log line with an empty query; one line naming the target, the signal and the query."""
    two = pods(2)
    # the command runs on the wall clock: so does the API server it talks to
    h = await make_harness(
        replicas=2, ready=two, answers=idle_without_ttft(two), server_clock=time.time
    )
    policy = tmp_path / "policy.yaml"
    policy.write_text(yaml.safe_dump({"targets": [case_target_doc()]}))
    env = {k: v for k, v in os.environ.items() if not k.startswith("VLLM_SCALER_")}
    returned, out = await run_scaler(
        ["recommend", "--once", "--policy", str(policy), "--no-in-cluster",
         "--prometheus-url", h.prom.url, "--kubeconfig", str(h.kubeconfig)],
        env,
    )  # fmt: skip
    assert returned == 1, out
    written = case_policy()  # the policy of the file, as the harness' loop reads it
    plan = build_query_plan(written.targets, rate_window_seconds=written.rate_window_seconds)
    header, line = out.splitlines()
    assert header.startswith(f"vllm-scaler: prometheus {h.prom.url}/ (auth: none; ")
    assert line.startswith(f"vllm-scaler: {KEY}: signal ttft_p95 has no series (absent): ")
    assert line.endswith(f"; the query that returned nothing: {plan.queries[QueryKind.TTFT_RATE]}")
