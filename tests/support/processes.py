"""Processes in tests: running the command line as its own process, waiting for one to end
without polling (a pidfd), and checking that a child ends when its parent is killed hard."""

from __future__ import annotations

import asyncio
import os
import select
import signal
import subprocess
import sys


async def run_scaler(args: list[str], env: dict[str, str]) -> tuple[int, str]:
    """Run ``python -m scaler *args`` with ``env`` to its end (120 s at most), its input
    closed (nothing can wait at a prompt): its exit code and its output (stdout and stderr
    together, in order)."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "scaler", *args, env=env, stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    out, _ = await asyncio.wait_for(proc.communicate(), timeout=120)
    return proc.returncode or 0, out.decode()


def wait_for_exit(pid: int, timeout: float) -> bool:
    """True when process ``pid`` (any process, not only a child) ends within ``timeout``
    seconds, or is already gone."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        readable, _, _ = select.select([fd], [], [], timeout)
        return bool(readable)
    finally:
        os.close(fd)


def assert_child_ends_with_its_parent(parent_code: str) -> list[str]:
    """Run ``parent_code`` in a new Python, read the first line it prints (a child's pid,
    then anything else), kill that parent hard (SIGKILL: no cleanup runs) and assert the
    child ends within 30 s. Returns the line's other words. The child is killed if it
    outlives the check."""
    parent = subprocess.Popen(
        [sys.executable, "-c", parent_code],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert parent.stdout is not None
    first, *rest = parent.stdout.readline().split()
    child = int(first)
    try:
        assert not wait_for_exit(child, timeout=0)  # running before
        parent.kill()
        parent.wait()
        assert wait_for_exit(child, timeout=30)
    finally:
        if not wait_for_exit(child, timeout=0):
            os.kill(child, signal.SIGKILL)
    return rest
