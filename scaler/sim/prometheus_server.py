"""A real Prometheus server for tests and the demo.

:class:`PrometheusServer` writes a one-job ``prometheus.yml`` whose targets come from a
file-SD JSON file (see :func:`write_file_sd`), starts the ``prometheus`` binary on a free
loopback port with its TSDB inside ``workdir``, and waits until ``/-/ready`` answers. Tests
change the scraped targets by rewriting the SD file; Prometheus re-reads it within a second.

Debian's package (``apt-get install prometheus``, 2.42) is what the project tests against.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import IO, Any, Self

import httpx

__all__ = [
    "PrometheusNotInstalledError",
    "PrometheusServer",
    "PrometheusStartError",
    "find_prometheus_binary",
    "wait_for_series",
    "write_file_sd",
]

_DEBIAN_BINARY = "/usr/bin/prometheus"
_INSTALL_HINT = "install Debian's prometheus package: apt-get install prometheus"


class PrometheusNotInstalledError(RuntimeError):
    """No ``prometheus`` binary was found."""


class PrometheusStartError(RuntimeError):
    """Prometheus exited or did not become ready in time; the message ends with its log tail."""


def find_prometheus_binary(binary: str | None = None) -> str:
    """Return the path of the Prometheus binary to run.

    Args:
        binary: an explicit path or command name; ``None`` looks up ``prometheus`` on PATH
            and then ``/usr/bin/prometheus``.

    Raises:
        PrometheusNotInstalledError: nothing executable was found (the message says how to
            install it).
    """
    candidates = [binary] if binary else ["prometheus", _DEBIAN_BINARY]
    for cand in candidates:
        found = shutil.which(cand)
        if found:
            return found
    raise PrometheusNotInstalledError(
        f"Prometheus binary not found (looked for {', '.join(candidates)}); {_INSTALL_HINT}"
    )


def _duration(seconds: float) -> str:
    # Prometheus durations are integers with a unit; milliseconds cover fractional seconds.
    ms = max(1, round(seconds * 1000))
    return f"{ms // 1000}s" if ms % 1000 == 0 else f"{ms}ms"


_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def die_with_parent(sig: int = signal.SIGTERM) -> Callable[[], None] | None:
    """A ``preexec_fn`` that has the child get ``sig`` when this process dies (Linux).

    ``prctl(PR_SET_PDEATHSIG)`` in the child, so that a parent killed hard (SIGKILL, OOM)
    does not leave the child running. Everything is looked up here, in the parent; the
    child only calls ``prctl`` and ``getppid`` (async-signal-safe). Returns None where it
    does not apply: not Linux, no libc, or not on the main thread (the signal follows the
    *thread* that forked, and a worker thread may end long before the process).
    """
    if not sys.platform.startswith("linux") or threading.current_thread() is not (
        threading.main_thread()
    ):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        prctl = libc.prctl
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def preexec() -> None:
        prctl(_PR_SET_PDEATHSIG, int(sig), 0, 0, 0)
        if os.getppid() != parent:  # the parent died before prctl took effect
            os._exit(1)

    return preexec


def _free_port() -> int:
    # Racy by nature (the port is released before Prometheus binds it); start() retries.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def write_file_sd(path: Path, groups: Sequence[tuple[Sequence[str], Mapping[str, str]]]) -> None:
    """Atomically write a Prometheus file-SD JSON file.

    Args:
        path: the SD file named in the scrape config.
        groups: ``(targets, labels)`` pairs; ``targets`` are ``host:port`` strings and
            ``labels`` the target labels to attach (for example ``namespace`` and ``pod``;
            ``__metrics_path__`` works too).

    The file is written to a temporary file in the same directory and moved into place
    with :func:`os.replace`, so Prometheus never reads a half-written file.
    """
    doc = [{"targets": list(t), "labels": dict(labels)} for t, labels in groups]
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(doc, f, indent=1)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class PrometheusServer:
    """A Prometheus process scraping the targets listed in a file-SD file.

    Use as ``async with PrometheusServer(tmp, sd_file=sd) as prom: ... prom.url ...`` or
    call :meth:`start` / :meth:`stop`. The log (``workdir/prometheus.log``) is kept after
    stop so a failing test can show it (:meth:`log_tail`).

    Args:
        workdir: directory for the config, the TSDB and the log (created if missing).
        scrape_interval_seconds: scrape (and rule evaluation) interval.
        sd_file: the file-SD JSON file (refreshed every second; it may not exist yet).
        binary: Prometheus binary; default ``prometheus`` on PATH, then /usr/bin/prometheus.
        ready_timeout_seconds: bound on the wait for ``/-/ready``.
        extra_args: more command-line flags (for example ``--query.lookback-delta=30s``, or
            ``--enable-feature=native-histograms``).
        rule_files: rule files to load (``rule_files`` of the config); more can be added
            later with :meth:`reload`.
    """

    def __init__(
        self,
        workdir: Path,
        *,
        scrape_interval_seconds: float = 1.0,
        sd_file: Path,
        binary: str | None = None,
        ready_timeout_seconds: float = 30.0,
        extra_args: Sequence[str] = (),
        rule_files: Sequence[Path] = (),
    ) -> None:
        self.workdir = workdir
        self.rule_files = tuple(rule_files)
        self.scrape_interval_seconds = scrape_interval_seconds
        self.sd_file = sd_file
        self._binary = binary
        self.ready_timeout_seconds = ready_timeout_seconds
        self.extra_args = tuple(extra_args)
        self.config_path = workdir / "prometheus.yml"
        self.log_path = workdir / "prometheus.log"
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None
        self._port: int | None = None

    @property
    def url(self) -> str:
        """Base URL, e.g. ``http://127.0.0.1:40123``. Raises RuntimeError before start."""
        if self._port is None:
            raise RuntimeError("PrometheusServer is not started")
        return f"http://127.0.0.1:{self._port}"

    @property
    def running(self) -> bool:
        """True while the process is alive."""
        return self._proc is not None and self._proc.poll() is None

    def log_tail(self, lines: int = 40) -> str:
        """The last ``lines`` lines of the Prometheus log ('' if none)."""
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def _write_config(self) -> None:
        interval = _duration(self.scrape_interval_seconds)
        # JSON is valid YAML: no YAML writer needed.
        config = {
            "global": {
                "scrape_interval": interval,
                "scrape_timeout": interval,
                "evaluation_interval": interval,
            },
            "rule_files": [str(f.resolve()) for f in self.rule_files],
            "scrape_configs": [
                {
                    "job_name": "vllm",
                    "file_sd_configs": [
                        {"files": [str(self.sd_file.resolve())], "refresh_interval": "1s"}
                    ],
                }
            ],
        }
        self.config_path.write_text(json.dumps(config, indent=1), encoding="utf-8")

    def reload(self, rule_files: Sequence[Path]) -> None:
        """Rewrite the config with ``rule_files`` and have Prometheus re-read it (SIGHUP);
        returns at once (the rules run from their group's next evaluation)."""
        self.rule_files = tuple(rule_files)
        self._write_config()
        if self._proc is None or self._proc.poll() is not None:
            raise RuntimeError("PrometheusServer is not running")
        self._proc.send_signal(signal.SIGHUP)

    def _spawn(self) -> None:
        binary = find_prometheus_binary(self._binary)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self._write_config()
        self._port = _free_port()
        self._log = open(self.log_path, "ab")  # noqa: SIM115 - closed in stop()
        args = [
            binary,
            f"--config.file={self.config_path}",
            f"--storage.tsdb.path={self.workdir / 'data'}",
            f"--web.listen-address=127.0.0.1:{self._port}",
            "--log.level=info",
            *self.extra_args,
        ]
        self._proc = subprocess.Popen(
            args,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            preexec_fn=die_with_parent(),  # prctl only, see die_with_parent
        )

    def _check_alive(self) -> bool:
        """False if the process died; raises unless the cause was a port race."""
        assert self._proc is not None
        code = self._proc.poll()
        if code is None:
            return True
        tail = self.log_tail()
        self._close_log()
        self._proc = None
        if "address already in use" in tail:
            return False
        raise PrometheusStartError(f"prometheus exited with code {code}; log tail:\n{tail}")

    def _not_ready_error(self) -> PrometheusStartError:
        self.stop()
        return PrometheusStartError(
            f"prometheus not ready within {self.ready_timeout_seconds}s; log tail:\n"
            + self.log_tail()
        )

    def start(self) -> None:
        """Start Prometheus and block until ``/-/ready`` answers 200.

        Raises:
            PrometheusNotInstalledError: no binary.
            PrometheusStartError: the process exited or was not ready in time.
        """
        for _attempt in range(3):
            self._spawn()
            deadline = time.monotonic() + self.ready_timeout_seconds
            with httpx.Client(timeout=2.0) as client:
                while time.monotonic() < deadline:
                    if not self._check_alive():
                        break  # port race: spawn again on another port
                    try:
                        if client.get(f"{self.url}/-/ready").status_code == 200:
                            return
                    except httpx.TransportError:
                        pass
                    time.sleep(0.1)
                else:
                    raise self._not_ready_error()
        raise PrometheusStartError("could not bind a free port after 3 attempts")

    async def astart(self) -> None:
        """Async :meth:`start`: the readiness wait does not block the event loop."""
        for _attempt in range(3):
            self._spawn()
            deadline = time.monotonic() + self.ready_timeout_seconds
            async with httpx.AsyncClient(timeout=2.0) as client:
                while time.monotonic() < deadline:
                    if not self._check_alive():
                        break
                    try:
                        if (await client.get(f"{self.url}/-/ready")).status_code == 200:
                            return
                    except httpx.TransportError:
                        pass
                    await asyncio.sleep(0.1)
                else:
                    raise self._not_ready_error()
        raise PrometheusStartError("could not bind a free port after 3 attempts")

    def _close_log(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None

    def stop(self, timeout_seconds: float = 10.0) -> None:
        """Stop Prometheus: SIGTERM, wait, then SIGKILL. Idempotent; keeps the log file."""
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=timeout_seconds)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self._close_log()

    async def astop(self, timeout_seconds: float = 10.0) -> None:
        """Async :meth:`stop` (the wait runs in a thread)."""
        await asyncio.to_thread(self.stop, timeout_seconds)

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    async def __aenter__(self) -> Self:
        await self.astart()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.astop()


async def wait_for_series(
    url: str,
    query: str,
    *,
    timeout: float,
    min_series: int = 1,
    poll_seconds: float = 0.2,
) -> list[dict[str, Any]]:
    """Poll an instant query until it returns at least ``min_series`` series.

    Args:
        url: Prometheus base URL.
        query: PromQL instant query.
        timeout: seconds before giving up.
        min_series: how many series the result must hold.
        poll_seconds: pause between polls.

    Returns:
        The ``data.result`` list of the first satisfying answer.

    Raises:
        TimeoutError: the deadline passed; the message holds the last answer or error.
    """
    deadline = time.monotonic() + timeout
    last: str = "no answer"
    async with httpx.AsyncClient(timeout=5.0) as client:
        while True:
            try:
                resp = await client.post(f"{url}/api/v1/query", data={"query": query})
                body = resp.json()
                result = body.get("data", {}).get("result", [])
                if body.get("status") == "success" and len(result) >= min_series:
                    return list(result)
                last = resp.text[:500]
            except (httpx.HTTPError, ValueError) as err:
                last = repr(err)
            if time.monotonic() >= deadline:
                raise TimeoutError(
                    f"query {query!r} returned fewer than {min_series} series within "
                    f"{timeout}s; last answer: {last}"
                )
            await asyncio.sleep(poll_seconds)
