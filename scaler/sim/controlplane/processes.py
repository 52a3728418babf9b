"""The control plane's processes: each one's command line, log file, start and stop."""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO

from scaler.sim.prometheus_server import die_with_parent

__all__ = ["Component", "ComponentError"]


class ComponentError(RuntimeError):
    """A component exited or never became ready; the message ends with its log's tail."""


class Component:
    """One server process of the control plane, its output in ``<workdir>/<name>.log``.

    The child gets SIGTERM when this process dies (see
    :func:`~scaler.sim.prometheus_server.die_with_parent`), so a test run killed hard
    leaves no etcd or API server behind.
    """

    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        *,
        workdir: Path,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.name = name
        self.argv = list(argv)
        self.env = dict(env) if env is not None else None
        self.log_path = workdir / f"{name}.log"
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    @property
    def pid(self) -> int | None:
        """The running process' id (None when stopped)."""
        return self._proc.pid if self._proc is not None else None

    def start(self) -> None:
        """Start the process (its output appended to the log)."""
        self._log = open(self.log_path, "ab")  # noqa: SIM115 - closed in stop()
        self._proc = subprocess.Popen(
            self.argv,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=self.env,
            preexec_fn=die_with_parent(),
        )

    def running(self) -> bool:
        """True while the process is alive."""
        return self._proc is not None and self._proc.poll() is None

    def check(self) -> None:
        """Raise :class:`ComponentError` if the process has exited."""
        if self._proc is not None and self._proc.poll() is not None:
            raise ComponentError(
                f"{self.name} exited with code {self._proc.returncode}; log tail:\n"
                + self.log_tail()
            )

    def log_tail(self, lines: int = 30) -> str:
        """The last ``lines`` lines of the log."""
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def stop(self, timeout_seconds: float = 10.0) -> None:
        """SIGTERM, then SIGKILL after ``timeout_seconds``; idempotent."""
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=timeout_seconds)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if self._log is not None:
            self._log.close()
            self._log = None

    def kill(self) -> None:
        """SIGKILL at once (what a crash looks like to the rest of the cluster)."""
        if self._proc is not None and self._proc.poll() is None:
            os.kill(self._proc.pid, signal.SIGKILL)
        self.stop(timeout_seconds=5.0)
