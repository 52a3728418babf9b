"""Time and duration arguments of the backtest command."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from scaler.backtest.timeparse import TimeParseError, parse_duration, parse_time

NOW = 1_746_100_800.0  # 2025-05-01T12:00:00Z


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("15s", 15), ("1m", 60), ("6h", 21600), ("1h30m", 5400), ("1.5h", 5400), ("2d", 172800),
     ("1w", 604800), ("500ms", 0.5), ("1m30s", 90),
     ("1y", 365 * 86400), ("1y2w", 365 * 86400 + 2 * 604800)],  # y: 365 d, as Prometheus
)  # fmt: skip
def test_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "15", "h", "1x", "-1h", "30m1h", "1h1h", "9" * 400 + "s"])
def test_bad_durations(text: str) -> None:
    with pytest.raises(TimeParseError):
        parse_duration(text)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("now", NOW),
        ("now-6h", NOW - 21600),
        ("now - 90m", NOW - 5400),
        ("now+10m", NOW + 600),
        ("2h", NOW - 7200),
        ("2h ago", NOW - 7200),
        ("1746100800", NOW),
        ("1746100800.5", NOW + 0.5),
        ("2025-05-01T12:00:00Z", NOW),
        ("2025-05-01T14:00:00+02:00", NOW),
        ("2025-05-01T12:00:00.250Z", NOW + 0.25),
    ],
)
def test_times(text: str, expected: float) -> None:
    assert parse_time(text, now=NOW) == pytest.approx(expected)


def test_rfc3339_is_utc_based() -> None:
    assert (
        parse_time("2025-05-01T12:00:00Z", now=0)
        == datetime(2025, 5, 1, 12, tzinfo=UTC).timestamp()
    )


@pytest.mark.parametrize(
    "text", ["2025-05-01T12:00:00", "2025-05-01", "yesterday", "now-", "now-6", "2w1y"]
)
def test_bad_times(text: str) -> None:
    with pytest.raises(TimeParseError):
        parse_time(text, now=NOW)


@pytest.mark.parametrize(
    "text",
    ["99999999999999", "now+999999w", "now-" + "9" * 400 + "w", "9" * 400 + "w", "now-5000w",
     "1969-12-31T23:59:59Z", "now-1000y"],
)  # fmt: skip
def test_times_a_date_cannot_be_written_for_are_refused(text: str) -> None:
    with pytest.raises(TimeParseError, match="expected a time from 1970-01-01T00:00:00Z to "):
        parse_time(text, now=NOW)


def test_years_count_back_as_prometheus_counts_them() -> None:
    assert parse_time("now-1y", now=NOW) == NOW - 365 * 86400
    assert parse_time("2y ago", now=NOW) == NOW - 2 * 365 * 86400
