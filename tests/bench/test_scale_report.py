"""The scale benchmark's report says when cycles sent a dependent query again."""

from __future__ import annotations

from scaler.bench.scale import format_result
from scaler.bench.scale.report import QueryFigures, ScaleFigures, ScaleResult


def _result(resending: int, most: int) -> str:
    query = QueryFigures("ttft_buckets", 23, 0.01, 0.001, 0.0005, 23, 0.01)
    figures = ScaleFigures(
        "vllm-scaler, recording rules", 6, 5, 0.8, 0.9, 0.9, 0.0, 0,
        queries=(query,), queries_max_per_cycle=most, resending_cycles=resending,
    )  # fmt: skip
    return format_result(ScaleResult(1, 8, 1, 224, 15.0, 100.0, 900.0, (figures,), 80.0))


def test_cycles_that_sent_a_dependent_query_again_are_counted() -> None:
    text = _result(1, 8)
    assert (
        "1 of 5 cycles sent a dependent query again, planned otherwise than the cycle "
        "before: up to 8 queries"
    ) in text
    assert "<= 6 queries/cycle: met" in text  # the steady state's count
    assert "sent a dependent query again" not in _result(0, 6)
