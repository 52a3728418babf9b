"""A target that cannot be read is named with what failed: what was read, of which target,
from which API server (no credential), why in the system's words (not asyncio's "Connect
call failed ..."), what was expected, and that the target is held; in the
``target_read_failed`` log and in what its resource's status and ``FailedGetScale`` Event
say."""

from __future__ import annotations

import asyncio
import errno
import socket
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import aiohttp
import pytest

from scaler.actuators.api_client import connect_api
from scaler.actuators.errors import ApiFailure, KubeApiError, classify_error, connect_failure_reason
from scaler.actuators.kubernetes import KubernetesActuator
from scaler.controller.loop import Controller
from scaler.controller.read_failure import read_failure_message
from scaler.sim.kubeapi import write_kubeconfig
from scaler.telemetry.metrics import ScalerMetrics
from tests.faults.helpers import busy, names
from tests.support.controller_harness import KEY, TOKEN, HarnessFactory, captured_logs

PODS = names(2)
HELD = "is held: its replicas stay as they are and nothing is decided or written for it"


def _closed_port() -> int:
    """A loopback port nothing listens on (bound, then closed): a connect is refused."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


def test_the_message_names_the_read_the_target_the_server_the_expectation_and_the_hold() -> None:
    err = KubeApiError(ApiFailure.FORBIDDEN, 'deployments.apps "vllm" is forbidden')
    assert read_failure_message(KEY, "scale", err, "https://10.0.0.1:6443") == (
        f"cannot read the scale subresource and pods of {KEY} from the Kubernetes API server "
        'at https://10.0.0.1:6443: forbidden: deployments.apps "vllm" is forbidden; expected '
        "RBAC to allow the controller get on the workload and its scale subresource and list "
        "on pods in the target's namespace (the chart's rbac.scope); "
        f"{KEY} {HELD} until a read succeeds"
    )
    # every failure class says what was expected; an unknown server is not named
    for outcome in ApiFailure:
        text = read_failure_message(KEY, "workload", KubeApiError(outcome, "x"), None)
        assert text.startswith(
            f"cannot read the workload object of {KEY} from the Kubernetes API server: "
            f"{outcome}: x; expected "
        ), outcome
        assert text.endswith(f"{KEY} {HELD} until a read succeeds"), outcome


async def test_a_refused_connection_names_the_server_and_the_system_reason(
    make_harness: HarnessFactory, tmp_path: Path
) -> None:
    h = await make_harness(replicas=2, ready=PODS, answers=busy(PODS))
    port = _closed_port()
    kubeconfig = write_kubeconfig(
        tmp_path / "kc", server_url=f"http://127.0.0.1:{port}", token=TOKEN
    )
    api, origin = await connect_api(kubeconfig=kubeconfig, in_cluster=False)
    try:
        actuator = KubernetesActuator(api, clock=h.clock, request_timeout=2.0)
        controller = Controller(
            policy=h.policy,
            source=h.source,
            actuator=actuator,
            metrics=ScalerMetrics(),
            clock=h.clock,
            api_server=origin.server,
        )
        with captured_logs() as logs:
            [report] = await asyncio.wait_for(controller.run_cycle(), timeout=10)
    finally:
        await api.close()
    assert report.action == "read_failed"
    [failed] = [e for e in logs if e["event"] == "target_read_failed"]
    assert failed["outcome"] == "transport"
    assert failed["error"] == f"cannot connect to 127.0.0.1:{port}: connection refused"
    assert failed["message"] == (
        f"cannot read the scale subresource and pods of {KEY} from the Kubernetes API server "
        f"at http://127.0.0.1:{port}: transport: cannot connect to 127.0.0.1:{port}: "
        "connection refused; expected an answer from the API server (is it up, and can the "
        "controller reach it: its address, a NetworkPolicy on the controller's egress, a "
        f"proxy?); {KEY} {HELD} until a read succeeds"
    )
    said = " ".join(str(v) for e in logs for v in e.values())
    assert "Connect call failed" not in said and "ssl:default" not in said
    assert TOKEN not in said


async def test_the_status_and_event_of_a_resource_say_the_same(
    make_harness: HarnessFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the resource's status and its FailedGetScale Event are given
    (:meth:`ResourceStatuses.unread`) is the log's message."""
    h = await make_harness(replicas=2, ready=PODS, answers=busy(PODS))
    h.controller.api_server = "https://api.example:6443"
    h.store.inject_fault("GET", "/deployments/vllm/scale$", 403)
    given: list[tuple[bool, str]] = []

    async def unread(target: Any, record: Any, missing: bool, message: str, *_: Any) -> None:
        given.append((missing, message))

    monkeypatch.setattr(h.controller.statuses, "unread", unread)
    with captured_logs() as logs:
        r = await h.cycle()
    assert r.action == "read_failed"
    [failed] = [e for e in logs if e["event"] == "target_read_failed"]
    assert given == [(False, failed["message"])]
    assert failed["message"].startswith(
        f"cannot read the scale subresource and pods of {KEY} from the Kubernetes API server "
        "at https://api.example:6443: forbidden: "
    )
    assert "expected RBAC to allow the controller get on the workload" in failed["message"]
    assert failed["message"].endswith(f"{KEY} {HELD} until a read succeeds")
    assert TOKEN not in failed["message"]


def _connector_error(error: OSError) -> aiohttp.ClientConnectorError:
    key = SimpleNamespace(host="api.example", port=6443, ssl=True)
    return aiohttp.ClientConnectorError(key, error)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("error", "reason"),
    [
        pytest.param(
            ConnectionRefusedError(errno.ECONNREFUSED, "Connect call failed ('10.0.0.1', 6443)"),
            "connection refused",
            id="one address refused",
        ),
        pytest.param(
            OSError(
                "Multiple exceptions: [Errno 111] Connect call failed ('::1', 6443, 0, 0), "
                "[Errno 101] Connect call failed ('10.0.0.1', 6443), "
                "[Errno 111] Connect call failed ('10.0.0.2', 6443)"
            ),
            "connection refused; network is unreachable",
            id="several addresses: each reason once",
        ),
        pytest.param(
            socket.gaierror(socket.EAI_NONAME, "Name or service not known"),
            "the host name api.example does not resolve (Name or service not known)",
            id="a name that does not resolve",
        ),
    ],
)
def test_a_connection_failure_is_said_in_the_systems_words(error: OSError, reason: str) -> None:
    exc = _connector_error(error)
    assert connect_failure_reason(exc) == reason
    failure = classify_error(exc)
    assert failure is not None and failure.outcome is ApiFailure.TRANSPORT
    assert failure.message == f"cannot connect to api.example:6443: {reason}"
    assert "Connect call failed" not in failure.message
