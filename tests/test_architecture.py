"""The layers of ``scaler/`` hold: the import contracts in pyproject.toml, checked by
import-linter's ``lint-imports`` (one layer imports only the layers below it; kubernetes-asyncio
only in the actuators and the simulator; the decision core imports no I/O library)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_import_contracts_are_kept() -> None:
    """Every contract in ``[tool.importlinter]`` is kept (a broken one names the import)."""
    lint_imports = Path(sys.executable).parent / "lint-imports"
    done = subprocess.run(
        [str(lint_imports), "--no-cache"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 broken" in done.stdout
