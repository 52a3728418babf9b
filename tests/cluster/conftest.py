"""Fixtures of the cluster tier: a real Kubernetes control plane, a namespace per test, a real
Prometheus scraping the kwok pods' vLLM metrics, and the project installed with its chart.

Every test under ``tests/cluster`` is marked ``cluster``. The cluster is, by default, the
control plane started here (:class:`~scaler.sim.controlplane.ControlPlane`: Kubernetes
built from its Go modules, cached under ``~/.cache/vllm-scaler/bin``, built on first use);
with ``VLLM_SCALER_TEST_CLUSTER=kubeconfig``, the cluster of ``$KUBECONFIG`` (kind, k3d),
with kwok nodes of this run (never the default: tests create a cluster-admin
ServiceAccount, fake nodes and namespaces there).

Without a Go toolchain (and no cached binary) the tier is skipped with the reason, except
under ``CI=true``, where it fails: CI must run it.

Fixtures for other tests:

- ``kube`` (session): the :class:`~scaler.sim.controlplane.Cluster`: ``kube.request`` /
  ``kube.get`` (the API as the admin), ``kube.kubectl(...)``, ``kube.apply(docs)``,
  ``kube.admin_token``, ``kube.service_account_token(ns, name)``,
  ``kube.service_account_kubeconfig(ns, name)``, ``kube.wait_for(check, timeout=, what=)``.
- ``control_plane`` (session): the same, only when it was started here (else skip): for
  what needs the servers themselves (their flags, feature gates, logs).
- ``namespace``: a fresh namespace of the test, deleted after it.
- ``kube_prometheus`` (session): a real Prometheus (Debian's) scraping every
  :class:`~tests.cluster.podmetrics.PodMetrics` of the run.
- ``pod_metrics``: ``pod_metrics(namespace)`` serves the vLLM metrics of that namespace's
  Running pods, under their names.
- ``install_scaler``: ``install_scaler(values)`` renders the chart with ``values`` into a
  namespace of its own and applies it; ``.start(prometheus_url)`` runs the controller.
- ``scene``: all of these for one test (:class:`~tests.cluster.scene.Scene`), with the reads
  the checks poll (pods Ready, ``spec.replicas``, Events).
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from scaler.sim.controlplane import (
    KUBEPLANE,
    BuildError,
    Cluster,
    ComponentError,
    ControlPlane,
    GoNotFoundError,
    ensure_binary,
    from_kubeconfig,
)
from scaler.sim.prometheus_server import (
    PrometheusNotInstalledError,
    PrometheusServer,
    find_prometheus_binary,
)
from tests.cluster.chart import Install, install_chart
from tests.cluster.podmetrics import Load, PodMetrics
from tests.cluster.scene import Scene

_HERE = Path(__file__).parent


@pytest.hookimpl(tryfirst=True)  # before -m deselects by the marker added here
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark the tier's tests ``cluster`` and run them last: a build of the control plane
    started beside the run (scripts/test.sh) has the rest of the suite's time to finish."""
    ours = [item for item in items if _HERE in Path(str(item.path)).parents]
    for item in ours:
        item.add_marker(pytest.mark.cluster)
    chosen = set(ours)
    items[:] = [item for item in items if item not in chosen] + ours


def _say(config: pytest.Config, text: str) -> None:
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line(text)


def _unavailable(reason: str) -> None:
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"the cluster tier must run in CI: {reason}", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def kube(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    workdir = tmp_path_factory.mktemp("kube")
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    try:
        # the build's progress lines (it may take many minutes) reach the terminal
        with capture.global_and_fixture_disabled() if capture else contextlib.nullcontext():
            built = ensure_binary(KUBEPLANE)
    except (GoNotFoundError, BuildError) as err:
        _unavailable(str(err))
        raise AssertionError("unreachable") from None
    if built.built:
        _say(request.config, f"cluster tier: built {built.path.name} in {built.seconds:.0f} s")
    if os.environ.get("VLLM_SCALER_TEST_CLUSTER") == "kubeconfig":
        external = from_kubeconfig(workdir=workdir, ready_delay_seconds=2.0)
        external.start()
        _say(request.config, f"cluster tier: the cluster of KUBECONFIG ({external.server})")
        try:
            yield external
        finally:
            external.stop()
        return
    for attempt in (1, 2):
        plane = ControlPlane(
            workdir / f"plane-{attempt}", kubeplane=built.path, ready_delay_seconds=2.0
        )
        try:
            plane.start()
            break
        except ComponentError as err:
            # a free port taken by another process between the look and the bind: new ports
            if attempt == 2 or "address already in use" not in str(err):
                raise
    _say(
        request.config,
        f"cluster tier: control plane {KUBEPLANE.version} up in {plane.start_seconds:.1f} s",
    )
    try:
        yield plane
    finally:
        plane.stop()


@pytest.fixture(scope="session")
def control_plane(kube: Cluster) -> ControlPlane:
    if not isinstance(kube, ControlPlane):
        pytest.skip("needs the control plane started here (its servers' flags)")
    return kube


def _name(test: str) -> str:
    base = re.sub(r"[^a-z0-9]+", "-", test.lower()).strip("-")[:40].strip("-")
    return f"{base}-{secrets.token_hex(2)}"


@pytest.fixture
def namespace(kube: Cluster, request: pytest.FixtureRequest) -> Iterator[str]:
    name = _name(request.node.name.removeprefix("test_"))
    kube.create_namespace(name)
    try:
        yield name
    finally:
        kube.delete_namespace(name)


@pytest.fixture(scope="session")
def kube_prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrometheusServer]:
    try:
        find_prometheus_binary()
    except PrometheusNotInstalledError as err:
        _unavailable(str(err))
    tmp = tmp_path_factory.mktemp("kube-prometheus")
    (tmp / "sd").mkdir()
    server = PrometheusServer(
        tmp / "prom", scrape_interval_seconds=1.0, sd_file=tmp / "sd" / "*.json"
    )
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def pod_metrics(
    kube: Cluster, kube_prometheus: PrometheusServer
) -> Iterator[Callable[..., PodMetrics]]:
    started: list[PodMetrics] = []
    sd_folder = kube_prometheus.sd_file.parent

    def make(namespace: str, default: Load | None = None) -> PodMetrics:
        farm = PodMetrics(
            kube, namespace, sd_folder / f"{namespace}.json", default=default or Load()
        )
        started.append(farm.start())
        return farm

    try:
        yield make
    finally:
        for farm in started:
            farm.stop()


@pytest.fixture
def install_scaler(
    kube: Cluster, request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[Callable[..., Install]]:
    installs: list[tuple[Install, str]] = []

    def install(values: dict[str, Any]) -> Install:
        ns = _name("scaler-" + request.node.name.removeprefix("test_"))
        kube.create_namespace(ns)
        done = install_chart(kube, ns, values, tmp_path)
        installs.append((done, ns))
        return done

    try:
        yield install
    finally:
        for done, ns in installs:
            done.uninstall()
            kube.delete_namespace(ns)


@pytest.fixture
def scene(
    kube: Cluster,
    namespace: str,
    kube_prometheus: PrometheusServer,
    pod_metrics: Callable[..., PodMetrics],
    install_scaler: Callable[..., Install],
) -> Scene:
    return Scene(kube, namespace, kube_prometheus, pod_metrics, install_scaler)
