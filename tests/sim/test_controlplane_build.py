"""The builder of the test servers (scaler.sim.controlplane.build): the cache key, the build
command, the cache hit, and the errors, with the ``go`` commands replaced (no Go build runs)."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from scaler.sim.controlplane import build
from scaler.sim.controlplane.build import (
    KUBEPLANE,
    KUBERNETES_VERSION,
    PROMETHEUS3,
    BuildError,
    GoNotFoundError,
    binary_path,
    ensure_binary,
)


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("VLLM_SCALER_BIN_CACHE", str(tmp_path / "bin"))
    monkeypatch.setattr(build, "find_go", lambda: "/opt/go/bin/go")
    return tmp_path / "bin"


class FakeGo:
    """``go env GOVERSION`` and ``go build``: records the build and writes the ``-o`` file."""

    def __init__(self, *, fail: bool = False) -> None:
        self.builds: list[tuple[list[str], dict[str, str], Path]] = []
        self.fail = fail

    def __call__(self, command: list[str], **kwargs: Any) -> subprocess.CompletedProcess[bytes]:
        if command[1:] == ["env", "GOVERSION"]:
            return subprocess.CompletedProcess(command, 0, b"go1.26.8\n")
        cwd = Path(kwargs["cwd"])
        self.builds.append((command, kwargs["env"], cwd))
        assert sorted(p.name for p in cwd.iterdir()) == sorted(
            ["go.mod", "go.sum", *(["main.go"] if command[-1] == "." else [])]
        )
        if self.fail:
            kwargs["stdout"].write(b"main.go:1: undefined: etcdmain\n")
            return subprocess.CompletedProcess(command, 1)
        target = Path(command[command.index("-o") + 1])
        target.write_bytes(b"\x7fELF")
        target.chmod(0o755)
        return subprocess.CompletedProcess(command, 0)


def test_a_build_lands_in_the_cache_under_version_and_digest(_cache: Path) -> None:
    go = FakeGo()
    result = ensure_binary(KUBEPLANE, out=None, runner=go)
    assert result.built and result.go_version == "go1.26.8"
    assert result.path == _cache / f"kubeplane-{KUBERNETES_VERSION}-{KUBEPLANE.digest()}"
    assert result.path.read_bytes() == b"\x7fELF"
    (command, env, _), = go.builds  # fmt: skip
    assert command[:3] == ["/opt/go/bin/go", "build", "-trimpath"]
    ldflags = next(a for a in command if a.startswith("-ldflags="))
    assert ldflags.startswith("-ldflags=-s -w ")
    assert f"-X k8s.io/component-base/version.gitVersion={KUBERNETES_VERSION}" in ldflags
    assert command[-1] == "."
    assert env["CGO_ENABLED"] == "0" and env["GOTOOLCHAIN"] == "local"
    assert env["GOFLAGS"] == "-mod=readonly"
    # the second call takes the cached binary and the recorded build time
    again = ensure_binary(KUBEPLANE, out=None, runner=FakeGo())
    assert not again.built and again.path == result.path
    assert again.seconds == pytest.approx(result.seconds, abs=0.1)


def test_prometheus_3_is_built_from_its_module_as_a_tool() -> None:
    go = FakeGo()
    result = ensure_binary(PROMETHEUS3, out=None, runner=go)
    assert result.path.name.startswith("prometheus-v0.316.0-")
    assert go.builds[0][0][-1] == "github.com/prometheus/prometheus/cmd/prometheus"
    assert PROMETHEUS3.describes == "Prometheus 3.16.0"


def test_the_digest_follows_the_module_files() -> None:
    assert KUBEPLANE.digest() != PROMETHEUS3.digest()
    assert len(KUBEPLANE.digest()) == 12
    files = KUBEPLANE.source_files()
    assert set(files) == {"go.mod", "go.sum", "main.go"}
    # every staging module replaced with the release of the same minor
    gomod = files["go.mod"].decode()
    assert f"k8s.io/kubernetes {KUBERNETES_VERSION}" in gomod
    minor = KUBERNETES_VERSION.split(".")[1]
    for module in ("api", "apimachinery", "client-go", "kubectl", "apiserver"):
        assert f"k8s.io/{module} => k8s.io/{module} v0.{minor}." in gomod


def test_a_failed_build_says_so_with_the_end_of_its_log(_cache: Path) -> None:
    with pytest.raises(
        BuildError, match=r"(?s)go build of kubeplane .* failed \(exit 1\).*undefined: etcdmain"
    ):
        ensure_binary(KUBEPLANE, out=None, runner=FakeGo(fail=True))
    assert not binary_path(KUBEPLANE).exists()


def test_no_go_toolchain_is_named_with_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.undo()  # the real find_go, on an empty PATH
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.delenv("GO", raising=False)
    monkeypatch.setattr(build.shutil, "which", lambda _: None)
    with pytest.raises(GoNotFoundError, match=r"no Go toolchain found.*install Go 1\.26"):
        build.find_go()


def test_the_build_line_says_whether_the_binary_was_built_now_or_cached() -> None:
    from scaler.sim.controlplane.__main__ import describe_build

    path = Path("/cache/kubeplane")
    assert describe_build(build.BuildResult(path, True, 21.2, "go1.26.8")) == "built now in 21 s"
    cached = build.BuildResult(path, False, 21.2, "go1.26.8")
    assert describe_build(cached) == "cached binary, built earlier in 21 s"
    unknown = build.BuildResult(path, False, None, None)
    assert describe_build(unknown) == "cached binary, build time unknown"
