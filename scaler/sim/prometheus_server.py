"""A real Prometheus server for tests and the demo.

:class:`PrometheusServer` writes a one-job ``prometheus.yml`` whose targets come from a
file-SD JSON file (see :func:`write_file_sd`), starts the ``prometheus`` binary on a free
loopback port with its TSDB inside ``workdir``, and waits until ``/-/ready`` answers. Tests
change the scraped targets by rewriting the SD file; Prometheus re-reads it within a second.

Debian's package (``apt-get install prometheus``, 2.42) is what the project tests against.
:class:`ScrapingServer` is the part any server that scrapes the file-SD targets and answers
Prometheus' HTTP API shares (the process, its port, log and readiness); VictoriaMetrics is the
other one (:mod:`scaler.sim.victoria_metrics`).
"""

from __future__ import annotations

import abc
import asyncio
import ctypes
import ctypes.util
import functools
import json
import os
import re
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
from typing import IO, Any, ClassVar, Self

import httpx

__all__ = [
    "PrometheusNotInstalledError",
    "PrometheusServer",
    "PrometheusStartError",
    "ScrapingServer",
    "ServerNotInstalledError",
    "ServerStartError",
    "duration",
    "find_binary",
    "find_prometheus_binary",
    "prometheus_version",
    "wait_for_series",
    "write_file_sd",
]

_DEBIAN_BINARY = "/usr/bin/prometheus"
_INSTALL_HINT = "install Debian's prometheus package: apt-get install prometheus"


class ServerNotInstalledError(RuntimeError):
    """The server's binary was not found (the message says how to install it)."""


class ServerStartError(RuntimeError):
    """The server exited or did not become ready in time; the message ends with its log tail."""


class PrometheusNotInstalledError(ServerNotInstalledError):
    """No ``prometheus`` binary was found."""


class PrometheusStartError(ServerStartError):
    """Prometheus exited or did not become ready in time; the message ends with its log tail."""


def find_binary(
    binary: str | None,
    defaults: Sequence[str],
    *,
    what: str,
    hint: str,
    error: type[ServerNotInstalledError] = ServerNotInstalledError,
) -> str:
    """The path of the first of ``binary`` (if given) or ``defaults`` that is executable.

    Raises:
        ServerNotInstalledError: (``error``) none is; the message names ``what`` was looked
            for and ends with ``hint``.
    """
    candidates = [binary] if binary else list(defaults)
    for cand in candidates:
        found = shutil.which(cand)
        if found:
            return found
    raise error(f"{what} binary not found (looked for {', '.join(candidates)}); {hint}")


def find_prometheus_binary(binary: str | None = None) -> str:
    """Return the path of the Prometheus binary to run.

    Args:
        binary: an explicit path or command name; ``None`` looks up ``prometheus`` on PATH
            and then ``/usr/bin/prometheus``.

    Raises:
        PrometheusNotInstalledError: nothing executable was found (the message says how to
            install it).
    """
    return find_binary(
        binary,
        ["prometheus", _DEBIAN_BINARY],
        what="Prometheus",
        hint=_INSTALL_HINT,
        error=PrometheusNotInstalledError,
    )


def duration(seconds: float) -> str:
    """A Prometheus duration (``15s``, ``1500ms``) for ``seconds``."""
    # Prometheus durations are integers with a unit; milliseconds cover fractional seconds.
    ms = max(1, round(seconds * 1000))
    return f"{ms // 1000}s" if ms % 1000 == 0 else f"{ms}ms"


_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def die_with_parent(
    sig: int = signal.SIGTERM, *, parent: int | None = None
) -> Callable[[], None] | None:
    """A ``preexec_fn`` that has the child get ``sig`` when this process dies (Linux).

    ``prctl(PR_SET_PDEATHSIG)`` in the child, so that a parent killed hard (SIGKILL, OOM)
    does not leave the child running. Everything is looked up here, in the parent; the
    child only calls ``prctl`` and ``getppid`` (async-signal-safe). Returns None where it
    does not apply: not Linux, no libc, or not on the main thread (the signal follows the
    *thread* that forked, and a worker thread may end long before the process).

    A Python child started by :mod:`multiprocessing` (no ``preexec_fn``) calls the returned
    function itself, first thing, with ``parent`` its parent's pid as the parent passed it:
    it then gets ``sig`` when that parent dies, or exits at once if it already has.
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
    parent = os.getpid() if parent is None else parent

    def preexec() -> None:
        prctl(_PR_SET_PDEATHSIG, int(sig), 0, 0, 0)
        if os.getppid() != parent:  # the parent died before prctl took effect
            os._exit(1)

    return preexec


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now. Racy by nature (the port is released before
    the server binds it): Prometheus' start retries; a controller that cannot bind it says
    so and exits."""
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


class ScrapingServer(abc.ABC):
    """A server process that scrapes the targets of a file-SD file and answers Prometheus'
    HTTP API on a free loopback port; subclasses say which binary, config and flags.

    Use as ``async with Server(tmp, sd_file=sd) as server: ... server.url ...`` or call
    :meth:`start` / :meth:`stop`. The log (``workdir/<name>.log``) is kept after stop so a
    failing test can show it (:meth:`log_tail`).

    Args:
        workdir: directory for the config, the data and the log (created if missing).
        scrape_interval_seconds: scrape (and rule evaluation) interval.
        sd_file: the file-SD JSON file, or a glob in its last path segment (it may not exist
            yet); re-read every second.
        binary: the server's binary; default: the subclass's name on PATH, then Debian's path.
        ready_timeout_seconds: bound on the wait for readiness.
        extra_args: more command-line flags.
    """

    #: Short name: the log file's stem and the name in error messages.
    name: ClassVar[str]
    #: Path that answers 200 once the server takes queries.
    ready_path: ClassVar[str]
    #: File name of the scrape configuration in :attr:`workdir`.
    config_name: ClassVar[str]
    #: More settings of the ``file_sd_configs`` entry.
    file_sd_options: ClassVar[dict[str, str]] = {}
    start_error: ClassVar[type[ServerStartError]] = ServerStartError

    def __init__(
        self,
        workdir: Path,
        *,
        scrape_interval_seconds: float = 1.0,
        sd_file: Path,
        binary: str | None = None,
        ready_timeout_seconds: float = 30.0,
        extra_args: Sequence[str] = (),
    ) -> None:
        self.workdir = workdir
        self.scrape_interval_seconds = scrape_interval_seconds
        self.sd_file = sd_file
        self._binary = binary
        self.ready_timeout_seconds = ready_timeout_seconds
        self.extra_args = tuple(extra_args)
        self.log_path = workdir / f"{self.name}.log"
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None
        self._port: int | None = None

    @property
    def url(self) -> str:
        """Base URL, e.g. ``http://127.0.0.1:40123``. Raises RuntimeError before start."""
        if self._port is None:
            raise RuntimeError(f"{type(self).__name__} is not started")
        return f"http://127.0.0.1:{self._port}"

    @property
    def running(self) -> bool:
        """True while the process is alive."""
        return self._proc is not None and self._proc.poll() is None

    def log_tail(self, lines: int = 40) -> str:
        """The last ``lines`` lines of the server's log ('' if none)."""
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    @abc.abstractmethod
    def find_binary(self, binary: str | None) -> str:
        """The binary to run (raises a :class:`ServerNotInstalledError`)."""

    @property
    def config_path(self) -> Path:
        """The scrape configuration written at start (``workdir/<config_name>``)."""
        return self.workdir / self.config_name

    def global_options(self, interval: str) -> dict[str, Any]:
        """More ``global`` settings of the scrape configuration (``interval``: the scrape one)."""
        return {}

    def config_options(self) -> dict[str, Any]:
        """More top-level settings of the scrape configuration."""
        return {}

    def write_config(self) -> None:
        """One job, ``vllm``, whose targets come from :attr:`sd_file`, every scrape interval."""
        interval = duration(self.scrape_interval_seconds)
        # JSON is valid YAML: no YAML writer needed.
        config = {
            "global": {
                "scrape_interval": interval,
                "scrape_timeout": interval,
                **self.global_options(interval),
            },
            **self.config_options(),
            "scrape_configs": [
                {
                    "job_name": "vllm",
                    "file_sd_configs": [
                        {"files": [str(self.sd_file.resolve())], **self.file_sd_options}
                    ],
                }
            ],
        }
        self.config_path.write_text(json.dumps(config, indent=1), encoding="utf-8")

    @abc.abstractmethod
    def command(self, binary: str, port: int) -> list[str]:
        """The command line serving on ``127.0.0.1:port``."""

    def _spawn(self) -> None:
        binary = self.find_binary(self._binary)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.write_config()
        self._port = free_port()
        self._log = open(self.log_path, "ab")  # noqa: SIM115 - closed in stop()
        self._proc = subprocess.Popen(
            [*self.command(binary, self._port), *self.extra_args],
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
        raise self.start_error(f"{self.name} exited with code {code}; log tail:\n{tail}")

    def _not_ready_error(self) -> ServerStartError:
        self.stop()
        return self.start_error(
            f"{self.name} not ready within {self.ready_timeout_seconds}s; log tail:\n"
            + self.log_tail()
        )

    def start(self) -> None:
        """Start the server and block until :attr:`ready_path` answers 200.

        Raises:
            ServerNotInstalledError: no binary.
            ServerStartError: the process exited or was not ready in time.
        """
        for _attempt in range(3):
            self._spawn()
            deadline = time.monotonic() + self.ready_timeout_seconds
            with httpx.Client(timeout=2.0) as client:
                while time.monotonic() < deadline:
                    if not self._check_alive():
                        break  # port race: spawn again on another port
                    try:
                        if client.get(self.url + self.ready_path).status_code == 200:
                            return
                    except httpx.TransportError:
                        pass
                    time.sleep(0.1)
                else:
                    raise self._not_ready_error()
        raise self.start_error("could not bind a free port after 3 attempts")

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
                        if (await client.get(self.url + self.ready_path)).status_code == 200:
                            return
                    except httpx.TransportError:
                        pass
                    await asyncio.sleep(0.1)
                else:
                    raise self._not_ready_error()
        raise self.start_error("could not bind a free port after 3 attempts")

    def _close_log(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None

    def stop(self, timeout_seconds: float = 10.0) -> None:
        """Stop the server: SIGTERM, wait, then SIGKILL. Idempotent; keeps the log file."""
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


def prometheus_version(binary: str) -> tuple[int, int]:
    """``(major, minor)`` of a Prometheus binary, from its ``--version`` line
    (``prometheus, version 3.16.0 (branch: ...)``).

    Raises:
        PrometheusStartError: it does not say (the message quotes what it printed).
    """
    return _version(shutil.which(binary) or binary)


@functools.cache
def _version(path: str) -> tuple[int, int]:
    out = subprocess.run(
        [path, "--version"], capture_output=True, text=True, timeout=30, check=False
    )
    text = out.stdout + out.stderr
    found = re.search(r"version (\d+)\.(\d+)\.", text)
    if found is None:
        raise PrometheusStartError(f"{path} --version: no version in {text[:200]!r}")
    return int(found.group(1)), int(found.group(2))


class PrometheusServer(ScrapingServer):
    """A Prometheus process scraping the targets listed in a file-SD file (see
    :class:`ScrapingServer` for the arguments; ``extra_args`` e.g.
    ``--query.lookback-delta=30s``). Its configuration is ``workdir/prometheus.yml``, its
    TSDB ``workdir/data``; ``rule_files`` are loaded (``rule_files`` of the config), and
    :meth:`reload` loads others later.

    ``native_histograms``: store the histograms a target serves in the protobuf exposition as
    native histograms. Before Prometheus 3.8 that is the feature flag
    ``--enable-feature=native-histograms``; from 3.9 the flag does nothing and the setting
    ``scrape_native_histograms`` is what turns it on (3.8 takes both): the one the binary's
    version takes is used.
    """

    def __init__(
        self,
        workdir: Path,
        *,
        rule_files: Sequence[Path] = (),
        native_histograms: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(workdir, **kwargs)
        self.rule_files = tuple(rule_files)
        self.native_histograms = native_histograms
        self._native_setting = False  # scrape_native_histograms rather than the flag

    def config_options(self) -> dict[str, Any]:
        """The rule files, if any."""
        return (
            {"rule_files": [str(f.resolve()) for f in self.rule_files]} if self.rule_files else {}
        )

    def reload(self, rule_files: Sequence[Path]) -> None:
        """Rewrite the config with ``rule_files`` and have Prometheus re-read it (SIGHUP);
        returns at once (the rules run from their group's next evaluation)."""
        self.rule_files = tuple(rule_files)
        self.write_config()
        if self._proc is None or self._proc.poll() is not None:
            raise RuntimeError("PrometheusServer is not running")
        self._proc.send_signal(signal.SIGHUP)

    name = "prometheus"
    ready_path = "/-/ready"
    start_error = PrometheusStartError
    config_name = "prometheus.yml"
    file_sd_options: ClassVar[dict[str, str]] = {"refresh_interval": "1s"}

    def find_binary(self, binary: str | None) -> str:
        """See :func:`find_prometheus_binary`; with :attr:`native_histograms`, its version
        says how they are turned on."""
        found = find_prometheus_binary(binary)
        if self.native_histograms:
            self._native_setting = prometheus_version(found) >= (3, 8)
        return found

    def global_options(self, interval: str) -> dict[str, Any]:
        """Rules are evaluated every scrape interval."""
        native = {"scrape_native_histograms": True} if self._native_setting else {}
        return {"evaluation_interval": interval, **native}

    def command(self, binary: str, port: int) -> list[str]:
        """``prometheus`` with its config, TSDB and listen address."""
        native = self.native_histograms and not self._native_setting
        return [
            binary,
            f"--config.file={self.config_path}",
            f"--storage.tsdb.path={self.workdir / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
            "--log.level=info",
            *(["--enable-feature=native-histograms"] if native else []),
        ]


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
