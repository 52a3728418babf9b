#!/usr/bin/env python3
"""Write the generated references into their pages: the policy file's (docs/policy.md, from
scaler/config/policy.py's models) and the settings' (docs/settings.md, from
scaler/config/settings.py and the command line), between each page's
`<!-- reference:NAME -->` and `<!-- /reference:NAME -->` lines.

Run it after changing a field of the policy or of the settings, or an option of a command;
`--check` only compares (exit 1 and a diff when a page is stale; the tests run it). The
documentation site publishes the committed text, so the pages read the same in the repository
and on the site.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from scriptkit import in_the_venv, write_or_check

ROOT = Path(__file__).resolve().parents[1]


def _hooks() -> ModuleType:
    """docs/hooks.py, the site's hooks, which generate the references."""
    spec = importlib.util.spec_from_file_location("docs_hooks", ROOT / "docs" / "hooks.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare only; exit 1 when stale")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    try:
        hooks = _hooks()
    except ModuleNotFoundError:
        in_the_venv("the package and its dev extra (mkdocs)")
    return write_or_check(hooks.rendered_pages(), check=args.check, source="the models")


if __name__ == "__main__":
    sys.exit(main())
