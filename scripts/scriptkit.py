"""What the scripts that generate committed files share: running again with the clone's
``.venv`` when started by the shebang's python3 (the system's; ``./scripts/setup.sh --dev``
installs the package and its dev extra in ``.venv``), and writing or checking their files."""

from __future__ import annotations

import difflib
import os
import sys
from pathlib import Path
from typing import NoReturn

ROOT = Path(__file__).resolve().parents[1]
VENV = ROOT / ".venv"


def in_the_venv(needs: str) -> NoReturn:
    """Run the script again with ``.venv``'s Python; without ``.venv``, or already in it, exit
    saying what to do (``needs``: what the script could not import)."""
    python = VENV / "bin" / "python"
    script = Path(sys.argv[0]).resolve()
    if python.exists() and Path(sys.prefix).resolve() != VENV.resolve():
        os.execv(python, [str(python), str(script), *sys.argv[1:]])
    sys.exit(
        f"{script.name}: needs {needs}: run ./scripts/setup.sh --dev, which installs it in .venv"
    )


def write_or_check(outputs: dict[Path, str], *, check: bool, source: str) -> int:
    """Write each file of ``outputs`` whose text differs (printing ``wrote <path>``), or with
    ``check`` only print a diff of each stale one: exit code 1 when any is stale, naming the
    script to run (``source``: what the files are generated from, for that line)."""
    stale = 0
    for path, text in outputs.items():
        old = path.read_text(encoding="utf-8") if path.exists() else ""
        if old == text:
            continue
        rel = path.relative_to(ROOT)
        if check:
            stale += 1
            sys.stdout.writelines(
                difflib.unified_diff(
                    old.splitlines(keepends=True),
                    text.splitlines(keepends=True),
                    f"{rel} (committed)",
                    f"{rel} (generated)",
                )
            )
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
            print(f"wrote {rel}")
    if stale:
        script = Path(sys.argv[0]).name
        print(f"{stale} file(s) differ from {source}: run scripts/{script}")
        return 1
    return 0
