"""The start-up question to the Kubernetes API server: one that cannot be reached is named
with its URL and what to check (the kubeconfig's context, or the pod's ServiceAccount), no
credential in the message; one that answers, with any status, is no problem of this check."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes_asyncio.config import incluster_config

from scaler.actuators.api_client import ApiServerOrigin, api_server_problem, connect_api
from scaler.sim.kubeapi import KubeApiServer, KubeStore, write_kubeconfig
from tests.support.tls import make_certificates

SA_TOKEN = "sa-token-31b7f0c4"


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port  # nothing listens there once the socket is closed: connection refused


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A port that accepts connections (the kernel's backlog) and never answers."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(8)
        yield s.getsockname()[1]


async def test_in_a_pod_the_message_names_the_service_account_configuration(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    port = _closed_port()
    token = tmp_path / "token"
    token.write_text(SA_TOKEN)
    monkeypatch.setattr(incluster_config, "SERVICE_TOKEN_FILENAME", str(token))
    monkeypatch.setattr(
        incluster_config, "SERVICE_CERT_FILENAME", str(make_certificates(tmp_path)["ca"])
    )
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", str(port))
    api, origin = await connect_api(kubeconfig=None, in_cluster=True)
    try:
        assert origin == ApiServerOrigin(f"https://127.0.0.1:{port}")
        problem = await api_server_problem(api, origin)
    finally:
        await api.close()
    assert problem == (
        f"the Kubernetes API server at https://127.0.0.1:{port} cannot be reached: connection "
        "refused (the pod's in-cluster ServiceAccount configuration); check that the pod can "
        "reach the API server (KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT, a "
        "NetworkPolicy on its egress) and that its ServiceAccount token is mounted "
        "(automountServiceAccountToken)"
    )


async def test_a_server_that_never_answers_is_named_with_the_time_waited(
    tmp_path: Path, silent_port: int
) -> None:
    server = f"http://127.0.0.1:{silent_port}"
    kubeconfig = write_kubeconfig(tmp_path / "kc", server_url=server, token=SA_TOKEN)
    api, origin = await connect_api(kubeconfig=kubeconfig, in_cluster=False)
    try:
        assert origin == ApiServerOrigin(server, kubeconfig=str(kubeconfig), context="sim")
        problem = await api_server_problem(api, origin, timeout_seconds=0.2)
    finally:
        await api.close()
    assert problem is not None
    assert problem.startswith(
        f"the Kubernetes API server at {server} cannot be reached: no answer within 0.2s "
        f"(context 'sim' of kubeconfig {kubeconfig}); check that it is the cluster meant "
    )
    assert SA_TOKEN not in problem


@pytest.mark.parametrize(
    ("token", "status"), [("case-token", 200), ("another-token", 401)], ids=["accepted", "refused"]
)
async def test_a_server_that_answers_is_no_problem_of_this_check(
    tmp_path: Path, token: str, status: int
) -> None:
    """A refused credential (401) is named by the calls that meet it, with their verb."""
    async with KubeApiServer(KubeStore(lambda: 0.0), token="case-token") as kube:
        kubeconfig = write_kubeconfig(tmp_path / "kc", server_url=kube.url, token=token)
        api, origin = await connect_api(kubeconfig=kubeconfig, in_cluster=False)
        try:
            assert await api_server_problem(api, origin) is None
        finally:
            await api.close()
        assert [(r.method, r.path, r.status) for r in kube.requests] == [
            ("GET", "/version/", status)
        ]
