"""The simulated fleet on a real Kubernetes control plane (``vllm-scaler sim --kube real``).

The same parts as :class:`~scaler.sim.cluster.SimCluster` (the fleet's ``/metrics``
endpoints in a file-SD file, Prometheus scraping them, a kubeconfig for the controller), but
the Kubernetes side is real: kube-apiserver, kube-controller-manager and kube-scheduler
1.37 with kwok playing the kubelet (:class:`~scaler.sim.controlplane.ControlPlane`, built
from Kubernetes' Go modules on first use), and the Deployment ``llm/vllm`` is a real one:

- its ReplicaSet creates and removes the pods (honouring the controller's
  ``pod-deletion-cost``), the scheduler binds them to the kwok nodes;
- kwok makes a pod Running and Ready after its annotation's delay, which is the model load:
  each simulated replica serves once the API says its pod is Ready (:meth:`Fleet.observe`);
- a pod being deleted drains its replica (no new requests, the running ones finish); the
  fleet deletes it when they are done, or kwok does at the end of its grace period.

The pods the Deployment has at the start are made Ready at once (replicas that were up), as
the stand-in's are.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from scaler.sim.controlplane import (
    DELETE_DELAY_ANNOTATION,
    KUBEPLANE,
    KUBERNETES_VERSION,
    POD_PLACEMENT,
    READY_DELAY_ANNOTATION,
    Cluster,
    ControlPlane,
    ensure_binary,
)
from scaler.sim.fleet import Fleet, FleetConfig, ObservedPod
from scaler.sim.kubeapi import ScaleChange
from scaler.sim.prometheus_server import PrometheusServer, ScrapingServer, write_file_sd
from scaler.sim.serving import FleetRuntime

__all__ = ["ClusterPods", "RealKubeCluster", "deployment"]

Doc = dict[str, Any]
#: How often the pods and ``spec.replicas`` are read from the API, seconds.
SYNC_SECONDS = 0.25
_CONTROLLER_JOB = "vllm-scaler-metrics"  # as scaler.sim.cluster.CONTROLLER_JOB


def deployment(config: FleetConfig, replicas: int) -> Doc:
    """The fleet's Deployment for the kwok nodes: its pods Ready after the model load (kwok's
    delay), kept by kwok at most a grace period once deleted (the fleet deletes them when
    drained)."""
    grace = int(config.termination_grace_seconds)
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": config.name, "namespace": config.namespace},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": dict(config.labels)},
            "template": {
                "metadata": {
                    "labels": dict(config.labels),
                    "annotations": {
                        READY_DELAY_ANNOTATION: f"{config.model.model_load_seconds:g}s",
                        DELETE_DELAY_ANNOTATION: f"{grace}s",
                    },
                },
                "spec": {
                    **POD_PLACEMENT,
                    "terminationGracePeriodSeconds": grace,
                    "containers": [{"name": "vllm", "image": "vllm/vllm-openai:kwok"}],
                },
            },
        },
    }


class ClusterPods:
    """What a following :class:`Fleet` keeps of the Kubernetes objects (its ``PodStore``):
    ``spec.replicas`` and the pods as last read from the API; the pods the fleet deletes are
    queued for the API (:meth:`take_deletions`)."""

    def __init__(self) -> None:
        self.spec_replicas = 0
        self.pods: dict[str, Doc] = {}
        self._deletions: list[str] = []
        self._callbacks: list[Callable[[ScaleChange], None]] = []

    def add_deployment(self, namespace: str, name: str, replicas: int, labels: Any) -> object:
        """The Deployment is the cluster's (created by :class:`RealKubeCluster`)."""
        return None

    def on_scale_change(self, callback: Callable[[ScaleChange], None]) -> object:
        self._callbacks.append(callback)
        return None

    def scaled(self, change: ScaleChange) -> None:
        """``spec.replicas`` read anew (another value than before)."""
        self.spec_replicas = change.new_replicas
        for callback in list(self._callbacks):
            callback(change)

    def get_spec_replicas(self, namespace: str, name: str) -> int:
        return self.spec_replicas

    def add_pod(
        self, namespace: str, name: str, labels: Any, *, created_at: float | None
    ) -> object:
        raise RuntimeError("a following fleet creates no pods: the ReplicaSet does")

    def get_pod(self, namespace: str, name: str) -> dict[str, Any]:
        return self.pods.get(name) or {"metadata": {"name": name}}

    def set_pod_ready(self, namespace: str, name: str, ready: bool = True) -> None:
        """kwok wrote it."""

    def mark_pod_terminating(
        self, namespace: str, name: str, *, grace_period_seconds: int = 30
    ) -> None:
        """The ReplicaSet did."""

    def delete_pod(self, namespace: str, name: str) -> None:
        """The replica drained: its pod goes (the kubelet's part)."""
        self._deletions.append(name)

    def take_deletions(self) -> list[str]:
        out, self._deletions = self._deletions, []
        return out


def _ready(pod: Doc) -> bool:
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in (pod.get("status") or {}).get("conditions") or []
    )


def _now_rfc3339() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


class RealKubeCluster:
    """The fleet, a real control plane and Prometheus, built but not yet started.

    Args:
        workdir: the kubeconfig, the file-SD files (``sd/``), Prometheus' TSDB and the control
            plane's folder (``kube/``).
        config: the fleet (its namespace and name are the Deployment's).
        scrape_interval_seconds: Prometheus' scrape interval.
        clock: wall clock, seconds.
        cluster: a cluster to use instead of starting one (its namespace ``config.namespace``
            is created and deleted here); None starts a :class:`ControlPlane`.
        prometheus: the server that scrapes the fleet (default: Debian's Prometheus).
    """

    def __init__(
        self,
        workdir: Path,
        config: FleetConfig,
        *,
        scrape_interval_seconds: float = 1.0,
        clock: Callable[[], float] = time.time,
        cluster: Cluster | None = None,
        prometheus: ScrapingServer | None = None,
    ) -> None:
        self.workdir = workdir
        self.config = config
        self.clock = clock
        self.store = ClusterPods()
        self.fleet = Fleet(self.store, config, now=clock(), follow=True)
        self.sd_dir = workdir / "sd"
        self.runtime = FleetRuntime(self.fleet, sd_file=self.sd_dir / "fleet.json", clock=clock)
        self.prometheus = prometheus or PrometheusServer(
            workdir / "prometheus",
            scrape_interval_seconds=scrape_interval_seconds,
            sd_file=self.sd_dir / "*.json",
        )
        self._given = cluster
        self.cluster: Cluster | None = cluster
        self.kubeconfig = workdir / "kubeconfig"
        self.kube_url = ""
        self._http: httpx.AsyncClient | None = None
        self._sync: asyncio.Task[None] | None = None

    def describe(self) -> str:
        """What the Kubernetes side is, for the demo's header."""
        return (
            f"kube-apiserver {KUBERNETES_VERSION} at {self.kube_url} (kubeconfig "
            f"{self.kubeconfig}): the ReplicaSet of Deployment {self.config.namespace}/"
            f"{self.config.name} makes the pods, kwok makes each Ready after the model load"
        )

    def scrape_controller(self, port: int) -> None:
        """Have Prometheus scrape a controller's ``/metrics`` on ``127.0.0.1:port`` too."""
        write_file_sd(
            self.sd_dir / "controller.json",
            [([f"127.0.0.1:{port}"], {"job": _CONTROLLER_JOB, "namespace": "vllm-scaler"})],
        )

    @property
    def _ns(self) -> str:
        return self.config.namespace

    def _path(self, what: str) -> str:
        apps = f"/apis/apps/v1/namespaces/{self._ns}/deployments/{self.config.name}"
        return {"deployment": apps, "pods": f"/api/v1/namespaces/{self._ns}/pods"}[what]

    async def start(self) -> None:
        """Start the control plane (building it first if it is not cached: Go is needed
        then), create the Deployment, then the fleet's metrics servers and Prometheus.

        Raises:
            GoNotFoundError, BuildError: the control plane could not be built.
            ComponentError: a server of it did not start.
            ServerNotInstalledError, ServerStartError: from Prometheus.
        """
        self.workdir.mkdir(parents=True, exist_ok=True)
        if self.cluster is None:
            built = await asyncio.to_thread(ensure_binary, KUBEPLANE)
            shutil.rmtree(self.workdir / "kube", ignore_errors=True)  # an earlier run's etcd
            plane = ControlPlane(self.workdir / "kube", kubeplane=built.path)
            self.cluster = plane
            await asyncio.to_thread(plane.start)
        cluster = self.cluster
        self.kube_url = cluster.server
        self.kubeconfig.write_bytes(cluster.admin_kubeconfig.read_bytes())
        self.kubeconfig.chmod(0o600)
        self._http = httpx.AsyncClient(
            base_url=cluster.server,
            verify=cluster.tls_context(),
            headers={"Authorization": f"Bearer {cluster.admin_token}"},
            timeout=10,
        )
        await self._namespace()
        replicas = self.config.initial_replicas
        await self._request("POST", f"/apis/apps/v1/namespaces/{self._ns}/deployments",
                            deployment(self.config, replicas))  # fmt: skip
        self.store.spec_replicas = replicas
        await self._up_already(replicas)
        await self._read()
        self.fleet.step(self.clock())
        self._sync = asyncio.create_task(self._keep_in_step())
        await self.runtime.start()
        await self.prometheus.astart()

    async def _namespace(self) -> None:
        """The fleet's namespace, made anew (an earlier run's may still be going away)."""
        deadline = time.monotonic() + 120
        while True:
            resp = await self._http_client().post(
                "/api/v1/namespaces", json={"metadata": {"name": self._ns}}
            )
            if resp.status_code == 201:
                return
            if resp.status_code != 409 or time.monotonic() > deadline:
                raise RuntimeError(f"namespace {self._ns}: HTTP {resp.status_code}: {resp.text}")
            existing = await self._request("GET", f"/api/v1/namespaces/{self._ns}", ok=(200, 404))
            if existing and not existing["metadata"].get("deletionTimestamp"):
                return  # there already (a cluster of the user's): the Deployment goes into it
            await asyncio.sleep(0.5)

    def _http_client(self) -> httpx.AsyncClient:
        assert self._http is not None
        return self._http

    async def _request(
        self, method: str, path: str, body: Any = None, *, ok: tuple[int, ...] = (200, 201)
    ) -> Any:
        assert self._http is not None
        resp = await self._http.request(method, path, json=body)
        if resp.status_code not in ok:
            raise RuntimeError(f"{method} {path}: HTTP {resp.status_code}: {resp.text[:300]}")
        return resp.json() if resp.content else None

    async def _up_already(self, replicas: int) -> None:
        """The pods at the start are replicas that were up: once scheduled, Ready now."""
        deadline = time.monotonic() + 60
        done: set[str] = set()
        while len(done) < replicas:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{replicas} pods of the Deployment not scheduled in 60 s")
            listing = await self._request("GET", self._path("pods"))
            for pod in listing["items"]:
                name = pod["metadata"]["name"]
                if name in done or not (pod.get("spec") or {}).get("nodeName"):
                    continue
                now = _now_rfc3339()
                status = pod.setdefault("status", {})
                status["phase"] = "Running"
                status["conditions"] = [
                    {"type": t, "status": "True", "lastTransitionTime": now}
                    for t in ("PodScheduled", "Initialized", "ContainersReady", "Ready")
                ]
                status["containerStatuses"] = [
                    {"name": "vllm", "image": "vllm/vllm-openai:kwok", "imageID": "",
                     "ready": True, "started": True, "restartCount": 0,
                     "state": {"running": {"startedAt": now}}}
                ]  # fmt: skip
                await self._request("PUT", f"{self._path('pods')}/{name}/status", pod)
                done.add(name)
            await asyncio.sleep(0.2)

    async def _read(self) -> None:
        """``spec.replicas`` and the pods, from the API, into the store and the fleet."""
        dep = await self._request("GET", self._path("deployment"))
        spec = int((dep.get("spec") or {}).get("replicas") or 0)
        if spec != self.store.spec_replicas:
            self.store.scaled(
                ScaleChange(
                    "apps",
                    "deployments",
                    self._ns,
                    self.config.name,
                    self.store.spec_replicas,
                    spec,
                    dep["metadata"]["resourceVersion"],
                    "api",
                )
            )
        selector = ",".join(f"{k}={v}" for k, v in sorted(self.config.labels.items()))
        assert self._http is not None
        resp = await self._http.get(self._path("pods"), params={"labelSelector": selector})
        resp.raise_for_status()
        pods = resp.json()["items"]
        self.store.pods = {p["metadata"]["name"]: p for p in pods}
        self.fleet.observe(
            [
                ObservedPod(
                    p["metadata"]["name"],
                    ready=_ready(p),
                    terminating=bool(p["metadata"].get("deletionTimestamp")),
                    node=str((p.get("spec") or {}).get("nodeName") or ""),
                )
                for p in pods
            ]
        )
        for name in self.store.take_deletions():
            await self._request(
                "DELETE", f"{self._path('pods')}/{name}", {"gracePeriodSeconds": 0},
                ok=(200, 202, 404),
            )  # fmt: skip

    async def _keep_in_step(self) -> None:
        while True:
            with contextlib.suppress(httpx.HTTPError, RuntimeError):
                await self._read()
            await asyncio.sleep(SYNC_SECONDS)

    async def stop(self) -> None:
        """Stop whatever started (the control plane only if started here; on a given cluster
        the namespace is deleted); safe after a failed start."""
        if self._sync is not None:
            self._sync.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sync
        await self.prometheus.astop()
        await self.runtime.stop()
        if self._http is not None:
            if self._given is not None:  # leave the cluster as it was: the pods go at once
                with contextlib.suppress(httpx.HTTPError, RuntimeError):
                    await self._request("DELETE", self._path("deployment"), ok=(200, 202, 404))
                    await self._request("DELETE", self._path("pods"), {"gracePeriodSeconds": 0},
                                        ok=(200, 202, 404))  # fmt: skip
                    await self._request("DELETE", f"/api/v1/namespaces/{self._ns}",
                                        ok=(200, 202, 404))  # fmt: skip
            await self._http.aclose()
        if self._given is None and self.cluster is not None:
            await asyncio.to_thread(self.cluster.stop)
