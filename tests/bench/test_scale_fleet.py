"""The scale benchmark's exposition server goes with the benchmark, even one killed hard."""

from __future__ import annotations

import sys

import pytest

from tests.support.processes import assert_child_ends_with_its_parent


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
    port = assert_child_ends_with_its_parent(bench_code)
    assert int(port[0]) > 0
