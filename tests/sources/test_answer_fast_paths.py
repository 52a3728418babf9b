"""The fast paths of answer parsing (plain decimal values, no garbage collection while an
answer is decoded) give exactly what the full checks give: same values, faults, messages."""

from __future__ import annotations

import gc
import json
import math
import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scaler.sources.prometheus.answers import (
    BadSeries,
    decode_json,
    parse_sample_value,
    parse_vector,
    paused_gc,
)

# The parser as it was before the fast path: the specification the fast path must meet.
_SPEC_RE = re.compile(r"^[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?$")


def spec_parse(raw: object) -> float:
    if not isinstance(raw, str):
        raise ValueError(f"sample value {raw!r} is not a string")
    if raw == "NaN":
        return math.nan
    if raw in ("+Inf", "Inf"):
        return math.inf
    if raw == "-Inf":
        return -math.inf
    if not _SPEC_RE.match(raw):
        raise ValueError(f"sample value {raw!r} is not a number")
    value = float(raw)
    if not math.isfinite(value):
        raise ValueError(f"sample value {raw!r} overflows a float")
    return value


def outcome(f: Any, raw: object) -> tuple[str, object]:
    try:
        value = f(raw)
    except ValueError as err:
        return "error", str(err)
    return "value", "nan" if math.isnan(value) else (value, math.copysign(1.0, value))


numberish = st.text(alphabet="0123456789+-.eE", max_size=12)
tricky = st.sampled_from(
    [
        "NaN", "+Inf", "-Inf", "Inf", "nan", "inf", "Infinity", "1e400", "-1e400", "-0", "0",
        "1.", ".5", ".", "+", "-", "e5", "1e", "1e+", "1_0", " 1", "1 ", "3\n", "٣", "1.5e-3",
        "0x10", "", "00012", "+.5e-07",
    ]
)  # fmt: skip


@settings(max_examples=2000, deadline=None)  # a loaded machine is no failure
@given(raw=st.one_of(numberish, tricky, st.text(max_size=8), st.floats().map(repr)))
def test_sample_values_read_exactly_as_the_full_parser_reads_them(raw: str) -> None:
    assert outcome(parse_sample_value, raw) == outcome(spec_parse, raw)


def test_non_strings_are_refused_as_before() -> None:
    for raw in (None, 1, 1.5, True, ["1"], {"v": "1"}):
        assert outcome(parse_sample_value, raw) == outcome(spec_parse, raw)


def _body(values: list[object]) -> dict[str, object]:
    return {
        "status": "success",
        "data": {
            "resultType": "vector",
            "result": [
                {"metric": {"pod": f"p{i}", "namespace": "ns"}, "value": [1700000000.5, v]}
                for i, v in enumerate(values)
            ],
        },
    }


def test_a_vector_reads_the_same_on_the_fast_and_the_full_path() -> None:
    values: list[object] = ["3", "0.25", "NaN", "+Inf", "-Inf", "lots", "1e400", "3\n", 7, "-0"]
    series, bad, _ = parse_vector(_body(values))
    expected_ok = {"p0": 3.0, "p1": 0.25, "p9": -0.0}
    got = {labels["pod"]: v for labels, v in series}
    assert {p: got[p] for p in expected_ok} == expected_ok
    assert math.isnan(got["p2"]) and got["p3"] == math.inf and got["p4"] == -math.inf
    assert got["p7"] == 3.0  # the full parser's regex takes a trailing newline: so does this
    assert [(b.labels["pod"], b.detail) for b in bad] == [
        ("p5", "result[5]: sample value 'lots' is not a number"),
        ("p6", "result[6]: sample value '1e400' overflows a float"),
        ("p8", "result[8]: sample value 7 is not a string"),
    ]
    assert all(isinstance(b, BadSeries) for b in bad)


def test_a_malformed_item_is_still_a_fault_of_its_own_series() -> None:
    body = _body(["1"])
    result: list[Any] = body["data"]["result"]  # type: ignore[index]
    result += [
        "not an object",
        {"metric": {"pod": "q", "n": 1}, "value": [1.0, "1"]},
        {"metric": {"pod": "r"}, "value": [True, "1"]},
        {"metric": {"pod": "s"}, "value": [1.0]},
    ]
    series, bad, _ = parse_vector(body)
    assert [labels["pod"] for labels, _ in series] == ["p0"]
    assert [b.detail for b in bad] == [
        "result[1] is not an object",
        "result[2].metric is not a label map",
        'result[3].value is not [timestamp, "value"]',
        'result[4].value is not [timestamp, "value"]',
    ]
    assert bad[1].labels == {"pod": "q"}


@pytest.mark.parametrize(
    "content",
    [
        b'{"status": "success", "data": {"result": [1, 2.5, "x"]}}',
        b'{"v": NaN, "w": Infinity}',  # not JSON, but what the standard decoder reads
        '{"text": "caf\u00e9"}'.encode("utf-16"),  # another encoding
        b'{"a": 1, "a": 2}',
        b'{"big": 123456789012345678901234567890}',
    ],
)
def test_json_is_read_as_the_standard_library_reads_it(content: bytes) -> None:
    assert json.dumps(decode_json(content)) == json.dumps(json.loads(content))


def test_content_that_is_not_json_is_a_value_error() -> None:
    for content in (b"", b"<html>", b'{"a": '):
        with pytest.raises(ValueError):
            decode_json(content)


def test_garbage_collection_resumes_as_it_was() -> None:
    assert gc.isenabled()
    with paused_gc():
        assert not gc.isenabled()
    assert gc.isenabled()
    gc.disable()
    try:
        with paused_gc():
            pass
        assert not gc.isenabled()  # a caller's own pause is kept
    finally:
        gc.enable()
    with pytest.raises(RuntimeError), paused_gc():
        raise RuntimeError("boom")
    assert gc.isenabled()


def test_a_repeated_label_value_is_held_once_in_a_decoded_answer() -> None:
    # 10^4-10^5 series per answer name the same namespaces and counters: one copy of each
    series = [
        {"metric": {"namespace": "team-001", "pod": f"p{i}"}, "value": [1, "2"]} for i in (1, 2)
    ]
    doc = decode_json(json.dumps({"data": {"result": series}}).encode())
    first, second = (s["metric"] for s in doc["data"]["result"])
    assert first == {"namespace": "team-001", "pod": "p1"}
    assert first["namespace"] is second["namespace"]
