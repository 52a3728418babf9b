"""Which of a target's Events are due this cycle: each says something once, then again only
when it changes or after a while (a refusal or a stuck replica lasts for hours; an Event a
cycle would bury every other one of the namespace).

What the Events say is made elsewhere (:func:`~scaler.controller.overrides.refusal_events`,
:func:`~scaler.controller.plan.stuck_event`); this room only remembers, in the target's
:class:`~scaler.controller.records.TargetRecord`, what was sent when.
"""

from __future__ import annotations

import structlog

from scaler.config.policy import TargetPolicy
from scaler.controller.overrides import REFUSALS, Control, refusal_events
from scaler.controller.plan import Event, stuck_event, stuck_pods
from scaler.controller.records import TargetRecord
from scaler.core.decide import Decision
from scaler.core.observation import WorkloadSnapshot

__all__ = ["refusals_due", "stuck_due"]

log = structlog.get_logger("vllm_scaler")


def refusals_due(
    record: TargetRecord,
    t: TargetPolicy,
    control: Control,
    core: Decision,
    now: float,
    *,
    repeat_seconds: float,
) -> list[Event]:
    """The refusal Events due: each kind at most every ``repeat_seconds`` while unchanged,
    and again at once when it changes; a kind no longer wanted is forgotten."""
    wanted = refusal_events(t.workload, control, core)
    due: list[Event] = []
    for kind in REFUSALS:
        if kind not in wanted:
            record.refusals.pop(kind, None)
            continue
        signature, event = wanted[kind]
        last = record.refusals.get(kind)
        if last is not None and last[0] == signature and now - last[1] < repeat_seconds:
            continue
        record.refusals[kind] = (signature, now)
        due.append(event)
    return due


def stuck_due(
    record: TargetRecord,
    t: TargetPolicy,
    snap: WorkloadSnapshot,
    d: Decision,
    now: float,
    *,
    repeat_seconds: float,
) -> list[Event]:
    """A Warning Event while replicas are stuck (not Ready past the model load timeout).

    At most one per target and ``repeat_seconds`` (a stuck pod stays stuck for hours when
    the cluster has no free GPU); ``vllm_scaler_stuck_replicas`` carries the count every
    cycle.
    """
    event = stuck_event(t, snap, d)
    if event is None:
        return []
    last = record.stuck_event_at
    if last is not None and 0 <= now - last < repeat_seconds:
        return []
    log.warning(
        "replicas_stuck",
        target=t.key,
        stuck=d.replicas.stuck,
        pods=stuck_pods(snap, t.model_load_timeout_seconds)[:20],
        message=event.message,
    )
    record.stuck_event_at = now
    return [event]
