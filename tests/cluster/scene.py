"""One test's scene on the cluster: its namespace, the kwok pods' metrics scraped by the real
Prometheus, the chart installed, and the reads every check polls (the ``scene`` fixture)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from scaler.sim.controlplane import Cluster
from scaler.sim.prometheus_server import PrometheusServer, wait_for_series
from tests.cluster.chart import Install
from tests.cluster.podmetrics import Load, PodMetrics

Doc = dict[str, Any]


def is_ready(pod: Doc) -> bool:
    """Ready condition True and no deletionTimestamp."""
    conditions = (pod.get("status") or {}).get("conditions") or []
    return not pod["metadata"].get("deletionTimestamp") and any(
        c["type"] == "Ready" and c["status"] == "True" for c in conditions
    )


@dataclass
class Scene:
    """What a cluster test works with.

    Attributes:
        kube: the cluster (as its admin).
        namespace: the test's own namespace (the workloads').
        prometheus: the real Prometheus that scrapes the kwok pods' vLLM metrics.
        pod_metrics: ``pod_metrics(namespace, default=Load())`` starts serving those.
        install_scaler: ``install_scaler(values)`` installs the chart in a namespace of its own.
    """

    kube: Cluster
    namespace: str
    prometheus: PrometheusServer
    pod_metrics: Callable[..., PodMetrics]
    install_scaler: Callable[..., Install]

    def scale_path(self, name: str = "vllm", resource: str = "deployments") -> str:
        return f"/apis/apps/v1/namespaces/{self.namespace}/{resource}/{name}/scale"

    def spec_replicas(self, name: str = "vllm", resource: str = "deployments") -> int:
        """``spec.replicas`` of the workload's scale subresource."""
        return int(self.kube.get(self.scale_path(name, resource))["spec"].get("replicas", 0))

    def set_replicas(self, replicas: int, name: str = "vllm") -> None:
        """What ``kubectl scale`` does: a merge patch of the Deployment's scale."""
        self.kube.request(
            "PATCH",
            self.scale_path(name),
            body={"spec": {"replicas": replicas}},
            content_type="application/merge-patch+json",
        )

    def wait_replicas(
        self, replicas: int, *, timeout: float = 60, resource: str = "deployments"
    ) -> None:
        """Until ``spec.replicas`` is ``replicas``."""
        self.kube.wait_for(
            lambda: self.spec_replicas(resource=resource) == replicas,
            timeout=timeout,
            what=f"spec.replicas {replicas} in {self.namespace}",
        )

    def ready_pods(self, namespace: str | None = None) -> list[str]:
        """The names of the Ready pods (not terminating), sorted."""
        return sorted(
            p["metadata"]["name"]
            for p in self.kube.pods(namespace or self.namespace)
            if is_ready(p)
        )

    def wait_ready(self, count: int, *, timeout: float = 60) -> list[str]:
        """The names of the Ready pods once there are exactly ``count``."""

        def ready() -> list[str] | None:
            pods = self.ready_pods()
            return pods if len(pods) == count else None

        return self.kube.wait_for(ready, timeout=timeout, what=f"{count} Ready pods")

    async def serve(self, count: int, default: Load) -> tuple[list[str], PodMetrics]:
        """Wait for ``count`` Ready pods, serve their metrics with ``default`` load and
        wait until Prometheus has scraped them all."""
        pods = self.wait_ready(count)
        metrics = self.pod_metrics(self.namespace, default=default)
        metrics.wait_served(set(pods))
        await self.scraped(count)
        return pods, metrics

    async def scraped(self, count: int) -> None:
        """Until Prometheus holds ``count`` pods' queue depth of the namespace."""
        await wait_for_series(
            self.prometheus.url,
            f'vllm:num_requests_waiting{{namespace="{self.namespace}"}}',
            timeout=30,
            min_series=count,
        )

    def events(self, reason: str) -> list[Doc]:
        """The Events of ``reason`` in the namespace, as ``kubectl get events -o json``."""
        out = self.kube.kubectl(
            "get", "events", "-n", self.namespace, f"--field-selector=reason={reason}", "-o", "json"
        ).stdout
        items: list[Doc] = json.loads(out)["items"]
        return items
