"""Helpers for controller-level tests: the real loop against loopback stand-ins.

One :class:`Harness` wires the real pieces the way :func:`scaler.controller.app.serve` does:

- a :class:`~scaler.sim.kubeapi.KubeStore` served by a :class:`~scaler.sim.kubeapi.KubeApiServer`
  on loopback, reached through a kubeconfig and the real kubernetes-asyncio client;
- a :class:`~scaler.actuators.kubernetes.KubernetesActuator` on a fake clock;
- a :class:`PromServer` (the fake Prometheus of ``fakeprom.py`` that can be stopped and
  restarted on the same port, for "connection refused") reached by a real
  :class:`~scaler.sources.prometheus.PrometheusSource`;
- :class:`~scaler.telemetry.metrics.ScalerMetrics` and the
  :class:`~scaler.controller.loop.Controller` on the same fake clock.

Nothing sleeps: the clock is a float the test advances.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Iterable,
    Iterator,
    Mapping,
    MutableMapping,
)
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import structlog
from aiohttp import web
from kubernetes_asyncio.client import ApiClient

from scaler.actuators.kubernetes import KubernetesActuator, build_api_client
from scaler.config.policy import Policy
from scaler.controller.loop import Controller
from scaler.controller.report import TargetReport
from scaler.core.decide import Decision
from scaler.sim.kubeapi import KubeApiServer, KubeStore, RecordedRequest, write_kubeconfig
from scaler.sources.prometheus import PrometheusSource
from scaler.telemetry.metrics import ScalerMetrics
from tests.support.clock import FakeClock
from tests.support.fakeprom import FakePrometheus
from tests.support.policies import case_policy

TOKEN = "case-token"
T0 = 1_718_000_000.0
NS = "llm"
NAME = "vllm"
LABELS = {"app": "vllm"}
KEY = "llm/Deployment/vllm"
SCALE_PATH = "/apis/apps/v1/namespaces/llm/deployments/vllm/scale"


async def _no_history(request: web.Request) -> web.Response:
    """A range query's answer from a Prometheus without history (the seasonal forecast's
    demand history): no series."""
    return web.json_response({"status": "success", "data": {"resultType": "matrix", "result": []}})


class PromServer:
    """Serves a :class:`FakePrometheus` on loopback; can stop and restart on the same port."""

    def __init__(self, fake: FakePrometheus) -> None:
        self.fake = fake
        self.port = 0
        self._runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> str:
        app = web.Application()
        app.router.add_post("/api/v1/query", self.fake.handle)
        app.router.add_post("/api/v1/query_range", _no_history)
        runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", self.port).start()
        self._runner = runner
        self.port = int(runner.addresses[0][1])
        self.fake.url = self.url
        return self.url

    async def stop(self) -> None:
        """Close the listener and every connection: clients then get connection refused."""
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None


@dataclass
class Harness:
    """The real controller wired to loopback stand-ins (see the module docstring)."""

    clock: FakeClock
    store: KubeStore
    kube: KubeApiServer
    prom: PromServer
    source: PrometheusSource
    actuator: KubernetesActuator
    metrics: ScalerMetrics
    controller: Controller
    policy: Policy
    kubeconfig: Path

    @property
    def fake(self) -> FakePrometheus:
        return self.prom.fake

    async def cycle(self) -> TargetReport:
        """One ``run_cycle`` of the real controller; the single target's report."""
        reports = await self.controller.run_cycle()
        assert [r.target for r in reports] == [KEY]
        return reports[0]

    async def next_cycle(self, seconds: float = 30.0) -> TargetReport:
        """Advance the fake clock by one interval, then run a cycle."""
        self.clock.advance(seconds)
        return await self.cycle()

    # -- the stand-in

    def replicas(self) -> int:
        """``spec.replicas`` of ``llm/vllm`` in the stand-in."""
        return self.store.get_spec_replicas(NS, NAME)

    def patches(self) -> list[RecordedRequest]:
        """PATCH requests to the scale subresource the stand-in answered."""
        return [r for r in self.kube.requests if r.method == "PATCH" and r.path == SCALE_PATH]

    def writes(self) -> list[RecordedRequest]:
        """Every request that was not a GET."""
        return [r for r in self.kube.requests if r.method != "GET"]

    def add_ready(self, names: Iterable[str], *, age: float = 3600.0) -> None:
        for n in names:
            self.store.add_pod(NS, n, LABELS, ready=True, created_at=self.clock.now - age)

    def add_starting(self, names: Iterable[str], *, age: float) -> None:
        """Pods Pending/ContainerCreating (not Ready) created ``age`` seconds ago."""
        for n in names:
            self.store.add_pod(NS, n, LABELS, ready=False, created_at=self.clock.now - age)

    # -- our own metrics

    def value(self, name: str, **labels: str) -> float | None:
        """A sample of ``metrics.registry`` (None when the series does not exist)."""
        return self.metrics.registry.get_sample_value(name, labels)

    def target_value(self, name: str, **labels: str) -> float | None:
        """A per-target sample (``target="llm/Deployment/vllm"`` added)."""
        return self.value(name, target=KEY, **labels)

    def count(self, name: str, **labels: str) -> float:
        """A counter sample; 0 when it was never incremented."""
        return self.value(name, **labels) or 0.0

    def query_errors(self, signal: str, reason: str) -> float:
        return self.count("vllm_scaler_query_errors_total", signal=signal, reason=reason)

    def decisions(self, reason: str) -> float:
        return self.count("vllm_scaler_decisions_total", target=KEY, reason=reason)

    def signal_valid(self, signal: str) -> float | None:
        return self.target_value("vllm_scaler_signal_valid", signal=signal)

    def signal_status(self, signal: str) -> str:
        """The one status whose ``vllm_scaler_signal_status`` series is 1."""
        found = [
            s.labels["status"]
            for metric in self.metrics.registry.collect()
            if metric.name == "vllm_scaler_signal_status"
            for s in metric.samples
            if s.labels.get("target") == KEY and s.labels.get("signal") == signal and s.value == 1
        ]
        assert len(found) == 1, found
        return found[0]


@contextlib.asynccontextmanager
async def open_harness(
    tmp_path: Path,
    *,
    policy: Policy | None = None,
    replicas: int,
    ready: Iterable[str] = (),
    timeout_seconds: float = 5.0,
    answers: Mapping[str, Any] | None = None,
    server_clock_ahead_seconds: float = 0.0,
    server_clock: Callable[[], float] | None = None,
) -> AsyncIterator[Harness]:
    """Start the stand-ins with Deployment ``llm/vllm`` (``replicas``, ready pods) and the loop.

    ``server_clock_ahead_seconds``: the stand-in's clock runs this far ahead of the
    controller's (negative: behind); its timestamps and ``Date`` headers are on its clock.
    ``server_clock``: the stand-in's clock instead (``time.time`` for a command run in its
    own process, on the wall clock, against it).
    """
    policy = policy or case_policy()
    clock = FakeClock(T0)
    store = KubeStore(
        server_clock
        or (
            (lambda: clock.now + server_clock_ahead_seconds)
            if server_clock_ahead_seconds
            else clock
        )
    )
    store.add_deployment(NS, NAME, replicas, LABELS)
    fake = FakePrometheus()
    if answers:
        fake.set(**answers)
    prom = PromServer(fake)
    async with contextlib.AsyncExitStack() as stack:
        kube = await stack.enter_async_context(KubeApiServer(store, token=TOKEN))
        await prom.start()
        stack.push_async_callback(prom.stop)
        stack.callback(fake.release.set)  # runs first: stalled handlers finish
        kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", server_url=kube.url, token=TOKEN)
        api: ApiClient = await build_api_client(kubeconfig=kubeconfig, in_cluster=False)
        stack.push_async_callback(api.close)
        http = await stack.enter_async_context(httpx.AsyncClient())
        source = PrometheusSource(
            http,
            base_url=prom.url,
            timeout_seconds=timeout_seconds,
            rate_window_seconds=policy.rate_window_seconds,
            clock=clock,
        )

        async def waited(seconds: float) -> None:  # a Retry-After waited in fake time
            clock.advance(seconds)

        actuator = KubernetesActuator(api, clock=clock, sleep=waited)
        metrics = ScalerMetrics()
        controller = Controller(
            policy=policy, source=source, actuator=actuator, metrics=metrics, clock=clock
        )
        h = Harness(
            clock, store, kube, prom, source, actuator, metrics, controller, policy, kubeconfig
        )
        h.add_ready(ready)
        yield h


HarnessFactory = Callable[..., Awaitable[Harness]]


def decision_of(report: TargetReport) -> Decision:
    """The decision of a cycle's report; the test fails, showing the report, when the cycle
    made none (the target could not be read)."""
    assert report.decision is not None, report
    return report.decision


@pytest.fixture
async def make_harness(tmp_path: Path) -> AsyncIterator[HarnessFactory]:
    """``await make_harness(replicas=4, ready=[...], policy=..., timeout_seconds=...)``."""
    async with contextlib.AsyncExitStack() as stack:

        async def make(**kwargs: Any) -> Harness:
            return await stack.enter_async_context(open_harness(tmp_path, **kwargs))

        yield make


@contextlib.contextmanager
def captured_logs() -> Iterator[list[MutableMapping[str, Any]]]:
    """structlog events as dicts, every level kept, global configuration restored after."""
    saved = structlog.get_config()
    try:
        with structlog.testing.capture_logs() as logs:
            structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.DEBUG))
            yield logs
    finally:
        structlog.configure(**saved)
