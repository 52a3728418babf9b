"""Seeded synthetic request traces: shapes the two bundled traces do not have.

Arrivals are a non-homogeneous Poisson process with the shape's rate ``rate(t)`` (requests/s),
drawn by thinning; prompt and output lengths are log-normal (median, sigma of the log),
rounded and clipped. Everything is drawn from ``random.Random(f"{shape}:{seed}")``, so a shape
and a seed always give the same trace. The rate scale of ``bench`` and ``sim`` then applies as
to a file (:func:`~scaler.sim.trace.build_trace`).

Shapes (rates before the rate scale; lengths in tokens):

- ``ramp`` (60 min): 0.5 requests/s for 5 minutes, rising linearly to 5 requests/s at minute
  35, held to minute 45, falling linearly back to 0.5 at minute 55, then held. Conversational
  lengths: prompt median 1000 (sigma 0.9, 16-24,000), output median 180 (sigma 0.9, 1-2048).
- ``flash`` (30 min): 0.5 requests/s; at minute 10 the load rises to 5 requests/s (x10)
  within 30 s, holds until minute 20, falls back to 0.5 within 30 s. Conversational lengths.
  The step's start (600 s) is :attr:`~scaler.sim.trace.Trace.step_seconds`, from which
  ``bench`` measures each policy's reaction time.
- ``steady-long`` (45 min): a steady 1 request/s with long prompts: median 4000 (sigma 0.6,
  512-16,000), output median 250 (sigma 0.7, 1-2048); besides, 8% of the requests carry a
  prompt beyond a 32,768-token context (median 45,000, sigma 0.2, 33,000-100,000), which vLLM
  rejects (public traces with long conversations have 7-16% of such requests).

Shapes that shift what a replica can serve, for measuring a learned capacity against the
replica model's truth (each change is in :attr:`~scaler.sim.trace.Trace.shifts`):

- ``mix-shift`` (60 min): a steady 2 requests/s whose prompts turn long at minute 20 and short
  again at minute 40: short prompts median 400 (sigma 0.7, 16-4,000), outputs median 200
  (sigma 0.8, 1-1,024); long prompts median 5,000 (sigma 0.4, 1,000-16,000), outputs median 150
  (sigma 0.7, 1-1,024). The work a request brings grows about tenfold, and with it the
  replicas needed.
- ``cache-shift`` (60 min): a steady 8 requests/s of prompts median 2,000 (sigma 0.4,
  256-12,000) with short answers (median 24, sigma 0.6, 1-512), a retrieval or agent workload
  whose prompts share a long prefix: a stated prefix-cache hit rate of 80% of each prompt until
  minute 25, then 10% (the shared prefix changed, or the caches went cold). Prefill is most of
  such a request's work: one replica serves about 2.2 times as many at 80% as at 10% (where
  long contexts and long answers hold the KV cache, the hit rate matters less: 1.2 times for
  3,000-token prompts with 150-token answers).
- ``sleep`` (45 min): a steady 3 requests/s of conversational lengths; at minute 15 two Ready
  replicas are put to sleep (level 1) and at minute 30 woken, as a model actuator or an
  operator does.

A multi-day shape with a recurring load, for the seasonal forecast (:mod:`scaler.core.seasonal`):

- ``daily-bursts`` (2 days): a daily curve, 1 request/s at 04:00 rising to 3 requests/s at
  16:00 and back (linear), with a burst at 09:00, 13:00 and 18:00 every day: the load rises to
  10 requests/s within 10 s, holds for 80 s and falls back within 10 s, 100 s in all, shorter
  than a model load (a batch job, a scheduled report run, the start of a working day).
  Conversational lengths. :func:`daily_bursts_rate` gives its rate at any time, before the
  replay too (the shape repeats every day), as a fleet's history would hold it.
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Callable
from dataclasses import dataclass, replace

from scaler.sim.trace import SleepEvent, Trace, build_trace, with_prefix_hits

__all__ = [
    "SHAPES",
    "LengthMix",
    "Shape",
    "daily_bursts_points",
    "daily_bursts_rate",
    "synthetic_rows",
    "synthetic_trace",
]


@dataclass(frozen=True, slots=True)
class LengthMix:
    """Log-normal token lengths, rounded and clipped to ``[low, high]``.

    Attributes:
        median: median length, tokens.
        sigma: standard deviation of the log.
        low, high: clip bounds, tokens.
    """

    median: float
    sigma: float
    low: int
    high: int

    def draw(self, rng: random.Random) -> int:
        """One length, tokens."""
        value = round(rng.lognormvariate(math.log(self.median), self.sigma))
        return max(self.low, min(self.high, value))


def _piecewise(points: tuple[tuple[float, float], ...]) -> Callable[[float], float]:
    """Linear interpolation through ``(seconds, rate)`` points, flat outside them."""

    def rate(t: float) -> float:
        if t <= points[0][0]:
            return points[0][1]
        for (t0, r0), (t1, r1) in itertools.pairwise(points):
            if t <= t1:
                return r0 + (r1 - r0) * (t - t0) / (t1 - t0)
        return points[-1][1]

    return rate


@dataclass(frozen=True, slots=True)
class Shape:
    """A synthetic trace's shape.

    Attributes:
        name: the name after ``synthetic:``.
        duration_seconds: length, seconds.
        rate_points: ``(seconds, requests/s)`` corners of the arrival rate, linear between.
        prompt, output: the length mixes.
        step_seconds: start of a load step (for reaction times), or None.
        oversize_share: share of requests whose prompt is drawn from ``oversize`` instead.
        oversize: prompts beyond the context (rejected requests), or None.
        mix_points: ``(seconds, prompt, output)``: from each point on, the lengths are drawn
            from these mixes instead (a mix shift).
        cache_hit_points: ``(seconds, share)``: the stated prefix-cache hit rate from each
            point on (none: no stated hits).
        sleep_events: replicas put to sleep and woken (seconds on the shape's clock).
    """

    name: str
    duration_seconds: float
    rate_points: tuple[tuple[float, float], ...]
    prompt: LengthMix
    output: LengthMix
    step_seconds: float | None = None
    oversize_share: float = 0.0
    oversize: LengthMix | None = None
    mix_points: tuple[tuple[float, LengthMix, LengthMix], ...] = ()
    cache_hit_points: tuple[tuple[float, float], ...] = ()
    sleep_events: tuple[SleepEvent, ...] = ()

    def mix_at(self, t: float) -> tuple[LengthMix, LengthMix]:
        """The prompt and output mixes at ``t`` seconds."""
        prompt, output = self.prompt, self.output
        for at, p, o in self.mix_points:
            if at <= t:
                prompt, output = p, o
        return prompt, output

    def shifts(self) -> tuple[tuple[float, str], ...]:
        """When what a replica serves changes, seconds on the shape's clock, and what."""
        out = [(at, "mix") for at, _, _ in self.mix_points]
        out += [(at, "cache-hit rate") for at, _ in self.cache_hit_points if at > 0]
        out += [(e.seconds, "wake" if e.level == 0 else "sleep") for e in self.sleep_events]
        return tuple(sorted(out))


_CHAT_PROMPT = LengthMix(1000, 0.9, 16, 24_000)
_CHAT_OUTPUT = LengthMix(180, 0.9, 1, 2048)
_SHORT_PROMPT = LengthMix(400, 0.7, 16, 4000)
_SHORT_OUTPUT = LengthMix(200, 0.8, 1, 1024)

_DAY = 86400.0
#: ``daily-bursts``: the hours of the day its bursts start, and its burst's rate, requests/s.
_BURST_HOURS = (9.0, 13.0, 18.0)
_BURST_RATE = 10.0


def _daily_curve(seconds_of_day: float) -> float:
    """``daily-bursts``' curve without bursts: 1 request/s at 04:00, 3 at 16:00, linear."""
    hour = seconds_of_day / 3600.0
    return 1.0 + 2.0 * (1.0 - abs(((hour - 4.0) % 24.0) - 12.0) / 12.0)


def daily_bursts_points(days: int) -> tuple[tuple[float, float], ...]:
    """``daily-bursts``' rate points over ``days`` days (hourly along the curve, four around
    each burst)."""
    points: list[tuple[float, float]] = []
    for d in range(days):
        day = d * _DAY
        marks = [(day + h * 3600.0, _daily_curve(h * 3600.0)) for h in range(24)]
        for b in _BURST_HOURS:
            at = day + b * 3600.0
            base = _daily_curve(b * 3600.0)
            marks += [(at, base), (at + 10.0, _BURST_RATE), (at + 90.0, _BURST_RATE)]
            marks += [(at + 100.0, _daily_curve(b * 3600.0 + 100.0))]
        points += sorted(marks)
    points.append((days * _DAY, _daily_curve(0.0)))
    return tuple(points)


_BURSTS_ONE_DAY = _piecewise(daily_bursts_points(1))


def daily_bursts_rate(t: float) -> float:
    """``daily-bursts``' rate at ``t`` seconds on the shape's clock (any day, negative ``t``
    included: the days before the replay), requests/s."""
    return _BURSTS_ONE_DAY(t % _DAY)


#: The shapes by name (parameters in the module docstring).
SHAPES: dict[str, Shape] = {
    "ramp": Shape(
        "ramp",
        3600.0,
        ((300.0, 0.5), (2100.0, 5.0), (2700.0, 5.0), (3300.0, 0.5)),
        _CHAT_PROMPT,
        _CHAT_OUTPUT,
    ),
    "flash": Shape(
        "flash",
        1800.0,
        ((600.0, 0.5), (630.0, 5.0), (1200.0, 5.0), (1230.0, 0.5)),
        _CHAT_PROMPT,
        _CHAT_OUTPUT,
        step_seconds=600.0,
    ),
    "steady-long": Shape(
        "steady-long",
        2700.0,
        ((0.0, 1.0),),
        LengthMix(4000, 0.6, 512, 16_000),
        LengthMix(250, 0.7, 1, 2048),
        oversize_share=0.08,
        oversize=LengthMix(45_000, 0.2, 33_000, 100_000),
    ),
    "mix-shift": Shape(
        "mix-shift",
        3600.0,
        ((0.0, 2.0),),
        _SHORT_PROMPT,
        _SHORT_OUTPUT,
        mix_points=(
            (1200.0, LengthMix(5000, 0.4, 1000, 16_000), LengthMix(150, 0.7, 1, 1024)),
            (2400.0, _SHORT_PROMPT, _SHORT_OUTPUT),
        ),
    ),
    "cache-shift": Shape(
        "cache-shift",
        3600.0,
        ((0.0, 8.0),),
        LengthMix(2000, 0.4, 256, 12_000),
        LengthMix(24, 0.6, 1, 512),
        cache_hit_points=((0.0, 0.8), (1500.0, 0.1)),
    ),
    "sleep": Shape(
        "sleep",
        2700.0,
        ((0.0, 3.0),),
        _CHAT_PROMPT,
        _CHAT_OUTPUT,
        sleep_events=(SleepEvent(900.0, 2, 1), SleepEvent(1800.0, 2, 0)),
    ),
    "daily-bursts": Shape(
        "daily-bursts",
        2 * _DAY,
        daily_bursts_points(2),
        _CHAT_PROMPT,
        _CHAT_OUTPUT,
    ),
}


def synthetic_rows(shape: Shape, seed: int = 0) -> list[tuple[float, int, int]]:
    """``(arrival seconds, prompt tokens, output tokens)`` of one draw of ``shape``, sorted."""
    rng = random.Random(f"{shape.name}:{seed}")
    rate = _piecewise(shape.rate_points)
    peak = max(r for _, r in shape.rate_points)
    rows: list[tuple[float, int, int]] = []
    t = 0.0
    while True:
        t += rng.expovariate(peak)
        if t >= shape.duration_seconds:
            return rows
        if rng.random() * peak <= rate(t):
            prompts, outputs = shape.mix_at(t)
            long = shape.oversize is not None and rng.random() < shape.oversize_share
            prompt = (shape.oversize if long and shape.oversize else prompts).draw(rng)
            rows.append((t, prompt, outputs.draw(rng)))


def synthetic_trace(
    name: str,
    *,
    seed: int = 0,
    start_seconds: float = 0.0,
    duration_seconds: float | None = None,
    compress: float = 1.0,
    rate_scale: float = 1.0,
) -> Trace:
    """The shape ``name`` drawn with ``seed``, windowed and scaled as a file would be.

    Raises:
        ValueError: an unknown shape (naming the known ones) or invalid window arguments.
    """
    shape = SHAPES.get(name)
    if shape is None:
        known = ", ".join(f"synthetic:{n}" for n in SHAPES)
        raise ValueError(f"unknown synthetic shape {name!r} (expected one of {known})")
    trace = build_trace(
        synthetic_rows(shape, seed),
        name=f"synthetic:{name} (seed {seed})",
        start_seconds=start_seconds,
        duration_seconds=duration_seconds,
        compress=compress,
        rate_scale=rate_scale,
        seed=seed,
        time_unit="s",
        time_unit_note="synthetic",
        span_seconds=shape.duration_seconds,
        step_seconds=shape.step_seconds,
    )
    if shape.cache_hit_points:
        trace = with_prefix_hits(
            trace, shape.cache_hit_points, start_seconds=start_seconds, compress=compress
        )

    def replayed(t: float) -> float:
        return (t - start_seconds) / compress

    inside = [
        (replayed(t), what)
        for t, what in shape.shifts()
        if 0 < replayed(t) < trace.duration_seconds
    ]
    sleeps = [
        replace(e, seconds=replayed(e.seconds))
        for e in shape.sleep_events
        if 0 <= replayed(e.seconds) < trace.duration_seconds
    ]
    return replace(trace, shifts=tuple(inside), sleep_events=tuple(sleeps))
