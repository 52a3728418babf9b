"""The assembled store: every API group of the stand-in over one resourceVersion counter."""

from __future__ import annotations

from collections.abc import Callable

from scaler.sim.kubeapi.autoscalers import Autoscalers
from scaler.sim.kubeapi.events import Events
from scaler.sim.kubeapi.faults import FaultInjection
from scaler.sim.kubeapi.scale import ScaleSubresource


class KubeStore(ScaleSubresource, Autoscalers, Events, FaultInjection):
    """The objects of the simulated cluster and the Python API the fleet drives them with.

    Every mutation bumps the global ``resourceVersion``. All ``namespace``/``name``
    arguments are strings; replica counts are ints >= 0; times are epoch seconds from the
    injected ``now``.

    Each API group's methods come from the class of its own module (pods, workloads and
    their scale subresource, events, plain objects and the autoscalers among them, fault
    injection), all over the one :class:`~scaler.sim.kubeapi.base.StoreBase`.

    Args:
        now: clock returning epoch seconds; used for creationTimestamp and friends.
    """

    def __init__(self, now: Callable[[], float]) -> None:
        super().__init__(now)
        self.register_kind("apps", "v1", "Deployment", "deployments", builtin=True)
        self.register_kind("apps", "v1", "StatefulSet", "statefulsets", builtin=True)
        self.register_kind("apps", "v1", "ReplicaSet", "replicasets", builtin=True)
        self.register_object_kind(
            "coordination.k8s.io", "v1", "Lease", "leases", builtin=True,
            unconditional_update=False, create_on_update=True,
        )  # fmt: skip
        self.register_object_kind(
            "autoscaling", "v2", "HorizontalPodAutoscaler", "horizontalpodautoscalers", builtin=True
        )
