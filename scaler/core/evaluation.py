"""One signal's part in a decision: HPA's proportional rule with the target's tolerance band.

Pure. :func:`evaluate_signal` turns a reading of a per-pod signal (queue depth, KV cache) or
a latency quantile (TTFT) into a :class:`SignalEvaluation`, by its spec's
:class:`~scaler.config.signal_specs.Sizing`; the capacity signal (derived) builds its own
(:func:`scaler.core.sizing.evaluate_capacity`) with the same band (:func:`banded`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from scaler.config.policy import TargetPolicy
from scaler.config.vocabulary import SignalName
from scaler.core.observation import ReplicaCounts
from scaler.core.signals import SignalReading, SignalStatus

__all__ = [
    "EPS",
    "LATENCY_MAX_RATIO",
    "TTFT_NOT_LOAD_STEP",
    "SignalEvaluation",
    "banded",
    "ceil_replicas",
    "evaluate_signal",
]

#: Float noise must not turn 5.0000000001 into 6 replicas or put 1.1 outside a 0.1 band.
EPS = 1e-9
#: The most a latency signal may multiply the serving replicas by in one decision.
LATENCY_MAX_RATIO = 2.0
#: The most a latency signal may add in one decision when its breach is not the fleet's load.
TTFT_NOT_LOAD_STEP = 1


@dataclass(frozen=True, slots=True)
class SignalEvaluation:
    """One signal's part in a decision.

    Attributes:
        name: the signal.
        status: the reading's status (see :class:`~scaler.core.signals.SignalStatus`).
        value: the value compared with the target, in the target's unit: waiting requests per
            replica asked for; KV-cache usage as a 0-1 ratio averaged over replicas asked for;
            TTFT in seconds. ``None`` when the reading is unusable.
        target: the configured target, same unit.
        ratio: ``value / target`` (``None`` when unusable).
        demand_replicas: the proportional result before the tolerance band, e.g.
            ``ceil(S / target)`` (``None`` when unusable).
        desired_replicas: what this signal alone asks for after the band (``None`` when unusable).
        valid: whether the reading may drive a scale-up (``ok``, ``idle`` or ``partial``).
        detail: the source's explanation of a non-``ok`` status.
    """

    name: SignalName
    status: SignalStatus
    value: float | None
    target: float
    ratio: float | None
    demand_replicas: int | None
    desired_replicas: int | None
    valid: bool
    detail: str = ""


def ceil_replicas(x: float) -> int:
    """``ceil(x)`` that float noise cannot push up a replica (5.0000000001 is 5)."""
    return math.ceil(x - EPS)


def evaluate_signal(
    policy: TargetPolicy,
    reading: SignalReading,
    counts: ReplicaCounts,
    *,
    settling: bool = False,
    not_load: bool = False,
) -> SignalEvaluation:
    """Apply HPA's proportional rule with the target's tolerance band to one reading, as
    the signal's :class:`~scaler.config.signal_specs.Sizing` says (per pod or latency).

    ``settling``: replicas were starting less than two rate windows ago, so a latency
    quantile may still reflect the queue from before they served; a latency signal may then
    ask for no more than the current replicas, as while replicas are starting.

    ``not_load``: the capacity signal sees the fleet neither loaded nor busy
    (:func:`scaler.core.guards.not_load`), so a breach of a latency signal whose spec says
    so (:attr:`~scaler.config.signal_specs.SignalSpec.not_load`: TTFT) is not the load's and
    more replicas would not fix it: it asks for at most :data:`TTFT_NOT_LOAD_STEP` replica more
    than the current ones; its ``demand_replicas`` still shows its proportional ask.

    Returns an evaluation whose ``desired_replicas`` is ``None`` when the reading is unusable.
    Computation is in floating point, so huge values clamp later instead of wrapping.
    """
    target = policy.signals.target_of(reading.name)
    valid = reading.status.usable_for_scale_up
    raw = reading.value
    if not valid or raw is None or not math.isfinite(raw) or raw < 0:
        return _asks_nothing(reading, target)
    current = counts.current
    if reading.name.per_pod:
        base = max(current, 1)
        value = raw / base
        ratio = value / target
        proposed = ceil_replicas(raw / target)
    else:
        value = raw
        ratio = 0.0 if reading.status is SignalStatus.IDLE else raw / target
        # Latency is not proportional to load (it grows without bound near saturation), so
        # one decision may at most double the serving replicas on it (AIBrix APA's 2x step).
        step = min(ratio, LATENCY_MAX_RATIO)
        if reading.status is SignalStatus.SATURATED:
            if not ratio > 1 + policy.tolerance.scale_up + EPS:
                # A lower bound at or below the band says nothing about the true value: the
                # signal asks for nothing (and, not fully valid, blocks a scale-down).
                return _asks_nothing(reading, target, value=value, ratio=ratio)
            step = LATENCY_MAX_RATIO  # the true ratio is larger, by how much is unknown
        proposed = ceil_replicas(step * max(counts.serving, 1))
        if counts.starting > 0 or counts.unschedulable > 0 or settling:
            # Latency cannot improve before the starting replicas (or those still waiting for
            # a node) serve, nor read as improved until its rate window has passed since they
            # did: it may not ask for capacity beyond what is already asked for (no cascade
            # on a lagging signal).
            proposed = min(proposed, current)
        elif not_load and reading.name.spec.not_load:
            # a breach the load does not explain: the smallest step up, not the doubling
            desired = banded(policy, ratio, min(proposed, current + TTFT_NOT_LOAD_STEP), current)
            return _evaluation(reading, target, value, ratio, (proposed, desired))
    desired = banded(policy, ratio, proposed, current)
    return _evaluation(reading, target, value, ratio, (proposed, desired))


def _asks_nothing(
    reading: SignalReading,
    target: float,
    *,
    value: float | None = None,
    ratio: float | None = None,
) -> SignalEvaluation:
    """An evaluation that asks for no replicas: an unusable reading (no value), or a lower
    bound at or below its band (its value and ratio shown, still valid for scale-up)."""
    return _evaluation(reading, target, value, ratio, None)


def _evaluation(
    reading: SignalReading,
    target: float,
    value: float | None,
    ratio: float | None,
    asks: tuple[int, int] | None,
) -> SignalEvaluation:
    """``asks``: the demand and the desired replicas, None when the signal asks for none."""
    return SignalEvaluation(
        name=reading.name,
        status=reading.status,
        value=value,
        target=target,
        ratio=ratio,
        demand_replicas=asks[0] if asks else None,
        desired_replicas=asks[1] if asks else None,
        valid=value is not None,
        detail=reading.detail,
    )


def banded(policy: TargetPolicy, ratio: float, proposed: int, current: int) -> int:
    """What a signal asks for after the tolerance band: ``current`` inside
    ``[1 - scale_down, 1 + scale_up]``, else ``proposed``, never against the ratio's direction
    (HPA does the same)."""
    tol = policy.tolerance
    if ratio > 1 + tol.scale_up + EPS:
        return max(proposed, current)
    if ratio < 1 - tol.scale_down - EPS:
        return min(proposed, current)
    return current
