"""The other autoscalers a cluster may run on a workload: ``autoscaling/v2``
HorizontalPodAutoscalers and KEDA ``keda.sh/v1alpha1`` ScaledObjects (plain objects)."""

from __future__ import annotations

from scaler.sim.kubeapi.errors import JSON
from scaler.sim.kubeapi.objects import Objects


class Autoscalers(Objects):
    """Python helpers that create HPAs and ScaledObjects as a user's manifests would."""

    def add_hpa(
        self,
        namespace: str,
        name: str,
        *,
        target_kind: str = "Deployment",
        target_name: str,
        target_api_version: str | None = "apps/v1",
        min_replicas: int = 1,
        max_replicas: int = 10,
    ) -> JSON:
        """Create an ``autoscaling/v2`` HorizontalPodAutoscaler targeting a workload."""
        ref: JSON = {"kind": target_kind, "name": target_name}
        if target_api_version is not None:
            ref["apiVersion"] = target_api_version
        return self.create_object(
            "autoscaling",
            "v2",
            "horizontalpodautoscalers",
            namespace,
            {
                "metadata": {"name": name},
                "spec": {
                    "scaleTargetRef": ref,
                    "minReplicas": min_replicas,
                    "maxReplicas": max_replicas,
                },
            },
        )

    def add_scaled_object(
        self,
        namespace: str,
        name: str,
        *,
        target_name: str,
        target_kind: str | None = None,
        target_api_version: str | None = None,
    ) -> JSON:
        """Create a KEDA ``keda.sh/v1alpha1`` ScaledObject (registering the CRD if needed).

        ``target_kind``/``target_api_version`` None leave them out of ``scaleTargetRef``
        (KEDA's defaults: Deployment, apps/v1).
        """
        if self.object_kind("keda.sh", "v1alpha1", "scaledobjects") is None:
            self.register_object_kind("keda.sh", "v1alpha1", "ScaledObject", "scaledobjects")
        ref: JSON = {"name": target_name}
        if target_kind is not None:
            ref["kind"] = target_kind
        if target_api_version is not None:
            ref["apiVersion"] = target_api_version
        return self.create_object(
            "keda.sh",
            "v1alpha1",
            "scaledobjects",
            namespace,
            {"metadata": {"name": name}, "spec": {"scaleTargetRef": ref, "triggers": []}},
        )
