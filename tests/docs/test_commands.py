"""The commands of the README and of the pages it links first work as typed right after the
README's first command (``./scripts/demo.sh``, which makes ``.venv`` but puts nothing on
``PATH``): each runs ``.venv/bin/vllm-scaler``, or comes after a step that puts it on ``PATH``
(``. out/demo/env.sh && ...``), never a bare ``vllm-scaler`` that is not found."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = ("README.md", "docs/demo.md", "docs/recommend.md")
#: A command (the program, a subcommand and at least one argument), not a mention of one
#: (``vllm-scaler run`` in a sentence names the command the demo starts).
BARE = re.compile(r"^vllm-scaler [a-z][a-z-]* \S")


def commands(text: str) -> Iterator[str]:
    """Every shell line of the page's ``bash`` blocks (continuations joined) and every inline
    code span, its spaces collapsed."""
    for block in re.findall(r"^```(?:bash|sh|console)\n(.*?)^```", text, flags=re.M | re.S):
        yield from (" ".join(line.split()) for line in block.replace("\\\n", " ").splitlines())
    prose = re.sub(r"^```.*?^```", "", text, flags=re.M | re.S)
    yield from (span.strip() for span in re.findall(r"`([^`\n]+)`", prose))


def test_the_check_finds_a_bare_command_and_lets_a_mention_be() -> None:
    page = (
        "Run `vllm-scaler check-policy p.yaml`; `vllm-scaler run` scales.\n"
        "```bash\nvllm-scaler sim \\\n  --help\n.venv/bin/vllm-scaler sim --help\n```\n"
    )
    assert [c for c in commands(page) if BARE.match(c)] == [
        "vllm-scaler sim --help",
        "vllm-scaler check-policy p.yaml",
    ]


@pytest.mark.parametrize("page", PAGES)
def test_no_command_runs_a_bare_vllm_scaler(page: str) -> None:
    text = (ROOT / page).read_text(encoding="utf-8")
    bare = [c for c in commands(text) if BARE.match(c)]
    assert bare == [], f"{page}: write .venv/bin/vllm-scaler (./scripts/setup.sh makes it)"
