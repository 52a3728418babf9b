"""Which pods a ReplicaSet removes first when it scales down: the ranking of the real
ReplicaSet controller, for the simulated fleet and the tests' ReplicaSet.

kube-controller-manager (k8s.io/kubernetes v1.37.2, ``pkg/controller/replicaset``
``getPodsToDelete`` and ``pkg/controller`` ``ActivePodsWithRanks.Less``) sorts the active pods
of the ReplicaSet and removes the first ones. A pod goes before another when, at the first
rule that tells them apart:

1. it is not assigned to a node and the other is;
2. its phase is earlier: Pending < Unknown < Running;
3. it is not Ready and the other is;
4. its ``controller.kubernetes.io/pod-deletion-cost`` is lower (feature gate
   ``PodDeletionCost``, on by default; an absent or invalid value is 0);
5. more active pods of the ReplicaSet's Deployment (the ReplicaSets of the same controller)
   share its node ("doubled up");
6. both Ready: it has been Ready for a shorter time, compared on a logarithmic scale (the
   base-2 logarithm of the nanoseconds since the Ready condition's ``lastTransitionTime``,
   truncated: pods whose times fall in one bucket tie, and the lower UID goes first); a
   Ready pod without that time goes first;
7. its containers restarted more often (the most restarts of any container);
8. it was created more recently, on the same logarithmic scale (a tie: the lower UID first).

Times are epoch seconds (the API's are whole seconds). :func:`removal_order` sorts with that
rule; :func:`pod_facts` reads what it needs from a pod as the API returns it.
"""

from __future__ import annotations

import functools
import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from scaler.sim.kubeapi.pods import is_deletion_cost

__all__ = ["DELETION_COST", "PodFacts", "deletion_cost", "pod_facts", "removal_order"]

#: The annotation of rule 4.
DELETION_COST = "controller.kubernetes.io/pod-deletion-cost"
_PHASE_ORDINAL = {"Pending": 0, "Unknown": 1, "Running": 2}  # any other phase: 0, as Go's map


@dataclass(frozen=True, slots=True)
class PodFacts:
    """What the ranking reads of one pod.

    Attributes:
        name: the pod's name (for the caller; not ranked on).
        uid: its ``metadata.uid`` (the tie-break of rules 6 and 8).
        node: ``spec.nodeName`` ('' while unassigned).
        phase: ``status.phase``.
        ready: the Ready condition is True.
        ready_since: that condition's ``lastTransitionTime``, epoch seconds (None: unknown).
        deletion_cost: the annotation's value (0 when absent or not a canonical int32).
        restarts: the most restarts of any of its containers.
        created_at: ``creationTimestamp``, epoch seconds (None: unknown).
        active: not terminating and not Succeeded or Failed (only active pods count as
            doubled up).
    """

    name: str
    uid: str
    node: str
    phase: str
    ready: bool
    ready_since: float | None
    deletion_cost: int
    restarts: int
    created_at: float | None
    active: bool = True


def _time(value: object) -> float | None:
    if not isinstance(value, str) or not value:
        return None
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


def deletion_cost(annotations: Mapping[str, str] | None) -> int:
    """The ``pod-deletion-cost`` as the controller reads it: a canonical int32, else 0."""
    value = (annotations or {}).get(DELETION_COST)
    return int(value) if value is not None and is_deletion_cost(value) else 0


def pod_facts(pod: Mapping[str, Any]) -> PodFacts:
    """The facts of a pod as the API (or the stand-in) returns it."""
    meta, spec, status = pod["metadata"], pod.get("spec") or {}, pod.get("status") or {}
    ready = next((c for c in status.get("conditions") or [] if c.get("type") == "Ready"), None)
    is_ready = ready is not None and ready.get("status") == "True"
    phase = str(status.get("phase") or "")
    restarts = max(
        (int(c.get("restartCount") or 0) for c in status.get("containerStatuses") or []),
        default=0,
    )
    return PodFacts(
        name=str(meta["name"]),
        uid=str(meta.get("uid") or ""),
        node=str(spec.get("nodeName") or ""),
        phase=phase,
        ready=is_ready,
        ready_since=_time(ready.get("lastTransitionTime")) if is_ready and ready else None,
        deletion_cost=deletion_cost(meta.get("annotations")),
        restarts=restarts,
        created_at=_time(meta.get("creationTimestamp")),
        active=not meta.get("deletionTimestamp") and phase not in ("Succeeded", "Failed"),
    )


def _log_rank(t: float, now: float) -> int:
    """``int64(math.Log2(float64(now - t)))`` with the difference in nanoseconds; -1 when
    it is not positive."""
    d = (now - t) * 1e9
    return int(math.log2(d)) if d > 0 else -1


def _after_or_zero(t1: float | None, t2: float | None) -> bool:
    if t1 is None or t2 is None:
        return t1 is None
    return t1 > t2


def _less(a: PodFacts, b: PodFacts, ranks: Mapping[str, int], now: float | None,
          cost: bool) -> bool:  # fmt: skip
    """``ActivePodsWithRanks.Less``: whether ``a`` goes before ``b`` (see the module)."""
    if a.node != b.node and (not a.node or not b.node):
        return not a.node
    pa, pb = _PHASE_ORDINAL.get(a.phase, 0), _PHASE_ORDINAL.get(b.phase, 0)
    if pa != pb:
        return pa < pb
    if a.ready != b.ready:
        return not a.ready
    if cost and a.deletion_cost != b.deletion_cost:
        return a.deletion_cost < b.deletion_cost
    if ranks[a.node] != ranks[b.node]:
        return ranks[a.node] > ranks[b.node]
    if a.ready and b.ready and a.ready_since != b.ready_since:
        if now is None or a.ready_since is None or b.ready_since is None:
            return _after_or_zero(a.ready_since, b.ready_since)
        diff = _log_rank(a.ready_since, now) - _log_rank(b.ready_since, now)
        return a.uid < b.uid if diff == 0 else diff < 0
    if a.restarts != b.restarts:
        return a.restarts > b.restarts
    if a.created_at != b.created_at:
        if now is None or a.created_at is None or b.created_at is None:
            return _after_or_zero(a.created_at, b.created_at)
        diff = _log_rank(a.created_at, now) - _log_rank(b.created_at, now)
        return a.uid < b.uid if diff == 0 else diff < 0
    return False


def removal_order(
    pods: Sequence[PodFacts],
    *,
    now: float | None,
    related: Iterable[PodFacts] | None = None,
    deletion_cost_gate: bool = True,
) -> list[PodFacts]:
    """``pods`` (the ReplicaSet's active pods) in the order the ReplicaSet removes them.

    Args:
        pods: the pods to rank.
        now: the controller's clock, epoch seconds (None: times compared exactly, as
            ``ActivePodsWithRanks`` with a zero ``Now``).
        related: the active pods of every ReplicaSet of the same Deployment, for the
            doubled-up rule (None: ``pods``).
        deletion_cost_gate: the ``PodDeletionCost`` feature gate.
    """
    on_node = Counter(p.node for p in (pods if related is None else related) if p.active)
    ranks = {p.node: on_node[p.node] for p in pods}

    def compare(a: PodFacts, b: PodFacts) -> int:
        if _less(a, b, ranks, now, deletion_cost_gate):
            return -1
        return 1 if _less(b, a, ranks, now, deletion_cost_gate) else 0

    return sorted(pods, key=functools.cmp_to_key(compare))
