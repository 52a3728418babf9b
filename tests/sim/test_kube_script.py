"""scripts/kube.sh keeps its state (pid, kubeconfig, logs) per user and per clone, so that a
second clone's ``up`` and ``down`` never act on another clone's control plane."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "kube.sh"


def _clone(root: Path, name: str) -> Path:
    """A checkout holding the script (``state`` and ``down`` need nothing else)."""
    (root / name / "scripts").mkdir(parents=True)
    shutil.copy(SCRIPT, root / name / "scripts" / "kube.sh")
    return root / name


def _kube(clone: Path, *args: str, env: dict[str, str]) -> str:
    out = subprocess.run(
        ["bash", str(clone / "scripts" / "kube.sh"), *args],
        capture_output=True,
        text=True,
        check=True,
        env=env,
        cwd="/",
    )
    return out.stdout.strip()


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    out = {k: v for k, v in os.environ.items() if k != "VLLM_SCALER_KUBE_STATE"}
    out["XDG_RUNTIME_DIR"] = str(tmp_path / "run")
    return out


def test_each_clone_and_user_has_its_own_state_directory(
    tmp_path: Path, env: dict[str, str]
) -> None:
    a, b = _clone(tmp_path, "a"), _clone(tmp_path, "b")
    state_a, state_b = _kube(a, "state", env=env), _kube(b, "state", env=env)
    prefix = f"{tmp_path / 'run'}/vllm-scaler-kube-{os.getuid()}-"
    assert state_a.startswith(prefix) and state_b.startswith(prefix)
    assert state_a != state_b
    assert _kube(a, "state", env=env) == state_a  # stable for a clone
    without_runtime_dir = {k: v for k, v in env.items() if k != "XDG_RUNTIME_DIR"}
    assert _kube(a, "state", env=without_runtime_dir).startswith(
        f"/tmp/vllm-scaler-kube-{os.getuid()}-"
    )
    named = {**env, "VLLM_SCALER_KUBE_STATE": str(tmp_path / "mine")}
    assert _kube(a, "state", env=named) == str(tmp_path / "mine")


def test_a_second_clones_down_leaves_the_first_clones_plane_running(
    tmp_path: Path, env: dict[str, str]
) -> None:
    a, b = _clone(tmp_path, "a"), _clone(tmp_path, "b")
    # clone a's plane: a process recorded in a's state, as `up` records it
    plane = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    reaper = threading.Thread(target=plane.wait)  # reaps it once stopped (no zombie)
    reaper.start()
    try:
        state_a = Path(_kube(a, "state", env=env))
        state_a.mkdir(parents=True)
        (state_a / "pid").write_text(f"{plane.pid}\n")
        assert _kube(b, "down", env=env) == "kube: not up"
        assert plane.poll() is None
        assert _kube(a, "down", env=env) == f"kube: stopped (logs in {state_a})"
        reaper.join(timeout=30)
        assert plane.returncode is not None
    finally:
        if plane.poll() is None:
            plane.kill()
        reaper.join()
