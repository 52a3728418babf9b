"""What a cycle writes on the ``VLLMAutoscaler`` resources: their status, and an Event when a
resource is refused.

Only the leader writes, through the one place that writes (:class:`~scaler.controller.apply.
Applier`), fenced like every write, and a status only when it changed
(:func:`scaler.controller.status.due`): compared with what this process last wrote, or, after
a start or a takeover, with the status the watch read (so a new leader rewrites nothing that
is still true). A refused resource's Warning Event is sent when its refusal changes: its
status, as read, already says the same refusal when it was sent before (by any leader).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from scaler.config.resource import ResourceRef
from scaler.controller.apply import Applied, Applier
from scaler.controller.fence import WriteFence
from scaler.controller.leader import parse_time
from scaler.controller.plan import Event
from scaler.controller.records import TargetRecord
from scaler.controller.status import (
    camel_reason,
    decided_status,
    due,
    refused_status,
    unread_status,
)
from scaler.controller.targets import Refused, Target
from scaler.core.decide import Decision

__all__ = ["ResourceStatuses"]


class ResourceStatuses:
    """Writes the status of each resource of a cycle.

    Args:
        applier: the one place that writes.
        writes: False in a dry run (nothing is written, not even a status).
    """

    def __init__(self, applier: Applier, *, writes: bool) -> None:
        self.applier = applier
        self.writes = writes

    async def decided(
        self,
        target: Target,
        record: TargetRecord,
        decision: Decision,
        applied: Applied,
        shadow: Decision | None,
        now: float,
        fence: WriteFence,
    ) -> None:
        """The status of a resource whose target was decided this cycle."""
        if target.resource is None:
            return
        if record.last_scale_at is None and target.status is not None:
            record.last_scale_at = parse_time(target.status.get("lastScaleTime"))
        if applied.action == "scaled":
            record.last_scale_at = now
        previous = record.status_written or _mapping(target.status)
        status = decided_status(
            target.policy,
            decision,
            generation=target.resource.generation,
            action=applied.action,
            error=applied.error,
            last_scale_time=record.last_scale_at,
            shadow=shadow,
            previous=previous,
            now=now,
        )
        await self._write(target.resource, record, status, previous, now, fence)

    async def unread(
        self, target: Target, record: TargetRecord, not_found: bool, message: str, now: float,
        fence: WriteFence,
    ) -> None:  # fmt: skip
        """The status of a resource whose target could not be read this cycle."""
        if target.resource is None:
            return
        previous = record.status_written or _mapping(target.status)
        status = unread_status(
            not_found,
            message,
            generation=target.resource.generation,
            previous=previous,
            now=now,
        )
        if self.writes and (previous or {}).get("reason") != status["reason"]:
            # said once when it starts, as the HPA's FailedGetScale
            await self.applier.emit(
                target.resource, Event("FailedGetScale", message, "Warning"), fence
            )
        await self._write(target.resource, record, status, previous, now, fence)

    async def refused(self, refused: Refused, now: float, fence: WriteFence) -> None:
        """The status of a resource that is not scaled, and its Warning Event once."""
        if not self.writes:
            return
        previous = _mapping(refused.status)
        status = refused_status(
            refused.reason,
            refused.message,
            generation=refused.resource.generation,
            previous=previous,
            now=now,
        )
        if not due(status, previous, last_written_at=None, now=now):
            return
        said = previous is not None and (
            previous.get("reason"),
            previous.get("message"),
            previous.get("observedGeneration"),
        ) == (refused.reason, refused.message, refused.resource.generation)
        if not said:
            event = Event(camel_reason(refused.reason), refused.message, "Warning")
            await self.applier.emit(refused.resource, event, fence)
        await self.applier.write_status(refused.resource, status, previous, fence)

    async def _write(
        self,
        ref: ResourceRef,
        record: TargetRecord,
        status: dict[str, Any],
        previous: Mapping[str, Any] | None,
        now: float,
        fence: WriteFence,
    ) -> None:
        if not self.writes:
            return
        if not due(status, previous, last_written_at=record.status_written_at, now=now):
            return
        if await self.applier.write_status(ref, status, previous, fence):
            record.status_written = status
            record.status_written_at = now


def _mapping(value: object) -> Mapping[str, Any] | None:
    return value if isinstance(value, Mapping) else None
