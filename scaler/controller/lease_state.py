"""The decision state that survives a failover, kept on the leader's Lease.

A new leader loads what the previous one persisted before its first decision
(:meth:`LeaseState.load_if_new_term`), and the leader writes the state back at most once per
cycle, only when it changed (:meth:`LeaseState.save`). The state rides on the Lease as the
annotation :data:`STATE_ANNOTATION` (compact JSON): the PUT that writes it also renews the
Lease and carries its resourceVersion, so a replica that lost the Lease cannot overwrite a
newer leader's state (the write conflicts), and one object holds the state of every target,
whether it comes from the policy file or from a resource.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

import structlog

from scaler.controller.fence import Leadership, WriteFence
from scaler.controller.records import TargetRecords
from scaler.core.state import STATE_FORMAT_VERSION, TargetState, decode_state, encode_state
from scaler.telemetry.metrics import ScalerMetrics

__all__ = ["MAX_STATE_BYTES", "STATE_ANNOTATION", "LeaseState"]

#: Lease annotation holding the persisted decision state (JSON).
STATE_ANNOTATION = "vllm-scaler.io/state"
#: Upper bound of the persisted state (Kubernetes allows 256 KiB of annotations in total).
MAX_STATE_BYTES = 64 * 1024


class LeaseState:
    """Loads and saves the decision state on the Lease of ``leader``.

    Args:
        leader: the elector whose Lease holds the state.
        metrics: ``vllm_scaler_state_writes_total`` is counted here.
    """

    def __init__(self, leader: Leadership, metrics: ScalerMetrics) -> None:
        self.leader = leader
        self.metrics = metrics
        self.log = structlog.get_logger("vllm_scaler")
        self._loaded_term: int | None = None
        self._persisted: str | None = None
        #: when the loaded state was saved (controller clock, seconds)
        self.saved_at = 0.0

    def load_if_new_term(self, records: TargetRecords, now: float) -> None:
        """As a leader of a term not loaded yet: take over the state the previous leader
        persisted (if any) into ``records``."""
        if not self.leader.is_leader() or self.leader.term == self._loaded_term:
            return
        self._loaded_term = self.leader.term
        self._persisted = None
        raw = self.leader.annotation(STATE_ANNOTATION)
        if not raw:
            self.log.info("state_not_found", message="no persisted state; starting fresh")
            return
        try:
            states, shadows, saved_at = _decode(raw)
        except (ValueError, TypeError) as err:
            self.log.error("state_unreadable", error=str(err), message="starting fresh")
            return
        records.load(states, shadows)
        self.saved_at = saved_at
        self.log.info(
            "state_loaded",
            targets=sorted(states),
            saved_at=saved_at,
            age_seconds=round(now - saved_at, 3),
        )

    async def save(
        self, records: TargetRecords, keys: Iterable[str], now: float, fence: WriteFence
    ) -> None:
        """As the leader, write the state of the targets ``keys`` to the Lease when it
        changed (fenced)."""
        if not fence.allows():
            return
        keys = list(keys)
        targets: dict[str, object] = {}
        shadows: dict[str, object] = {}
        for key in keys:
            record = records.get(key)
            if record is None:
                continue
            if record.state is not None:
                targets[key] = encode_state(record.state)
            if record.shadow_state is not None:
                shadows[key] = encode_state(record.shadow_state)
        saved: dict[str, object] = {"targets": targets}
        if shadows:
            saved["shadows"] = shadows
        body = json.dumps(saved, sort_keys=True, separators=(",", ":"), allow_nan=False)
        if body == self._persisted:
            return
        text = json.dumps(
            {"v": STATE_FORMAT_VERSION, "saved_at": now, **saved},
            sort_keys=True,
            separators=(",", ":"),
            allow_nan=False,
        )
        if len(text.encode()) > MAX_STATE_BYTES:
            self.metrics.state_writes.labels("too_large").inc()
            self.log.error("state_too_large", bytes=len(text.encode()), limit=MAX_STATE_BYTES)
            return
        if await self.leader.write_annotations({STATE_ANNOTATION: text}):
            self._persisted = body
            self.metrics.state_writes.labels("written").inc()
        else:
            self.metrics.state_writes.labels("failed").inc()


def _decode(raw: str) -> tuple[dict[str, TargetState], dict[str, TargetState], float]:
    """The states, the shadows' states and when they were saved, from the annotation.

    Raises:
        ValueError, TypeError: not the format :meth:`LeaseState.save` writes.
    """
    doc = json.loads(raw)
    if not isinstance(doc, dict) or doc.get("v") != STATE_FORMAT_VERSION:
        raise ValueError(f"unknown state format {doc.get('v') if isinstance(doc, dict) else doc!r}")
    targets = doc.get("targets") or {}
    if not isinstance(targets, dict):
        raise ValueError("targets is not an object")
    states = {str(k): decode_state(v) for k, v in targets.items()}
    shadows = doc.get("shadows") or {}  # absent before shadow policies existed
    if not isinstance(shadows, dict):
        raise ValueError("shadows is not an object")
    shadow_states = {str(k): decode_state(v) for k, v in shadows.items()}
    return states, shadow_states, float(doc.get("saved_at") or 0.0)
