"""The documentation site builds with MkDocs in strict mode (every warning an error: a broken
link, a missing anchor, a page left out of the navigation), the README's links land on pages
and anchors that exist, and the generated references cover every field of their models."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
import yaml

from scaler.config.policy import Policy
from scaler.config.reference import (
    EXAMPLE_WORKLOAD,
    default_policy_yaml,
    policy_field_paths,
    policy_reference,
    policy_sections,
)
from scaler.config.settings import Settings, env_name

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site, built once for the module as CI builds it: ``mkdocs build --strict``."""
    out = tmp_path_factory.mktemp("site")
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return out


class _Ids(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.ids: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.ids |= {v for k, v in attrs if k == "id" and v}


def _ids(page: Path) -> set[str]:
    parser = _Ids()
    parser.feed(page.read_text(encoding="utf-8"))
    return parser.ids


def _built(site: Path, doc: str) -> Path:
    """The HTML file MkDocs writes for ``docs/<doc>`` (directory URLs)."""
    stem = doc.removesuffix(".md")
    return site / ("index.html" if stem == "index" else f"{stem}/index.html")


def test_the_site_builds_in_strict_mode_with_every_page_in_its_navigation(site: Path) -> None:
    pages = sorted(p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md"))
    assert "index.md" in pages and "runbooks.md" in pages
    for page in pages:
        assert _built(site, page).is_file(), page


def _readme_links() -> Iterator[tuple[str, str]]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if "://" in target:
            continue
        path, _, anchor = target.partition("#")
        yield path, anchor


def test_every_link_of_the_readme_lands_on_a_file_and_an_anchor_that_exist(site: Path) -> None:
    links = list(_readme_links())
    assert len(links) > 20
    for path, anchor in links:
        assert (ROOT / path).exists(), path
        if anchor:
            assert path.startswith("docs/") and path.endswith(".md"), path
            page = _built(site, path.removeprefix("docs/"))
            assert anchor in _ids(page), (path, anchor)


def test_the_generated_pages_hold_their_references_not_the_markers(site: Path) -> None:
    policy = (site / "policy" / "index.html").read_text(encoding="utf-8")
    settings = (site / "settings" / "index.html").read_text(encoding="utf-8")
    assert "reference:" not in policy and "reference:" not in settings
    assert "shorten_window_on_steady_fall" in policy
    for field in Settings.model_fields:
        assert env_name(field) in settings, field


def test_the_committed_references_are_what_the_models_generate() -> None:
    """docs/policy.md and docs/settings.md hold their references in the repository (read on
    GitHub as on the site): stale after a change of a field, an option or a command."""
    out = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "render-reference.py"), "--check"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 0, (
        "a committed reference differs from what the models generate: "
        "run scripts/render-reference.py\n" + out.stdout + out.stderr
    )
    assert (out.stdout, out.stderr) == ("", "")


def _hooks() -> Any:
    spec = importlib.util.spec_from_file_location("docs_hooks", DOCS / "hooks.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_stale_reference_is_generated_anew_between_its_markers() -> None:
    hooks = _hooks()
    page = (
        "# Policy\n\nintro\n\n<!-- reference:policy (generated: do not edit) -->\n"
        "| `min_replicas` | a field as it was |\n<!-- /reference:policy -->\n\n## Notes\n"
    )
    text = hooks.filled(page)
    assert "a field as it was" not in text
    assert text == (
        "# Policy\n\nintro\n\n<!-- reference:policy (generated: do not edit) -->\n\n"
        + policy_reference().strip("\n")
        + "\n\n<!-- /reference:policy -->\n\n## Notes\n"
    )
    # the site's build drops the marker lines, not the text between them
    built = hooks.on_page_markdown(text)
    assert "reference:" not in built and policy_reference().strip("\n") in built


def _schema_paths(schema: dict[str, Any]) -> set[str]:
    """Every property path of a JSON schema (pydantic's own, independent of the reference's
    walk of the models): ``targets[].signals.ttft_p95.quantile``..."""
    defs = schema.get("$defs", {})
    out: set[str] = set()

    def walk(node: dict[str, Any], path: str, seen: frozenset[str]) -> None:
        if "$ref" in node:
            name = node["$ref"].rsplit("/", 1)[-1]
            if name in seen:
                return
            node, seen = defs[name], seen | {name}
        for branch in node.get("anyOf", []) + node.get("allOf", []):
            walk(branch, path, seen)
        if node.get("type") == "array" and "items" in node:
            walk(node["items"], path + "[]", seen)
        for prop, sub in node.get("properties", {}).items():
            child = f"{path}.{prop}".lstrip(".")
            out.add(child)
            walk(sub, child, seen)

    walk(schema, "", frozenset())
    return out


def test_the_policy_reference_covers_every_field_of_the_schema() -> None:
    """Each field pydantic's JSON schema of the policy has (a shadow's fields are a
    target's) has its row in the section of its model."""
    expected = {
        p.replace("targets[].shadow.", "targets[].")
        for p in _schema_paths(Policy.model_json_schema(by_alias=True))
    }
    assert "targets[].workload.apiVersion" in expected
    assert "targets[].scaleDown.maxSurplusPercentPerPeriod" in expected
    documented = set(policy_field_paths())
    assert expected <= documented, sorted(expected - documented)
    text = policy_reference()
    sections = re.split(r"^## ", text, flags=re.M)
    for path in expected:
        section, _, field = path.rpartition(".")
        heading = f"`{section}`" if section else "The file"
        body = next(s for s in sections if s.startswith(heading + "\n"))
        assert re.search(rf"^\| `{re.escape(field)}` \|", body, flags=re.M), path


def test_every_field_of_the_policy_has_a_description() -> None:
    missing = [
        f"{s.path}.{name}"
        for s in policy_sections()
        for name, field in s.model.model_fields.items()
        if not field.description
    ]
    assert missing == []


def test_the_defaults_shown_are_the_policy_of_a_target_that_sets_only_its_workload() -> None:
    loaded = Policy.model_validate(yaml.safe_load(default_policy_yaml()))
    assert loaded == Policy.model_validate({"targets": [{"workload": EXAMPLE_WORKLOAD}]})
    assert "maxSurplusPercentPerPeriod: 25" in default_policy_yaml()
