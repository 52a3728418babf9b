"""Shared wording of messages: counts in the number their noun takes."""

from __future__ import annotations

import pytest

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
