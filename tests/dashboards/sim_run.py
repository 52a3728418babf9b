"""A short simulated run with everything the dashboards read, for tests and the previews.

A real Prometheus scrapes the simulated vLLM fleet (job ``vllm``) and the in-process
controller's own ``/metrics`` served by :class:`TelemetryServer` (job ``vllm-scaler``) while a
slice of the bundled code trace is replayed. ``PrometheusServer`` writes a single scrape job,
so both come from file-SD files matched by one glob: the fleet's file is rewritten as pods come
and go, ours is written once, and its ``job`` target label overrides the job name (Prometheus
sets ``job`` from the job name only where a target has none). Optionally a VictoriaMetrics
scrapes the same targets beside it, so one run serves the queries of both backends.

Run ``python -m tests.dashboards.sim_run docs/dashboards`` to redraw the dashboards page's pictures.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import sys
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scaler.config.policy import parse_policy
from scaler.controller.loop import Controller
from scaler.sim.cluster import CONTROLLER_JOB, SimCluster
from scaler.sim.demo import NAMED_TRACES
from scaler.sim.engine import ReplicaModel
from scaler.sim.fleet import FleetConfig, SimPod
from scaler.sim.prometheus_server import ScrapingServer, wait_for_series
from scaler.sim.trace import load_trace
from scaler.sim.victoria_metrics import VictoriaMetricsServer
from scaler.telemetry.metrics import ScalerMetrics
from scaler.telemetry.server import TelemetryServer
from tests.support.sim_policy import sim_policy

INTERVAL_SECONDS = 2.0
SCALER_JOB = CONTROLLER_JOB
POLICY = sim_policy(max_replicas=4, up_pods_per_period=2, down_window_seconds=15)
# The panels of the capacity signal and of the shadow policy need their series: a seed gives
# the capacity signal an estimate from the first cycle (a 40 s run is too short to learn one),
# and the shadow is the same policy without the capacity signal.
POLICY["targets"][0]["signals"]["capacity"] = {
    "seed_prompt_tokens_per_second": 20_000,
    "seed_generation_tokens_per_second": 0,
}
POLICY["targets"][0]["shadow"] = {"max_replicas": 4, "signals": {"capacity": {"enabled": False}}}
# The dashboards' run: inter-token latency is off by default, and its panels need it on (a
# target the run never reaches).
DASHBOARDS_POLICY = copy.deepcopy(POLICY)
DASHBOARDS_POLICY["targets"][0]["signals"]["itl_p95"] = {"enabled": True, "target_seconds": 5.0}


@dataclass(frozen=True, slots=True)
class SimRun:
    """What a test needs from a finished replay; the backends and all targets still serve.

    ``backends``: the base URL of each server that scraped the run, by name (``prometheus``,
    and ``victoria-metrics`` when asked for). ``pods``: every pod of the fleet (their
    creation, Ready, termination and deletion times on the wall clock).
    """

    prometheus_url: str
    start: float
    end: float
    model_name: str
    scale_events: list[tuple[int, int]]
    backends: dict[str, str]
    pods: tuple[SimPod, ...] = ()


@contextlib.asynccontextmanager
async def simulated_run(
    workdir: Path,
    *,
    start_minute: float = 14.0,
    trace_seconds: float = 100.0,
    compress: float = 4.0,
    tail_seconds: float = 15.0,
    victoria_metrics: bool = False,
    policy_doc: dict[str, Any] | None = None,
) -> AsyncIterator[SimRun]:
    """Replay ``trace_seconds`` of the code trace from ``start_minute`` (sped up by
    ``compress``) with the controller scaling, then yield while everything keeps serving.
    ``victoria_metrics``: a VictoriaMetrics scrapes the same targets (the controller reads
    Prometheus). ``policy_doc``: the controller's policy (default :data:`POLICY`)."""
    policy = parse_policy(POLICY if policy_doc is None else policy_doc)
    trace = load_trace(
        NAMED_TRACES["code"],
        start_seconds=start_minute * 60,
        duration_seconds=trace_seconds,
        compress=compress,
        rate_scale=0.5,
        seed=1,
    )
    config = FleetConfig(model=ReplicaModel(model_load_seconds=4.0), termination_grace_seconds=30)
    cluster = SimCluster(workdir, config, scrape_interval_seconds=1.0, clock=time.time)
    metrics = ScalerMetrics()
    telemetry = TelemetryServer(metrics, host="127.0.0.1", port=0)
    extra: list[ScrapingServer] = []
    if victoria_metrics:
        extra.append(
            VictoriaMetricsServer(
                workdir / "victoria-metrics-beside",
                scrape_interval_seconds=1.0,
                sd_file=cluster.sd_dir / "*.json",
            )
        )
    stop = asyncio.Event()

    async def control(controller: Controller) -> None:
        while not stop.is_set():
            await controller.run_cycle()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=INTERVAL_SECONDS)

    try:
        await telemetry.start()
        cluster.scrape_controller(telemetry.port)
        await cluster.start()
        for server in extra:
            await server.astart()
        backends = {"prometheus": cluster.prometheus.url} | {s.name: s.url for s in extra}
        for url in backends.values():
            await wait_for_series(url, "vllm:num_requests_running", timeout=30)
            await wait_for_series(url, f'up{{job="{SCALER_JOB}"}} == 1', timeout=30)
        url = cluster.prometheus.url
        async with cluster.controller(policy, metrics=metrics) as controller:
            start = time.time()
            task = asyncio.create_task(control(controller))
            await cluster.runtime.replay(trace, tail_seconds=tail_seconds, stop=asyncio.Event())
            stop.set()
            await task
        yield SimRun(
            prometheus_url=url,
            start=start,
            end=time.time(),
            model_name=config.model_name,
            scale_events=[(c.old_replicas, c.new_replicas) for _, c in cluster.fleet.scale_changes],
            backends=backends,
            pods=(*cluster.fleet.gone, *cluster.fleet.pods.values()),
        )
    finally:
        stop.set()
        for server in extra:
            await server.astop()
        await cluster.stop()
        await telemetry.stop()


async def _render(out_dir: Path) -> None:
    import tempfile

    from scaler.dashboards import render_previews

    with tempfile.TemporaryDirectory() as tmp:
        async with simulated_run(
            Path(tmp),
            start_minute=13.0,
            trace_seconds=180.0,
            tail_seconds=45.0,
            policy_doc=DASHBOARDS_POLICY,
        ) as run:
            # A short run: a 15 s rate window shows its shape better than Grafana's 1 m.
            builtins = {"__rate_interval": "15s", "__interval": "5s", "__range": "5m"}
            paths = await asyncio.to_thread(
                render_previews,
                run.prometheus_url,
                out_dir,
                start=run.start,
                end=run.end,
                builtins=builtins,
            )
    for p in paths:
        print(p)


if __name__ == "__main__":
    asyncio.run(_render(Path(sys.argv[1] if len(sys.argv) > 1 else "docs/dashboards")))
