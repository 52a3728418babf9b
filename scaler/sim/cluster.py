"""The simulated cluster on loopback: the vLLM fleet, the Kubernetes API stand-in, Prometheus.

One place builds and starts the three parts in the right order (the API stand-in first, so a
kubeconfig exists; the fleet's per-pod ``/metrics`` servers and their file-SD; then Prometheus),
and stops them all, whichever of them started. The demo (``vllm-scaler sim``), the end-to-end
tests and the dashboard previews all run on it; each adds its own controller. Prometheus can be
VictoriaMetrics instead (``backend``), scraping the same file-SD targets.
"""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import AsyncIterator, Callable
from pathlib import Path

from scaler.actuators.kubernetes import KubernetesActuator, build_api_client
from scaler.config.policy import Policy
from scaler.controller.loop import Controller
from scaler.sim.fleet import Fleet, FleetConfig
from scaler.sim.kubeapi import KubeApiServer, KubeStore, write_kubeconfig
from scaler.sim.prometheus_server import PrometheusServer, ScrapingServer, write_file_sd
from scaler.sim.serving import FleetRuntime
from scaler.sim.victoria_metrics import VictoriaMetricsServer
from scaler.sources.prometheus import PrometheusSource, build_http_client
from scaler.telemetry.metrics import ScalerMetrics

__all__ = ["BACKENDS", "CONTROLLER_JOB", "SimCluster"]

#: The ``job`` label of the controller's own ``/metrics`` when the simulated Prometheus
#: scrapes it (the fleet's series are ``job="vllm"``): the name of the chart's metrics Service
#: for a release named ``vllm-scaler``, as its ServiceMonitor labels the series, so that the
#: shipped alert rules (``deploy/rules``, rendered from the chart's defaults) apply unchanged.
CONTROLLER_JOB = "vllm-scaler-metrics"

#: The servers that can scrape the fleet and answer the controller's queries, by name.
BACKENDS: dict[str, type[ScrapingServer]] = {
    "prometheus": PrometheusServer,
    "victoria-metrics": VictoriaMetricsServer,
}


class SimCluster:
    """The fleet, the Kubernetes API stand-in and Prometheus, built but not yet started.

    Args:
        workdir: holds the kubeconfig, the file-SD files (``sd/``) and Prometheus' TSDB.
        config: the fleet (replica model, drain grace, replicas at start).
        scrape_interval_seconds: Prometheus' scrape interval.
        clock: wall clock, seconds (the fleet runs in real time).
        backend: which server scrapes the fleet and answers the queries (a key of
            :data:`BACKENDS`); :attr:`prometheus` is that server whichever it is.

    Prometheus reads every ``*.json`` file in :attr:`sd_dir`: the fleet rewrites ``fleet.json``
    as pods come and go; a caller may add its own (e.g. the controller's ``/metrics``, with a
    ``job`` label that overrides the job name).
    """

    def __init__(
        self,
        workdir: Path,
        config: FleetConfig,
        *,
        scrape_interval_seconds: float = 1.0,
        clock: Callable[[], float],
        backend: str = "prometheus",
    ) -> None:
        if backend not in BACKENDS:
            raise ValueError(f"backend must be one of {sorted(BACKENDS)}, got {backend!r}")
        self.workdir = workdir
        self.clock = clock
        self.token = secrets.token_hex(16)
        self.store = KubeStore(now=clock)
        self.fleet = Fleet(self.store, config, now=clock())
        self.sd_dir = workdir / "sd"
        self.runtime = FleetRuntime(self.fleet, sd_file=self.sd_dir / "fleet.json", clock=clock)
        self.kube = KubeApiServer(self.store, token=self.token)
        # file SD accepts a glob in the last path segment
        self.prometheus: ScrapingServer = BACKENDS[backend](
            workdir / backend,
            scrape_interval_seconds=scrape_interval_seconds,
            sd_file=self.sd_dir / "*.json",
        )
        self.kubeconfig = workdir / "kubeconfig"
        self.kube_url = ""

    def describe(self) -> str:
        """What the Kubernetes side is, for the demo's header."""
        return f"{self.kube_url} (kubeconfig {self.kubeconfig})"

    def scrape_controller(self, port: int) -> None:
        """Have Prometheus scrape a controller's ``/metrics`` on ``127.0.0.1:port`` too, as
        job :data:`CONTROLLER_JOB` (its ``vllm_scaler_*`` series beside the fleet's, as in a
        cluster). Before or after :meth:`start`: file SD picks the file up either way."""
        write_file_sd(
            self.sd_dir / "controller.json",
            [([f"127.0.0.1:{port}"], {"job": CONTROLLER_JOB, "namespace": "vllm-scaler"})],
        )

    async def start(self) -> None:
        """Start the API stand-in, the fleet's metrics servers and Prometheus (in that order).

        Raises:
            ServerNotInstalledError, ServerStartError: from the backend's server.
        """
        self.kube_url = await self.kube.start()
        write_kubeconfig(self.kubeconfig, server_url=self.kube_url, token=self.token)
        await self.runtime.start()
        await self.prometheus.astart()

    async def stop(self) -> None:
        """Stop whatever started; safe to call more than once or after a failed start."""
        await self.prometheus.astop()
        await self.runtime.stop()
        await self.kube.stop()

    @contextlib.asynccontextmanager
    async def controller(
        self,
        policy: Policy,
        *,
        metrics: ScalerMetrics | None = None,
        timeout_seconds: float = 5.0,
    ) -> AsyncIterator[Controller]:
        """An in-process controller reading this Prometheus and writing through the stand-in.

        Its HTTP and Kubernetes clients are the production ones (``build_http_client``,
        ``build_api_client`` on the kubeconfig); they are closed on exit.
        """
        http = build_http_client(bearer_token_file=None, ca_file=None, timeout_seconds=5)
        api = await build_api_client(kubeconfig=self.kubeconfig, in_cluster=False)
        try:
            yield Controller(
                policy=policy,
                source=PrometheusSource(
                    http,
                    base_url=self.prometheus.url,
                    timeout_seconds=timeout_seconds,
                    rate_window_seconds=policy.rate_window_seconds,
                ),
                actuator=KubernetesActuator(api, clock=self.clock),
                metrics=metrics or ScalerMetrics(),
            )
        finally:
            await http.aclose()
            await api.close()
