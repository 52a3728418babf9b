"""Any cluster given by a kubeconfig (kind, k3d, a shared test cluster) as a :class:`Cluster`.

Whatever the kubeconfig authenticates with (client certificates, an exec plugin), the tests
call the API with a bearer token, as they do on the control plane started here: the user's
kubectl creates a ServiceAccount bound to ``cluster-admin`` in a namespace of this run and a
token for it (the TokenRequest API), and :meth:`ExternalCluster.stop` deletes both. kwok
runs here against that cluster for the test pods' nodes (:class:`~.kwok.KwokNodes`: fake
nodes of this run only, tainted, so that the cluster's own workloads never land on them).
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import secrets
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any, Self

from scaler.sim.controlplane.build import KUBEPLANE, ensure_binary
from scaler.sim.controlplane.cluster import Cluster, ClusterError
from scaler.sim.controlplane.kwok import KwokNodes

__all__ = ["ExternalCluster", "from_kubeconfig"]


def _user_kubectl(kubectl: list[str], kubeconfig: str, *args: str) -> str:
    done = subprocess.run(
        [*kubectl, f"--kubeconfig={kubeconfig}", *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    if done.returncode != 0:
        raise ClusterError(
            f"kubectl {' '.join(args)} (KUBECONFIG={kubeconfig}) exited {done.returncode}: "
            f"{done.stderr.strip()}"
        )
    return done.stdout


def _ca_data(cluster: dict[str, Any]) -> bytes | None:
    if cluster.get("certificate-authority-data"):
        return base64.b64decode(cluster["certificate-authority-data"])
    if cluster.get("certificate-authority"):
        return Path(cluster["certificate-authority"]).read_bytes()
    return None


class ExternalCluster(Cluster):
    """A cluster reached through the user's kubeconfig, with kwok nodes of this run.

    Args:
        kubeconfig: the kubeconfig (a ``:``-separated list as ``$KUBECONFIG`` is).
        workdir: where this run's files go (default: a temporary folder).
        nodes, ready_delay_seconds, delete_delay_seconds: the kwok nodes (see
            :class:`~.kwok.KwokNodes`).
    """

    def __init__(
        self,
        kubeconfig: str,
        *,
        workdir: Path | None = None,
        nodes: int = 2,
        ready_delay_seconds: float = 3.0,
        delete_delay_seconds: float = 0.5,
    ) -> None:
        self._own_workdir = workdir is None
        root = Path(tempfile.mkdtemp(prefix="kubeplane-")) if workdir is None else workdir
        root.mkdir(parents=True, exist_ok=True)
        self.kubeplane = ensure_binary(KUBEPLANE).path
        kubectl = [str(self.kubeplane), "kubectl"]
        self.user_kubeconfig = kubeconfig
        view = json.loads(
            _user_kubectl(kubectl, kubeconfig, "config", "view", "--raw", "--minify", "-o=json")
        )
        cluster = view["clusters"][0]["cluster"]
        self.admin_namespace = f"vllm-scaler-tests-{secrets.token_hex(3)}"
        ns = self.admin_namespace
        for args in (
            ("create", "namespace", ns),
            ("create", "serviceaccount", "admin", "-n", ns),
            (
                "create",
                "clusterrolebinding",
                ns,
                "--clusterrole=cluster-admin",
                f"--serviceaccount={ns}:admin",
            ),
        ):
            _user_kubectl(kubectl, kubeconfig, *args)
        token = _user_kubectl(
            kubectl, kubeconfig, "create", "token", "admin", "-n", ns, "--duration=24h"
        ).strip()
        super().__init__(
            server=cluster["server"],
            admin_token=token,
            ca_data=_ca_data(cluster),
            kubectl=kubectl,
            workdir=root,
        )
        self.root = root
        self.kwok = KwokNodes(
            self,
            kubeplane=self.kubeplane,
            workdir=root / "kwok",
            nodes=nodes,
            ready_delay_seconds=ready_delay_seconds,
            delete_delay_seconds=delete_delay_seconds,
        )

    def start(self, *, timeout: float = 120.0) -> Self:
        """Start kwok and wait for its nodes."""
        self.kwok.start(timeout=timeout)
        return self

    def stop(self) -> None:
        """Stop kwok, delete its nodes, the admin ServiceAccount's binding and namespace."""
        self.kwok.stop()
        kubectl = [str(self.kubeplane), "kubectl"]
        for args in (
            ("delete", "clusterrolebinding", self.admin_namespace, "--ignore-not-found"),
            ("delete", "namespace", self.admin_namespace, "--ignore-not-found", "--wait=false"),
        ):
            with contextlib.suppress(ClusterError):  # best effort: the cluster may be gone
                _user_kubectl(kubectl, self.user_kubeconfig, *args)
        self.close()
        if self._own_workdir:
            shutil.rmtree(self.root, ignore_errors=True)


def from_kubeconfig(kubeconfig: str | None = None, **kwargs: Any) -> ExternalCluster:
    """The cluster of ``kubeconfig`` (default ``$KUBECONFIG``), not started yet.

    Raises:
        ClusterError: no kubeconfig given, or kubectl cannot read it.
    """
    source = kubeconfig or os.environ.get("KUBECONFIG")
    if not source:
        raise ClusterError("no kubeconfig: pass one or set KUBECONFIG")
    return ExternalCluster(source, **kwargs)
