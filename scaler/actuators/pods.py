"""Pods as the Kubernetes API lists them, read into :class:`~scaler.core.observation.PodInfo`:
readiness, scheduling, container restarts and, for replicas that are groups of pods, the
group."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from scaler.config.policy import ReplicaGroups
from scaler.core.observation import PodInfo

__all__ = ["POD_DELETION_COST", "pod_info", "without_requirements"]

#: Annotation the ReplicaSet controller reads to pick which pods to remove first (lower first).
POD_DELETION_COST = "controller.kubernetes.io/pod-deletion-cost"


def without_requirements(selector: str, labels: Mapping[str, str]) -> str:
    """``selector`` (a label selector string) without its requirements on ``labels``' keys:
    a LeaderWorkerSet's ``name=x,worker-index=0`` lists its leaders; without the second, every
    pod of its groups. '' when nothing is left (then nothing would be selected safely)."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(selector):
        depth += ch == "("
        depth -= ch == ")"
        if ch == "," and depth == 0:
            parts.append(selector[start:i])
            start = i + 1
    parts.append(selector[start:])
    kept = []
    for part in (p.strip() for p in parts):
        key = part.lstrip("!").split(" ")[0]
        for op in ("!=", "==", "="):
            key = key.split(op)[0]
        if key.strip() not in labels:
            kept.append(part)
    return ",".join(kept)


def _condition(status: Any, kind: str) -> Any:
    """The pod condition of type ``kind`` (None without it)."""
    conditions = (status.conditions or []) if status is not None else []
    return next((c for c in conditions if c.type == kind), None)


def _seconds_since(when: Any, now: float) -> float | None:
    return max(0.0, now - when.timestamp()) if when is not None else None


def _unschedulable(status: Any) -> str | None:
    """``reason: message`` of a PodScheduled condition that is False (None otherwise)."""
    scheduled = _condition(status, "PodScheduled")
    if scheduled is None or scheduled.status != "False":
        return None
    text = ": ".join(str(x) for x in (scheduled.reason, scheduled.message) if x)
    return text or "not scheduled"


def _last_restart(status: Any) -> Any:
    """When a container of the pod last terminated before being restarted (None: never)."""
    latest = None
    for c in (status.container_statuses or []) if status is not None else []:
        last = c.last_state.terminated if c.last_state is not None else None
        if not c.restart_count or last is None or last.finished_at is None:
            continue
        if latest is None or last.finished_at > latest:
            latest = last.finished_at
    return latest


def pod_info(pod: Any, now: float, groups: ReplicaGroups | None = None) -> PodInfo:
    """A kubernetes-asyncio V1Pod -> PodInfo. ``ready_seconds`` is the time since the Ready
    condition's ``lastTransitionTime`` (None without the condition or its time); the
    PodScheduled condition and the containers' last terminations tell when the pod's
    current start began (:attr:`~scaler.core.observation.PodInfo.start_seconds`); with
    ``groups``, the pod's group (its group label's value, else its own name) and whether it
    serves (every pod, or its group's leader only)."""
    meta, status = pod.metadata, pod.status
    ready_condition = _condition(status, "Ready")
    ready = ready_condition is not None and ready_condition.status == "True"
    since = getattr(ready_condition, "last_transition_time", None) if ready else None
    scheduled = _condition(status, "PodScheduled")
    scheduled_at = (
        getattr(scheduled, "last_transition_time", None)
        if scheduled is not None and scheduled.status == "True"
        else None
    )
    created = meta.creation_timestamp
    age = max(0.0, now - created.timestamp()) if created is not None else 0.0
    group: str | None = None
    serves = True
    if groups is not None:
        labels = meta.labels or {}
        group = labels.get(groups.group_label or "") or meta.name
        leader = all(labels.get(k) == v for k, v in (groups.leader_labels or {}).items())
        serves = groups.serving_pods == "all" or leader
    return PodInfo(
        name=meta.name,
        ready=ready,
        terminating=meta.deletion_timestamp is not None,
        age_seconds=age,
        phase=(status.phase if status is not None and status.phase else "Unknown"),
        deletion_cost=(meta.annotations or {}).get(POD_DELETION_COST),
        ready_seconds=_seconds_since(since, now),
        scheduled_seconds=_seconds_since(scheduled_at, now),
        unschedulable=_unschedulable(status),
        restarted_seconds=_seconds_since(_last_restart(status), now),
        group=group,
        serves=serves,
    )
