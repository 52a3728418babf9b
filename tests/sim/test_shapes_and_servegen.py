"""The shapes that shift what a replica serves (mix, cache-hit rate, sleep) and the day-scale
replays drawn from ServeGen's per-client rates."""

from __future__ import annotations

from pathlib import Path

import pytest

from scaler.sim.catalog import open_trace, trace_label
from scaler.sim.servegen import DEFAULT_DIR, parse_servegen, servegen_trace, window_rates
from scaler.sim.trace import SleepEvent, per_second_rate


def test_the_mix_shift_turns_prompts_long_for_twenty_minutes() -> None:
    t = open_trace("synthetic:mix-shift")
    assert t.shifts == ((1200.0, "mix"), (2400.0, "mix"))

    def median_prompt(lo: float, hi: float) -> float:
        ps = sorted(r.prompt_tokens for r in t.requests if lo <= r.arrival_seconds < hi)
        return ps[len(ps) // 2]

    assert median_prompt(0, 1200) < 600 and median_prompt(2400, 3600) < 600
    assert 4000 < median_prompt(1200, 2400) < 6000
    # a window cut after the first shift, compressed: the shift moves with the replay clock
    cut = open_trace("synthetic:mix-shift", start_seconds=600.0, compress=2.0)
    assert cut.shifts == ((300.0, "mix"), (900.0, "mix"))


def test_the_cache_shift_states_80_then_10_percent_hits() -> None:
    t = open_trace("synthetic:cache-shift", duration_seconds=1800.0)
    before = [r for r in t.requests if r.arrival_seconds < 1500]
    after = [r for r in t.requests if r.arrival_seconds >= 1500]
    assert all(r.cached_tokens == int(0.8 * r.prompt_tokens) for r in before)
    assert all(r.cached_tokens == int(0.1 * r.prompt_tokens) for r in after)
    assert t.shifts == ((1500.0, "cache-hit rate"),)


def test_the_sleep_shape_puts_two_replicas_to_sleep_for_fifteen_minutes() -> None:
    t = open_trace("synthetic:sleep")
    assert t.sleep_events == (SleepEvent(900.0, 2, 1), SleepEvent(1800.0, 2, 0))
    assert t.shifts == ((900.0, "sleep"), (1800.0, "wake"))
    assert open_trace("synthetic:sleep", duration_seconds=600.0).sleep_events == ()


def test_the_older_shapes_draw_what_they_drew() -> None:
    # The shift fields draw nothing from the shapes' generator: ramp's first arrivals are those
    # of the bundled figures.
    ramp = open_trace("synthetic:ramp")
    again = open_trace("synthetic:ramp")
    assert ramp.requests == again.requests and ramp.shifts == () and ramp.sleep_events == ()
    assert all(r.cached_tokens == 0 for r in ramp.requests)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("servegen:m-small", "expected servegen:<m-small|m-mid|folder>:day<N>"),
        ("servegen:m-small:day0", "days 0-0: expected 1 <= first <= last <= 14"),
        ("servegen:m-small:day5-3", "days 5-3"),
        ("servegen:m-small:day15", "days 15-15"),
    ],
)
def test_a_bad_servegen_name_says_what_is_expected(spec: str, message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("|", r"\|")):
        parse_servegen(spec)


def _client(path: Path, rates: list[float], cv: float = 1.0) -> None:
    path.write_text(
        "".join(
            f"{600 * i},{r},{cv if r else 0},{'Gamma' if r else ''},1,1\n"
            for i, r in enumerate(rates)
        ),
        encoding="utf-8",
    )


def test_a_replay_follows_the_windows_scaled_to_its_peak(tmp_path: Path) -> None:
    folder = tmp_path / "model"
    folder.mkdir()
    windows = 144 * 2  # two days
    day1 = [100.0 if 60 <= i % 144 < 120 else 25.0 for i in range(windows)]
    _client(folder / "chunk-0-trace.csv", day1, cv=3.0)
    _client(folder / "chunk-1-trace.csv", [0.0] * 6 + [50.0] * (windows - 6))
    spec = f"servegen:{folder}:day2"
    assert parse_servegen(spec).folder == folder
    rates = window_rates(parse_servegen(spec))
    assert len(rates) == 144 and max(rates) == 150.0 and min(rates) == 75.0
    trace = servegen_trace(spec, peak_requests_per_second=3.0)
    assert trace.duration_seconds == 86400.0
    hourly = per_second_rate(trace, 3600.0)
    # 3 req/s where both clients are busy (150 x 0.02), 1.5 elsewhere, within the draw's noise
    assert hourly[11] == pytest.approx(3.0, rel=0.06)
    assert hourly[3] == pytest.approx(1.5, rel=0.06)
    assert "x0.02 of its clients' rates, peak 3 req/s, lengths from the Azure conv trace" in (
        trace.description
    )
    assert servegen_trace(spec, peak_requests_per_second=3.0).requests[:50] == trace.requests[:50]
    assert trace_label(spec) == "servegen-model-day2"
    with pytest.raises(FileNotFoundError, match="no ServeGen client files"):
        servegen_trace(f"servegen:{tmp_path}/none:day1")


@pytest.mark.skipif(
    not (DEFAULT_DIR / "m-small").is_dir(), reason=f"no ServeGen data at {DEFAULT_DIR}"
)
def test_m_small_has_its_evening_peak() -> None:
    rates = window_rates(parse_servegen("servegen:m-small:day3"))
    hourly = [sum(rates[h * 6 : h * 6 + 6]) / 6 for h in range(24)]
    assert max(hourly) > 1.8 * min(hourly)
    assert max(range(24), key=lambda h: hourly[h]) >= 18 or hourly[9] > 1.5 * hourly[4]
