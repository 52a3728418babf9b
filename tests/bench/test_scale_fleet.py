"""The scale benchmark's exposition server goes with the benchmark, even one killed hard."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from tests.support.processes import wait_for_exit


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl is Linux only")
def test_the_exposition_server_ends_when_the_benchmark_is_killed() -> None:
    bench_code = (
        "import sys\n"
        "from scaler.bench.scale.fleet import exposition_server\n"
        "if __name__ == '__main__':\n"
        "    with exposition_server() as server:\n"
        "        print(server.pid, server.port, flush=True)\n"
        "        sys.stdin.read()\n"
    )
    bench = subprocess.Popen(
        [sys.executable, "-c", bench_code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert bench.stdout is not None
    pid, port = (int(x) for x in bench.stdout.readline().split())
    try:
        assert port > 0 and not wait_for_exit(pid, timeout=0)  # serving
        bench.kill()  # SIGKILL: no cleanup runs in the benchmark
        bench.wait()
        assert wait_for_exit(pid, timeout=30)
    finally:
        if not wait_for_exit(pid, timeout=0):
            os.kill(pid, signal.SIGKILL)
