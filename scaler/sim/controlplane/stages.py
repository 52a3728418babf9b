"""kwok's Stages for the test nodes and pods: what a kubelet would report, with a delay to
Ready that plays a model load.

kwok (``sigs.k8s.io/kwok``) plays the kubelet of the nodes it manages: each Stage selects
objects by their fields and, after its delay, writes a status (or deletes the object). These
Stages:

- ``node-ready``: a node kwok manages becomes Ready with a large capacity;
  ``node-heartbeat``: its conditions are renewed (kwok renews the node's Lease by itself).
- ``pod-ready``: a scheduled pod becomes Running and Ready, its containers started, after
  the pod's annotation :data:`READY_DELAY_ANNOTATION` (a Go duration, ``"20s"``) or else the
  control plane's default delay. That delay is the model load of a vLLM replica: the pod
  exists, is counted in ``status.replicas``, and is not Ready yet.
- ``pod-delete``: a pod with a deletionTimestamp is removed after the annotation
  :data:`DELETE_DELAY_ANNOTATION` or the default delay (a drain, cut to what tests need).

The annotation names are kwok's own (``<stage>.stage.kwok.x-k8s.io/delay``), so that a pod
template written for kwok elsewhere behaves the same here.
"""

from __future__ import annotations

from typing import Any, Final

__all__ = ["DELETE_DELAY_ANNOTATION", "READY_DELAY_ANNOTATION", "stages"]

READY_DELAY_ANNOTATION: Final = "pod-ready.stage.kwok.x-k8s.io/delay"
DELETE_DELAY_ANNOTATION: Final = "pod-delete.stage.kwok.x-k8s.io/delay"

_API = "kwok.x-k8s.io/v1alpha1"

# Node conditions as a healthy kubelet reports them (kwok's NodeConditions function).
_NODE_STATUS: Final = """\
{{ $now := Now }}
conditions:
{{ range NodeConditions }}
- lastHeartbeatTime: {{ $now | Quote }}
  lastTransitionTime: {{ or $.metadata.creationTimestamp $now | Quote }}
  message: {{ .message | Quote }}
  reason: {{ .reason | Quote }}
  status: {{ .status | Quote }}
  type: {{ .type | Quote }}
{{ end }}
addresses:
{{ with NodeIP }}
- address: {{ . | Quote }}
  type: InternalIP
{{ end }}
{{ with NodeName }}
- address: {{ . | Quote }}
  type: Hostname
{{ end }}
allocatable:
  cpu: 1k
  memory: 1Ti
  pods: 1k
  nvidia.com/gpu: 1k
capacity:
  cpu: 1k
  memory: 1Ti
  pods: 1k
  nvidia.com/gpu: 1k
nodeInfo:
  architecture: amd64
  operatingSystem: linux
  kubeletVersion: {{ printf "kwok-%s" Version | Quote }}
  containerRuntimeVersion: {{ printf "kwok-%s" Version | Quote }}
  kernelVersion: {{ printf "kwok-%s" Version | Quote }}
  kubeProxyVersion: {{ printf "kwok-%s" Version | Quote }}
phase: Running
"""

_POD_READY_STATUS: Final = """\
{{ $now := Now }}
conditions:
- lastTransitionTime: {{ $now | Quote }}
  status: "True"
  type: Initialized
- lastTransitionTime: {{ $now | Quote }}
  status: "True"
  type: ContainersReady
- lastTransitionTime: {{ $now | Quote }}
  status: "True"
  type: Ready
{{ range .spec.readinessGates }}
- lastTransitionTime: {{ $now | Quote }}
  status: "True"
  type: {{ .conditionType | Quote }}
{{ end }}
containerStatuses:
{{ range .spec.containers }}
- image: {{ .image | Quote }}
  name: {{ .name | Quote }}
  ready: true
  started: true
  restartCount: 0
  state:
    running:
      startedAt: {{ $now | Quote }}
{{ end }}
{{ with NodeIPWith $.spec.nodeName }}
hostIP: {{ . | Quote }}
{{ end }}
{{ with PodIPWith $.spec.nodeName false $.metadata.uid $.metadata.name $.metadata.namespace }}
podIP: {{ . | Quote }}
{{ end }}
phase: Running
startTime: {{ $now | Quote }}
"""


def _ms(seconds: float) -> int:
    return max(0, round(seconds * 1000))


def stages(*, ready_delay_seconds: float, delete_delay_seconds: float) -> list[dict[str, Any]]:
    """The Stage documents (kwok's ``--config`` file holds them, YAML documents).

    Args:
        ready_delay_seconds: a pod's default time from being scheduled to Ready.
        delete_delay_seconds: a deleted pod's default time until it is gone.
    """

    def stage(name: str, kind: str, selector: list[dict[str, Any]], spec: dict[str, Any]) -> Any:
        return {
            "apiVersion": _API,
            "kind": "Stage",
            "metadata": {"name": name},
            "spec": {
                "resourceRef": {"apiGroup": "v1", "kind": kind},
                "selector": {"matchExpressions": selector},
                **spec,
            },
        }

    node_not_ready = {
        "key": '.status.conditions.[] | select( .type == "Ready" ) | .status',
        "operator": "NotIn",
        "values": ["True"],
    }
    node_ready = {**node_not_ready, "operator": "In"}
    alive = {"key": ".metadata.deletionTimestamp", "operator": "DoesNotExist"}
    return [
        stage("node-ready", "Node", [node_not_ready], {"next": {"statusTemplate": _NODE_STATUS}}),
        stage(
            "node-heartbeat",
            "Node",
            [node_ready],
            {
                "delay": {"durationMilliseconds": 20_000, "jitterDurationMilliseconds": 25_000},
                "next": {"statusTemplate": _NODE_STATUS},
            },
        ),
        stage(
            "pod-ready",
            "Pod",
            [
                alive,
                {"key": ".spec.nodeName", "operator": "Exists"},
                {"key": ".status.phase", "operator": "In", "values": ["Pending"]},
            ],
            {
                "delay": {
                    "durationMilliseconds": _ms(ready_delay_seconds),
                    "durationFrom": {
                        "expressionFrom": f'.metadata.annotations["{READY_DELAY_ANNOTATION}"]'
                    },
                },
                "next": {"statusTemplate": _POD_READY_STATUS},
            },
        ),
        stage(
            "pod-delete",
            "Pod",
            [{"key": ".metadata.deletionTimestamp", "operator": "Exists"}],
            {
                "delay": {
                    "durationMilliseconds": _ms(delete_delay_seconds),
                    "durationFrom": {
                        "expressionFrom": f'.metadata.annotations["{DELETE_DELAY_ANNOTATION}"]'
                    },
                },
                "next": {"delete": True},
            },
        ),
    ]
