"""What the control loop remembers of each target from one cycle to the next: one record per
target, as a controller-runtime reconciler keeps per-object state.

A :class:`TargetRecord` holds everything the loop carries for one target (its decision
state and its shadow's, the state a new leader loaded for it, the Events already sent, a
scale-down in progress, what was said once), so that forgetting a target is dropping one
record and nothing of it is left in a dictionary elsewhere. :class:`TargetRecords` holds
the records by target key (``namespace/Kind/name``).

Only the loop's memory lives here; what export needs from cycle to cycle stays in
:class:`~scaler.controller.exports.DecisionExports` (it changes no decision).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from scaler.controller.removal import PendingRemoval
from scaler.core.state import TargetState, resume

__all__ = ["TargetRecord", "TargetRecords"]


@dataclass(slots=True)
class TargetRecord:
    """One target's memory in the loop.

    Attributes:
        state: the active policy's decision state after the last cycle (None before the
            first one).
        shadow_state: the shadow policy's (None without a shadow, or before its first cycle).
        resumed: the state a new leader loaded for the target (persisted by the previous
            one), taken by the target's next cycle instead of ``state``.
        resumed_shadow: the same for the shadow policy.
        refusals: each kind of refusal Event sent (conflict, pause, ...) -> its signature and
            when it was sent (controller clock, seconds).
        stuck_event_at: when the last ``ReplicasStuck`` Event was sent.
        cost_unsupported_logged: said once that the kind ignores pod-deletion-cost.
        removal: our own scale-down whose pods may still be live.
        survivors: the pods ranked to go that the last scale-down's workload controller
            left (their ``vllm_scaler_removal_survivors`` series).
        disabled: ``spec.replicas`` was 0 at the last cycle (scaling disabled, said once).
        selectorless: the scale subresource answered no selector at the last cycle (said
            once).
        last_scale_at: when the controller last changed the replicas (epoch seconds; a
            resource's ``status.lastScaleTime``).
        status_written: the resource's status as this process last wrote it (None: not
            since it started or took the lead).
        status_written_at: when it was written (controller clock, seconds).
    """

    state: TargetState | None = None
    shadow_state: TargetState | None = None
    resumed: TargetState | None = None
    resumed_shadow: TargetState | None = None
    refusals: dict[str, tuple[object, float]] = field(default_factory=dict)
    stuck_event_at: float | None = None
    cost_unsupported_logged: bool = False
    removal: PendingRemoval | None = None
    survivors: tuple[str, ...] = ()
    disabled: bool = False
    selectorless: bool = False
    last_scale_at: float | None = None
    status_written: dict[str, Any] | None = None
    status_written_at: float | None = None

    def state_for(
        self, current: int, now: float, *, saved_at: float, max_gap: float, shadow: bool = False
    ) -> TargetState | None:
        """The state the next decision starts from: a loaded one, resumed with the current
        replicas (:func:`scaler.core.state.resume`; taken once), else the last cycle's."""
        loaded = self.resumed_shadow if shadow else self.resumed
        if loaded is not None:
            if shadow:
                self.resumed_shadow = None
            else:
                self.resumed = None
            return resume(
                loaded, saved_at=saved_at, current_replicas=current, now=now, max_gap=max_gap
            )
        return self.shadow_state if shadow else self.state

    def forget_decisions(self) -> tuple[str, ...]:
        """Drop the decision state, the loaded one and the scale-down in progress (scaling
        disabled: it resumes with a fresh history); the survivors whose series go with it."""
        survivors = self.survivors
        self.state = self.shadow_state = self.resumed = self.resumed_shadow = None
        self.removal = None
        self.survivors = ()
        return survivors


class TargetRecords:
    """The records of every target, by key; a record is made on first use."""

    def __init__(self) -> None:
        self._records: dict[str, TargetRecord] = {}

    def __getitem__(self, key: str) -> TargetRecord:
        record = self._records.get(key)
        if record is None:
            record = self._records[key] = TargetRecord()
        return record

    def get(self, key: str) -> TargetRecord | None:
        """The record of ``key`` if there is one (none is made)."""
        return self._records.get(key)

    def __contains__(self, key: object) -> bool:
        return key in self._records

    def __iter__(self) -> Iterator[str]:
        return iter(self._records)

    def items(self) -> Iterable[tuple[str, TargetRecord]]:
        return self._records.items()

    def load(self, states: dict[str, TargetState], shadows: dict[str, TargetState]) -> None:
        """A new term: the states the previous leader persisted replace any loaded before."""
        for record in self._records.values():
            record.resumed = record.resumed_shadow = None
        for key, state in states.items():
            self[key].resumed = state
        for key, state in shadows.items():
            self[key].resumed_shadow = state

    def keep_only(self, keys: Iterable[str]) -> list[str]:
        """Drop the records of every target but ``keys`` (targets that are gone); the keys
        dropped."""
        kept = set(keys)
        gone = [key for key in self._records if key not in kept]
        for key in gone:
            del self._records[key]
        return gone
