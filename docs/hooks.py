"""MkDocs hooks of the documentation site: the generated references.

A page that holds a marker line gets the generated text in its place at build time:
``<!-- reference:policy -->`` the policy file's reference, ``<!-- reference:settings -->``
the settings' (both from their pydantic models, :mod:`scaler.config.reference`), so that no
field is documented by hand.

The real-world cases live beside their tests (``tests/cases/*.md``); the site publishes each
as ``cases/<file>`` and the pages' links to ``../tests/cases/`` (right when read in the
repository) are pointed there.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import typer
from mkdocs.structure.files import File, Files

from scaler.config.reference import policy_reference, settings_reference


def setting_commands() -> dict[str, list[str]]:
    """Settings field -> the commands of ``vllm-scaler`` that offer it as an option (read
    from the command line itself: each option's environment variable names its field)."""
    from scaler.cli import app
    from scaler.config.settings import Settings, env_name

    by_variable = {env_name(f): f for f in Settings.model_fields}
    group: Any = typer.main.get_command(app)
    out: dict[str, list[str]] = {}
    for name in sorted(group.list_commands(None)):
        command = group.get_command(None, name)
        for param in command.params:
            field = by_variable.get(param.envvar) if isinstance(param.envvar, str) else None
            if field is not None:
                out.setdefault(field, []).append(name)
    return out


MARKERS: dict[str, Callable[[], str]] = {
    "<!-- reference:policy -->": policy_reference,
    "<!-- reference:settings -->": lambda: settings_reference(setting_commands()),
}


#: The cases' texts, beside their tests.
CASES = Path(__file__).resolve().parent.parent / "tests" / "cases"


def on_files(files: Files, config: Any) -> Files:
    """Add each case text of :data:`CASES` to the site as ``cases/<file name>``."""
    for path in sorted(CASES.glob("*.md")):
        files.append(File.generated(config, f"cases/{path.name}", abs_src_path=str(path)))
    return files


def on_page_markdown(markdown: str, **_: Any) -> str:
    """Replace each marker line with its generated reference; point links to the cases'
    texts at their pages on the site."""
    for marker, generate in MARKERS.items():
        if marker in markdown:
            markdown = markdown.replace(marker, generate())
    return markdown.replace("](../tests/cases/", "](cases/")
