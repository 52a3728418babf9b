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
- Checking the choice was honoured. Once the workload controller has removed its pods,
  :meth:`PendingRemoval.order_ignored` tells whether it removed pods other than the ones
  ranked to go (a ReplicaSet controller with the ``PodDeletionCost`` feature gate off, or
  one older than 1.22; another controller that ignores the annotation), naming the chosen
  pods that survived: their requests were not the ones spared.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from scaler.core.drain import RemovalPlan
from scaler.core.observation import PodInfo, WorkloadSnapshot

__all__ = [
    "REMOVAL_EXPIRY_SECONDS",
    "IgnoredOrder",
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
class IgnoredOrder:
    """A scale-down whose workload controller removed other pods than those ranked to go.

    Attributes:
        survived: the pods ranked lowest (chosen to go) that are still live.
        removed: the pods that went instead (neither chosen nor not ready at the time).
    """

    survived: tuple[str, ...]
    removed: tuple[str, ...]


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
        chosen: the pods ranked lowest by pod-deletion-cost for it (empty for kinds that
            ignore the annotation).
        live_names: the live pods when it was written.
    """

    candidates: frozenset[str]
    count: int
    live_before: int
    at: float
    chosen: frozenset[str] = frozenset()
    live_names: frozenset[str] = frozenset()

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

    def order_ignored(self, snap: WorkloadSnapshot) -> IgnoredOrder | None:
        """Once the removal is done (:meth:`removing` is 0): the chosen pods still live and
        the other pods removed instead, when the workload controller did not remove the
        chosen ones; None when it did, or nothing was chosen. A pod not ready at the time
        going first is the ReplicaSet's own rule, not an ignored ranking."""
        if not self.chosen:
            return None
        live = snap.live_pod_names
        removed = sorted((self.live_names - live) - self.candidates)
        survived = sorted(self.chosen & live)
        if not removed or not survived:
            return None
        return IgnoredOrder(tuple(survived), tuple(removed))


def pending_removal(
    snap: WorkloadSnapshot, removal: RemovalPlan | None, count: int, now: float
) -> PendingRemoval:
    """What a scale-down of ``count`` replicas written over ``snap`` at ``now`` removes."""
    live = snap.live_pod_names
    if removal is None:
        return PendingRemoval(live, count, len(live), now, live_names=live)
    not_ready = {p.name for p in snap.pods if not p.terminating and not p.ready}
    chosen = frozenset(removal.chosen)
    return PendingRemoval(chosen | not_ready, count, len(live), now, chosen, live)
