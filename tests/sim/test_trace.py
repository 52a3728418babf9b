"""Trace loading: the real Azure traces, slicing, compression, rate scaling, errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from scaler.sim.trace import Trace, TraceRequest, load_trace, per_second_rate

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
