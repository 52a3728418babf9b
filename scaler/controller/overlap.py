"""Pods two targets' selectors both pick (case 28; pure).

A selector is not ownership. The actuator keeps for a target only the pods whose controllers
lead to it (:mod:`scaler.actuators.ownership`): a canary's pods that the main Deployment's
selector also picks are the canary's only. Where a pod's owner cannot be told (no controller
reference, one that cannot be followed) its selector's verdict stands, unless another target
lists it too: then it counts for neither, and both report the overlap (the HPA's
AmbiguousSelector), rather than both counting its queue.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from scaler.core.observation import WorkloadSnapshot

__all__ = ["shared_pods_left_out"]


def shared_pods_left_out(
    snapshots: Mapping[str, WorkloadSnapshot],
) -> dict[str, WorkloadSnapshot]:
    """``snapshots`` with every pod whose owner cannot be told that another target lists too
    left out of each target that could not tell it, and named in its ``shared`` with the
    other targets. Pods another target owns were already left out by the actuator; a pod
    that one target owns and another cannot tell stays the owner's."""
    listed: dict[tuple[str, str], list[str]] = {}
    for key, snap in snapshots.items():
        for pod in snap.pods:
            listed.setdefault((snap.namespace, pod.name), []).append(key)
    out: dict[str, WorkloadSnapshot] = {}
    for key, snap in snapshots.items():
        shared = {
            pod: tuple(sorted(k for k in listed[(snap.namespace, pod)] if k != key))
            for pod, _ in snap.unowned
            if len(listed.get((snap.namespace, pod), ())) > 1
        }
        if not shared:
            out[key] = snap
            continue
        out[key] = replace(
            snap,
            pods=tuple(p for p in snap.pods if p.name not in shared),
            shared=tuple(sorted(shared.items())),
        )
    return out
