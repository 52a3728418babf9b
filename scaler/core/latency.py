"""Every latency SLO of a target against its reading this cycle (pure): the seam through which
a sizing rule takes all of them, not TTFT alone.

Each enabled latency signal of the registry (TTFT, ITL; :attr:`scaler.config.vocabulary.
SignalName.latency`) is a constraint of the fleet's size: the decision keeps the replica count
that holds every one within its target (each signal's own proportional ask, the largest
wins). :func:`latency_checks` lists them with their readings, and :func:`within_targets` says
whether a cycle met them all, for a rule that learns from the cycles that did (a replica's
capacity at the SLO: :mod:`scaler.core.capacity` reads TTFT's alone today).
"""

from __future__ import annotations

from dataclasses import dataclass

from scaler.config.policy import TargetPolicy
from scaler.config.vocabulary import SignalName
from scaler.core.evaluation import EPS
from scaler.core.observation import Observation
from scaler.core.signals import SignalStatus

__all__ = ["LatencyCheck", "latency_checks", "within_targets"]


@dataclass(frozen=True, slots=True)
class LatencyCheck:
    """One latency signal's reading against its target.

    Attributes:
        name: the signal (``ttft_p95``, ``itl_p95``).
        status: its reading's status (``empty`` when the source gave none).
        value: the quantile, seconds (a lower bound for ``saturated``); None when unusable.
        target: the policy's target, seconds.
    """

    name: SignalName
    status: SignalStatus
    value: float | None
    target: float

    @property
    def ratio(self) -> float | None:
        """``value / target``; 0 for an idle window; None when the value is unusable."""
        if self.status is SignalStatus.IDLE:
            return 0.0
        return None if self.value is None else self.value / self.target

    def within(self, tolerance: float = 0.0) -> bool | None:
        """The reading is at most the target (``tolerance``: the band above it, a 0-1 ratio);
        None when it says nothing: unusable, or a lower bound at or below the target."""
        ratio = self.ratio
        if ratio is None or not self.status.usable_for_scale_up:
            return None
        above = ratio > 1 + tolerance + EPS
        if self.status is SignalStatus.SATURATED and not above:
            return None  # at least this much, maybe more
        return not above


def latency_checks(policy: TargetPolicy, observation: Observation) -> tuple[LatencyCheck, ...]:
    """Each enabled latency signal's reading against its target, in the registry's order."""
    out: list[LatencyCheck] = []
    for name in policy.signals.enabled():
        if not name.latency:
            continue
        reading = observation.signals.get(name)
        status = reading.status if reading is not None else SignalStatus.EMPTY
        value = reading.value if reading is not None and status.usable_for_scale_up else None
        out.append(LatencyCheck(name, status, value, policy.signals.target_of(name)))
    return tuple(out)


def within_targets(checks: tuple[LatencyCheck, ...], tolerance: float = 0.0) -> bool | None:
    """Every latency SLO met (True), one broken (False: the first broken one decides, even if
    another says nothing), or not known (None: no check, or one says nothing and none broke)."""
    results = [c.within(tolerance) for c in checks]
    if any(r is False for r in results):
        return False
    if not results or any(r is None for r in results):
        return None
    return True
