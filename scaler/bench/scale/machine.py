"""What this machine allows a cycle: the cores scraping takes, and the shortest cycle left.

The scale benchmark runs Prometheus, the simulated pods' exposition server and the controller
on one machine. Scraping 8,000 pods keeps Prometheus and the exposition server busy whether
or not a cycle runs; what is left is all a cycle can use. :func:`background_cores` measures
that background (both processes' CPU over an idle interval, before any cycle), and
:func:`cycle_floor` the shortest cycle the measured work allows: the cycle's own work
(Prometheus' CPU beyond its background, rule evaluations included, plus the controller's)
divided by the cores left. No schedule of the same work finishes sooner on this machine, so a
cycle time above a goal whose floor is above it too says the work, not the waiting, is at
fault.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

__all__ = [
    "Background",
    "background_cores",
    "cycle_floor",
    "cycle_work",
    "machine_cores",
    "process_cpu_seconds",
]


def machine_cores() -> int:
    """The CPUs this process may run on (its affinity; the machine's count if unknown)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def process_cpu_seconds(pid: int) -> float:
    """User plus system CPU seconds of process ``pid`` so far (``/proc/<pid>/stat``).

    Raises:
        OSError: the process is gone or ``/proc`` is not readable.
    """
    with open(f"/proc/{pid}/stat") as f:
        # the command name (field 2) may hold spaces: count fields after its closing paren
        fields = f.read().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks


@dataclass(frozen=True, slots=True)
class Background:
    """CPU taken while no cycle runs, cores (CPU seconds per wall second).

    Attributes:
        prometheus_cores: Prometheus alone (scrapes, head compaction; no rule loaded).
        others_cores: the other processes measured (the exposition server).
        seconds: the idle interval measured, wall seconds.
    """

    prometheus_cores: float
    others_cores: float
    seconds: float

    @property
    def cores(self) -> float:
        """Both together, cores."""
        return self.prometheus_cores + self.others_cores


async def background_cores(
    prometheus_pid: int,
    other_pids: Sequence[int],
    seconds: float,
    *,
    cpu: Callable[[int], float] = process_cpu_seconds,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> Background:
    """The CPU Prometheus and ``other_pids`` use over ``seconds`` of wall time, cores.

    Raises:
        OSError: a process is gone.
    """
    start = clock()
    prom0 = cpu(prometheus_pid)
    others0 = sum(cpu(p) for p in other_pids)
    await sleep(seconds)
    wall = max(clock() - start, 1e-9)
    return Background(
        prometheus_cores=(cpu(prometheus_pid) - prom0) / wall,
        others_cores=(sum(cpu(p) for p in other_pids) - others0) / wall,
        seconds=wall,
    )


def cycle_work(
    prometheus_cpu_seconds: float,
    wall_seconds: float,
    cycles: int,
    controller_cpu_seconds: float,
    prometheus_background_cores: float,
) -> float:
    """One cycle's own work, CPU seconds: Prometheus' CPU while the cycles ran, less what its
    background took over the same wall time, per cycle, plus the controller's mean CPU a cycle.

    Args:
        prometheus_cpu_seconds: Prometheus' CPU over all the cycles.
        wall_seconds: the cycles' total wall time.
        cycles: how many cycles ran (at least one).
        controller_cpu_seconds: the controller's mean CPU seconds a cycle.
        prometheus_background_cores: :attr:`Background.prometheus_cores`.

    Raises:
        ValueError: no cycle.
    """
    if cycles < 1:
        raise ValueError(f"cycles must be at least 1, got {cycles}")
    own = prometheus_cpu_seconds - prometheus_background_cores * wall_seconds
    return max(0.0, own / cycles) + controller_cpu_seconds


def cycle_floor(work_seconds: float, cores: int, background: float) -> float:
    """The shortest cycle the work allows, seconds: ``work / (cores - background)``, the cores
    left counted as at least a tenth of one (the figure stays finite, and huge, when the
    background takes them all)."""
    return work_seconds / max(cores - background, 0.1)
