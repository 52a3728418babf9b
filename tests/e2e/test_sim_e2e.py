"""``vllm-scaler sim`` as a user runs it, with a real Prometheus: stopped by SIGHUP, killed
hard, or left by its controller; nothing it started may outlive it."""

from __future__ import annotations

import asyncio
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from scaler.sim.prometheus_server import find_prometheus_binary, wait_for_series

pytestmark = pytest.mark.e2e


@pytest.fixture
def trace(tmp_path: Path) -> Path:
    path = tmp_path / "trace.csv"
    rows = "".join(f"{t * 0.5},200,20\n" for t in range(40))  # 20 s of requests
    path.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n" + rows, encoding="utf-8")
    return path


def _prometheus_or_skip() -> None:
    try:
        find_prometheus_binary()
    except Exception as err:  # the message says how to install it
        pytest.skip(str(err))


def _start_sim(
    trace: Path, workdir: Path, env: dict[str, str] | None = None
) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            sys.executable, "-m", "scaler", "sim", "--trace", str(trace), "--start-minute", "0",
            "--minutes", "1", "--compress", "1", "--rate-scale", "1", "--model-load-seconds", "1",
            "--tail-seconds", "600", "--interval", "1", "--workdir", str(workdir),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, **(env or {})},
    )  # fmt: skip


def _lines_until(proc: subprocess.Popen[str], marker: str, timeout: float = 60.0) -> list[str]:
    """Lines of ``proc``'s output up to the one containing ``marker`` (select, no sleeping)."""
    assert proc.stdout is not None
    seen: list[str] = []
    deadline = time.monotonic() + timeout
    while not any(marker in line for line in seen):
        left = deadline - time.monotonic()
        readable, _, _ = select.select([proc.stdout], [], [], max(0.0, left))
        assert readable, f"{marker!r} not printed within {timeout}s: {seen}"
        line = proc.stdout.readline()
        assert line, f"sim exited before printing {marker!r}: {seen}"
        seen.append(line)
    return seen


def _children(pid: int) -> list[int]:
    text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    return [int(p) for p in text.split()]


def _cmdline(pid: int) -> str:
    return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()


def _ends_within(pid: int, timeout: float) -> bool:
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        return bool(select.select([fd], [], [], timeout)[0])
    finally:
        os.close(fd)


@pytest.fixture
def reap() -> Iterator[list[int]]:
    """Pids to SIGKILL at the end if the test left them running."""
    pids: list[int] = []
    yield pids
    for pid in pids:
        if not _ends_within(pid, 0):
            os.kill(pid, signal.SIGKILL)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("sig", [signal.SIGHUP, signal.SIGTERM, signal.SIGINT])
def test_a_stop_signal_ends_the_replay_cleans_up_and_prints_the_summary(
    trace: Path, tmp_path: Path, reap: list[int], sig: signal.Signals
) -> None:
    _prometheus_or_skip()
    workdir = tmp_path / "demo"
    stale = workdir / "prometheus" / "data" / "stale-block"
    stale.parent.mkdir(parents=True)
    stale.write_text("series of an interrupted run")
    sim = _start_sim(trace, workdir)
    reap.append(sim.pid)
    _lines_until(sim, "Decisions of vllm-scaler")
    children = _children(sim.pid)
    reap.extend(children)
    kinds = sorted("prometheus" if "prometheus" in _cmdline(c) else "controller" for c in children)
    assert kinds == ["controller", "prometheus"]
    assert not stale.exists()  # Prometheus started on a fresh TSDB
    sim.send_signal(sig)
    out, _ = sim.communicate(timeout=90)
    assert sim.returncode == 128 + sig, out
    assert f"{sig.name}: stopping the replay and cleaning up" in out
    assert "\nrequests        " in out and "\nreplicas        peak " in out
    for child in children:
        assert _ends_within(child, 0), _cmdline(child)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG")
def test_prometheus_and_the_controller_die_with_a_sim_killed_hard(
    trace: Path, tmp_path: Path, reap: list[int]
) -> None:
    _prometheus_or_skip()
    sim = _start_sim(trace, tmp_path / "demo")
    reap.append(sim.pid)
    _lines_until(sim, "Decisions of vllm-scaler")
    children = _children(sim.pid)
    reap.extend(children)
    assert len(children) == 2
    sim.kill()
    sim.wait()
    for child in children:
        assert _ends_within(child, 30)


def test_a_controller_that_exits_early_stops_the_demo_at_once(
    trace: Path, tmp_path: Path, reap: list[int]
) -> None:
    _prometheus_or_skip()
    # An invalid setting in the environment: the controller refuses to start.
    sim = _start_sim(trace, tmp_path / "demo", {"VLLM_SCALER_PROMETHEUS_TIMEOUT_SECONDS": "-1"})
    reap.append(sim.pid)
    out, _ = sim.communicate(timeout=120)  # the tail is 600 s: only an early stop ends in time
    assert sim.returncode == 1, out
    assert "VLLM_SCALER_PROMETHEUS_TIMEOUT_SECONDS" in out
    assert "controller exited early with code 2: stopping the replay" in out
    assert out.rstrip().endswith("controller exited early with code 2; the run ended without it")


def test_the_controllers_own_metrics_are_served_and_scraped_as_run_serves_them(
    trace: Path, tmp_path: Path, reap: list[int]
) -> None:
    """The controller in the loop serves its ``vllm_scaler_*`` series on the port the header
    names, and the simulated Prometheus scrapes them as job ``vllm-scaler``."""
    _prometheus_or_skip()
    sim = _start_sim(trace, tmp_path / "demo")
    reap.append(sim.pid)
    header = _lines_until(sim, "Decisions of vllm-scaler")
    fields = {line[:12].strip(): line[12:].split()[0] for line in header if line[:1].isalpha()}
    prometheus, metrics = fields["prometheus"], fields["metrics"]
    assert metrics.startswith("http://127.0.0.1:") and metrics.endswith("/metrics")
    try:
        [cycles] = asyncio.run(
            wait_for_series(prometheus, "vllm_scaler_cycles_total >= 1", timeout=60)
        )
        assert cycles["metric"]["job"] == "vllm-scaler-metrics"
        assert cycles["metric"]["instance"] == metrics.removeprefix("http://").split("/")[0]
        body = httpx.get(metrics, timeout=10).text
        assert 'vllm_scaler_current_replicas{target="llm/Deployment/vllm"}' in body
    finally:
        sim.send_signal(signal.SIGTERM)
        out, _ = sim.communicate(timeout=90)
    assert sim.returncode == 128 + signal.SIGTERM, out
