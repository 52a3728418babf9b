"""The two servers the contract suite holds to each other: the Kubernetes API stand-in
(:mod:`scaler.sim.kubeapi`, over HTTP on loopback) and a real kube-apiserver (the cluster
tier's, with its controllers and kwok).

Each test body runs against both through :class:`Server`: the same requests
(:meth:`Server.request`), and the same objects set up in each server's own way (the
stand-in's from Python, as the simulated fleet does; the real server's through its API and
controllers). What a test asserts is what the real server answers; the stand-in passes when
it answers the same.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import random
import string
import time
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import httpx

from scaler.actuators.kubernetes import KubernetesActuator, build_api_client
from scaler.actuators.lease import LeaseClient
from scaler.sim.controlplane import POD_PLACEMENT, READY_DELAY_ANNOTATION, Cluster
from scaler.sim.kubeapi import KubeApiServer, KubeStore, owner_reference, write_kubeconfig

Doc = dict[str, Any]
#: who sends a request: the admin, nobody (no Authorization header), a token the server
#: does not know
Auth = Literal["admin", "anonymous", "wrong"]

JSON = "application/json"
MERGE = "application/merge-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"
JSON_PATCH = "application/json-patch+json"


@dataclass(frozen=True, slots=True)
class Answer:
    """One answer: its status, its body (decoded JSON, else the text) and content type."""

    status: int
    body: Any
    content_type: str

    @property
    def is_status(self) -> bool:
        """The body is a ``v1 Status``."""
        return isinstance(self.body, dict) and self.body.get("kind") == "Status"

    @property
    def reason(self) -> str | None:
        """``Status.reason`` (None when the body is no Status or has none)."""
        return self.body.get("reason") if self.is_status else None

    @property
    def message(self) -> str:
        """``Status.message``, or the text of a body that is no JSON."""
        if self.is_status:
            return str(self.body.get("message", ""))
        return self.body if isinstance(self.body, str) else ""

    @property
    def causes(self) -> list[str]:
        """The fields of ``Status.details.causes``, in order."""
        if not self.is_status:
            return []
        details = self.body.get("details") or {}
        return [str(c.get("field", "")) for c in details.get("causes") or []]

    def summary(self) -> tuple[int, str | None, list[str]]:
        """``(status, reason, cause fields)``: what a refusal is compared by."""
        return self.status, self.reason, self.causes


@dataclass(frozen=True, slots=True)
class CustomKind:
    """A custom resource kind with a scale subresource, as its CRD declares it."""

    group: str
    kind: str
    plural: str
    version: str = "v1alpha1"
    #: ``scale.labelSelectorPath`` ``.status.selector`` is declared
    selector_path: bool = True

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"

    def path(self, namespace: str, name: str = "") -> str:
        base = f"/apis/{self.group}/{self.version}/namespaces/{namespace}/{self.plural}"
        return f"{base}/{name}" if name else base

    def crd(self) -> Doc:
        """The CustomResourceDefinition (its objects' fields are free: preserved unknown)."""
        scale = {"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas"}
        if self.selector_path:
            scale["labelSelectorPath"] = ".status.selector"
        return {
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": f"{self.plural}.{self.group}"},
            "spec": {
                "group": self.group,
                "names": {
                    "kind": self.kind,
                    "listKind": f"{self.kind}List",
                    "plural": self.plural,
                    "singular": self.kind.lower(),
                },
                "scope": "Namespaced",
                "versions": [
                    {
                        "name": self.version,
                        "served": True,
                        "storage": True,
                        "subresources": {"status": {}, "scale": scale},
                        "schema": {
                            "openAPIV3Schema": {
                                "type": "object",
                                "x-kubernetes-preserve-unknown-fields": True,
                            }
                        },
                    }
                ],
            },
        }


#: The custom kinds of the suite: a scale subresource with a selector path, without one,
#: and LeaderWorkerSet's (its group, names and paths; its status field is its own).
PODCLIQUE = CustomKind("grove.io", "PodClique", "podcliques", selector_path=False)
SCALING_GROUP = CustomKind("grove.io", "PodCliqueScalingGroup", "podcliquescalinggroups")
CUSTOM_KINDS = (PODCLIQUE, SCALING_GROUP)


def pod_doc(name: str, labels: Mapping[str, str], annotations: Mapping[str, str]) -> Doc:
    """A bare pod for the kwok nodes (no controller), Ready at once once scheduled."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "labels": dict(labels),
            "annotations": {READY_DELAY_ANNOTATION: "0s", **annotations},
        },
        "spec": {
            **copy.deepcopy(POD_PLACEMENT),
            "terminationGracePeriodSeconds": 30,
            "containers": [{"name": "vllm", "image": "vllm/vllm-openai:kwok"}],
        },
    }


def deployment_doc(name: str, replicas: int, labels: Mapping[str, str]) -> Doc:
    template = pod_doc("", labels, {})
    template["metadata"].pop("name")
    template.pop("apiVersion")
    template.pop("kind")
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {"replicas": replicas, "selector": {"matchLabels": dict(labels)},
                 "template": template},
    }  # fmt: skip


class Server(ABC):
    """One server under the contract, with a namespace of the test's own.

    Attributes:
        name: ``stand-in`` or ``kube-apiserver``.
        namespace: the test's namespace.
    """

    name: str
    namespace: str
    http: httpx.AsyncClient

    @abstractmethod
    def admin_token(self) -> str:
        """The bearer token of the admin."""

    async def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        content_type: str = JSON,
        params: Mapping[str, str] | None = None,
        auth: Auth = "admin",
    ) -> Answer:
        """Send one request; the answer, whatever its status."""
        token = {"admin": self.admin_token(), "anonymous": None, "wrong": "not-a-token"}[auth]
        return await _send(
            self.http, method, path, body, content_type=content_type, params=params, token=token
        )

    async def get(self, path: str, **params: str) -> Answer:
        return await self.request("GET", path, params=params or None)

    async def ok(self, method: str, path: str, body: Any = None, **kw: Any) -> Doc:
        """A request that must succeed (2xx); its JSON body."""
        answer = await self.request(method, path, body, **kw)
        assert 200 <= answer.status < 300, (method, path, answer)
        result: Doc = answer.body
        return result

    # -- objects, set up as each server has them

    @abstractmethod
    async def deployment(
        self, name: str, *, replicas: int = 0, labels: Mapping[str, str] | None = None
    ) -> list[str]:
        """A Deployment; with ``replicas``, its ReplicaSet and that many Ready pods owned
        through it (the real ones made by the controllers and kwok). Returns the pod names."""

    @abstractmethod
    async def annotate(self, deployment: str, annotations: Mapping[str, str]) -> None:
        """Another writer (``kubectl annotate``) sets annotations of a Deployment."""

    @abstractmethod
    async def pod(
        self,
        name: str,
        labels: Mapping[str, str],
        *,
        annotations: Mapping[str, str] | None = None,
        ready: bool = False,
    ) -> None:
        """A bare pod (no controller); ``ready``: wait until it is Ready."""

    @abstractmethod
    async def install(self, kind: CustomKind) -> None:
        """Serve ``kind`` (its CRD; on the real server, installed for the session)."""

    @abstractmethod
    async def custom(
        self, kind: CustomKind, name: str, *, replicas: int, selector: str | None = None
    ) -> None:
        """An object of a custom kind (its CRD installed); ``selector``: what its operator
        wrote into ``status.selector`` (None: nothing yet)."""

    @abstractmethod
    async def touch(self, kind: CustomKind, name: str) -> None:
        """Another writer changes a custom object (an annotation): a new resourceVersion."""

    @abstractmethod
    def kubeconfig(self) -> Path:
        """A kubeconfig of the admin, for the controller's own clients."""

    @contextlib.asynccontextmanager
    async def actuator(self, **kwargs: Any) -> AsyncIterator[KubernetesActuator]:
        """The controller's actuator on this server (kubernetes-asyncio, as ``run`` builds it)."""
        api = await build_api_client(kubeconfig=self.kubeconfig(), in_cluster=False)
        try:
            yield KubernetesActuator(api, clock=time.time, **kwargs)
        finally:
            await api.close()

    @contextlib.asynccontextmanager
    async def leases(self) -> AsyncIterator[LeaseClient]:
        """The controller's Lease client on this server."""
        api = await build_api_client(kubeconfig=self.kubeconfig(), in_cluster=False)
        try:
            yield LeaseClient(api, clock=time.time)
        finally:
            await api.close()


async def _send(
    http: httpx.AsyncClient,
    method: str,
    path: str,
    body: Any,
    *,
    content_type: str,
    params: Mapping[str, str] | None,
    token: str | None,
) -> Answer:
    import json

    content = None
    if body is not None:
        content = body.encode() if isinstance(body, str) else json.dumps(body).encode()
    headers = {"Content-Type": content_type} if content is not None else {}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    resp = await http.request(method, path, content=content, headers=headers, params=params)
    media = resp.headers.get("content-type", "").split(";")[0].strip()
    decoded: Any = resp.text
    if media == JSON:
        decoded = resp.json()
    return Answer(resp.status_code, decoded, media)


_SUFFIX = "bcdfghjklmnpqrstvwxz2456789"  # what the API server's name generator draws from


def _suffix(rng: random.Random, n: int) -> str:
    return "".join(rng.choice(_SUFFIX) for _ in range(n))


@dataclass
class StandIn(Server):
    """The stand-in, served on loopback for one test, its objects set up from Python."""

    store: KubeStore
    server: KubeApiServer
    http: httpx.AsyncClient
    workdir: Path
    namespace: str = "contract"
    name: str = "stand-in"
    _rng: random.Random = field(default_factory=lambda: random.Random(7))

    @classmethod
    @contextlib.asynccontextmanager
    async def open(cls, workdir: Path) -> AsyncIterator[StandIn]:
        store = KubeStore(time.time)
        token = "".join(random.choices(string.ascii_lowercase, k=24))
        async with (
            KubeApiServer(store, token=token) as server,
            httpx.AsyncClient(base_url=server.url, timeout=10) as http,
        ):
            write_kubeconfig(workdir / "stand-in.kubeconfig", server_url=server.url, token=token)
            yield cls(store, server, http, workdir)

    def admin_token(self) -> str:
        return self.server.token

    async def deployment(
        self, name: str, *, replicas: int = 0, labels: Mapping[str, str] | None = None
    ) -> list[str]:
        labels = dict(labels or {"app": name})
        dep = self.store.add_deployment(self.namespace, name, replicas, labels)
        if not replicas:
            return []
        template_hash = _suffix(self._rng, 10)
        pod_labels = {**labels, "pod-template-hash": template_hash}
        rs = self.store.add_workload(
            "apps", "replicasets", self.namespace, f"{name}-{template_hash}",
            replicas=replicas, labels=pod_labels, owner=owner_reference(dep),
        )  # fmt: skip
        pods = sorted(f"{name}-{template_hash}-{_suffix(self._rng, 5)}" for _ in range(replicas))
        for pod in pods:
            self.store.add_pod(
                self.namespace, pod, pod_labels, ready=True, owner=owner_reference(rs)
            )
        return pods

    async def annotate(self, deployment: str, annotations: Mapping[str, str]) -> None:
        self.store.set_workload_annotations(self.namespace, deployment, annotations)

    async def pod(
        self,
        name: str,
        labels: Mapping[str, str],
        *,
        annotations: Mapping[str, str] | None = None,
        ready: bool = False,
    ) -> None:
        self.store.add_pod(self.namespace, name, labels, ready=ready)
        if annotations:
            pod = self.store.get_pod(self.namespace, name)
            pod["metadata"]["annotations"] = dict(annotations)
            self.store.patch_pod(self.namespace, name, pod)

    async def install(self, kind: CustomKind) -> None:
        if self.store.scale_kind(kind.group, kind.version, kind.plural) is None:
            self.store.register_kind(
                kind.group, kind.version, kind.kind, kind.plural,
                label_selector_path=kind.selector_path,
            )  # fmt: skip

    async def custom(
        self, kind: CustomKind, name: str, *, replicas: int, selector: str | None = None
    ) -> None:
        await self.install(kind)
        self.store.add_workload(
            kind.group, kind.plural, self.namespace, name, replicas=replicas,
            labels={"app": name},
        )  # fmt: skip
        self.store.set_scale_selector(
            self.namespace, name, selector or "", group=kind.group, plural=kind.plural
        )

    async def touch(self, kind: CustomKind, name: str) -> None:
        self.store.touch_workload(self.namespace, name, group=kind.group, plural=kind.plural)

    def kubeconfig(self) -> Path:
        return self.workdir / "stand-in.kubeconfig"


@dataclass
class RealServer(Server):
    """The cluster tier's kube-apiserver, a namespace of the test's own on it."""

    cluster: Cluster
    http: httpx.AsyncClient
    namespace: str
    name: str = "kube-apiserver"

    @classmethod
    @contextlib.asynccontextmanager
    async def open(cls, cluster: Cluster, namespace: str) -> AsyncIterator[RealServer]:
        async with httpx.AsyncClient(
            base_url=cluster.server, verify=cluster.tls_context(), timeout=30
        ) as http:
            yield cls(cluster, http, namespace)

    def admin_token(self) -> str:
        return self.cluster.admin_token

    async def _until(self, check: Callable[[], Any], what: str, timeout: float = 60) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            value = await check()
            if value:
                return value
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
            await asyncio.sleep(0.2)

    def _ready_pods(self, items: list[Doc]) -> list[str]:
        return sorted(
            p["metadata"]["name"]
            for p in items
            if not p["metadata"].get("deletionTimestamp")
            and any(
                c["type"] == "Ready" and c["status"] == "True"
                for c in (p.get("status") or {}).get("conditions") or []
            )
        )

    async def deployment(
        self, name: str, *, replicas: int = 0, labels: Mapping[str, str] | None = None
    ) -> list[str]:
        labels = dict(labels or {"app": name})
        ns = self.namespace
        await self.ok("POST", f"/apis/apps/v1/namespaces/{ns}/deployments",
                      deployment_doc(name, replicas, labels))  # fmt: skip
        if not replicas:
            return []
        selector = ",".join(f"{k}={v}" for k, v in sorted(labels.items()))

        async def ready() -> list[str] | None:
            dep = await self.ok("GET", f"/apis/apps/v1/namespaces/{ns}/deployments/{name}")
            if (dep.get("status") or {}).get("readyReplicas") != replicas:
                return None
            listing = await self.ok(
                "GET", f"/api/v1/namespaces/{ns}/pods", params={"labelSelector": selector}
            )
            pods = self._ready_pods(listing["items"])
            return pods if len(pods) == replicas else None

        pods: list[str] = await self._until(ready, f"{replicas} Ready pods of {name}")
        return pods

    async def annotate(self, deployment: str, annotations: Mapping[str, str]) -> None:
        await self.ok(
            "PATCH", f"/apis/apps/v1/namespaces/{self.namespace}/deployments/{deployment}",
            {"metadata": {"annotations": dict(annotations)}}, content_type=MERGE,
        )  # fmt: skip

    async def pod(
        self,
        name: str,
        labels: Mapping[str, str],
        *,
        annotations: Mapping[str, str] | None = None,
        ready: bool = False,
    ) -> None:
        ns = self.namespace
        await self.ok("POST", f"/api/v1/namespaces/{ns}/pods",
                      pod_doc(name, labels, annotations or {}))  # fmt: skip
        if ready:

            async def is_ready() -> bool:
                pod = await self.ok("GET", f"/api/v1/namespaces/{ns}/pods/{name}")
                return bool(self._ready_pods([pod]))

            await self._until(is_ready, f"pod {name} Ready")

    async def install(self, kind: CustomKind) -> None:
        assert kind in CUSTOM_KINDS, f"{kind.plural}.{kind.group} is not installed"

    async def custom(
        self, kind: CustomKind, name: str, *, replicas: int, selector: str | None = None
    ) -> None:
        path = kind.path(self.namespace)
        body = {"apiVersion": kind.api_version, "kind": kind.kind, "metadata": {"name": name},
                "spec": {"replicas": replicas}}  # fmt: skip
        await self.ok("POST", path, body)
        status: Doc = {"replicas": 0}
        if selector is not None:
            status["selector"] = selector
        await self.ok("PATCH", f"{path}/{name}/status", {"status": status}, content_type=MERGE)

    async def touch(self, kind: CustomKind, name: str) -> None:
        await self.ok("PATCH", kind.path(self.namespace, name),
                      {"metadata": {"annotations": {"touched": str(time.time())}}},
                      content_type=MERGE)  # fmt: skip

    def kubeconfig(self) -> Path:
        return self.cluster.admin_kubeconfig


def install_custom_kinds(cluster: Cluster) -> None:
    """The suite's CRDs on the real server, Established (once a session)."""
    cluster.apply([k.crd() for k in CUSTOM_KINDS])
    for kind in CUSTOM_KINDS:
        cluster.kubectl(
            "wait", "--for=condition=Established", f"crd/{kind.plural}.{kind.group}",
            "--timeout=30s",
        )  # fmt: skip


def remove_custom_kinds(cluster: Cluster) -> None:
    for kind in CUSTOM_KINDS:
        cluster.request(
            "DELETE",
            f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{kind.plural}.{kind.group}",
            ok=(200, 202, 404),
        )
