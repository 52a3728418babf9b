"""Which pods a scale-down should remove: the idlest, marked through pod-deletion-cost.

Pure: pods and their load in, annotation values out. The ReplicaSet controller removes
not-ready pods first, then those with the lowest ``controller.kubernetes.io/pod-deletion-cost``
(then the most recently ready, then the newest). Costs are chosen so that exactly the
``remove`` idlest ready pods rank lowest among the ready ones: each pod's cost is its requests
in flight (rounded up), and every pod kept costs more than every pod chosen. Pods without load
data (not scraped) are ranked as the busiest: nothing proves they are idle.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from scaler.core.observation import PodInfo

__all__ = ["RemovalPlan", "plan_removal"]

_INT32_MAX = 2**31 - 1


@dataclass(frozen=True, slots=True)
class RemovalPlan:
    """The outcome of :func:`plan_removal`.

    Attributes:
        costs: ready pod -> pod-deletion-cost to write.
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
    top = max((math.ceil(v) for v in load.values() if math.isfinite(v)), default=0)
    raw = {n: min(_INT32_MAX, math.ceil(load[n])) for n in known}
    raw.update(dict.fromkeys(unknown, min(_INT32_MAX, top + 1)))
    floor = max((raw[n] for n in chosen), default=-1) + 1
    costs = {n: raw[n] if n in chosen else min(_INT32_MAX, max(raw[n], floor)) for n in order}
    return RemovalPlan(
        costs=costs,
        chosen=tuple(chosen),
        load=tuple(load.get(n) for n in chosen),
    )
