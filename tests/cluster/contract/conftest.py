"""The contract suite's fixture: ``api``, each test run once against the API stand-in and
once against the real kube-apiserver (``[stand-in]``, ``[kube-apiserver]``)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from scaler.sim.controlplane import Cluster
from tests.cluster.contract.servers import (
    RealServer,
    Server,
    StandIn,
    install_custom_kinds,
    remove_custom_kinds,
)


@pytest.fixture(scope="session")
def custom_kinds(kube: Cluster) -> Iterator[None]:
    """The suite's CRDs on the real server for the session (a CRD deleted and made again
    at once would meet its own deletion)."""
    install_custom_kinds(kube)
    try:
        yield
    finally:
        remove_custom_kinds(kube)


@pytest.fixture(params=["stand-in", "kube-apiserver"])
def server_kind(request: pytest.FixtureRequest) -> tuple[str, Cluster | None, str]:
    """Which server, and for the real one its cluster and the test's namespace."""
    if request.param == "stand-in":
        return "stand-in", None, "contract"
    request.getfixturevalue("custom_kinds")
    kube: Cluster = request.getfixturevalue("kube")
    namespace: str = request.getfixturevalue("namespace")
    return "kube-apiserver", kube, namespace


@pytest.fixture
async def api(
    server_kind: tuple[str, Cluster | None, str], tmp_path: Path
) -> AsyncIterator[Server]:
    _, cluster, namespace = server_kind
    if cluster is None:
        async with StandIn.open(tmp_path) as stand_in:
            yield stand_in
    else:
        async with RealServer.open(cluster, namespace) as real:
            yield real
