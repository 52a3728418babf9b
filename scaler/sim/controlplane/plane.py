"""A real Kubernetes control plane on loopback: etcd, kube-apiserver, kube-controller-manager,
kube-scheduler and kwok, in a folder of their own, stopped together.

What is set up, and why:

- A CA, the API server's serving certificate and the service-account signing key are made at
  each start (:mod:`.pki`); clients verify the server with the CA.
- Authentication by bearer tokens: a static token file holds the admin (group
  ``system:masters``), the controller manager and the scheduler (their own users, which the
  server's bootstrap RBAC authorizes), and kwok (an admin: it writes node and pod status).
  A ServiceAccount's token comes from the TokenRequest API
  (:meth:`~scaler.sim.controlplane.cluster.Cluster.service_account_token`), signed by the key
  made here.
- Authorization ``Node,RBAC`` (kubeadm's), so the RBAC a test installs is what it gets.
- The controller manager runs every default controller with a client per controller
  (``--use-service-account-credentials``, as kubeadm does), so the Deployment, ReplicaSet,
  StatefulSet, HorizontalPodAutoscaler, garbage-collector and namespace controllers behave as
  in any cluster. Its feature gates can be changed for a test (:meth:`restart_controller_manager`).
- No component serves anything but the API server and etcd, both on 127.0.0.1 only; the
  controller manager and scheduler have their secure ports off, and leader election off (one
  of each).
- etcd runs without fsync: a test cluster's data need not survive a power cut, and fsync is
  most of etcd's latency on a shared disk.
"""

from __future__ import annotations

import csv
import secrets
import shutil
import ssl
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Self

import httpx

from scaler.sim.controlplane.build import KUBEPLANE, ensure_binary
from scaler.sim.controlplane.cluster import Cluster, ClusterError, write_token_kubeconfig
from scaler.sim.controlplane.kwok import KwokNodes
from scaler.sim.controlplane.pki import make_pki
from scaler.sim.controlplane.processes import Component, ComponentError
from scaler.sim.prometheus_server import free_port

__all__ = ["ControlPlane"]

_SERVICE_CIDR = "10.96.0.0/16"  # addresses of Services: data only, no traffic


def _wait_http(
    url: str,
    component: Component,
    *,
    timeout: float,
    verify: ssl.SSLContext | bool,
    token: str | None,
) -> None:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    deadline = time.monotonic() + timeout
    last = "no answer"
    with httpx.Client(verify=verify, timeout=2.0, headers=headers) as client:
        while time.monotonic() < deadline:
            component.check()
            try:
                resp = client.get(url)
                if resp.status_code == 200:
                    return
                last = f"HTTP {resp.status_code}: {resp.text[:300]}"
            except httpx.TransportError as err:
                last = repr(err)
            time.sleep(0.1)
    raise ComponentError(
        f"{component.name} not ready within {timeout:g} s ({url}: {last}); log tail:\n"
        + component.log_tail()
    )


class ControlPlane(Cluster):
    """The servers of a Kubernetes cluster started here (see the module's notes).

    Use as ``with ControlPlane() as plane: ...`` or :meth:`start` / :meth:`stop`.

    Args:
        workdir: the folder of every file and log (default: a new temporary folder, removed
            by :meth:`stop` unless ``keep``).
        kubeplane: the multi-call binary (default: :func:`ensure_binary` of
            :data:`~scaler.sim.controlplane.build.KUBEPLANE`, built if not cached).
        nodes: how many kwok nodes (two zones, round-robin).
        ready_delay_seconds: a pod's time from scheduled to Ready (the model load), unless
            its annotation says otherwise (:data:`~.stages.READY_DELAY_ANNOTATION`).
        delete_delay_seconds: a deleted pod's time until it is gone.
        controller_manager_feature_gates: ``--feature-gates`` of the controller manager.
        keep: leave the folder after stop (to read the logs).
    """

    def __init__(
        self,
        workdir: Path | None = None,
        *,
        kubeplane: Path | None = None,
        nodes: int = 2,
        ready_delay_seconds: float = 3.0,
        delete_delay_seconds: float = 0.5,
        controller_manager_feature_gates: Mapping[str, bool] | None = None,
        keep: bool = False,
    ) -> None:
        self._own_workdir = workdir is None
        self.root = Path(tempfile.mkdtemp(prefix="kubeplane-")) if workdir is None else workdir
        self.root.mkdir(parents=True, exist_ok=True)
        self.keep = keep
        self.kubeplane = kubeplane or ensure_binary(KUBEPLANE).path
        self.nodes = nodes
        self.ready_delay_seconds = ready_delay_seconds
        self.delete_delay_seconds = delete_delay_seconds
        self.feature_gates = dict(controller_manager_feature_gates or {})
        self.pki = make_pki(self.root / "pki")
        self._tokens = {
            "admin": secrets.token_hex(24),
            "system:kube-controller-manager": secrets.token_hex(24),
            "system:kube-scheduler": secrets.token_hex(24),
        }
        self.etcd_port, self.port = free_port(), free_port()
        super().__init__(
            server=f"https://127.0.0.1:{self.port}",
            admin_token=self._tokens["admin"],
            ca_data=self.pki.ca.read_bytes(),
            kubectl=[str(self.kubeplane), "kubectl"],
            workdir=self.root,
        )
        self.etcd = self._etcd()
        self.apiserver = self._apiserver()
        self.scheduler = self._scheduler()
        self.controller_manager = self._controller_manager()
        self.kwok = KwokNodes(
            self,
            kubeplane=self.kubeplane,
            workdir=self.root / "kwok",
            nodes=nodes,
            ready_delay_seconds=ready_delay_seconds,
            delete_delay_seconds=delete_delay_seconds,
        )
        #: seconds :meth:`start` took (None before)
        self.start_seconds: float | None = None

    # ------------------------------------------------------------------ components

    def _component(self, name: str, *args: str) -> Component:
        return Component(
            name,
            [str(self.kubeplane), name, *args],
            workdir=self.root,
            env={"HOME": str(self.root), "PATH": "/usr/bin:/bin"},
        )

    def _etcd(self) -> Component:
        peer = free_port()
        client = f"http://127.0.0.1:{self.etcd_port}"
        return self._component(
            "etcd",
            "--name=etcd0",
            f"--data-dir={self.root / 'etcd'}",
            f"--listen-client-urls={client}",
            f"--advertise-client-urls={client}",
            f"--listen-peer-urls=http://127.0.0.1:{peer}",
            f"--initial-advertise-peer-urls=http://127.0.0.1:{peer}",
            f"--initial-cluster=etcd0=http://127.0.0.1:{peer}",
            "--unsafe-no-fsync",
            "--log-level=warn",
        )

    def _apiserver(self) -> Component:
        tokens = self.root / "tokens.csv"
        with open(tokens, "w", encoding="utf-8", newline="") as f:
            writer = csv.writer(f)
            writer.writerow([self._tokens["admin"], "admin", "admin", "system:masters"])
            for user in ("system:kube-controller-manager", "system:kube-scheduler"):
                writer.writerow([self._tokens[user], user, user])
        tokens.chmod(0o600)
        return self._component(
            "kube-apiserver",
            f"--etcd-servers=http://127.0.0.1:{self.etcd_port}",
            "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1",
            f"--secure-port={self.port}",
            f"--tls-cert-file={self.pki.server_cert}",
            f"--tls-private-key-file={self.pki.server_key}",
            f"--client-ca-file={self.pki.ca}",
            f"--token-auth-file={tokens}",
            "--authorization-mode=Node,RBAC",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-account-key-file={self.pki.sa_public}",
            f"--service-account-signing-key-file={self.pki.sa_key}",
            f"--service-cluster-ip-range={_SERVICE_CIDR}",
            # the `kubernetes` Service's endpoints would be 127.0.0.1, which Endpoints refuse
            "--endpoint-reconciler-type=none",
            f"--cert-dir={self.root / 'apiserver-certs'}",
            "--allow-privileged=true",
            "--profiling=false",
        )

    def _kubeconfig(self, user: str) -> Path:
        return write_token_kubeconfig(
            self.root / f"{user.rsplit(':', 1)[-1]}.kubeconfig",
            server=self.server,
            token=self._tokens[user],
            ca_data=self.ca_data,
        )

    def _controller_manager(self) -> Component:
        kubeconfig = self._kubeconfig("system:kube-controller-manager")
        args = [
            f"--kubeconfig={kubeconfig}",
            f"--authentication-kubeconfig={kubeconfig}",
            f"--authorization-kubeconfig={kubeconfig}",
            "--secure-port=0",
            "--leader-elect=false",
            "--use-service-account-credentials=true",
            f"--root-ca-file={self.pki.ca}",
            f"--service-cluster-ip-range={_SERVICE_CIDR}",
            # the HPA controller asks the metrics APIs (absent here) every 15 s by default
            "--horizontal-pod-autoscaler-sync-period=5s",
        ]
        if self.feature_gates:
            gates = ",".join(f"{k}={str(v).lower()}" for k, v in sorted(self.feature_gates.items()))
            args.append(f"--feature-gates={gates}")
        return self._component("kube-controller-manager", *args)

    def _scheduler(self) -> Component:
        kubeconfig = self._kubeconfig("system:kube-scheduler")
        return self._component(
            "kube-scheduler",
            f"--kubeconfig={kubeconfig}",
            f"--authentication-kubeconfig={kubeconfig}",
            f"--authorization-kubeconfig={kubeconfig}",
            "--secure-port=0",
            "--leader-elect=false",
        )

    # ------------------------------------------------------------------ lifecycle

    def start(self, *, timeout: float = 120.0) -> Self:
        """Start every component; return once the API server is ready, the nodes are Ready
        and the controller manager has created the ``default`` ServiceAccount.

        Raises:
            ComponentError: a component exited or was not ready in time (with its log).
        """
        started = time.monotonic()
        try:
            self.etcd.start()
            _wait_http(
                f"http://127.0.0.1:{self.etcd_port}/health",
                self.etcd,
                timeout=timeout,
                verify=False,
                token=None,
            )
            self.apiserver.start()
            _wait_http(
                f"{self.server}/readyz",
                self.apiserver,
                timeout=timeout,
                verify=self.tls_context(),
                token=self.admin_token,
            )
            self.controller_manager.start()
            self.scheduler.start()
            self.kwok.start(timeout=timeout)
            self._wait_controllers(timeout)
        except BaseException:
            self.stop()
            raise
        self.start_seconds = time.monotonic() - started
        return self

    def _wait_controllers(self, timeout: float) -> None:
        def ready() -> bool:
            self.controller_manager.check()
            self.scheduler.check()
            return self.exists("/api/v1/namespaces/default/serviceaccounts/default")

        try:
            self.wait_for(ready, timeout=timeout, what="the controller manager")
        except ClusterError as err:
            raise ComponentError(
                f"{err}; log tail:\n{self.controller_manager.log_tail()}"
            ) from None

    def restart_controller_manager(self, feature_gates: Mapping[str, bool]) -> None:
        """Run the controller manager anew with ``feature_gates`` (``{}``: the defaults),
        for a test of a behaviour a gate turns off (``PodDeletionCost``)."""
        self.controller_manager.stop()
        self.feature_gates = dict(feature_gates)
        self.controller_manager = self._controller_manager()
        self.controller_manager.start()
        self._wait_controllers(60.0)

    def components(self) -> Sequence[Component]:
        """Every process, in start order."""
        return (
            self.etcd,
            self.apiserver,
            self.controller_manager,
            self.scheduler,
            self.kwok.component,
        )

    def stop(self) -> None:
        """Stop every component (kwok first, etcd last) and remove the folder unless ``keep``."""
        if self.apiserver.running():
            self.kwok.stop()
        else:
            self.kwok.component.stop()
        for component in reversed(self.components()[:-1]):
            component.stop()
        self.close()
        if self._own_workdir and not self.keep:
            shutil.rmtree(self.root, ignore_errors=True)
