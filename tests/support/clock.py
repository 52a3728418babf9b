"""A hand-advanced clock: the only "now" of the code under test."""

from __future__ import annotations


class FakeClock:
    """Seconds since the epoch, moved only by the test (``advance`` or assigning ``now``)."""

    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds
