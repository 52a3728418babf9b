"""A real Kubernetes control plane for tests, built from Kubernetes' own Go modules.

- :mod:`.build`: the binaries (one multi-call ``kubeplane``: etcd, kube-apiserver,
  kube-controller-manager, kube-scheduler, kubectl, kwok; and Prometheus 3), built once per
  version into a cache outside the clone (:func:`ensure_binary`).
- :mod:`.plane`: :class:`ControlPlane`, those servers on loopback in a folder of their own,
  with a CA made at start, RBAC, an admin token and kwok nodes whose pods become Ready after
  a delay that plays a model load.
- :mod:`.external`: :func:`from_kubeconfig`, any cluster (kind, k3d) as the same
  :class:`Cluster`, with kwok nodes of its own.
- :mod:`.cluster`: :class:`Cluster`, what tests call: the API with a bearer token, kubectl,
  namespaces, ServiceAccount tokens and kubeconfigs.

``python -m scaler.sim.controlplane build|up`` does the same for a person.
"""

from scaler.sim.controlplane.build import (
    ETCD_VERSION,
    KUBEPLANE,
    KUBERNETES_VERSION,
    KWOK_VERSION,
    PROMETHEUS3,
    PROMETHEUS3_VERSION,
    BuildError,
    BuildResult,
    GoNotFoundError,
    GoProgram,
    binary_path,
    cache_dir,
    ensure_binary,
)
from scaler.sim.controlplane.cluster import Cluster, ClusterError, write_token_kubeconfig
from scaler.sim.controlplane.external import ExternalCluster, from_kubeconfig
from scaler.sim.controlplane.kwok import KWOK_NODE_LABEL, KWOK_TAINT, POD_PLACEMENT, KwokNodes
from scaler.sim.controlplane.plane import ControlPlane
from scaler.sim.controlplane.processes import Component, ComponentError
from scaler.sim.controlplane.stages import DELETE_DELAY_ANNOTATION, READY_DELAY_ANNOTATION

__all__ = [
    "DELETE_DELAY_ANNOTATION",
    "ETCD_VERSION",
    "KUBEPLANE",
    "KUBERNETES_VERSION",
    "KWOK_NODE_LABEL",
    "KWOK_TAINT",
    "KWOK_VERSION",
    "POD_PLACEMENT",
    "PROMETHEUS3",
    "PROMETHEUS3_VERSION",
    "READY_DELAY_ANNOTATION",
    "BuildError",
    "BuildResult",
    "Cluster",
    "ClusterError",
    "Component",
    "ComponentError",
    "ControlPlane",
    "ExternalCluster",
    "GoNotFoundError",
    "GoProgram",
    "KwokNodes",
    "binary_path",
    "cache_dir",
    "ensure_binaries",
    "ensure_binary",
    "from_kubeconfig",
    "write_token_kubeconfig",
]


def ensure_binaries() -> dict[str, BuildResult]:
    """The control plane's binary, built if it is not cached (``{"kubeplane": result}``).

    Raises:
        GoNotFoundError: it must be built and there is no Go toolchain.
        BuildError: the build failed.
    """
    return {KUBEPLANE.name: ensure_binary(KUBEPLANE)}
