"""The model load time of a target, learned from its own pods (pure: no I/O, no clock reads).

A pod's start is measured from ``metadata.creationTimestamp`` to the ``lastTransitionTime``
of its Ready condition turning True (image pull, scheduling, node provisioning and weight
loading included: all of it is time before a new replica serves); a restart of its vLLM
container (an OOM kill, a crash) is a start from that restart, not from the pod's creation
hours before. Only starts the controller
saw happen count: a pod is watched from the first cycle it is seen not ready, and measured on
the first cycle it is seen ready. Pods that were ready before the controller first saw them
say nothing (a restarted pod's Ready time is its last restart's, a pod created with the
controller down may have waited for a node that no longer has to be provisioned).

The estimate is the median of the last :data:`RECENT_STARTS` starts: one slow start (an image
pulled on a fresh node) does not move it, a lasting change (a bigger model, a new node pool)
takes over within a few starts. Each start is clipped to the policy's model load timeout
(a pod slower than that was stuck, and is reported as such).

The estimate sets the forecast horizon (:mod:`scaler.core.capacity`) and the startup guard
(:func:`startup_timeout_seconds`).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from scaler.core.observation import PodInfo

__all__ = ["RECENT_STARTS", "LoadTimes", "observe_starts", "startup_timeout_seconds"]

#: How many recent starts the median is taken over.
RECENT_STARTS = 7


@dataclass(frozen=True, slots=True)
class LoadTimes:
    """What one target's pods said about the model load time.

    Attributes:
        recent: seconds from creation to Ready of the latest observed starts, oldest first
            (at most :data:`RECENT_STARTS`).
        watching: live pods seen not ready, whose start is measured when they turn Ready.
    """

    recent: tuple[float, ...] = ()
    watching: frozenset[str] = frozenset()

    @property
    def median_seconds(self) -> float | None:
        """The median of :attr:`recent`, seconds; None before the first observed start."""
        return statistics.median(self.recent) if self.recent else None


def observe_starts(load: LoadTimes, pods: Sequence[PodInfo], *, max_seconds: float) -> LoadTimes:
    """``load`` after one cycle's pods.

    Args:
        load: the previous cycle's :class:`LoadTimes`.
        pods: the target's pods this cycle.
        max_seconds: the policy's model load timeout; a longer start is recorded as this.

    A ready pod that was watched is measured as ``age_seconds - ready_seconds`` (its Ready
    condition's transition time), or as its age when the transition time is unknown (then up
    to one control interval too long); after a container restart, from the restart
    (``restarted_seconds``) instead of the creation. Terminating and finished pods and pods
    gone are forgotten.
    """
    recent = list(load.recent)
    watching: set[str] = set()
    for p in pods:
        if p.terminating or p.finished:
            continue
        if not p.ready:
            watching.add(p.name)
            continue
        if p.name not in load.watching:
            continue
        since_ready = p.ready_seconds if p.ready_seconds is not None else 0.0
        began = p.age_seconds if p.restarted_seconds is None else p.restarted_seconds
        took = began - max(0.0, since_ready)
        if took >= 0:
            recent.append(min(took, max_seconds))
    return LoadTimes(recent=tuple(recent[-RECENT_STARTS:]), watching=frozenset(watching))


def startup_timeout_seconds(model_load_timeout_seconds: float, learned: float | None) -> float:
    """How long a pod that is not ready counts as *starting* before it counts as *stuck*,
    seconds.

    The policy's ``model_load_timeout_seconds`` until a start has been observed; then three
    times the learned model load time, at least two minutes more than it, and never more than
    the timeout: a pod far slower than this target's pods usually are is stuck (for example
    Pending for lack of GPUs), and should neither hold scale-downs nor hide the need for
    capacity any longer.
    """
    if learned is None:
        return model_load_timeout_seconds
    return min(model_load_timeout_seconds, max(3.0 * learned, learned + 120.0))
