"""Which pods a scale-down should remove: the idlest, marked through pod-deletion-cost.

Pure: pods and their load in, annotation values out. The ReplicaSet controller removes
not-ready pods first, then those with the lowest ``controller.kubernetes.io/pod-deletion-cost``
(then the most recently ready, then the newest). Each ready pod's cost is its place in the
idlest-first order (0 is removed first), so the ``remove`` chosen pods rank lowest, and so
does every shorter prefix of them: a ranking written ahead for several removals still holds
for each smaller step, and it changes only when the order does. Pods without load data (not
scraped) are ranked as the busiest: nothing proves they are idle.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from scaler.core.observation import PodInfo

__all__ = ["RemovalPlan", "plan_removal"]


@dataclass(frozen=True, slots=True)
class RemovalPlan:
    """The outcome of :func:`plan_removal`.

    Attributes:
        costs: ready pod -> pod-deletion-cost to write (its place, idlest first, from 0).
        chosen: the pods expected to be removed, idlest first.
        load: the in-flight requests of the chosen pods (None: unknown).
    """

    costs: dict[str, int]
    chosen: tuple[str, ...]
    load: tuple[float | None, ...]


def plan_removal(pods: Sequence[PodInfo], load: Mapping[str, float], remove: int) -> RemovalPlan:
    """Rank the live ready pods by requests in flight and pick the ``remove`` idlest.

    Args:
        pods: the target's pods (terminating and not-ready ones are ignored).
        load: pod -> requests running plus waiting (pods without data are absent).
        remove: how many replicas the scale-down removes.
    """
    ready = [p.name for p in pods if p.ready and not p.terminating]
    known = sorted((n for n in ready if n in load), key=lambda n: (load[n], n))
    unknown = sorted(n for n in ready if n not in load)
    order = known + unknown
    chosen = order[: max(0, remove)]
    costs = {n: i for i, n in enumerate(order)}
    return RemovalPlan(
        costs=costs,
        chosen=tuple(chosen),
        load=tuple(load.get(n) for n in chosen),
    )
