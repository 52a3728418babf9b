"""Fencing every write of a cycle on current leadership.

A replica that lost its Lease must stop writing at once, not at the end of a slow cycle:
leadership is checked right before each write is sent (scale, pod annotation, Event, state
annotation), with the elector's clock read then (:meth:`LeaderElector.is_leader
<scaler.controller.leader.LeaderElector.is_leader>`). Once a check fails, the rest of the
cycle is read-only, even if a renewal succeeds meanwhile: its decisions were made in the
term that ended. A cycle that started without leadership writes nothing.

Kubernetes offers no fencing token on writes, so a request already in flight when the
renew deadline passes may still land (client-go's leader election has the same limit); the
renew deadline being shorter than the lease duration leaves that margin.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

__all__ = ["Leadership", "WriteFence"]


class Leadership(Protocol):
    """Who may write (see :class:`scaler.controller.leader.LeaderElector`)."""

    @property
    def term(self) -> int: ...

    def is_leader(self) -> bool: ...

    def observe(self) -> bool: ...

    def annotation(self, key: str) -> str | None: ...

    async def write_annotations(self, annotations: Mapping[str, str]) -> bool: ...


class WriteFence:
    """Answers, right before each write of one cycle, whether it may be sent.

    Args:
        leader: the elector; None when this process always leads (no leader election).
    """

    def __init__(self, leader: Leadership | None) -> None:
        self._leader = leader
        self._term = leader.term if leader is not None and leader.is_leader() else None
        #: a check failed in this cycle: nothing more is written
        self.lost = leader is not None and self._term is None

    def allows(self) -> bool:
        """Whether a write may be sent now (reads the elector's clock)."""
        if self._leader is None:
            return True
        if not self.lost and (not self._leader.is_leader() or self._leader.term != self._term):
            self.lost = True
        return not self.lost
