"""Waiting for a process to end without polling (a pidfd)."""

from __future__ import annotations

import os
import select


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
