"""Building the test servers from their Go modules, once per version, into a cache outside
the clone.

The project stays a Python project: Go is only the build tool of the real servers its tests
start. Each program is a Go module of the project's own (``go/<name>/``: ``go.mod``,
``go.sum`` and, for the control plane, ``main.go``), shipped as package data:

- ``kubeplane``: one multi-call binary (``kubeplane etcd|kube-apiserver|
  kube-controller-manager|kube-scheduler|kubectl|kwok``) built from ``k8s.io/kubernetes``
  (:data:`KUBERNETES_VERSION`; its go.mod replaces each staging module ``k8s.io/*`` with the
  ``v0.X.Y`` of the same release, as a module that requires ``k8s.io/kubernetes`` must),
  ``go.etcd.io/etcd/server/v3`` at the version that release pins (:data:`ETCD_VERSION`) and
  ``sigs.k8s.io/kwok`` (:data:`KWOK_VERSION`). One binary compiles the packages the programs
  share once and links once.
- ``prometheus``: Prometheus 3 (:data:`PROMETHEUS3_VERSION`, module
  ``github.com/prometheus/prometheus`` ``v0.3XX.Y`` = Prometheus ``3.XX.Y``), ``./cmd/prometheus``
  as a ``tool`` of its go.mod, without the web UI's assets (the HTTP API is all the tests use).

A binary is cached as ``<cache>/<name>-<version>-<digest>``, the digest being that of the
module's files (so an edit of go.mod or main.go builds anew, and two versions live side by
side); ``<cache>`` is :func:`cache_dir`. Go's own build and module caches (``go env GOCACHE
GOMODCACHE``, outside the clone too) make a rebuild after such an edit incremental. A build
holds a file lock, so two test runs started at once build once.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Final, TextIO

from scaler.sim.prometheus_server import die_with_parent

__all__ = [
    "ETCD_VERSION",
    "KUBEPLANE",
    "KUBERNETES_VERSION",
    "KWOK_VERSION",
    "PROGRAMS",
    "PROMETHEUS3",
    "PROMETHEUS3_VERSION",
    "BuildError",
    "BuildResult",
    "GoNotFoundError",
    "GoProgram",
    "binary_path",
    "cache_dir",
    "ensure_binary",
    "find_go",
]

#: The newest Kubernetes release the Go module proxy serves (k8s.io/kubernetes).
KUBERNETES_VERSION: Final = "v1.37.2"
#: The etcd that release pins (its go.mod's go.etcd.io/etcd/server/v3).
ETCD_VERSION: Final = "v3.7.0"
#: sigs.k8s.io/kwok, built against the Kubernetes modules above.
KWOK_VERSION: Final = "v0.8.0"
#: Prometheus 3.16.0 (module version v0.316.0).
PROMETHEUS3_VERSION: Final = "v0.316.0"
# v0.3XX.Y is Prometheus 3.XX.Y
_PROMETHEUS3_RELEASE: Final = (
    f"3.{int(PROMETHEUS3_VERSION.split('.')[1]) - 300}.{PROMETHEUS3_VERSION.split('.')[2]}"
)

_CACHE_ENV: Final = "VLLM_SCALER_BIN_CACHE"
_GO_HINT: Final = (
    "install Go 1.26 or newer (https://go.dev/dl/, or Debian's golang-go where it is recent "
    "enough) and make sure `go` is on PATH"
)


class GoNotFoundError(RuntimeError):
    """No Go toolchain to build with (the message says what to install)."""


class BuildError(RuntimeError):
    """``go build`` failed; the message ends with the end of its log."""


@dataclass(frozen=True, slots=True)
class GoProgram:
    """A program built from a Go module of the project's.

    Attributes:
        name: the binary's name (and the folder of its module under ``go/``).
        version: the version of what it builds (the cache key's readable part).
        package: the package to build: ``.`` (the module's own main.go) or a main package
            of a dependency listed as a ``tool``.
        describes: what the binary is, for messages.
        link_vars: ``-X`` settings of the link (the version a program reports of itself).
    """

    name: str
    version: str
    package: str
    describes: str
    link_vars: tuple[tuple[str, str], ...] = ()

    def ldflags(self) -> str:
        """``-ldflags``: no symbol table or debug information, and :attr:`link_vars`."""
        return " ".join(["-s", "-w", *(f"-X {k}={v}" for k, v in self.link_vars)])

    def source_files(self) -> dict[str, bytes]:
        """The module's files (name -> content): go.mod, go.sum and any .go file."""
        folder = resources.files("scaler.sim.controlplane") / "go" / self.name
        return {
            entry.name: entry.read_bytes()
            for entry in sorted(folder.iterdir(), key=lambda e: e.name)
            if entry.name in ("go.mod", "go.sum") or entry.name.endswith(".go")
        }

    def digest(self) -> str:
        """12 hex digits of SHA-256 over the module's files and the target platform."""
        h = hashlib.sha256(f"{sys.platform}/{platform.machine()}\n{self.ldflags()}\n".encode())
        for name, content in self.source_files().items():
            h.update(f"{name}\n{len(content)}\n".encode())
            h.update(content)
        return h.hexdigest()[:12]


#: The control plane: etcd, kube-apiserver, kube-controller-manager, kube-scheduler,
#: kubectl and kwok in one binary.
KUBEPLANE: Final = GoProgram(
    "kubeplane",
    KUBERNETES_VERSION,
    ".",
    f"Kubernetes {KUBERNETES_VERSION} (kube-apiserver, kube-controller-manager, kube-scheduler, "
    f"kubectl), etcd {ETCD_VERSION} and kwok {KWOK_VERSION}",
    # what `kubectl version` and /version report (Kubernetes' own build sets the same)
    tuple(
        (f"{package}.{var}", value)
        for package in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version")
        for var, value in (
            ("gitVersion", KUBERNETES_VERSION),
            ("gitMajor", KUBERNETES_VERSION[1:].split(".")[0]),
            ("gitMinor", KUBERNETES_VERSION.split(".")[1]),
            ("gitTreeState", "clean"),
        )
    ),
)
#: Prometheus 3, the second Prometheus of the end-to-end tier.
PROMETHEUS3: Final = GoProgram(
    "prometheus",
    PROMETHEUS3_VERSION,
    "github.com/prometheus/prometheus/cmd/prometheus",
    f"Prometheus {_PROMETHEUS3_RELEASE}",
    # what `prometheus --version` and prometheus_build_info report (its release build sets
    # the same through promu)
    tuple(
        (f"github.com/prometheus/common/version.{var}", value)
        for var, value in (
            ("Version", _PROMETHEUS3_RELEASE),
            ("Revision", f"module-{PROMETHEUS3_VERSION}"),
            ("Branch", "release"),
            ("BuildUser", "vllm-scaler"),
        )
    ),
)
PROGRAMS: Final = {p.name: p for p in (KUBEPLANE, PROMETHEUS3)}


def cache_dir() -> Path:
    """Where built binaries are kept: ``$VLLM_SCALER_BIN_CACHE``, else
    ``$XDG_CACHE_HOME/vllm-scaler/bin``, else ``~/.cache/vllm-scaler/bin``."""
    explicit = os.environ.get(_CACHE_ENV)
    if explicit:
        return Path(explicit).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path("~/.cache").expanduser())
    return Path(base) / "vllm-scaler" / "bin"


def binary_path(program: GoProgram) -> Path:
    """The cached binary of ``program`` (it may not exist yet)."""
    return cache_dir() / f"{program.name}-{program.version}-{program.digest()}"


def find_go() -> str:
    """The ``go`` command to build with: ``$GO``, else ``go`` on PATH, else /usr/local/go.

    Raises:
        GoNotFoundError: none is there.
    """
    for candidate in (os.environ.get("GO"), "go", "/usr/local/go/bin/go"):
        if candidate:
            found = shutil.which(candidate)
            if found:
                return found
    raise GoNotFoundError(f"no Go toolchain found to build the test servers; {_GO_HINT}")


@dataclass(frozen=True, slots=True)
class BuildResult:
    """A binary ready to run.

    Attributes:
        path: the executable.
        built: True when this call built it, False when it was in the cache.
        seconds: the build's wall time (this call's, or the one recorded with the binary).
        go_version: the toolchain that built it.
    """

    path: Path
    built: bool
    seconds: float | None
    go_version: str | None


def _sidecar(path: Path, suffix: str) -> Path:
    # not with_suffix: the version's dots would be taken for one
    return path.parent / (path.name + suffix)


def _say(out: TextIO | None, text: str) -> None:
    if out is not None:
        print(text, file=out, flush=True)


@contextlib.contextmanager
def _lock(path: Path, out: TextIO | None, what: str) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            _say(out, f"waiting for the build of {what} in progress in another process")
            fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _recorded(path: Path) -> BuildResult:
    info: dict[str, object] = {}
    with contextlib.suppress(OSError, ValueError):
        loaded = json.loads(_sidecar(path, ".json").read_text(encoding="utf-8"))
        if isinstance(loaded, dict):
            info = loaded
    seconds = info.get("seconds")
    go_version = info.get("go_version")
    return BuildResult(
        path,
        False,
        float(seconds) if isinstance(seconds, int | float) else None,
        str(go_version) if go_version else None,
    )


def _child_setup() -> Callable[[], None]:
    """The build's ``preexec_fn``: a lower priority (a build takes both cores for minutes;
    anything interactive goes first), and SIGTERM when this process dies."""
    with_parent = die_with_parent()

    def setup() -> None:
        with contextlib.suppress(OSError):
            os.nice(10)
        if with_parent is not None:
            with_parent()

    return setup


def ensure_binary(
    program: GoProgram,
    *,
    out: TextIO | None = sys.stderr,
    jobs: int | None = None,
    runner: Callable[..., subprocess.CompletedProcess[bytes]] = subprocess.run,
) -> BuildResult:
    """The cached binary of ``program``, built first when it is not in the cache.

    The build runs in a copy of the module's files (so an installed package stays
    untouched) with ``-trimpath`` and ``-ldflags='-s -w'`` (no debug information: a smaller
    binary and a shorter link) plus the program's :attr:`~GoProgram.link_vars`,
    ``CGO_ENABLED=0`` (as Kubernetes' releases are built),
    ``-mod=readonly`` (go.sum as committed; nothing but the module proxy is asked),
    ``GOTOOLCHAIN=local`` (never a toolchain download) and at a lower priority. Its output
    goes to ``<binary>.log``.

    Args:
        program: what to build (:data:`KUBEPLANE`, :data:`PROMETHEUS3`).
        out: where progress lines go (None: silent).
        jobs: ``go build -p``; None leaves Go's default (the number of CPUs).
        runner: runs the build command (``subprocess.run``'s signature; tests replace it).

    Raises:
        GoNotFoundError: it must be built and there is no Go toolchain.
        BuildError: ``go build`` failed (the message ends with its log's last lines).
    """
    path = binary_path(program)
    if path.is_file() and os.access(path, os.X_OK):
        return _recorded(path)
    with _lock(cache_dir() / f".{program.name}.lock", out, program.name):
        if path.is_file():  # another process built it while this one waited
            return _recorded(path)
        go = find_go()
        version = (
            runner([go, "env", "GOVERSION"], capture_output=True, check=False)
            .stdout.decode()
            .strip()
        )
        _say(
            out,
            f"building {program.name} {program.version}: {program.describes}, with {version} "
            f"into {path} (a build on an empty Go cache takes many minutes on 2 cores; later "
            "runs take the cached binary)",
        )
        started = time.monotonic()
        log_path = _sidecar(path, ".log")
        with tempfile.TemporaryDirectory(prefix=f".{program.name}-", dir=cache_dir()) as tmp:
            src = Path(tmp) / "src"
            src.mkdir()
            for name, content in program.source_files().items():
                (src / name).write_bytes(content)
            target = Path(tmp) / program.name
            command = [go, "build", "-trimpath", f"-ldflags={program.ldflags()}", "-o", str(target)]
            if jobs is not None:
                command[2:2] = ["-p", str(jobs)]
            command.append(program.package)
            env = {
                **os.environ,
                "CGO_ENABLED": "0",
                "GOFLAGS": "-mod=readonly",
                "GOTOOLCHAIN": "local",
                "GOWORK": "off",
            }
            with open(log_path, "wb") as log:
                done = runner(
                    command,
                    cwd=src,
                    env=env,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    check=False,
                    preexec_fn=_child_setup(),
                )
            if done.returncode != 0 or not target.is_file():
                tail = log_path.read_text(encoding="utf-8", errors="replace").splitlines()[-30:]
                raise BuildError(
                    f"go build of {program.name} {program.version} failed (exit "
                    f"{done.returncode}); {log_path}:\n" + "\n".join(tail)
                )
            seconds = time.monotonic() - started
            os.replace(target, path)
        _sidecar(path, ".json").write_text(
            json.dumps(
                {"seconds": round(seconds, 1), "go_version": version, "built_at": time.time()}
            ),
            encoding="utf-8",
        )
        _say(out, f"built {program.name} in {seconds:.0f} s: {path}")
        return BuildResult(path, True, seconds, version)
