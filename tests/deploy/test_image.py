"""The image: a base pinned by digest, every runtime dependency from the hash-pinned lock
(requirements.txt) and the project's wheel built by the hash-pinned build backend
(requirements-build.txt), both matching pyproject.toml, no wheel left in a layer, and the
commands that need an extra say so in one line instead of failing with a traceback."""

from __future__ import annotations

import importlib.metadata
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from dockerfile_parse import DockerfileParser
from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from typer.testing import CliRunner
from uv import find_uv_bin

from scaler.cli import COMMANDS, EXTRAS, app

ROOT = Path(__file__).resolve().parents[2]
LOCK = ROOT / "requirements.txt"
BUILD_LOCK = ROOT / "requirements-build.txt"
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
PROJECT = "vllm-scaler (pyproject.toml)"
# The image's interpreter and platform, for the lock's environment markers.
IMAGE_ENV = {
    **default_environment(),
    "python_version": "3.11",
    "python_full_version": "3.11.16",
    "sys_platform": "linux",
    "platform_system": "Linux",
    "os_name": "posix",
    "implementation_name": "cpython",
    "platform_python_implementation": "CPython",
}


@dataclass
class Pin:
    requirement: Requirement
    hashes: list[str] = field(default_factory=list)
    via: set[str] = field(default_factory=set)

    @property
    def version(self) -> str:
        (spec,) = self.requirement.specifier
        assert spec.operator == "==", self.requirement
        return spec.version


def _lock(path: Path = LOCK) -> dict[str, Pin]:
    """A lock's entries by canonical name: ``name==version [; marker]`` lines with their
    ``--hash`` options and ``# via`` comments, as pip-compile and uv write them."""
    pins: dict[str, Pin] = {}
    current: Pin | None = None
    in_via = False
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.strip().removesuffix("\\").strip()
        if not line:
            continue
        if not raw.startswith((" ", "#")):
            current = Pin(Requirement(line))
            pins[canonicalize_name(current.requirement.name)] = current
            in_via = False
        elif line.startswith("--hash="):
            assert current is not None
            current.hashes.append(line.removeprefix("--hash="))
        elif current is not None and line.startswith("# via"):
            parent = line.removeprefix("# via").strip()
            in_via = not parent
            if parent:
                current.via.add(parent)
        elif current is not None and in_via and line.startswith("#   "):
            current.via.add(line.removeprefix("#").strip())
    return pins


def _project_dependencies() -> list[Requirement]:
    return [Requirement(r) for r in PYPROJECT["project"]["dependencies"]]


def test_lock_pins_exactly_the_runtime_dependencies_of_pyproject() -> None:
    pins = _lock()
    direct = _project_dependencies()
    for req in direct:
        pin = pins.get(canonicalize_name(req.name))
        assert pin is not None, f"{req} is in pyproject.toml but not in requirements.txt"
        assert req.specifier.contains(pin.version, prereleases=True), (
            f"requirements.txt pins {req.name}=={pin.version}, outside pyproject's {req}: "
            "run scripts/lock.sh"
        )
        assert PROJECT in pin.via, pin
    # Nothing is locked as a direct dependency that pyproject no longer asks for.
    locked_direct = {name for name, pin in pins.items() if PROJECT in pin.via}
    assert locked_direct == {canonicalize_name(r.name) for r in direct}, (
        "requirements.txt is stale: run scripts/lock.sh"
    )
    # No extra's dependency (matplotlib, the dashboards SDK, ...) in the image.
    extras = PYPROJECT["project"]["optional-dependencies"]
    extra_only = {
        canonicalize_name(Requirement(r).name)
        for name, reqs in extras.items()
        if name != "dev"
        for r in reqs
    } - locked_direct
    assert extra_only and not extra_only & set(pins), extra_only & set(pins)


def test_cloud_lock_pins_the_runtime_dependencies_and_the_cloud_extra() -> None:
    """requirements-cloud.txt (the image built with --build-arg LOCK=requirements-cloud.txt):
    pyproject's dependencies and those of its cloud extra (aws, google, azure), each hashed,
    nothing of another extra."""
    pins = _lock(ROOT / "requirements-cloud.txt")
    extras = PYPROJECT["project"]["optional-dependencies"]
    cloud = [Requirement(r) for name in ("aws", "google", "azure") for r in extras[name]]
    assert extras["cloud"] == ["vllm-scaler[aws,google,azure]"]
    wanted = _project_dependencies() + cloud
    locked_direct = {name for name, pin in pins.items() if PROJECT in pin.via}
    assert locked_direct == {canonicalize_name(r.name) for r in wanted}, (
        "requirements-cloud.txt is stale: run scripts/lock.sh"
    )
    for req in wanted:
        pin = pins[canonicalize_name(req.name)]
        assert req.specifier.contains(pin.version, prereleases=True), (req, pin.version)
    for name, pin in pins.items():
        assert pin.hashes, f"{name} has no --hash"
    assert not {"matplotlib", "prometheus-api-client"} & set(pins)


def test_lock_is_hashed_and_closed() -> None:
    pins = _lock()
    assert len(pins) >= len(_project_dependencies())
    header = LOCK.read_text(encoding="utf-8").splitlines()[:3]
    assert any("scripts/lock.sh" in line for line in header), header
    for name, pin in pins.items():
        assert pin.hashes, f"{name} has no --hash"
        assert all(re.fullmatch(r"sha256:[0-9a-f]{64}", h) for h in pin.hashes), name
        assert pin.via, f"{name}: nothing depends on it"
        for parent in pin.via - {PROJECT}:
            assert canonicalize_name(parent) in pins, f"{name} via {parent}, which is not locked"


def test_lock_holds_every_requirement_of_the_locked_packages() -> None:
    """Closure by the packages' own metadata: for each locked package installed here at the
    locked version, every requirement that applies to the image (Linux, CPython 3.11, no
    extras) is locked too, at a version it accepts."""
    pins = _lock()
    checked = 0
    for name, pin in pins.items():
        try:
            dist = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            continue
        if dist.version != pin.version:
            continue
        checked += 1
        for text in dist.requires or []:
            req = Requirement(text)
            if req.marker is not None and not req.marker.evaluate({**IMAGE_ENV, "extra": ""}):
                continue
            dep = pins.get(canonicalize_name(req.name))
            assert dep is not None, f"{name} {pin.version} requires {req}, not in the lock"
            assert req.specifier.contains(dep.version, prereleases=True), (name, req, dep.version)
    assert checked >= len(pins) // 2, f"only {checked} of {len(pins)} locked versions installed"


def _build_requirements() -> list[Requirement]:
    return [Requirement(r) for r in PYPROJECT["build-system"]["requires"]]


def test_build_lock_pins_exactly_the_build_requirements_of_pyproject() -> None:
    """requirements-build.txt is [build-system].requires locked: the backend the image builds
    the project's wheel with (setuptools brings no dependency of its own, so the lock holds
    exactly the requirements), hashed, at versions the requirements accept."""
    pins = _lock(BUILD_LOCK)
    header = BUILD_LOCK.read_text(encoding="utf-8").splitlines()[:3]
    assert any("scripts/lock.sh" in line for line in header), header
    wanted = _build_requirements()
    assert set(pins) == {canonicalize_name(r.name) for r in wanted}, (
        f"requirements-build.txt pins {sorted(pins)} for {[str(r) for r in wanted]}: "
        "run scripts/lock.sh"
    )
    for req in wanted:
        pin = pins[canonicalize_name(req.name)]
        assert req.specifier.contains(pin.version, prereleases=True), (
            f"requirements-build.txt pins {req.name}=={pin.version}, outside pyproject's "
            f"{req}: run scripts/lock.sh"
        )
        assert pin.hashes and all(re.fullmatch(r"sha256:[0-9a-f]{64}", h) for h in pin.hashes)


def test_build_requirements_name_the_setuptools_that_reads_the_license_expression() -> None:
    """pyproject's ``license = "Apache-2.0"`` is a PEP 639 license expression, which
    setuptools reads from 77.0 on (77.0.1 is the first release on PyPI; 76 rejects the
    string): [build-system].requires must not promise an older one works."""
    assert isinstance(PYPROJECT["project"]["license"], str)
    assert PYPROJECT["build-system"]["build-backend"] == "setuptools.build_meta"
    (setuptools,) = [r for r in _build_requirements() if r.name == "setuptools"]
    assert not setuptools.specifier.contains("76.1.0")
    assert setuptools.specifier.contains("77.0.1")


def _dockerfile() -> DockerfileParser:
    return DockerfileParser(str(ROOT / "Dockerfile"))


def test_base_image_is_pinned_by_digest() -> None:
    parents = _dockerfile().parent_images
    assert len(parents) == 2
    assert len(set(parents)) == 1, parents
    assert re.fullmatch(r"python:3\.11-slim-bookworm@sha256:[0-9a-f]{64}", parents[0]), parents


def test_image_installs_from_the_lock_and_leaves_no_wheel_in_a_layer() -> None:
    instructions = _dockerfile().structure
    stages: list[list[tuple[str, str]]] = []
    for ins in instructions:
        if ins["instruction"] == "FROM":
            stages.append([])
        if stages and ins["instruction"] != "COMMENT":
            stages[-1].append((ins["instruction"], " ".join(ins["value"].split())))
    build, final = stages
    build_runs = " ".join(v for i, v in build if i == "RUN")
    assert "--require-hashes" in build_runs and '-r "${LOCK}"' in build_runs
    # the lock: requirements.txt unless the build asks for the cloud extras' own
    args = [v for i, v in build if i == "ARG"]
    assert args == ["LOCK=requirements.txt"], args
    # The project's wheel is built by the locked setuptools, installed before it is used.
    install_backend = "pip install --no-cache-dir --require-hashes -r requirements-build.txt"
    build_project = "--no-deps --no-build-isolation"
    assert install_backend in build_runs and build_project in build_runs
    assert build_runs.index(install_backend) < build_runs.index(build_project)
    copied = (
        "requirements.txt requirements-cloud.txt requirements-build.txt pyproject.toml README.md ./"
    )
    assert ("COPY", copied) in build
    # The final stage copies nothing from the build stage: the wheels are only mounted.
    assert not [v for i, v in final if i in ("COPY", "ADD")], final
    (install,) = [v for i, v in final if i == "RUN"]
    assert install.startswith("--mount=type=bind,from=build,source=/wheels,target=/wheels ")
    assert "pip install --no-cache-dir --no-index --no-deps /wheels/*.whl" in install
    assert "pip check" in install
    assert "install --upgrade" not in build_runs + install  # nothing unpinned
    assert ("USER", "65532:65532") in final


def _install_build_lock(python: Path) -> None:
    """Installs requirements-build.txt into the environment of ``python`` with hashes
    required, from uv's cache when it holds the files, else from the package index; skips
    (with uv's reason) only when neither is reachable, fails on anything else."""
    uv = find_uv_bin()
    lock = ["--require-hashes", "-r", str(BUILD_LOCK)]
    install = [uv, "pip", "install", "--python", str(python), *lock]
    cached = subprocess.run([*install, "--offline"], capture_output=True, text=True)
    if cached.returncode == 0:
        return
    fetched = subprocess.run(install, capture_output=True, text=True)
    if fetched.returncode != 0:
        error = fetched.stderr.strip()
        if "hash" in error.lower() or not re.search(r"connect|dns|network|offline", error, re.I):
            pytest.fail(f"installing requirements-build.txt failed:\n{error}")
        pytest.skip(f"the build lock's files are neither cached nor downloadable: {error}")


def test_the_wheel_builds_with_the_locked_setuptools_and_holds_only_the_package(
    tmp_path: Path,
) -> None:
    """The image's build stage, outside docker: the sources it copies (pyproject.toml,
    README.md, scaler/), an environment holding only the build lock, and ``pip wheel
    --no-build-isolation``. The wheel holds scaler and its subpackages (every module, the
    package data) and the dist-info, nothing else of the flat layout's root."""
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, src / name)
    shutil.copytree(ROOT / "scaler", src / "scaler", ignore=shutil.ignore_patterns("__pycache__"))
    env = tmp_path / "env"
    subprocess.run([find_uv_bin(), "venv", "-q", "--python", sys.executable, str(env)], check=True)
    python = env / "bin" / "python"
    _install_build_lock(python)
    out = tmp_path / "wheels"
    pip = [sys.executable, "-m", "pip", "--python", str(python), "--disable-pip-version-check"]
    wheel = ["wheel", "--no-cache-dir", "--no-deps", "--no-build-isolation"]
    built = subprocess.run(
        [*pip, *wheel, "--wheel-dir", str(out), str(src)], capture_output=True, text=True
    )
    assert built.returncode == 0, built.stdout + built.stderr
    (built_wheel,) = out.glob("vllm_scaler-*.whl")
    names = zipfile.ZipFile(built_wheel).namelist()
    dist_info = f"vllm_scaler-{PYPROJECT['project']['version']}.dist-info/"
    assert [n for n in names if not n.startswith(("scaler/", dist_info))] == []
    modules = {p.relative_to(src).as_posix() for p in (src / "scaler").rglob("*.py")}
    assert {n for n in names if n.endswith(".py")} == modules
    for data in ("scaler/py.typed", "scaler/sim/traces/README.md"):
        assert data in names
    assert any(n.startswith("scaler/examples/") and n.endswith(".yaml") for n in names)
    metadata = zipfile.ZipFile(built_wheel).read(dist_info + "METADATA").decode()
    assert "License-Expression: Apache-2.0" in metadata.splitlines()


def test_every_extra_command_names_an_extra_that_brings_its_modules() -> None:
    extras = PYPROJECT["project"]["optional-dependencies"]
    registered = {c.name for c in COMMANDS}
    providers = importlib.metadata.packages_distributions()
    for command, (extra, modules) in EXTRAS.items():
        assert command in registered, command
        wanted = {canonicalize_name(Requirement(r).name) for r in extras[extra]}
        for module in modules:
            dists = {canonicalize_name(d) for d in providers.get(module, [])}
            assert dists & wanted, f"{command}: {module} does not come with [{extra}]"


@pytest.mark.parametrize(
    ("args", "missing", "line"),
    [
        pytest.param(
            ["bench", "--trace", "conv"], "matplotlib",
            "vllm-scaler: matplotlib is missing: pip install 'vllm-scaler[sim]'", id="bench",
        ),
        pytest.param(
            ["sim", "--minutes", "1"], "matplotlib",
            "vllm-scaler: matplotlib is missing: pip install 'vllm-scaler[sim]'", id="sim",
        ),
        pytest.param(
            ["backtest", "--start", "now-1h"], "prometheus_api_client",
            "vllm-scaler: prometheus_api_client is missing: pip install 'vllm-scaler[backtest]'",
            id="backtest",
        ),
        pytest.param(
            ["dashboards", "--check"], "grafana_foundation_sdk",
            "vllm-scaler: grafana_foundation_sdk is missing: "
            "pip install 'vllm-scaler[dashboards]'",
            id="dashboards",
        ),
    ],
)  # fmt: skip
def test_a_command_without_its_extra_prints_one_line(
    args: list[str], missing: str, line: str, monkeypatch
) -> None:
    """As in the image, where no extra is installed: the module cannot be found (a None in
    sys.modules is how importlib spells that), so the command stops before any work."""
    monkeypatch.setitem(sys.modules, missing, None)
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2, result.output
    assert result.output.splitlines() == [line]
    assert result.exception is None or isinstance(result.exception, SystemExit)
    if args[0] != "dashboards":  # its --help belongs to the generator
        assert CliRunner().invoke(app, [args[0], "--help"]).exit_code == 0
