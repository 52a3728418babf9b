"""Scale-downs in progress: which pods are being removed, and whether their ranking is in place.

Two rules of drain-aware scale-down live here (pure functions over what the API lists):

- Ranking before removing. The ReplicaSet controller ranks pods by
  ``controller.kubernetes.io/pod-deletion-cost`` from its informer cache, which may not have
  an annotation written a moment ago (Kubernetes documents the feature as best effort for
  this reason). So a scale-down is written only in a cycle that reads the pods already
  ranked the way the fresh plan wants (:func:`ranked`); otherwise the cycle writes the
  annotations and the scale-down waits for a later cycle, where the plan is made again from
  fresh loads and must still hold. While a stabilization window or a step limit holds a
  scale-down the signals ask for, the ranking is written ahead (:func:`ranked_in_order`
  tells whether it is already in place), so the scale-down comes in the first cycle the
  window and the step limit allow, as without the ranking.
- Telling removal apart from surplus. Pods beyond ``spec.replicas`` are not all draining: a
  rollout's surge or a paused canary runs extra pods for as long as it lasts. Only pods
  with a deletionTimestamp and pods this controller's own scale-down removes
  (:class:`PendingRemoval`) hold a further scale-down.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from scaler.core.drain import RemovalPlan
from scaler.core.observation import PodInfo, WorkloadSnapshot

__all__ = [
    "REMOVAL_EXPIRY_SECONDS",
    "PendingRemoval",
    "deletion_cost",
    "pending_removal",
    "ranked",
    "ranked_in_order",
]


def deletion_cost(pod: PodInfo) -> int:
    """The pod's pod-deletion-cost as the ReplicaSet controller reads it (absent: 0)."""
    try:
        return int(pod.deletion_cost or 0)
    except ValueError:
        return 0


def ranked(pods: Sequence[PodInfo], chosen: Iterable[str]) -> bool:
    """Whether the annotations as read rank exactly ``chosen`` lowest among the live ready
    pods, strictly below every other one (a tie leaves the choice to the ReplicaSet)."""
    names = set(chosen)
    ready = [p for p in pods if p.ready and not p.terminating]
    low = [deletion_cost(p) for p in ready if p.name in names]
    high = [deletion_cost(p) for p in ready if p.name not in names]
    if len(low) != len(names):
        return False  # a chosen pod is gone or no longer ready: plan again
    return not low or not high or max(low) < min(high)


def ranked_in_order(pods: Sequence[PodInfo], chosen: Sequence[str]) -> bool:
    """Whether every prefix of ``chosen`` (idlest first) is :func:`ranked`: the ranking a
    scale-down of any number of these pods needs is in place."""
    return all(ranked(pods, chosen[:i]) for i in range(1, len(chosen) + 1))


#: A workload controller acts on a scale-down within seconds. A chosen pod still live
#: without a deletionTimestamp this long after the write was not the one removed (the
#: ReplicaSet took another, e.g. from a stale cache): it no longer holds scale-down.
REMOVAL_EXPIRY_SECONDS = 120.0


@dataclass(frozen=True, slots=True)
class PendingRemoval:
    """A scale-down this controller wrote, whose pods may still be live.

    Attributes:
        candidates: the pods the workload controller may remove for it: the chosen pods
            and the pods not ready at the time (removed first) for kinds that honour
            pod-deletion-cost; every live pod for the others (which pods is the kind's rule).
        count: the replicas the write removed.
        live_before: live pods (no deletionTimestamp) when it was written.
        at: when it was written (controller clock, seconds).
    """

    candidates: frozenset[str]
    count: int
    live_before: int
    at: float

    def removing(self, snap: WorkloadSnapshot, now: float) -> int:
        """Live pods (no deletionTimestamp) of this removal still to go; 0 once the
        workload controller got to it (whichever pods it took) or after
        :data:`REMOVAL_EXPIRY_SECONDS`. Pods beyond ``spec.replicas`` that were there
        before (a rollout's surge, a canary) or came after never count."""
        if now - self.at > REMOVAL_EXPIRY_SECONDS:
            return 0
        live = snap.live_pod_names
        left = len(self.candidates & live) - (len(self.candidates) - self.count)
        gone = self.live_before - len(live)
        return max(0, min(left, self.count - gone, len(live) - snap.spec_replicas))


def pending_removal(
    snap: WorkloadSnapshot, removal: RemovalPlan | None, count: int, now: float
) -> PendingRemoval:
    """What a scale-down of ``count`` replicas written over ``snap`` at ``now`` removes."""
    live = snap.live_pod_names
    if removal is None:
        return PendingRemoval(live, count, len(live), now)
    not_ready = {p.name for p in snap.pods if not p.terminating and not p.ready}
    return PendingRemoval(frozenset(removal.chosen) | not_ready, count, len(live), now)
