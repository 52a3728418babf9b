"""Trace loading: the real Azure traces, slicing, compression, rate scaling, errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from scaler.sim.catalog import open_trace
from scaler.sim.synthetic import SHAPES
from scaler.sim.trace import (
    Trace,
    TraceRequest,
    load_trace,
    per_second_rate,
    rejected_count,
    summary_line,
)

SHARED_TRACES = Path(__file__).resolve().parents[3] / "shared" / "traces"
BUNDLED_TRACES = Path(__file__).resolve().parents[2] / "scaler" / "sim" / "traces"
TRACE_FILES = ("AzureLLMInferenceTrace_code.csv", "AzureLLMInferenceTrace_conv.csv")
# The bundled copies are the shared files byte for byte (pinned below when both exist).
TRACES = SHARED_TRACES if (SHARED_TRACES / TRACE_FILES[0]).is_file() else BUNDLED_TRACES
needs_traces = pytest.mark.skipif(
    not (TRACES / TRACE_FILES[0]).is_file(),
    reason=f"the Azure traces are neither at {SHARED_TRACES} nor at {BUNDLED_TRACES}",
)


@pytest.mark.parametrize("name", TRACE_FILES)
def test_bundled_traces_are_the_shared_files(name: str) -> None:
    assert (BUNDLED_TRACES / name).is_file()
    if not (SHARED_TRACES / name).is_file():
        pytest.skip(f"no shared copy at {SHARED_TRACES} to compare with")
    assert (BUNDLED_TRACES / name).read_bytes() == (SHARED_TRACES / name).read_bytes()


def _write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return p


@pytest.fixture
def small(tmp_path: Path) -> Path:
    # 100 requests, one every 0.5 s, wall-clock with 7 fraction digits; prompt = index.
    lines = ["TIMESTAMP,ContextTokens,GeneratedTokens"]
    for i in range(100):
        secs = 3 + i * 0.5
        lines.append(f"2023-11-16 18:{17 + int(secs // 60):02d}:{secs % 60:010.7f},{i + 1},7")
    return _write(tmp_path, "small.csv", "\n".join(lines) + "\n")


@needs_traces
def test_real_code_trace_with_7_digit_timestamps() -> None:
    t = load_trace(TRACES / "AzureLLMInferenceTrace_code.csv")
    assert len(t) == 8819
    first, second = t.requests[0], t.requests[1]
    # 18:17:03.9799600 -> 18:17:04.0319600: 52 ms apart, to the 7th digit.
    assert first == TraceRequest(0.0, 4808, 10)
    assert second.arrival_seconds == pytest.approx(0.052, abs=1e-7)
    assert second.prompt_tokens == 3180 and second.output_tokens == 8
    assert 56 * 60 < t.duration_seconds < 58 * 60
    mean_prompt = sum(r.prompt_tokens for r in t.requests) / len(t)
    mean_output = sum(r.output_tokens for r in t.requests) / len(t)
    assert mean_prompt == pytest.approx(2048, abs=1)
    assert mean_output == pytest.approx(28, abs=1)
    assert t.mean_rate == pytest.approx(2.6, abs=0.1)
    assert t.description.startswith("AzureLLMInferenceTrace_code.csv minutes 0-")
    assert t.description.endswith(
        f"real time, rate x1: 8819 requests over {t.duration_seconds:.0f} s"
    )


@needs_traces
def test_real_conv_trace_slice_compress_and_rate() -> None:
    path = TRACES / "AzureLLMInferenceTrace_conv.csv"
    full = load_trace(path)
    assert len(full) == 19366
    t = load_trace(path, start_seconds=600, duration_seconds=900, compress=5, rate_scale=0.3)
    in_window = [r for r in full.requests if 600 <= r.arrival_seconds < 1500]
    assert t.duration_seconds == 180.0
    assert all(0 <= r.arrival_seconds < 180 for r in t.requests)
    assert len(t) == pytest.approx(0.3 * len(in_window), rel=0.1)
    assert t.description == (
        f"AzureLLMInferenceTrace_conv.csv minutes 10-25, time compressed 5x, rate x0.3: "
        f"{len(t)} requests over 180 s"
    )


def test_slice_and_compress(small: Path) -> None:
    t = load_trace(small, start_seconds=10, duration_seconds=20, compress=4)
    # Requests at 10.0, 10.5, ..., 29.5 s: 40 of them, prompts 21..60.
    assert len(t) == 40
    assert [r.prompt_tokens for r in t.requests] == list(range(21, 61))
    assert t.requests[0].arrival_seconds == pytest.approx(0.0, abs=1e-9)
    assert t.requests[-1].arrival_seconds == pytest.approx(19.5 / 4)
    assert t.duration_seconds == 5.0
    assert t.description == (
        "small.csv minutes 0.17-0.5, time compressed 4x, rate x1: 40 requests over 5 s"
    )
    assert per_second_rate(t, 1.0) == [8.0] * 5


def test_rate_scale_thinning_is_seeded(small: Path) -> None:
    a = load_trace(small, rate_scale=0.5, seed=1)
    b = load_trace(small, rate_scale=0.5, seed=1)
    c = load_trace(small, rate_scale=0.5, seed=2)
    assert a == b
    assert a.requests != c.requests
    assert 35 <= len(a) <= 65
    assert set(a.requests) <= set(load_trace(small).requests)


def test_rate_scale_above_one_replicates(small: Path) -> None:
    t = load_trace(small, rate_scale=2.5, seed=3)
    assert len(t) == 250
    counts: dict[int, int] = {}
    for r in t.requests:
        counts[r.prompt_tokens] = counts.get(r.prompt_tokens, 0) + 1
    assert set(counts.values()) == {2, 3}
    arrivals = [r.arrival_seconds for r in t.requests]
    assert arrivals == sorted(arrivals)
    assert all(0 <= a <= t.duration_seconds == 49.5 for a in arrivals)
    sliced = load_trace(small, duration_seconds=10, rate_scale=2.5)
    assert len(sliced) == 50 and max(r.arrival_seconds for r in sliced.requests) < 10
    # Copies are jittered (not exact duplicates) and stay within one mean gap of the original.
    assert len(set(arrivals)) > 200
    base = {r.prompt_tokens: r.arrival_seconds for r in load_trace(small).requests}
    assert all(0 <= r.arrival_seconds - base[r.prompt_tokens] <= 0.5 for r in t.requests)
    assert load_trace(small, rate_scale=2.5, seed=3) == t
    assert "rate x2.5: 250 requests" in t.description


def test_plain_seconds_and_jsonl(tmp_path: Path) -> None:
    csv_path = _write(tmp_path, "s.csv", "t,p,o\n5.5,10,1\n6.0,20,2\n7.25,30,3\n")
    t = load_trace(csv_path, time_column="t", prompt_column="p", output_column="o")
    assert [r.arrival_seconds for r in t.requests] == [0.0, 0.5, 1.75]
    lines = [
        '{"TIMESTAMP": "2023-11-16 18:17:03.9799600", "ContextTokens": 5, "GeneratedTokens": 2}',
        "",
        '{"TIMESTAMP": "2023-11-16 18:17:05.0000000", "ContextTokens": 6, "GeneratedTokens": 3}',
    ]
    j = load_trace(_write(tmp_path, "t.jsonl", "\n".join(lines) + "\n"))
    assert j.requests[1] == TraceRequest(pytest.approx(1.02004), 6, 3)  # type: ignore[arg-type]
    assert isinstance(j, Trace) and j.source == "t.jsonl"


def test_errors_name_file_line_column_and_value(tmp_path: Path) -> None:
    p = _write(tmp_path, "bad.csv", "TIMESTAMP,ContextTokens\n1,2\n")
    with pytest.raises(ValueError, match=r"bad.csv: missing column\(s\) \['GeneratedTokens'\]"):
        load_trace(p)
    p = _write(tmp_path, "bad2.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n1,2,3\n2,x7,3\n")
    with pytest.raises(ValueError, match=r"bad2.csv line 3 column 'ContextTokens'.*'x7'"):
        load_trace(p)
    p = _write(tmp_path, "bad3.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\nyesterday,2,3\n")
    with pytest.raises(ValueError, match=r"bad3.csv line 2 column 'TIMESTAMP'.*'yesterday'"):
        load_trace(p)
    p = _write(tmp_path, "bad4.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n1,2,-3\n")
    with pytest.raises(ValueError, match=r"line 2 column 'GeneratedTokens'.*'-3'"):
        load_trace(p)
    p = _write(tmp_path, "b.jsonl", '{"TIMESTAMP": 1, "ContextTokens": 2}\n')
    with pytest.raises(ValueError, match=r"b.jsonl line 1: missing column"):
        load_trace(p)
    with pytest.raises(ValueError, match="compress"):
        load_trace(p, compress=0)


@pytest.mark.parametrize(
    ("text", "error"),
    [
        pytest.param(
            "TIMESTAMP,ContextTokens,GeneratedTokens\n1,2,3\n2,5\n",
            " line 3: missing column(s) ['GeneratedTokens'] on this line (it has 2 of the "
            "header's 3 fields)",
            id="a row short of a column",
        ),
        *(
            pytest.param(
                text,
                ": the file is empty (expected a CSV header with the columns ['TIMESTAMP', "
                "'ContextTokens', 'GeneratedTokens'], then one request per line)",
                id=f"empty {text!r}",
            )
            for text in ("", "\n\n")
        ),
    ],
)
def test_a_missing_column_or_header_says_what_is_missing_where(
    tmp_path: Path, text: str, error: str
) -> None:
    path = _write(tmp_path, "t.csv", text)
    with pytest.raises(ValueError) as err:
        load_trace(path)
    assert str(err.value) == f"{path}{error}"


@pytest.mark.parametrize("name", ["bin.csv", "bin.jsonl"])
def test_a_binary_trace_is_named_as_not_utf8_text(tmp_path: Path, name: str) -> None:
    p = tmp_path / name
    p.write_bytes(b"\xff\xfe\x00\x01PK\x03\x04")
    with pytest.raises(ValueError) as err:
        load_trace(p)
    assert str(err.value).startswith(f"{p}: not UTF-8 text (byte 0xff: invalid start byte)")


def test_a_utf8_bom_is_read_as_excel_writes_it(tmp_path: Path) -> None:
    csv_path = tmp_path / "excel.csv"
    csv_path.write_bytes(
        b"\xef\xbb\xbfTIMESTAMP,ContextTokens,GeneratedTokens\r\n0,5,2\r\n1.5,6,3\r\n"
    )
    jsonl_path = tmp_path / "bom.jsonl"
    jsonl_path.write_bytes(
        b'\xef\xbb\xbf{"TIMESTAMP": 0, "ContextTokens": 5, "GeneratedTokens": 2}\n'
        b'{"TIMESTAMP": 1.5, "ContextTokens": 6, "GeneratedTokens": 3}\n'
    )
    for path in (csv_path, jsonl_path):
        assert list(load_trace(path).requests) == [TraceRequest(0.0, 5, 2), TraceRequest(1.5, 6, 3)]


def _jsonl(tmp_path: Path, stamps: list[float]) -> Path:
    lines = [f'{{"ts": {s!r}, "ContextTokens": 100, "GeneratedTokens": 10}}' for s in stamps]
    return _write(tmp_path, "t.jsonl", "\n".join(lines) + "\n")


@pytest.mark.parametrize(
    ("stamps", "unit", "note", "duration"),
    [
        pytest.param(
            [i * 500.0 for i in range(7201)], "ms", "41.7 days", 3600.0, id="relative-ms-hour"
        ),
        pytest.param(
            [i * 0.5 for i in range(7201)], "s", "60.0 min", 3600.0, id="relative-seconds"
        ),
        pytest.param(
            [1.7e12 + i * 1000.0 for i in range(61)], "ms", "Unix epoch in ms", 60.0, id="epoch-ms"
        ),
        pytest.param(
            [1.7e9 + i for i in range(61)], "s", "Unix epoch in s", 60.0, id="epoch-seconds"
        ),
        pytest.param(
            [1.7e18 + i * 1e9 for i in range(61)], "ns", "Unix epoch in ns", 60.0, id="epoch-ns"
        ),
    ],
)
def test_time_unit_detected_from_the_range(
    tmp_path: Path, stamps: list[float], unit: str, note: str, duration: float
) -> None:
    t = load_trace(_jsonl(tmp_path, stamps), time_column="ts")
    assert (t.time_unit, t.duration_seconds) == (unit, pytest.approx(duration))
    assert t.time_unit_note.startswith("detected: ") and note in t.time_unit_note
    line = summary_line(t, max_model_len=32768, rate_scale="x1")
    assert f"time unit {unit}, detected" in line
    assert line.startswith(f"read t.jsonl: {len(stamps)} requests over ")


def test_time_unit_given_wins(tmp_path: Path) -> None:
    path = _jsonl(tmp_path, [i * 10.0 for i in range(61)])
    assert load_trace(path, time_column="ts").duration_seconds == 600.0
    t = load_trace(path, time_column="ts", time_unit="ms")
    assert (t.duration_seconds, t.time_unit, t.time_unit_note) == (
        pytest.approx(0.6),
        "ms",
        "given",
    )
    with pytest.raises(ValueError, match="time_unit: expected one of auto, s, ms, us, ns"):
        load_trace(path, time_column="ts", time_unit="minutes")


@pytest.mark.parametrize(
    ("stamps", "unit", "message"),
    [
        pytest.param(
            [i * 3600.0 for i in range(300)],
            "s",
            r"implausible trace: its timestamps span 12\.5 days, more than 7\.0 days "
            r"\(timestamps read in s; give --time-unit",
            id="span-in-seconds",
        ),
        pytest.param(
            [i * 1e-5 for i in range(1000)],
            "s",
            r"implausible trace: 1000 requests in 0\.00999 s, a mean of 100,100 requests/s",
            id="rate",
        ),
        pytest.param([5.0, 5.0, 5.0], "auto", "all 3 requests at the same time", id="no-span"),
    ],
)
def test_implausible_traces_are_refused_with_the_reason(
    tmp_path: Path, stamps: list[float], unit: str, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        load_trace(_jsonl(tmp_path, stamps), time_column="ts", time_unit=unit)


def test_summary_counts_rejected_requests(small: Path) -> None:
    t = load_trace(small)
    assert summary_line(t, max_model_len=50, rate_scale="x2 (auto)") == (
        "read small.csv: 100 requests over 49.5 s (file span 49.5 s, wall clock, timestamps "
        "with a date), 57 rejected (prompt + output > 50 tokens), rate scale x2 (auto)"
    )
    assert rejected_count(t, 50) == 57  # prompts 44..100 plus 7 output tokens exceed 50


@pytest.mark.parametrize("name", [pytest.param(n, id=n) for n in ("ramp", "flash", "steady-long")])
def test_synthetic_shapes_are_seeded(name: str) -> None:
    a = open_trace(f"synthetic:{name}", seed=4)
    assert a == open_trace(f"synthetic:{name}", seed=4)
    assert a.requests != open_trace(f"synthetic:{name}", seed=5).requests
    assert a.duration_seconds == SHAPES[name].duration_seconds
    assert a.source == f"synthetic:{name} (seed 4)"


def test_flash_is_ten_times_the_load_within_30_seconds() -> None:
    t = open_trace("synthetic:flash")
    assert t.step_seconds == 600.0
    per_minute = per_second_rate(t, 60.0)
    before = sum(per_minute[:10]) / 10
    during = sum(per_minute[11:20]) / 9
    assert before == pytest.approx(0.5, rel=0.15)
    assert during == pytest.approx(5.0, rel=0.1)
    # 30 s after the step the rate is already x10: the window [630, 660) carries ~150.
    assert sum(1 for r in t.requests if 630 <= r.arrival_seconds < 660) == pytest.approx(
        150, rel=0.25
    )
    sliced = open_trace("synthetic:flash", start_seconds=300, compress=2)
    assert sliced.step_seconds == 150.0


def test_steady_long_has_long_prompts_and_rejected_requests() -> None:
    t = open_trace("synthetic:steady-long")
    accepted = sorted(r.prompt_tokens for r in t.requests if r.prompt_tokens <= 16_000)
    assert accepted[len(accepted) // 2] == pytest.approx(4000, rel=0.1)
    assert rejected_count(t, 32768) / len(t) == pytest.approx(0.08, abs=0.015)
    rate = per_second_rate(t, 300.0)
    assert max(rate) < 1.6 * min(rate)  # steady


def test_open_trace_names_what_it_accepts() -> None:
    with pytest.raises(ValueError, match=r"unknown synthetic shape 'burst'.*synthetic:ramp"):
        open_trace("synthetic:burst")
    with pytest.raises(FileNotFoundError, match=r"nope\.csv: no such file.*'code' or 'conv'"):
        open_trace("nope.csv")


def test_open_trace_says_a_directory_is_no_trace_file(tmp_path: Path) -> None:
    with pytest.raises(IsADirectoryError) as err:
        open_trace(str(tmp_path))
    assert str(err.value) == (
        f"{tmp_path}: is a directory, not a trace file (expected 'code' or 'conv' (the bundled "
        "Azure traces), 'synthetic:ramp', 'synthetic:flash', 'synthetic:steady-long', "
        "'synthetic:mix-shift', 'synthetic:cache-shift', 'synthetic:sleep', "
        "'synthetic:daily-bursts', 'servegen:m-small|m-mid:day<N>[-<M>]' (day-scale replays) "
        "or a CSV/JSONL file)"
    )


def test_one_request_reads_in_the_singular(tmp_path: Path) -> None:
    t = load_trace(_write(tmp_path, "one.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n0,2,3\n"))
    assert summary_line(t, max_model_len=50, rate_scale="x1").startswith(
        "read one.csv: 1 request over "
    )
    assert t.description.endswith(": 1 request over 0 s")
