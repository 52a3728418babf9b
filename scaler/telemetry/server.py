"""The HTTP endpoint of our own telemetry: ``/metrics``, ``/healthz`` and ``/readyz`` (aiohttp)."""

from __future__ import annotations

import errno
import os
import socket
from collections.abc import Callable

from aiohttp import web
from prometheus_client import CONTENT_TYPE_PLAIN_0_0_4, generate_latest

from scaler.telemetry.health import Probe
from scaler.telemetry.metrics import ScalerMetrics


def _always() -> Probe:
    return True, "ok"


class TelemetryBindError(OSError):
    """The endpoint cannot listen; the message names the setting, the value and the OS reason."""


def _bind_error(err: OSError, host: str, port: int) -> TelemetryBindError:
    if isinstance(err, socket.gaierror) or not err.errno:
        reason = err.strerror or str(err)
    else:  # asyncio's message repeats the address; the OS reason is enough
        reason = os.strerror(err.errno)
    if isinstance(err, socket.gaierror) or err.errno in (errno.EADDRNOTAVAIL, errno.EAFNOSUPPORT):
        return TelemetryBindError(
            f"VLLM_SCALER_METRICS_ADDRESS (--metrics-address): value {host!r}: cannot listen "
            f"on it ({reason}); expected a local IP address or host name, e.g. 0.0.0.0"
        )
    return TelemetryBindError(
        f"VLLM_SCALER_METRICS_PORT (--metrics-port): value {port}: cannot listen on "
        f"{host}:{port} ({reason}); choose a free port, or 0 to turn the endpoint off"
    )


class TelemetryServer:
    """Serves the metrics registry and health probes.

    Args:
        metrics: the registry to expose.
        host, port: where to listen (port 0 picks a free port).
        live: ``/healthz``: passes while the control loop completes cycles (see
            :class:`scaler.telemetry.health.Heartbeat`); 503 with the reason otherwise.
        ready: ``/readyz``: passes once the controller has completed a cycle; 503 until then.
    """

    def __init__(
        self,
        metrics: ScalerMetrics,
        *,
        host: str,
        port: int,
        live: Callable[[], Probe] = _always,
        ready: Callable[[], Probe] = _always,
    ) -> None:
        self._metrics = metrics
        self._host = host
        self._port = port
        self._live = live
        self._ready = ready
        self._runner: web.AppRunner | None = None
        self.port = port

    async def _serve_metrics(self, _: web.Request) -> web.Response:
        body = generate_latest(self._metrics.registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_PLAIN_0_0_4})

    @staticmethod
    def _probe(probe: Callable[[], Probe]) -> web.Response:
        ok, why = probe()
        return web.Response(status=200 if ok else 503, text=why + "\n")

    async def _healthz(self, _: web.Request) -> web.Response:
        return self._probe(self._live)

    async def _readyz(self, _: web.Request) -> web.Response:
        return self._probe(self._ready)

    async def start(self) -> None:
        """Start listening; :attr:`port` is the bound port afterwards.

        Raises:
            TelemetryBindError: the address does not resolve or is not local, or the port
                is in use or not allowed.
        """
        app = web.Application()
        app.router.add_get("/metrics", self._serve_metrics)
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/readyz", self._readyz)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self._host, self._port)
        try:
            await site.start()
        except OSError as err:  # socket.gaierror is an OSError
            await self.stop()
            raise _bind_error(err, self._host, self._port) from None
        sockets = getattr(site._server, "sockets", None) or []
        if sockets:
            self.port = int(sockets[0].getsockname()[1])

    async def stop(self) -> None:
        """Stop listening."""
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
