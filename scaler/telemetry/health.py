"""What the probes answer: liveness from the control loop's heartbeat, readiness once it ran.

- Liveness (``/healthz``): the control loop completes cycles. It fails when no cycle has
  completed for :attr:`Heartbeat.stale_after_seconds` (three control intervals, at least a
  minute): the loop is stuck (an await that never returns, a deadlock), and a restart helps.
  A cycle completes during a Prometheus or Kubernetes API outage (its reads fail, the
  decisions hold), so an outage never fails liveness: restarting every replica would help
  nobody.
- Readiness (``/readyz``): one cycle has completed since the process started. It does not
  depend on Prometheus either; only our own ``/metrics`` sits behind the Service.

Durations are measured on an injected monotonic clock (seconds), so a wall-clock step
cannot fail the probe.
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["MIN_STALE_SECONDS", "MISSED_INTERVALS", "Heartbeat", "Probe"]

#: A probe's answer: whether it passes, and one line saying why.
Probe = tuple[bool, str]

#: Control intervals without a completed cycle after which the loop counts as stuck.
MISSED_INTERVALS = 3
#: The least time without a completed cycle that counts as stuck (a slow cycle that waits
#: on request timeouts is not stuck).
MIN_STALE_SECONDS = 60.0


class Heartbeat:
    """Records completed control cycles and answers the probes.

    Args:
        interval_seconds: the control interval.
        clock: monotonic seconds.
    """

    def __init__(self, interval_seconds: float, *, clock: Callable[[], float]) -> None:
        self._clock = clock
        self.interval_seconds = interval_seconds
        #: no cycle for this long fails liveness (seconds)
        self.stale_after_seconds = max(MISSED_INTERVALS * interval_seconds, MIN_STALE_SECONDS)
        self._last = clock()  # the start counts as a beat: the first cycle has the same time
        self.cycles = 0

    def beat(self) -> None:
        """A control cycle completed (with decisions or with errors) now."""
        self._last = self._clock()
        self.cycles += 1

    def live(self) -> Probe:
        """``/healthz``: False when no cycle completed for ``stale_after_seconds``."""
        age = self._clock() - self._last
        what = "the last control cycle completed" if self.cycles else "started"
        if age <= self.stale_after_seconds:
            return True, f"ok: {what} {age:.0f} s ago"
        return False, (
            f"no control cycle completed for {age:.0f} s ({what} then); the limit is "
            f"{self.stale_after_seconds:.0f} s ({MISSED_INTERVALS} control intervals of "
            f"{self.interval_seconds:g} s, at least {MIN_STALE_SECONDS:.0f} s)"
        )

    def ready(self) -> Probe:
        """``/readyz``: True once a control cycle has completed."""
        if self.cycles:
            return True, "ok"
        return False, "no control cycle completed yet"
