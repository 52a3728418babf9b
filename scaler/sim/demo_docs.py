"""The demo's own documentation blocks: ``vllm-scaler sim --write-summary FILE`` puts a run's
summary and decisions into the Markdown files that show them (the README, ``docs/demo.md``),
so that new numbers are one re-run away."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

__all__ = ["DOC_BLOCKS", "doc_blocks", "missing_doc_blocks", "write_doc_blocks"]


#: The blocks of a documentation file that ``sim --write-summary`` fills with a run's output:
#: name -> (opening marker, closing marker).
DOC_BLOCKS = {
    "summary": ("<!-- demo-summary -->", "<!-- /demo-summary -->"),
    "transcript": ("<!-- demo-transcript -->", "<!-- /demo-transcript -->"),
}
#: Lines of the demo's output left out of the blocks: the plot's path (the page shows the plot).
_LEFT_OUT = ("plot  ",)
#: What names this machine in the lines kept: loopback ports (the header's servers, the
#: controller's ``started`` line), written as ``<port>``.
_PORTS = (
    (re.compile(r"://127\.0\.0\.1:\d+"), "://127.0.0.1:<port>"),
    (re.compile(r"\bmetrics_port=\d+"), "metrics_port=<port>"),
)


def doc_blocks(printed: str, workdir: Path | None = None) -> dict[str, str]:
    """What a run printed, as the documentation's blocks: ``transcript``, every line as the
    run printed it (its header: the trace, the fleet, where Prometheus, the API stand-in, the
    policy, the controller's metrics listen, the dry run's command; the decisions), with the
    loopback ports written ``<port>`` and an absolute ``workdir`` as ``out/demo`` (the
    default), the plot's line left out; and ``summary``, from the summary's title
    (``== vllm-scaler demo``) on."""
    kept = []
    for line in printed.splitlines():
        if line.startswith(_LEFT_OUT):
            continue
        for pattern, placeholder in _PORTS:
            line = pattern.sub(placeholder, line)
        if workdir is not None and workdir.is_absolute():
            line = line.replace(str(workdir), "out/demo")
        kept.append(line)
    transcript = "\n".join(kept).strip("\n")
    at = transcript.find("== vllm-scaler demo")
    summary = transcript[at:] if at >= 0 else ""
    return {"transcript": transcript, "summary": summary}


def missing_doc_blocks(text: str) -> str | None:
    """Why ``text`` holds no block :func:`write_doc_blocks` can fill (None when it holds one)."""
    for opening, closing in DOC_BLOCKS.values():
        if opening in text and closing in text.split(opening, 1)[1]:
            return None
    pairs = " or ".join(f"{o} ... {c}" for o, c in DOC_BLOCKS.values())
    return f"expected a file holding {pairs}"


def write_doc_blocks(text: str, blocks: Mapping[str, str]) -> str:
    """``text`` with each of its :data:`DOC_BLOCKS` replaced by the block's text, fenced."""
    for name, (opening, closing) in DOC_BLOCKS.items():
        if opening not in text:
            continue
        head, rest = text.split(opening, 1)
        if closing not in rest:
            continue
        _, tail = rest.split(closing, 1)
        text = f"{head}{opening}\n```text\n{blocks.get(name, '')}\n```\n{closing}{tail}"
    return text
