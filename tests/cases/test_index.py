"""The real-world cases live beside their tests: every case file names tests that exist, every
test that says it implements a case is named by that case, and the fault matrix points at
every case.

A case file is ``tests/cases/NN-name.md``: the case's text as it was reported (input and what
is right), then a section ``## In this repository`` with its kind, its source where known and
its tests, one per line as ``path::test_name``. A case found here rather than in the
collection is ``tests/cases/hNN-name.md``: the same format, its text written here.
"""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

import pytest

from tests.support.fakeprom import CASES, SHARED

ROOT = Path(__file__).resolve().parents[2]
SECTION = "## In this repository"
_TEST_REF = re.compile(r"`(tests/[\w/.-]+\.py)::(test_\w+)(?:\[[^`]*\])?`")


def collection_files() -> list[Path]:
    """The cases of the collection (their text as it was reported)."""
    return sorted(CASES.glob("[0-9][0-9]-*.md"))


def case_files() -> list[Path]:
    """Every case: the collection's and those found here (``hNN``)."""
    return collection_files() + sorted(CASES.glob("h[0-9][0-9]-*.md"))


@cache
def _test_functions(path: Path) -> frozenset[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return frozenset(
        node.name
        for node in tree.body
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith("test")
    )


def named_tests(case: Path) -> list[tuple[str, str]]:
    text = case.read_text(encoding="utf-8")
    _, _, section = text.partition(SECTION)
    return _TEST_REF.findall(section)


def test_there_are_cases() -> None:
    assert len(case_files()) >= 20


@pytest.mark.parametrize("case", case_files(), ids=lambda p: p.name)
def test_each_case_names_its_kind_source_and_tests_that_exist(case: Path) -> None:
    text = case.read_text(encoding="utf-8")
    assert re.match(r"# h?\d\d ", text), f"{case.name}: starts with its number and title"
    assert SECTION in text, f"{case.name}: has a section {SECTION!r}"
    section = text.partition(SECTION)[2]
    for field in ("**Kind:**", "**Source:**", "**Tests:**"):
        assert field in section, f"{case.name}: names {field}"
    tests = named_tests(case)
    assert tests, f"{case.name}: names at least one test"
    for path, name in tests:
        file = ROOT / path
        assert file.is_file(), f"{case.name}: {path} does not exist"
        assert name in _test_functions(file), f"{case.name}: {path} has no test {name}"
    assert any(p.startswith("tests/cases/") for p, _ in tests), (
        f"{case.name}: at least one of its tests lives beside it in tests/cases/"
    )


def _case_file_calls() -> list[tuple[str, str, str]]:
    """(test file, test function, case file) of every ``case_file("NN-...")`` call in a test."""
    found = []
    for path in sorted((ROOT / "tests").rglob("test_*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in tree.body:
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for sub in ast.walk(node):
                if (
                    isinstance(sub, ast.Call)
                    and getattr(sub.func, "id", None) == "case_file"
                    and sub.args
                    and isinstance(sub.args[0], ast.Constant)
                ):
                    rel = str(path.relative_to(ROOT))
                    found.append((rel, node.name, str(sub.args[0].value)))
    return found


def test_every_test_that_implements_a_case_is_named_by_it() -> None:
    calls = _case_file_calls()
    assert calls
    missing = []
    for path, name, case in calls:
        file = CASES / case
        if not file.is_file():
            missing.append(f"{path}::{name} implements {case}, which is not in tests/cases")
        elif (path, name) not in named_tests(file):
            missing.append(f"{case} does not name {path}::{name}")
    assert missing == []


def test_the_fault_matrix_points_at_every_case() -> None:
    matrix = (ROOT / "docs" / "fault-matrix.md").read_text(encoding="utf-8")
    unlinked = [c.name for c in case_files() if f"../tests/cases/{c.name}" not in matrix]
    assert unlinked == []


@pytest.mark.skipif(not (SHARED / "cases").is_dir(), reason="the shared case collection is absent")
def test_every_case_of_the_collection_is_here_with_its_text_as_given() -> None:
    shared = {p.name: p for p in (SHARED / "cases").glob("[0-9][0-9]-*.md")}
    here = {p.name: p for p in collection_files()}
    assert set(shared) <= set(here), sorted(set(shared) - set(here))
    for name in sorted(set(shared) & set(here)):
        given = shared[name].read_text(encoding="utf-8").rstrip("\n")
        kept = here[name].read_text(encoding="utf-8").partition("\n---\n")[0].rstrip("\n")
        assert kept == given, f"{name}: the case's text differs from the one reported"
