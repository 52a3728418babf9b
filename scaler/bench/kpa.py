"""A Knative / AIBrix KPA-style autoscaler on concurrency per replica.

Source: Knative Serving ``pkg/autoscaler/scaling/autoscaler.go`` (``Scale``), with the windows
AIBrix's KPA uses (stable 180 s, panic 60 s, panic threshold 2x; Knative's defaults are
60 s / 6 s / 2x). Pure: samples and times (seconds) are passed in.

Per decision:

- observed stable / panic concurrency = the mean of the per-second total in-flight requests
  (waiting + running over ready replicas) over the stable / panic window;
- ``desired_stable = ceil(stable / target)``, ``desired_panic = ceil(panic / target)``, both
  clamped to ``[floor(ready / max_scale_down_rate), ceil(ready x max_scale_up_rate)]``;
- panic starts when ``desired_panic / ready >= panic_threshold`` and ends once a whole stable
  window has passed without that condition; while panicking the count never goes down (it is
  the highest of both windows' recommendations seen in this panic).
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field

__all__ = ["Kpa", "KpaConfig"]


@dataclass(frozen=True, slots=True)
class KpaConfig:
    """KPA parameters.

    Attributes:
        target_concurrency: in-flight requests per replica the KPA aims for.
        stable_window_seconds: averaging window for normal operation, seconds.
        panic_window_seconds: short averaging window, seconds.
        panic_threshold: panic when the panic window asks for this multiple of ready replicas.
        max_scale_up_rate: at most this multiple of ready replicas per decision (Knative 1000).
        max_scale_down_rate: at least ready / this per decision (Knative 2).
        min_replicas, max_replicas: the range.
    """

    target_concurrency: float
    stable_window_seconds: float = 180.0
    panic_window_seconds: float = 60.0
    panic_threshold: float = 2.0
    max_scale_up_rate: float = 1000.0
    max_scale_down_rate: float = 2.0
    min_replicas: int = 1
    max_replicas: int = 32


@dataclass(slots=True)
class Kpa:
    """The KPA's state: concurrency samples and the panic episode."""

    config: KpaConfig
    samples: deque[tuple[float, float]] = field(default_factory=deque)
    panic_since: float | None = None
    max_panic_pods: int = 0

    def record(self, now: float, concurrency: float) -> None:
        """Record the fleet's total in-flight requests at ``now`` (seconds)."""
        self.samples.append((now, concurrency))
        horizon = now - max(self.config.stable_window_seconds, self.config.panic_window_seconds)
        while self.samples and self.samples[0][0] <= horizon:
            self.samples.popleft()

    def _average(self, now: float, window: float) -> float:
        values = [c for t, c in self.samples if t > now - window]
        return sum(values) / len(values) if values else 0.0

    @property
    def panicking(self) -> bool:
        """True while in panic mode."""
        return self.panic_since is not None

    def decide(self, now: float, ready: int) -> int:
        """The desired replicas at ``now`` given ``ready`` serving replicas."""
        c = self.config
        ready = max(ready, 1)
        stable = self._average(now, c.stable_window_seconds)
        panic = self._average(now, c.panic_window_seconds)
        dspc = math.ceil(stable / c.target_concurrency)
        dppc = math.ceil(panic / c.target_concurrency)
        up_cap = math.ceil(c.max_scale_up_rate * ready)
        down_floor = math.floor(ready / c.max_scale_down_rate)
        desired_stable = int(min(max(dspc, down_floor), up_cap))
        desired_panic = int(min(max(dppc, down_floor), up_cap))
        over = dppc / ready >= c.panic_threshold
        if over:
            self.panic_since = now  # start, or extend, the panic
        elif self.panic_since is not None and self.panic_since + c.stable_window_seconds < now:
            self.panic_since = None
        if self.panic_since is not None:
            # Provision for the larger window, and never go down while panicking.
            self.max_panic_pods = max(self.max_panic_pods, desired_stable, desired_panic)
            desired = self.max_panic_pods
        else:
            self.max_panic_pods = 0
            desired = desired_stable
        return max(c.min_replicas, min(c.max_replicas, desired))
