"""MkDocs hooks of the documentation site: the generated references, the cases' pages.

The policy file's reference and the settings' (both from their pydantic models,
:mod:`scaler.config.reference`) are committed in ``docs/policy.md`` and ``docs/settings.md``
between the lines ``<!-- reference:NAME ... -->`` and ``<!-- /reference:NAME -->``, so that the
pages read the same in the repository as on the site and no field is documented by hand.
``scripts/render-reference.py`` writes them (:func:`rendered_pages`); a test fails when the
committed text is not what the models generate. The site's build drops the marker lines.

The real-world cases live beside their tests (``tests/cases/*.md``); the site publishes each
as ``cases/<file>`` and the pages' links to ``../tests/cases/`` (right when read in the
repository) are pointed there.
"""

from __future__ import annotations

import re
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


#: Each generated reference by name, and the page that holds it.
REFERENCES: dict[str, Callable[[], str]] = {
    "policy": policy_reference,
    "settings": lambda: settings_reference(setting_commands()),
}
DOCS = Path(__file__).resolve().parent
PAGES = {"policy": DOCS / "policy.md", "settings": DOCS / "settings.md"}
#: The command that writes the references into their pages.
REFRESH = "scripts/render-reference.py"

_BLOCK = re.compile(
    r"^(<!-- reference:(?P<name>[a-z]+)\b[^\n]*-->\n)(?P<body>.*?)"
    r"^(<!-- /reference:(?P=name) -->)$",
    flags=re.M | re.S,
)
_MARKER = re.compile(r"^<!-- /?reference:[a-z]+\b[^\n]*-->\n", flags=re.M)


def filled(markdown: str) -> str:
    """``markdown`` with the text between each reference's marker lines generated anew.

    Raises:
        KeyError: a marker names no reference of :data:`REFERENCES`.
    """

    def body(found: re.Match[str]) -> str:
        text = REFERENCES[found["name"]]().strip("\n")
        return f"{found[1]}\n{text}\n\n{found[4]}"

    return _BLOCK.sub(body, markdown)


def rendered_pages() -> dict[Path, str]:
    """Each page of :data:`PAGES` with its reference generated from the models.

    Raises:
        ValueError: a page has no ``<!-- reference:NAME -->``/``<!-- /reference:NAME -->`` pair.
    """
    out: dict[Path, str] = {}
    for name, page in PAGES.items():
        text = page.read_text(encoding="utf-8")
        if not any(m["name"] == name for m in _BLOCK.finditer(text)):
            raise ValueError(
                f"{page.name}: no <!-- reference:{name} --> ... <!-- /reference:{name} --> lines"
            )
        out[page] = filled(text)
    return out


#: The cases' texts, beside their tests.
CASES = Path(__file__).resolve().parent.parent / "tests" / "cases"


def on_files(files: Files, config: Any) -> Files:
    """Add each case text of :data:`CASES` to the site as ``cases/<file name>``."""
    for path in sorted(CASES.glob("*.md")):
        files.append(File.generated(config, f"cases/{path.name}", abs_src_path=str(path)))
    return files


def on_page_markdown(markdown: str, **_: Any) -> str:
    """Drop the references' marker lines (their text is committed between them); point links
    to the cases' texts at their pages on the site."""
    return _MARKER.sub("", markdown).replace("](../tests/cases/", "](cases/")
