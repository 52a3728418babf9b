"""kwok: fake nodes, and the kubelet's part of each pod on them (Running, Ready, gone).

:class:`KwokNodes` starts kwok against a cluster (the one started here, or any other: it only
manages the nodes it creates, annotated :data:`KWOK_NODE_ANNOTATION`) and creates the nodes.
Pods reach them through the label :data:`KWOK_NODE_LABEL` and a toleration of
:data:`KWOK_TAINT` (:data:`POD_PLACEMENT` holds both), so that on a cluster with real nodes
(kind, k3d) nothing else lands on a fake node and the test pods land on nothing else.

Pod and node IPs are given from the loopback range (``127.64.0.0/16``, ``127.63.0.1``): they
are data in the API only, never connected to; were anything to try, it stays on this host.
"""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Any, Final

import yaml

from scaler.sim.controlplane.cluster import Cluster, write_token_kubeconfig
from scaler.sim.controlplane.processes import Component
from scaler.sim.controlplane.stages import stages

__all__ = ["KWOK_NODE_ANNOTATION", "KWOK_NODE_LABEL", "KWOK_TAINT", "POD_PLACEMENT", "KwokNodes"]

KWOK_NODE_ANNOTATION: Final = "kwok.x-k8s.io/node"
#: label of every fake node (value ``kwok``)
KWOK_NODE_LABEL: Final = "type"
#: taint of every fake node (``key=value:effect``)
KWOK_TAINT: Final = {"key": "kwok.x-k8s.io/node", "value": "fake", "effect": "NoSchedule"}
#: what a pod template needs to run on the fake nodes (merge into ``spec.template.spec``)
POD_PLACEMENT: Final[dict[str, Any]] = {
    "nodeSelector": {KWOK_NODE_LABEL: "kwok"},
    "tolerations": [{**KWOK_TAINT, "operator": "Equal"}],
}


class KwokNodes:
    """kwok and its nodes on ``cluster``.

    Args:
        cluster: where to create the nodes (as its admin).
        kubeplane: the multi-call binary (``kubeplane kwok``).
        workdir: kwok's folder (its config, kubeconfig, log; also its HOME, so that a
            user's ``~/.kwok`` is not read).
        nodes: how many nodes, spread over ``zones`` round-robin.
        zones: ``topology.kubernetes.io/zone`` values.
        ready_delay_seconds, delete_delay_seconds: a pod's default time to Ready once
            scheduled, and to disappear once deleted (see :mod:`.stages`).
    """

    def __init__(
        self,
        cluster: Cluster,
        *,
        kubeplane: Path,
        workdir: Path,
        nodes: int = 2,
        zones: tuple[str, ...] = ("zone-a", "zone-b"),
        ready_delay_seconds: float = 3.0,
        delete_delay_seconds: float = 0.5,
    ) -> None:
        self.cluster = cluster
        self.workdir = workdir
        self.ready_delay_seconds = ready_delay_seconds
        self.delete_delay_seconds = delete_delay_seconds
        # unique per run: several runs may share one cluster given by KUBECONFIG
        run = secrets.token_hex(3)
        self.node_names = [f"kwok-{run}-{i}" for i in range(nodes)]
        self.zones = zones
        workdir.mkdir(parents=True, exist_ok=True)
        config = workdir / "kwok.yaml"
        config.write_text(
            yaml.safe_dump_all(
                stages(
                    ready_delay_seconds=ready_delay_seconds,
                    delete_delay_seconds=delete_delay_seconds,
                ),
                sort_keys=False,
            ),
            encoding="utf-8",
        )
        kubeconfig = write_token_kubeconfig(
            workdir / "kwok.kubeconfig",
            server=cluster.server,
            token=cluster.admin_token,
            ca_data=cluster.ca_data,
        )
        self.component = Component(
            "kwok",
            [
                str(kubeplane),
                "kwok",
                f"--kubeconfig={kubeconfig}",
                f"--config={config}",
                "--manage-all-nodes=false",
                f"--manage-nodes-with-annotation-selector={KWOK_NODE_ANNOTATION}=fake",
                "--cidr=127.64.0.0/16",
                "--node-ip=127.63.0.1",
                "--node-lease-duration-seconds=40",
            ],
            workdir=workdir,
            env={"HOME": str(workdir), "PATH": "/usr/bin:/bin"},
        )

    def node(self, name: str, zone: str) -> dict[str, Any]:
        """The Node object of one fake node."""
        return {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": name,
                "annotations": {KWOK_NODE_ANNOTATION: "fake"},
                "labels": {
                    "kubernetes.io/hostname": name,
                    "kubernetes.io/os": "linux",
                    "kubernetes.io/arch": "amd64",
                    "topology.kubernetes.io/zone": zone,
                    KWOK_NODE_LABEL: "kwok",
                },
            },
            "spec": {"taints": [KWOK_TAINT]},
        }

    def start(self, *, timeout: float = 60.0) -> None:
        """Start kwok, create the nodes and wait until every one is Ready."""
        self.component.start()
        for i, name in enumerate(self.node_names):
            self.cluster.request(
                "POST", "/api/v1/nodes", body=self.node(name, self.zones[i % len(self.zones)])
            )

        def ready() -> bool:
            self.component.check()
            nodes = self.cluster.get("/api/v1/nodes", labelSelector=f"{KWOK_NODE_LABEL}=kwok")
            status = {
                n["metadata"]["name"]: any(
                    c["type"] == "Ready" and c["status"] == "True"
                    for c in (n.get("status") or {}).get("conditions") or []
                )
                for n in nodes["items"]
            }
            return all(status.get(name) for name in self.node_names)

        self.cluster.wait_for(ready, timeout=timeout, what="the kwok nodes to be Ready")

    def stop(self) -> None:
        """Delete the nodes (best effort) and stop kwok."""
        try:
            for name in self.node_names:
                self.cluster.request("DELETE", f"/api/v1/nodes/{name}", ok=(200, 202, 404))
        except Exception:  # the cluster may be gone already
            pass
        self.component.stop()
