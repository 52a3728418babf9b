"""A cluster the tests talk to, whichever started it: the API over HTTP with a bearer token,
kubectl, namespaces, service-account tokens and kubeconfigs.

:class:`Cluster` is what :class:`~scaler.sim.controlplane.plane.ControlPlane` (the servers
started here) and :func:`~scaler.sim.controlplane.external.from_kubeconfig` (any cluster,
kind or k3d) both give. Every call authenticates with a bearer token: the admin's, or a
service account's from the TokenRequest API, so that what a test does as the controller is
authorized by the server's RBAC exactly as in a pod.
"""

from __future__ import annotations

import base64
import json
import ssl
import subprocess
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Self, TypeVar

import httpx
import yaml

__all__ = ["Cluster", "ClusterError", "write_token_kubeconfig"]

T = TypeVar("T")

Doc = dict[str, Any]


class ClusterError(RuntimeError):
    """A call to the cluster failed or a condition was not met in time (the message says
    which, with the server's answer)."""


def write_token_kubeconfig(
    path: Path,
    *,
    server: str,
    token: str,
    ca_data: bytes | None,
    namespace: str = "default",
    name: str = "vllm-scaler-tests",
) -> Path:
    """Write a kubeconfig with one cluster, one bearer-token user and one context ``name``.

    ``ca_data`` is the PEM of the CA that signed the server's certificate (None: the system's
    roots). The file is created with mode 0600, as kubectl does.
    """
    cluster: dict[str, Any] = {"server": server}
    if ca_data is not None:
        cluster["certificate-authority-data"] = base64.b64encode(ca_data).decode()
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": name, "cluster": cluster}],
        "users": [{"name": name, "user": {"token": token}}],
        "contexts": [
            {"name": name, "context": {"cluster": name, "user": name, "namespace": namespace}}
        ],
        "current-context": name,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.touch(mode=0o600)
    path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return path


class Cluster:
    """Access to one cluster as its administrator.

    Args:
        server: the API server's URL (``https://127.0.0.1:PORT``).
        admin_token: a bearer token with every right (``system:masters`` or cluster-admin).
        ca_data: PEM of the CA of the server's certificate (None: the system's roots).
        kubectl: the kubectl command (``[kubeplane, "kubectl"]`` or ``["kubectl"]``).
        workdir: where kubeconfigs and kubectl's cache are written.
    """

    def __init__(
        self,
        *,
        server: str,
        admin_token: str,
        ca_data: bytes | None,
        kubectl: Sequence[str],
        workdir: Path,
    ) -> None:
        self.server = server
        self.admin_token = admin_token
        self.ca_data = ca_data
        self.workdir = workdir
        self._kubectl = list(kubectl)
        self.ca_file: Path | None = None
        if ca_data is not None:
            self.ca_file = workdir / "ca.crt"
            if not self.ca_file.exists():
                self.ca_file.write_bytes(ca_data)
        self.admin_kubeconfig = write_token_kubeconfig(
            workdir / "admin.kubeconfig", server=server, token=admin_token, ca_data=ca_data
        )
        self._http: httpx.Client | None = None

    # ------------------------------------------------------------------ HTTP

    def tls_context(self) -> ssl.SSLContext:
        """Verifies the API server with :attr:`ca_data` (else the system's roots)."""
        if self.ca_data is None:
            return ssl.create_default_context()
        return ssl.create_default_context(cadata=self.ca_data.decode())

    def client(self, token: str | None = None, *, timeout: float = 30.0) -> httpx.Client:
        """An HTTP client for the API with ``token`` (default: the admin's); the caller
        closes it."""
        return httpx.Client(
            base_url=self.server,
            headers={"Authorization": f"Bearer {token or self.admin_token}"},
            verify=self.tls_context(),
            timeout=timeout,
        )

    @property
    def http(self) -> httpx.Client:
        """The admin's HTTP client, shared (closed by :meth:`close`)."""
        if self._http is None:
            self._http = self.client()
        return self._http

    def request(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        content_type: str = "application/json",
        params: Mapping[str, str] | None = None,
        ok: Iterable[int] = (200, 201),
    ) -> Any:
        """Send one request as the admin; the decoded JSON answer.

        Raises:
            ClusterError: the status is not in ``ok`` (the message holds the answer).
        """
        content = None if body is None else json.dumps(body).encode()
        headers = {"Content-Type": content_type} if content is not None else {}
        resp = self.http.request(method, path, content=content, headers=headers, params=params)
        if resp.status_code not in set(ok):
            raise ClusterError(f"{method} {path}: HTTP {resp.status_code}: {resp.text[:500]}")
        return resp.json() if resp.content else None

    def get(self, path: str, **params: str) -> Any:
        """GET ``path`` as the admin (JSON); 404 raises :class:`ClusterError`."""
        return self.request("GET", path, params=params or None)

    def exists(self, path: str) -> bool:
        """Whether GET ``path`` finds the object."""
        return self.http.get(path).status_code == 200

    def pods(self, namespace: str, selector: str | None = None) -> list[Doc]:
        """The pods of ``namespace`` (``selector``: a label selector), as JSON objects."""
        params = {"labelSelector": selector} if selector else {}
        items: list[Doc] = self.get(f"/api/v1/namespaces/{namespace}/pods", **params)["items"]
        return items

    # ------------------------------------------------------------------ kubectl

    def kubectl(
        self,
        *args: str,
        input: str | None = None,
        kubeconfig: Path | None = None,
        check: bool = True,
        timeout: float = 120.0,
    ) -> subprocess.CompletedProcess[str]:
        """Run kubectl against this cluster (as the admin unless ``kubeconfig`` says).

        Raises:
            ClusterError: ``check`` and kubectl exited non-zero (its stderr in the message).
        """
        argv = [
            *self._kubectl,
            f"--kubeconfig={kubeconfig or self.admin_kubeconfig}",
            f"--cache-dir={self.workdir / 'kubectl-cache'}",
            *args,
        ]
        done = subprocess.run(
            argv, input=input, capture_output=True, text=True, timeout=timeout, check=False
        )
        if check and done.returncode != 0:
            raise ClusterError(
                f"kubectl {' '.join(args)} exited {done.returncode}: {done.stderr.strip()}"
            )
        return done

    def apply(self, docs: Iterable[Doc] | str, *, namespace: str | None = None) -> None:
        """``kubectl apply`` of YAML text or objects (server-side, as the admin)."""
        text = docs if isinstance(docs, str) else yaml.safe_dump_all(list(docs), sort_keys=False)
        args = ["apply", "--server-side", "--force-conflicts", "-f", "-"]
        if namespace:
            args += ["-n", namespace]
        self.kubectl(*args, input=text)

    # ------------------------------------------------------------------ objects

    def create_namespace(self, name: str, labels: Mapping[str, str] | None = None) -> None:
        """Create a namespace (labels optional)."""
        meta: dict[str, Any] = {"name": name}
        if labels:
            meta["labels"] = dict(labels)
        self.request("POST", "/api/v1/namespaces", body={"metadata": meta})

    def delete_namespace(self, name: str) -> None:
        """Delete a namespace (the namespace controller removes what is in it later)."""
        self.request("DELETE", f"/api/v1/namespaces/{name}", ok=(200, 202, 404))

    def service_account_token(
        self, namespace: str, name: str, *, expiration_seconds: int = 24 * 3600
    ) -> str:
        """A token of the ServiceAccount ``namespace/name`` from the TokenRequest API (what
        the kubelet mounts in a pod)."""
        answer = self.request(
            "POST",
            f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token",
            body={
                "apiVersion": "authentication.k8s.io/v1",
                "kind": "TokenRequest",
                "spec": {"expirationSeconds": expiration_seconds},
            },
        )
        token: str = answer["status"]["token"]
        return token

    def service_account_kubeconfig(
        self, namespace: str, name: str, path: Path | None = None
    ) -> Path:
        """A kubeconfig that authenticates as the ServiceAccount ``namespace/name``."""
        return write_token_kubeconfig(
            path or self.workdir / f"sa-{namespace}-{name}.kubeconfig",
            server=self.server,
            token=self.service_account_token(namespace, name),
            ca_data=self.ca_data,
            namespace=namespace,
        )

    def wait_for(
        self,
        check: Callable[[], T | None],
        *,
        timeout: float,
        what: str,
        poll_seconds: float = 0.2,
    ) -> T:
        """Poll ``check`` until it returns a true value (not None, False, 0 or empty); return it.

        Raises:
            ClusterError: ``timeout`` seconds passed (the message names ``what``).
        """
        deadline = time.monotonic() + timeout
        while True:
            value = check()
            if value:
                return value
            if time.monotonic() > deadline:
                raise ClusterError(f"timed out after {timeout:g} s waiting for {what}")
            time.sleep(poll_seconds)

    def start(self, *, timeout: float = 120.0) -> Self:
        """Start what this cluster runs here (the servers, or kwok); return it ready."""
        raise NotImplementedError

    def stop(self) -> None:
        """Stop what :meth:`start` started and remove what this run created."""
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def close(self) -> None:
        """Close the shared HTTP client."""
        if self._http is not None:
            self._http.close()
            self._http = None
