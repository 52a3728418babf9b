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
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Callable
from dataclasses import dataclass

from scaler.sim.trace import Trace, build_trace

__all__ = ["SHAPES", "LengthMix", "Shape", "synthetic_rows", "synthetic_trace"]


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
    """

    name: str
    duration_seconds: float
    rate_points: tuple[tuple[float, float], ...]
    prompt: LengthMix
    output: LengthMix
    step_seconds: float | None = None
    oversize_share: float = 0.0
    oversize: LengthMix | None = None


_CHAT_PROMPT = LengthMix(1000, 0.9, 16, 24_000)
_CHAT_OUTPUT = LengthMix(180, 0.9, 1, 2048)

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
            long = shape.oversize is not None and rng.random() < shape.oversize_share
            prompt = (shape.oversize if long and shape.oversize else shape.prompt).draw(rng)
            rows.append((t, prompt, shape.output.draw(rng)))


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
    return build_trace(
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
