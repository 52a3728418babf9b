"""The Prometheus test server helper: SD file writing, start/stop, failures."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from scaler.sim.prometheus_server import (
    PrometheusNotInstalledError,
    PrometheusServer,
    PrometheusStartError,
    find_prometheus_binary,
    write_file_sd,
)


def _need_prometheus() -> None:
    try:
        find_prometheus_binary()
    except PrometheusNotInstalledError as err:
        pytest.skip(str(err))


def test_write_file_sd_is_atomic_json(tmp_path: Path) -> None:
    sd = tmp_path / "sd" / "targets.json"
    write_file_sd(sd, [(["127.0.0.1:1", "127.0.0.1:2"], {"namespace": "llm", "pod": "p-0"})])
    write_file_sd(sd, [(["127.0.0.1:3"], {"pod": "p-1"})])
    assert json.loads(sd.read_text()) == [{"targets": ["127.0.0.1:3"], "labels": {"pod": "p-1"}}]
    assert [p.name for p in sd.parent.iterdir()] == ["targets.json"]  # no temp files left


def test_missing_binary_says_how_to_install(tmp_path: Path) -> None:
    with pytest.raises(PrometheusNotInstalledError, match="apt-get install prometheus"):
        PrometheusServer(tmp_path, sd_file=tmp_path / "sd.json", binary="no-such-prom").start()


def test_sync_start_stop_keeps_log(tmp_path: Path) -> None:
    _need_prometheus()
    server = PrometheusServer(tmp_path / "w", sd_file=tmp_path / "sd.json")
    with server:
        assert server.running
        assert httpx.get(f"{server.url}/-/ready").status_code == 200
        assert server.url.startswith("http://127.0.0.1:")
    assert not server.running
    assert "Server is ready" in server.log_tail()
    server.stop()  # idempotent


def test_start_failure_shows_log_tail(tmp_path: Path) -> None:
    _need_prometheus()
    server = PrometheusServer(
        tmp_path / "w", sd_file=tmp_path / "sd.json", extra_args=["--no-such-flag"]
    )
    with pytest.raises(PrometheusStartError, match="exited with code"):
        server.start()
    assert not server.running


@pytest.mark.parametrize(
    ("version", "flag", "setting"),
    [
        ("2.42.0", True, False),  # Debian's: the feature flag
        ("3.7.2", True, False),
        ("3.8.0", False, True),  # the setting from 3.8 (the flag does nothing from 3.9)
        ("3.16.0", False, True),
    ],
)
def test_native_histograms_are_turned_on_as_the_binarys_version_takes_it(
    tmp_path: Path, version: str, flag: bool, setting: bool
) -> None:
    fake = tmp_path / f"prometheus-{version}"
    fake.write_text(f"#!/bin/sh\necho 'prometheus, version {version} (branch: HEAD)'\n")
    fake.chmod(0o755)
    server = PrometheusServer(
        tmp_path / "p", sd_file=tmp_path / "sd.json", binary=str(fake), native_histograms=True
    )
    server.find_binary(str(fake))
    server.workdir.mkdir()
    server.write_config()
    config = json.loads(server.config_path.read_text())
    assert config["global"].get("scrape_native_histograms", False) is setting
    assert ("--enable-feature=native-histograms" in server.command(str(fake), 9090)) is flag
