"""A real single-node VictoriaMetrics for tests: the second backend the controller and the
dashboards are checked against.

:class:`VictoriaMetricsServer` scrapes the same file-SD targets as
:class:`~scaler.sim.prometheus_server.PrometheusServer` through VictoriaMetrics' built-in
scraper (``-promscrape.config`` takes Prometheus' ``scrape_configs``) and answers Prometheus'
HTTP query API with MetricsQL. Debian's package (``apt-get install victoria-metrics``, 1.79) is
what the project tests against.

What it needs beyond Prometheus' configuration, and why:

- ``-promscrape.fileSDCheckInterval``: file-SD files are re-read every 5 minutes by default
  and its ``file_sd_configs`` accept no ``refresh_interval`` (nor ``evaluation_interval`` in
  ``global``: 1.79 refuses unknown fields), so pods that come and go need the flag.
- ``-search.latencyOffset``: by default a query near "now" sees nothing of the last 30 s (the
  time is moved back), so an autoscaler would read 30-second-old signals; one scrape interval
  keeps it within one scrape of Prometheus.
"""

from __future__ import annotations

from typing import Final

from scaler.sim.prometheus_server import (
    ScrapingServer,
    ServerNotInstalledError,
    ServerStartError,
    duration,
    find_binary,
)

__all__ = [
    "VictoriaMetricsNotInstalledError",
    "VictoriaMetricsServer",
    "VictoriaMetricsStartError",
    "find_victoria_metrics_binary",
]

_DEBIAN_BINARY: Final = "/usr/bin/victoria-metrics"
_INSTALL_HINT: Final = "install Debian's victoria-metrics package: apt-get install victoria-metrics"


class VictoriaMetricsNotInstalledError(ServerNotInstalledError):
    """No ``victoria-metrics`` binary was found."""


class VictoriaMetricsStartError(ServerStartError):
    """VictoriaMetrics exited or did not become ready in time (the message ends with its log)."""


def find_victoria_metrics_binary(binary: str | None = None) -> str:
    """The path of the single-node VictoriaMetrics binary.

    Args:
        binary: an explicit path or command name; ``None`` looks up ``victoria-metrics`` on
            PATH and then ``/usr/bin/victoria-metrics``.

    Raises:
        VictoriaMetricsNotInstalledError: nothing executable was found (the message says how
            to install it).
    """
    return find_binary(
        binary,
        ["victoria-metrics", _DEBIAN_BINARY],
        what="VictoriaMetrics",
        hint=_INSTALL_HINT,
        error=VictoriaMetricsNotInstalledError,
    )


class VictoriaMetricsServer(ScrapingServer):
    """Single-node VictoriaMetrics scraping the targets listed in a file-SD file (see
    :class:`~scaler.sim.prometheus_server.ScrapingServer` for the arguments). Its scrape
    configuration is ``workdir/scrape.yml``, its data ``workdir/data``; ready when ``/health``
    answers."""

    name = "victoria-metrics"
    ready_path = "/health"
    start_error = VictoriaMetricsStartError
    config_name = "scrape.yml"

    def find_binary(self, binary: str | None) -> str:
        """See :func:`find_victoria_metrics_binary`."""
        return find_victoria_metrics_binary(binary)

    def command(self, binary: str, port: int) -> list[str]:
        """``victoria-metrics`` with its scrape config, data path, listen address, a
        one-second file-SD check and a latency offset of one scrape interval."""
        return [
            binary,
            f"-promscrape.config={self.config_path}",
            "-promscrape.fileSDCheckInterval=1s",
            f"-search.latencyOffset={duration(self.scrape_interval_seconds)}",
            f"-storageDataPath={self.workdir / 'data'}",
            f"-httpListenAddr=127.0.0.1:{port}",
            "-loggerLevel=INFO",
        ]
