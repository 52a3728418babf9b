"""Every dashboard, keyed by its committed file name, and the committed JSON form."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from scaler.dashboards.decisions import DECISIONS_UID, decisions_dashboard
from scaler.dashboards.fleet import FLEET_UID, fleet_dashboard

FILES: Final = {DECISIONS_UID: "vllm-scaler-decisions.json", FLEET_UID: "vllm-fleet.json"}


def build_dashboards() -> dict[str, dict[str, Any]]:
    """Every dashboard, keyed by the file name it is committed under in ``dashboards/``."""
    return {
        FILES[DECISIONS_UID]: decisions_dashboard(),
        FILES[FLEET_UID]: fleet_dashboard(),
    }


def to_json(doc: Mapping[str, Any]) -> str:
    """The committed form: sorted keys, two-space indent, trailing newline (stable diffs)."""
    return json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def write_dashboards(out_dir: Path) -> list[Path]:
    """Write every dashboard's JSON into ``out_dir``; returns the paths written."""
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for name, doc in build_dashboards().items():
        path = out_dir / name
        path.write_text(to_json(doc), encoding="utf-8")
        written.append(path)
    return written
