"""Shared wording of messages: counts in the number their noun takes; what a field expected."""

from __future__ import annotations

from pathlib import Path

import pytest

from scaler.config.policy import PolicyError, load_policy
from scaler.config.wording import counted


@pytest.mark.parametrize(
    ("args", "kwargs", "text"),
    [
        ((1, "step"), {}, "1 step"),
        ((2, "step"), {}, "2 steps"),
        ((0, "replica"), {}, "0 replicas"),
        ((1, "series", "series"), {}, "1 series"),
        ((2, "query", "queries"), {}, "2 queries"),
        ((34560001, "step"), {"thousands": True}, "34,560,001 steps"),
        ((1, "step"), {"thousands": True}, "1 step"),
    ],
)
def test_a_count_takes_its_nouns_number(
    args: tuple[int, str], kwargs: dict[str, bool], text: str
) -> None:
    assert counted(*args, **kwargs) == text


def test_a_whole_float_is_told_to_drop_its_decimal_point(tmp_path: Path) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text(
        "targets:\n"
        "  - workload: {apiVersion: apps/v1, kind: Deployment, name: llm, namespace: default}\n"
        "    min_replicas: 2.0\n"
        "    max_replicas: 2.5\n"
    )
    with pytest.raises(PolicyError) as err:
        load_policy(policy)
    text = str(err.value)
    assert (
        "targets[0].min_replicas: value 2.0: expected a whole number without a decimal point "
        "(2, not 2.0)"
    ) in text
    assert "targets[0].max_replicas: value 2.5: expected a whole number\n" in text + "\n"
