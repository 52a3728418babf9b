"""A ``VLLMAutoscaler``'s status, from the cycle's decision (pure).

What ``kubectl get`` and ``kubectl describe`` show of a resource: the replicas, the reason,
the driving signal with its value and target, the learned capacity and model load time, the
shadow's recommendation, and conditions modelled on the HPA's:

- ``AbleToScale``: whether the controller can change the replicas now (``False``: the
  target cannot be read (``FailedGetScale``) or written (``FailedUpdateScale``), another
  autoscaler scales it (``Conflict``), it is paused (``Paused``)); ``True`` with
  ``SucceededRescale`` right after a change, the reason of a hold that waits
  (``Stabilized``, ``WaitingForPending``, ...), else ``ReadyForNewScale``.
- ``ScalingActive``: whether the signals decide the replicas (``False``: no usable signal
  (``NoValidSignals``), ``spec.replicas`` 0 (``ScalingDisabled``), no pod selector
  (``SelectorRequired``), a spec the controller refuses (``InvalidSpec``), a target another
  resource or the policy file names (``AmbiguousTarget``), a target that does not exist
  (``TargetNotFound``)); ``True`` with the decision's reason.
- ``ScalingLimited``: whether a bound changed what the signals asked for (``MaxReplicas``,
  ``MinReplicas``, ``StepLimit``, ``LearningFloor``), else ``DesiredWithinRange``.
- ``CapacityLearned`` (the project's own, while the capacity signal is on): whether one
  replica's capacity at the TTFT target is known (``Learned``) or still ``Learning``.

Reasons are the project's reason vocabulary (:mod:`scaler.core.reasons`) in CamelCase, as
Kubernetes writes condition reasons; ``status.reason`` keeps the vocabulary's own word for
the printer column (``scale_up``, ``stabilized``). A status is written only when it
changed (:func:`due`): its replicas, reason or conditions at once, its signal values (which
move every cycle) at most every :data:`VALUES_REFRESH_SECONDS`.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from scaler.config.crd import CAPACITY_STATUS_UNITS
from scaler.config.policy import TargetPolicy
from scaler.core.decide import Decision
from scaler.core.evaluation import SignalEvaluation
from scaler.core.reasons import Limit, Reason
from scaler.core.signals import SignalStatus

__all__ = [
    "REFUSED_REASONS",
    "VALUES_REFRESH_SECONDS",
    "camel_reason",
    "decided_status",
    "due",
    "refused_status",
    "rfc3339",
    "unread_status",
]

Status = dict[str, Any]

#: The fields of a status that move with the load every cycle: written at most this often
#: when nothing else changed (seconds).
VALUES_REFRESH_SECONDS = 60.0
#: Why a resource is not scaled at all (``status.reason``), beside the decisions' reasons.
REFUSED_REASONS = ("invalid_spec", "ambiguous_target", "target_not_found", "target_read_failed")

#: Holds during which the controller could change the replicas but waits.
_WAITING = frozenset(
    {
        Reason.STABILIZED,
        Reason.WAITING_FOR_STARTING,
        Reason.WAITING_FOR_DRAIN,
        Reason.WAITING_FOR_TTFT_WINDOW,
        Reason.OUTSIDE_WRITER,
    }
)
#: Decisions for which no signal decides the replicas.
_INACTIVE = frozenset({Reason.NO_VALID_SIGNALS, Reason.SCALING_DISABLED, Reason.SELECTOR_REQUIRED})
#: The limits that bound the replicas (the stabilization window is a wait, not a bound).
_BOUNDS = (Limit.MAX_REPLICAS, Limit.MIN_REPLICAS, Limit.STEP_LIMIT, Limit.LEARNING_FLOOR)
#: Actions after which the replicas were written.
_WRITTEN = frozenset({"scaled"})


def camel_reason(reason: str) -> str:
    """``waiting_for_pending`` -> ``WaitingForPending`` (a condition's reason)."""
    return "".join(word[:1].upper() + word[1:] for word in reason.split("_"))


def rfc3339(epoch_seconds: float) -> str:
    """A metav1.Time string (``2006-01-02T15:04:05Z``)."""
    return datetime.fromtimestamp(epoch_seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _finite(value: float | None) -> float | None:
    if value is None or not math.isfinite(value):
        return None
    return round(value, 6)


def _signal(e: SignalEvaluation, capacity_unit: str) -> dict[str, Any]:
    unit = e.name.unit
    if e.name == "capacity":  # demand and capacity per replica, in the signal's own unit
        unit = f"{CAPACITY_STATUS_UNITS.get(capacity_unit, capacity_unit)}_per_replica"
    out: dict[str, Any] = {"name": str(e.name), "unit": unit, "status": str(e.status)}
    value = _finite(e.value) if e.status is not SignalStatus.LEARNING else None
    if value is not None and e.valid:
        out["value"] = value
    target = _finite(e.target) if e.status is not SignalStatus.LEARNING else None
    if target is not None:
        out["target"] = target
    if e.desired_replicas is not None:
        out["desiredReplicas"] = e.desired_replicas
    return out


def _condition(kind: str, ok: bool | None, reason: str, message: str) -> dict[str, Any]:
    status = "Unknown" if ok is None else ("True" if ok else "False")
    return {"type": kind, "status": status, "reason": reason, "message": message}


def _able(d: Decision, action: str, error: str) -> dict[str, Any]:
    if error:
        return _condition("AbleToScale", False, "FailedUpdateScale", error)
    if d.reason is Reason.CONFLICT:
        return _condition("AbleToScale", False, "Conflict", d.message)
    if d.reason is Reason.PAUSED:
        return _condition("AbleToScale", False, "Paused", d.message)
    if action in _WRITTEN:
        return _condition(
            "AbleToScale",
            True,
            "SucceededRescale",
            f"the controller set the replicas from {d.current_replicas} to {d.desired_replicas}",
        )
    if d.reason in _WAITING:
        return _condition("AbleToScale", True, camel_reason(d.reason), d.message)
    return _condition(
        "AbleToScale", True, "ReadyForNewScale", "the controller can change the replicas"
    )


def _active(d: Decision) -> dict[str, Any]:
    if d.reason in _INACTIVE:
        return _condition("ScalingActive", False, camel_reason(d.reason), d.message)
    return _condition("ScalingActive", True, camel_reason(d.reason), d.message)


def _limited(t: TargetPolicy, d: Decision) -> dict[str, Any]:
    # as the HPA's: a bound that holds the replicas carried out (a min bound under a
    # stabilization window that keeps more replicas limits nothing)
    held = {
        Limit.MIN_REPLICAS: d.desired_replicas <= t.min_replicas,
        Limit.MAX_REPLICAS: d.desired_replicas >= t.max_replicas,
    }
    bound = next((limit for limit in _BOUNDS if limit in d.limits and held.get(limit, True)), None)
    if bound is None:
        return _condition(
            "ScalingLimited",
            False,
            "DesiredWithinRange",
            "the desired replicas are within the bounds and step limits",
        )
    return _condition(
        "ScalingLimited",
        True,
        camel_reason(bound),
        f"the signals asked for {d.recommended_replicas}; {d.message}",
    )


def _capacity(t: TargetPolicy, d: Decision) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """The capacity estimate and the CapacityLearned condition (None: the signal is off)."""
    if not t.signals.capacity_enabled:
        return None, None
    estimate = d.state.capacity.estimate
    if estimate is None:
        return {"learned": False}, _condition(
            "CapacityLearned",
            False,
            "Learning",
            "no estimate of one replica's capacity yet: it is learned while TTFT is near its "
            "target on a busy fleet (or seeded in signals.capacity)",
        )
    # the number is in the unit of the memory it was learned in (memory in another unit
    # than the policy's is dropped, never read as if it were in the new one)
    unit = CAPACITY_STATUS_UNITS.get(d.state.capacity.unit, d.state.capacity.unit)
    per_replica = _finite(estimate.tokens_per_second)
    view: dict[str, Any] = {"learned": True, "unit": unit, "samples": estimate.samples}
    if per_replica is not None:
        view["perReplica"] = per_replica
    return view, _condition(
        "CapacityLearned",
        True,
        "Learned",
        f"one replica serves {estimate.tokens_per_second:.4g} {unit} at the TTFT target "
        f"({estimate.samples} samples)",
    )


def decided_status(
    t: TargetPolicy,
    d: Decision,
    *,
    generation: int,
    action: str,
    error: str,
    last_scale_time: float | None,
    shadow: Decision | None,
    previous: Mapping[str, Any] | None,
    now: float,
) -> Status:
    """The status of a resource whose target was decided this cycle.

    Args:
        t: the target the resource defines.
        d: the decision carried out (after pause, pin and conflicts).
        generation: the resource's ``metadata.generation`` the decision used.
        action, error: what applying the decision ended in
            (:class:`~scaler.controller.apply.Applied`).
        last_scale_time: when the controller last changed the replicas (epoch seconds).
        shadow: the shadow policy's decision, if the target has one.
        previous: the status as last written or read (for the conditions' transition times).
        now: the cycle's time (epoch seconds).
    """
    driving = next((e for e in d.signals if e.name == d.driving_signal), None)
    conditions = [_able(d, action, error), _active(d), _limited(t, d)]
    capacity, learned = _capacity(t, d)
    if learned is not None:
        conditions.append(learned)
    status: Status = {
        "observedGeneration": generation,
        "currentReplicas": d.current_replicas,
        "desiredReplicas": d.desired_replicas,
        "reason": str(d.reason),
        "message": d.message,
        "signals": [_signal(e, d.state.capacity.unit) for e in d.signals],
    }
    if driving is not None:
        status["drivingSignal"] = _signal(driving, d.state.capacity.unit)
    if last_scale_time is not None:
        status["lastScaleTime"] = rfc3339(last_scale_time)
    if capacity is not None:
        status["capacity"] = capacity
    load = _finite(d.state.load_times.median_seconds)
    if load is not None:
        status["modelLoadSeconds"] = load
    if shadow is not None:
        status["shadow"] = {
            "desiredReplicas": shadow.desired_replicas,
            "reason": str(shadow.reason),
        }
    status["conditions"] = _transitions(conditions, previous, now)
    return status


def refused_status(
    reason: str,
    message: str,
    *,
    generation: int,
    previous: Mapping[str, Any] | None,
    now: float,
) -> Status:
    """The status of a resource the controller does not scale: its spec is refused
    (``invalid_spec``) or its target is another's (``ambiguous_target``). Nothing is
    written to the target; the replicas are left as they are."""
    conditions = [
        _condition("AbleToScale", False, camel_reason(reason), message),
        _condition("ScalingActive", False, camel_reason(reason), message),
    ]
    return {
        "observedGeneration": generation,
        "reason": reason,
        "message": message,
        "conditions": _transitions(conditions, previous, now),
    }


def unread_status(
    not_found: bool,
    message: str,
    *,
    generation: int,
    previous: Mapping[str, Any] | None,
    now: float,
) -> Status:
    """The status of a resource whose target could not be read this cycle (it does not
    exist, or the API failed): nothing is decided or written; the last replicas seen and
    the last scale time are kept."""
    reason = "target_not_found" if not_found else "target_read_failed"
    conditions = [
        _condition("AbleToScale", False, "FailedGetScale", message),
        _condition("ScalingActive", False, camel_reason(reason), message),
    ]
    status: Status = {"observedGeneration": generation, "reason": reason, "message": message}
    for kept in ("currentReplicas", "lastScaleTime"):
        if previous is not None and kept in previous:
            status[kept] = previous[kept]
    status["conditions"] = _transitions(conditions, previous, now)
    return status


def _transitions(
    conditions: list[dict[str, Any]], previous: Mapping[str, Any] | None, now: float
) -> list[dict[str, Any]]:
    """Each condition with its ``lastTransitionTime``: the previous one's while its status
    is unchanged, else ``now``."""
    before = {
        c.get("type"): c
        for c in ((previous or {}).get("conditions") or [])
        if isinstance(c, Mapping)
    }
    out = []
    for c in conditions:
        old = before.get(c["type"])
        since = (
            old.get("lastTransitionTime")
            if old is not None and old.get("status") == c["status"]
            else None
        )
        out.append({**c, "lastTransitionTime": since or rfc3339(now)})
    return out


#: Where the values that move every cycle are, in a status (the model load time moves only
#: when a replica's start is measured: written at once, as the replicas are).
_VALUES = ("signals", "drivingSignal", "capacity", "message")


def _without_values(status: Mapping[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(dict(status))
    for key in _VALUES:
        out.pop(key, None)
    for c in out.get("conditions") or []:
        c.pop("message", None)
    return out


def due(
    new: Mapping[str, Any],
    old: Mapping[str, Any] | None,
    *,
    last_written_at: float | None,
    now: float,
) -> bool:
    """Whether ``new`` is to be written over ``old`` (the status as last written or read):
    at once when anything but the values that move with the load changed (replicas, reason,
    conditions, generation, the last scale time), and for those values at most every
    :data:`VALUES_REFRESH_SECONDS`; never when nothing changed."""
    if old is None:
        return True
    if _without_values(new) != _without_values(old):
        return True
    if dict(new) == dict(old):
        return False
    return last_written_at is None or now - last_written_at >= VALUES_REFRESH_SECONDS
