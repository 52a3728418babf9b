"""Which pods are a target's: the ones the Kubernetes API lists for it, and those it listed
a moment ago.

A series counts for a target only when its pod is one of the target's own, matched by exact
name: the pods of the snapshot (the scale subresource's selector, listed through the API),
or, with explicit ``prometheus_matchers``, whatever those matchers pick. A pod name pattern
never decides: another workload's pods can share the name's prefix (a StatefulSet
``vllm-70b`` beside a Deployment ``vllm``) and Kubernetes shortens long generated names.

:class:`PodMemory` keeps, per target, the pods it listed until recently: a deleted pod's
series linger for Prometheus' lookback (5 minutes) and its counters stay in a ``rate()``
window, so they are known as the target's gone pods (dropped with a reason, and their last
requests still count in the target's TTFT) instead of as strangers.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from scaler.core.observation import WorkloadSnapshot

__all__ = ["FORGET_AFTER_SECONDS", "PodMemory"]

#: How long a pod the target no longer lists is still known as its own: Prometheus' default
#: lookback delta (an instant query returns a series this long after its last sample).
FORGET_AFTER_SECONDS = 300.0


@dataclass(slots=True)
class PodMemory:
    """The pods each target listed within the last ``forget_after_seconds``.

    Args:
        clock: seconds (any monotonic origin); the controller's clock in tests.
        forget_after_seconds: how long a pod no longer listed stays known; the rate window
            is added per call, since a gone pod's counters stay in it that much longer.
    """

    clock: Callable[[], float]
    forget_after_seconds: float = FORGET_AFTER_SECONDS
    _seen: dict[str, dict[str, float]] = field(default_factory=dict)

    def update(
        self, snapshots: Mapping[str, WorkloadSnapshot], *, rate_window_seconds: float = 0.0
    ) -> dict[str, frozenset[str]]:
        """Note the pods listed now; return target key -> its gone pods (listed before
        within the memory, not listed now). Targets without a snapshot this cycle keep
        their memory and get none (their pods are unknown this cycle)."""
        now = self.clock()
        keep = self.forget_after_seconds + rate_window_seconds
        out: dict[str, frozenset[str]] = {}
        for key, snap in snapshots.items():
            seen = self._seen.setdefault(key, {})
            listed = {p.name for p in snap.pods}
            for name in listed:
                seen[name] = now
            for name, at in list(seen.items()):
                if name not in listed and not (0 <= now - at <= keep):
                    del seen[name]
            out[key] = frozenset(seen.keys() - listed)
        return out
