"""Per-target decision state carried from one cycle to the next.

The state is an immutable value: :func:`scaler.core.decide.decide` returns a new one, and
:func:`record_write` records a successful write to the scale subresource. All times are
seconds on the controller's clock (any monotonic-enough float; the tests use a fake clock).
"""

from __future__ import annotations

from dataclasses import dataclass, replace


@dataclass(frozen=True, slots=True)
class Recommendation:
    """A replica count the signals asked for at a time (after the guards, before stabilization)."""

    at: float
    replicas: int


@dataclass(frozen=True, slots=True)
class ScaleEvent:
    """A write of ``spec.replicas`` that this controller made."""

    at: float
    from_replicas: int
    to_replicas: int


@dataclass(frozen=True, slots=True)
class TargetState:
    """What one target's decisions remember.

    Attributes:
        recommendations: timestamped recommendations within the longest stabilization window
            (HPA keeps the same list); seeded with the current replicas on start so that a
            restarted controller never scales down at once.
        scale_events: our own writes within the longest step-limit period.
        last_written_replicas: the value we last wrote, to notice writes by someone else.
        last_rewrite_at: when we last overwrote someone else's value (once per cooldown).
    """

    recommendations: tuple[Recommendation, ...] = ()
    scale_events: tuple[ScaleEvent, ...] = ()
    last_written_replicas: int | None = None
    last_rewrite_at: float | None = None

    @classmethod
    def seeded(cls, current_replicas: int, now: float) -> TargetState:
        """A fresh state whose history holds the current replicas at ``now``."""
        return cls(recommendations=(Recommendation(now, current_replicas),))


def record_write(
    state: TargetState, *, from_replicas: int, to_replicas: int, now: float
) -> TargetState:
    """Return ``state`` after a successful write of ``to_replicas`` to the scale subresource."""
    return replace(
        state,
        scale_events=(*state.scale_events, ScaleEvent(now, from_replicas, to_replicas)),
        last_written_replicas=to_replicas,
    )
