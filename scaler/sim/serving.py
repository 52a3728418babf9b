"""Runs a :class:`~scaler.sim.fleet.Fleet` under the wall clock, as real HTTP endpoints.

Each ready pod serves its own ``/metrics`` on loopback in vLLM's exposition format, and the
Prometheus file-service-discovery file lists the pods as they come and go (with ``namespace``
and ``pod`` labels, as the Kubernetes pod service discovery gives them). The trace is replayed
against the fleet; a sample of the fleet's state is recorded every second for the report.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path

from aiohttp import web

from scaler.sim.exposition import CONTENT_TYPE
from scaler.sim.fleet import Fleet, FleetSample, SimPod
from scaler.sim.prometheus_server import write_file_sd
from scaler.sim.trace import Trace, to_sim_request


class FleetRuntime:
    """Drives a fleet in real time, with a ``/metrics`` server per ready pod.

    Args:
        fleet: the fleet (its store's clock must be ``clock``).
        sd_file: the file-SD JSON file Prometheus watches.
        clock: epoch seconds.
        tick_seconds: how often the fleet advances.
    """

    def __init__(
        self,
        fleet: Fleet,
        *,
        sd_file: Path,
        clock: Callable[[], float] = time.time,
        tick_seconds: float = 0.05,
    ) -> None:
        self.fleet = fleet
        self.sd_file = sd_file
        self.clock = clock
        self.tick_seconds = tick_seconds
        self.samples: list[FleetSample] = []
        self._sites: dict[str, tuple[web.AppRunner, int]] = {}
        self._next_id = 0

    async def _serve_pod(self, pod: SimPod) -> None:
        exported = pod.metrics
        if exported is None:
            raise ValueError("the fleet exports no metrics (FleetConfig.export_metrics)")

        async def metrics(_: web.Request) -> web.Response:
            pod.engine.advance_to(self.clock())
            return web.Response(body=exported.render(), headers={"Content-Type": CONTENT_TYPE})

        app = web.Application()
        app.router.add_get("/metrics", metrics)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = int(site._server.sockets[0].getsockname()[1])  # type: ignore[union-attr]
        self._sites[pod.name] = (runner, port)

    async def _drop_pod(self, pod: SimPod) -> None:
        entry = self._sites.pop(pod.name, None)
        if entry is not None:
            await entry[0].cleanup()

    def _write_sd(self) -> None:
        ns = self.fleet.config.namespace
        groups = [
            ([f"127.0.0.1:{port}"], {"namespace": ns, "pod": name})
            for name, (_, port) in sorted(self._sites.items())
        ]
        write_file_sd(self.sd_file, groups)

    async def start(self) -> None:
        """Serve the pods that are ready at the start and write the SD file."""
        for pod in self.fleet.pods.values():
            if pod.ready:
                await self._serve_pod(pod)
        self._write_sd()

    async def _apply(self, ready: list[SimPod], gone: list[SimPod]) -> None:
        for pod in ready:
            await self._serve_pod(pod)
        for pod in gone:
            await self._drop_pod(pod)
        if ready or gone:
            self._write_sd()

    async def replay(self, trace: Trace, *, tail_seconds: float, stop: asyncio.Event) -> None:
        """Replay ``trace`` from now, then run ``tail_seconds`` more, or until ``stop``; its
        sleep events put pods to sleep and wake them at their times."""
        start = self.clock()
        arrivals = list(trace.requests)
        sleeps = list(trace.sleep_events)
        i = 0
        end = start + trace.duration_seconds + tail_seconds
        next_sample = start
        since_sample = 0
        while not stop.is_set():
            now = self.clock()
            if now >= end:
                break
            while i < len(arrivals) and start + arrivals[i].arrival_seconds <= now:
                req = to_sim_request(trace, i, start + arrivals[i].arrival_seconds)
                req.id = self._next_id
                self._next_id += 1
                self.fleet.submit(req, max(now, req.arrival))
                i += 1
                since_sample += 1
            while sleeps and start + sleeps[0].seconds <= now:
                event = sleeps.pop(0)
                if event.level:
                    self.fleet.sleep(event.replicas, event.level, now)
                else:
                    self.fleet.wake(event.replicas, now)
            changes = self.fleet.step(now)
            await self._apply(changes.ready, changes.gone)
            if now >= next_sample:
                self.samples.append(self.fleet.sample(now - start, since_sample))
                since_sample = 0
                next_sample += 1.0
            await asyncio.sleep(self.tick_seconds)
        self.started_at = start

    async def stop(self) -> None:
        """Stop every pod's metrics server."""
        for runner, _ in list(self._sites.values()):
            await runner.cleanup()
        self._sites.clear()
