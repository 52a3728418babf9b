"""The VictoriaMetrics test server: its scrape configuration passes 1.79's strict parsing and
it fails clearly. (Scraping the fleet and answering queries: tests/e2e and tests/dashboards.)"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from scaler.sim.cluster import BACKENDS, SimCluster
from scaler.sim.fleet import FleetConfig
from scaler.sim.prometheus_server import ServerNotInstalledError
from scaler.sim.victoria_metrics import (
    VictoriaMetricsNotInstalledError,
    VictoriaMetricsServer,
    VictoriaMetricsStartError,
    find_victoria_metrics_binary,
)


def _binary() -> str:
    try:
        return find_victoria_metrics_binary()
    except VictoriaMetricsNotInstalledError as err:
        pytest.skip(str(err))


def test_missing_binary_says_how_to_install(tmp_path: Path) -> None:
    server = VictoriaMetricsServer(tmp_path, sd_file=tmp_path / "sd.json", binary="no-such-vm")
    with pytest.raises(VictoriaMetricsNotInstalledError, match="apt-get install victoria-metrics"):
        server.start()
    assert issubclass(VictoriaMetricsNotInstalledError, ServerNotInstalledError)


def test_scrape_config_passes_strict_parsing(tmp_path: Path) -> None:
    server = VictoriaMetricsServer(
        tmp_path, scrape_interval_seconds=1.5, sd_file=tmp_path / "sd" / "*.json"
    )
    server.write_config()
    check = subprocess.run(
        [_binary(), f"-promscrape.config={server.config_path}", "-promscrape.config.dryRun"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert check.returncode == 0, check.stderr
    flags = server.command("vm", 8428)
    assert "-search.latencyOffset=1500ms" in flags
    assert "-promscrape.fileSDCheckInterval=1s" in flags


def test_start_failure_shows_log_tail(tmp_path: Path) -> None:
    _binary()
    server = VictoriaMetricsServer(
        tmp_path / "w", sd_file=tmp_path / "sd.json", extra_args=["-no-such-flag"]
    )
    with pytest.raises(VictoriaMetricsStartError, match="exited with code"):
        server.start()
    assert not server.running


def test_cluster_backends(tmp_path: Path) -> None:
    assert set(BACKENDS) == {"prometheus", "victoria-metrics"}
    cluster = SimCluster(tmp_path, FleetConfig(), clock=lambda: 0.0, backend="victoria-metrics")
    assert isinstance(cluster.prometheus, VictoriaMetricsServer)
    with pytest.raises(ValueError, match="backend must be one of"):
        SimCluster(tmp_path, FleetConfig(), clock=lambda: 0.0, backend="thanos")
