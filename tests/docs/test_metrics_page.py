"""The "Own metrics" page names every vllm_scaler_ series ScalerMetrics exports (those the
dashboards and alerts read among them), and what the query-success series' label holds."""

from __future__ import annotations

import re
from pathlib import Path

from scaler.sources.promql import QueryKind
from scaler.telemetry.metrics import ScalerMetrics

PAGE = Path(__file__).resolve().parents[2] / "docs" / "metrics.md"
# the sample name prometheus-client adds to a family's name, by type
_SUFFIX = {"counter": "_total", "info": "_info"}


def _own_metrics_section() -> str:
    text = PAGE.read_text(encoding="utf-8")
    found = re.search(r"^# Own metrics\n(.*)", text, flags=re.M | re.S)
    assert found, "docs/metrics.md has no Own metrics heading"
    return found[1]


def test_every_exported_metric_is_documented() -> None:
    """Each name appears in full or in the section's shorthand (`_desired_replicas` after a
    full vllm_scaler_ name)."""
    section = _own_metrics_section()
    missing = []
    for family in ScalerMetrics().registry.collect():
        if not family.name.startswith("vllm_scaler_"):
            continue
        name = family.name + _SUFFIX.get(family.type, "")
        short = "`_" + name.removeprefix("vllm_scaler_")
        if name not in section and short not in section:
            missing.append(name)
    assert missing == []


def test_the_query_success_series_names_its_queries() -> None:
    """Its label is called signal but holds the query kinds, which the section lists."""
    section = " ".join(_own_metrics_section().split())
    start = section.index("`vllm_scaler_last_successful_query_timestamp_seconds{signal}`")
    described = section[start : start + 600]
    for kind in QueryKind:
        assert f"`{kind}`" in described, kind
