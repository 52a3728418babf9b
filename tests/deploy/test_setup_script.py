"""scripts/setup.sh's reinstall check: run against a stand-in virtual environment whose
python records the pip installs it is asked for."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.deploy.render import ROOT


def _checkout(tmp_path: Path) -> tuple[Path, Path]:
    """A copy of what setup.sh reads, a .venv whose python logs its arguments, and a PATH
    with prometheus and victoria-metrics present (nothing to install with apt)."""
    (tmp_path / "scripts").mkdir()
    shutil.copy(ROOT / "scripts" / "setup.sh", tmp_path / "scripts" / "setup.sh")
    for name in ("pyproject.toml", "requirements.txt"):
        shutil.copy(ROOT / name, tmp_path / name)
    log = tmp_path / "python-calls"
    venv_python = tmp_path / ".venv" / "bin" / "python"
    venv_python.parent.mkdir(parents=True)
    venv_python.write_text(f'#!/bin/sh\necho "$*" >> {log}\n')
    venv_python.chmod(0o755)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("prometheus", "victoria-metrics"):
        (bin_dir / tool).write_text("#!/bin/sh\n")
        (bin_dir / tool).chmod(0o755)
    (bin_dir / "python3.13").symlink_to(sys.executable)
    return log, bin_dir


def _setup(tmp_path: Path, bin_dir: Path, *args: str) -> str:
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(tmp_path)}
    return subprocess.run(
        [str(tmp_path / "scripts" / "setup.sh"), *args],
        check=True,
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
    ).stdout


def _installs(log: Path) -> list[str]:
    if not log.exists():
        return []
    return [line for line in log.read_text().splitlines() if "pip install -q -e" in line]


def test_the_dev_install_serves_the_demo_without_a_reinstall(tmp_path: Path) -> None:
    """demo.sh runs setup.sh (the sim extra) and test.sh runs setup.sh --dev: dev includes
    sim, so switching between them after a dev install reinstalls nothing."""
    log, bin_dir = _checkout(tmp_path)
    _setup(tmp_path, bin_dir, "--dev")
    assert _installs(log) == ["-m pip install -q -e .[dev]"]
    _setup(tmp_path, bin_dir)  # demo.sh
    _setup(tmp_path, bin_dir, "--dev")  # test.sh
    _setup(tmp_path, bin_dir)
    assert _installs(log) == ["-m pip install -q -e .[dev]"]


def test_each_step_that_takes_time_says_so_and_a_setup_with_nothing_to_do_is_quiet(
    tmp_path: Path,
) -> None:
    _, bin_dir = _checkout(tmp_path)
    out = _setup(tmp_path, bin_dir, "--dev")
    assert out.splitlines() == [
        "setup: upgrading pip in .venv",
        "setup: installing vllm-scaler[dev] and its dependencies into .venv (pip; minutes on a "
        "fresh machine)",
        "setup: done (.venv/bin/vllm-scaler; this is skipped until pyproject.toml or "
        "requirements.txt change)",
    ]
    assert _setup(tmp_path, bin_dir, "--dev") == ""  # test.sh's edit-test loop


def test_a_sim_install_is_completed_for_dev_and_a_changed_pyproject_reinstalls(
    tmp_path: Path,
) -> None:
    log, bin_dir = _checkout(tmp_path)
    _setup(tmp_path, bin_dir)
    _setup(tmp_path, bin_dir)
    assert _installs(log) == ["-m pip install -q -e .[sim]"]
    _setup(tmp_path, bin_dir, "--dev")  # sim lacks the test tools
    assert _installs(log)[-1] == "-m pip install -q -e .[dev]"
    with (tmp_path / "requirements.txt").open("a") as f:
        f.write("# changed\n")
    _setup(tmp_path, bin_dir)
    assert _installs(log) == [
        "-m pip install -q -e .[sim]",
        "-m pip install -q -e .[dev]",
        "-m pip install -q -e .[sim]",
    ]
    assert os.access(tmp_path / ".venv" / ".vllm-scaler-setup", os.R_OK)
