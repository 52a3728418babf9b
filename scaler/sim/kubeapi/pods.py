"""core/v1 Pods: created and driven from Python by the simulated fleet; over HTTP, get, list
and a PATCH of labels and annotations only."""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Mapping
from typing import Any

from scaler.sim.kubeapi.base import StoreBase, rfc3339
from scaler.sim.kubeapi.errors import (
    JSON,
    DecodeError,
    bad_request,
    conflict,
    invalid,
    name_mismatch,
    not_found,
)
from scaler.sim.kubeapi.selectors import parse_label_selector

POD_DELETION_COST_ANNOTATION = "controller.kubernetes.io/pod-deletion-cost"


def is_deletion_cost(value: str) -> bool:
    """A canonical int32, as the API validates the annotation since 1.21: an optional
    ``-``, then digits without a leading zero (``0`` itself, and ``-007``, pass; ``+5`` and
    ``007`` do not; kubernetes pkg/apis/core/helper ``GetDeletionCostFromPodAnnotations``)."""
    if re.fullmatch(r"-[0-9]+|0|[1-9][0-9]*", value) is None:
        return False
    return -(2**31) <= int(value) < 2**31


def _ready_condition(ready: bool, when: str) -> JSON:
    return {
        "type": "Ready",
        "status": "True" if ready else "False",
        "lastProbeTime": None,
        "lastTransitionTime": when,
    }


def pod_ready(pod: Mapping[str, Any]) -> bool:
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in pod["status"].get("conditions", [])
    )


class Pods(StoreBase):
    """The pods of the simulated cluster, keyed by (namespace, name)."""

    def __init__(self, now: Callable[[], float]) -> None:
        super().__init__(now)
        self._pods: dict[tuple[str, str], JSON] = {}

    def _pods_changed(self, namespace: str) -> None:
        """Called after the pods of ``namespace`` changed (workloads recompute their status)."""

    def add_pod(
        self,
        namespace: str,
        name: str,
        labels: Mapping[str, str],
        *,
        ready: bool = False,
        phase: str | None = None,
        created_at: float | None = None,
        owner: JSON | None = None,
    ) -> JSON:
        """Create a pod. ``phase`` defaults to Running when ready, Pending otherwise.

        ``created_at`` (epoch seconds) backdates creationTimestamp; ``owner`` (an
        :func:`~scaler.sim.kubeapi.base.owner_reference`) is its controller, as a ReplicaSet
        or StatefulSet owns the pods it creates. Returns a copy.

        Raises:
            ValueError: a pod with that name exists.
        """
        if (namespace, name) in self._pods:
            raise ValueError(f"pod {namespace}/{name} exists")
        meta = self._meta(namespace, name, labels)
        if created_at is not None:
            meta["creationTimestamp"] = rfc3339(created_at)
        if owner is not None:
            meta["ownerReferences"] = [dict(owner)]
        pod: JSON = {
            "metadata": meta,
            "spec": {
                "containers": [{"name": "vllm", "image": "vllm/vllm-openai"}],
                "terminationGracePeriodSeconds": 30,
            },
            "status": {
                "phase": phase or ("Running" if ready else "Pending"),
                "conditions": [_ready_condition(ready, meta["creationTimestamp"])],
            },
        }
        self._pods[(namespace, name)] = pod
        self._pods_changed(namespace)
        return copy.deepcopy(pod)

    def _pod(self, namespace: str, name: str) -> JSON:
        pod = self._pods.get((namespace, name))
        if pod is None:
            raise not_found("", "pods", name)
        return pod

    def get_pod(self, namespace: str, name: str) -> JSON:
        """A copy of a pod (ApiError 404 when missing)."""
        return copy.deepcopy(self._pod(namespace, name))

    def set_pod_ready(
        self, namespace: str, name: str, ready: bool = True, *, phase: str | None = None
    ) -> None:
        """Set the Ready condition (and phase: Running when ready unless given). As the kubelet
        does, ``lastTransitionTime`` moves only when the status changes."""
        pod = self._pod(namespace, name)
        if pod_ready(pod) != ready or not pod["status"].get("conditions"):
            pod["status"]["conditions"] = [_ready_condition(ready, rfc3339(self._now()))]
        if phase is not None:
            pod["status"]["phase"] = phase
        elif ready:
            pod["status"]["phase"] = "Running"
        pod["metadata"]["resourceVersion"] = self._bump()
        self._pods_changed(namespace)

    def set_pod_status(self, namespace: str, name: str, **status: Any) -> None:
        """Replace fields of a pod's ``status`` as the kubelet or scheduler writes them
        (``phase``, ``reason``, ``message``, ``conditions``, ``containerStatuses``); a field
        given as None is removed."""
        pod = self._pod(namespace, name)
        for key, value in status.items():
            if value is None:
                pod["status"].pop(key, None)
            else:
                pod["status"][key] = copy.deepcopy(value)
        pod["metadata"]["resourceVersion"] = self._bump()
        self._pods_changed(namespace)

    def mark_pod_terminating(
        self, namespace: str, name: str, *, grace_period_seconds: int = 30
    ) -> None:
        """Set deletionTimestamp (now + grace) and deletionGracePeriodSeconds, like a DELETE."""
        pod = self._pod(namespace, name)
        meta = pod["metadata"]
        if "deletionTimestamp" not in meta:
            meta["deletionTimestamp"] = rfc3339(self._now() + grace_period_seconds)
            meta["deletionGracePeriodSeconds"] = grace_period_seconds
            meta["resourceVersion"] = self._bump()
            self._pods_changed(namespace)

    def delete_pod_gracefully(
        self, namespace: str, name: str, grace_period_seconds: int | None = None
    ) -> JSON:
        """A DELETE of a pod: its deletionTimestamp set after its grace period (the pod's
        ``terminationGracePeriodSeconds`` unless given), as the API does for a pod on a
        node; 0 removes it at once. Returns the pod as the answer shows it.

        Raises:
            ApiError: 404 when it does not exist.
        """
        pod = self._pod(namespace, name)
        grace = grace_period_seconds
        if grace is None:
            grace = int(pod["spec"].get("terminationGracePeriodSeconds", 30))
        if grace <= 0:
            gone = copy.deepcopy(pod)
            self.delete_pod(namespace, name)
            return gone
        self.mark_pod_terminating(namespace, name, grace_period_seconds=grace)
        return self.get_pod(namespace, name)

    def delete_pod(self, namespace: str, name: str) -> None:
        """Remove a pod for good (ApiError 404 when missing)."""
        self._pod(namespace, name)
        del self._pods[(namespace, name)]
        self._bump()
        self._pods_changed(namespace)

    def list_pods(self, namespace: str, selector: str = "") -> list[JSON]:
        """Copies of the pods of ``namespace`` matching a label selector, by name.

        Raises:
            SelectorError: the selector does not parse.
        """
        sel = parse_label_selector(selector)
        return [
            copy.deepcopy(p)
            for (ns, name), p in sorted(self._pods.items())
            if ns == namespace and sel.matches(p["metadata"].get("labels", {}))
        ]

    def patch_pod(self, namespace: str, name: str, new_pod: JSON, *, dry_run: bool = False) -> JSON:
        """Store a patched pod (the result of applying a patch to :meth:`get_pod`).

        Only ``metadata.labels`` and ``metadata.annotations`` may change (the rest of a
        running pod is immutable for our purposes: 422, like upstream's "pod updates may not
        change fields other than ..."); label and annotation values must be strings (400,
        as the JSON decoder answers). ``controller.kubernetes.io/pod-deletion-cost`` must be
        an int32 (422).

        Raises:
            ApiError: 404, 400, 409 (resourceVersion precondition), 422.
        """
        pod = self._pod(namespace, name)
        meta = new_pod.get("metadata")
        if not isinstance(meta, dict):
            raise bad_request("metadata must be an object")
        rv = meta.get("resourceVersion") or ""
        if rv and rv != pod["metadata"]["resourceVersion"]:
            raise conflict("", "pods", name)
        if meta.get("name", name) != name:
            raise name_mismatch(meta.get("name"), name)
        for f in ("labels", "annotations"):
            values = meta.get(f) or {}
            if not isinstance(values, dict) or not all(isinstance(v, str) for v in values.values()):
                raise DecodeError(
                    "Pod", f"json: cannot unmarshal number into Go struct field "
                    f"ObjectMeta.metadata.{f} of type string",
                )  # fmt: skip
        cost = (meta.get("annotations") or {}).get(POD_DELETION_COST_ANNOTATION)
        if cost is not None and not is_deletion_cost(cost):
            raise invalid(
                "Pod",
                "",
                name,
                [
                    (
                        f"metadata.annotations[{POD_DELETION_COST_ANNOTATION}]",
                        "FieldValueInvalid",
                        f'Invalid value: "{cost}": must be a 32bit integer',
                    )
                ],
            )
        changed = [
            k
            for k in set(new_pod) | set(pod)
            if k not in ("metadata", "status", "kind", "apiVersion")
            and new_pod.get(k) != pod.get(k)
        ]
        fixed = ("name", "namespace", "uid", "creationTimestamp", "deletionTimestamp")
        changed += [f"metadata.{k}" for k in fixed if meta.get(k) != pod["metadata"].get(k)]
        if changed:
            raise invalid(
                "Pod",
                "",
                name,
                [
                    (
                        sorted(changed)[0],
                        "FieldValueForbidden",
                        "Forbidden: pod updates may not change fields other than "
                        "`spec.containers[*].image`,`spec.initContainers[*].image`,"
                        "`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to "
                        "existing tolerations),`spec.terminationGracePeriodSeconds` (the "
                        "stand-in changes none of them)",
                    )
                ],
            )
        out = copy.deepcopy(pod)
        for f in ("labels", "annotations"):
            if meta.get(f):
                out["metadata"][f] = dict(meta[f])
            else:
                out["metadata"].pop(f, None)
        if dry_run or out == pod:
            return out
        out["metadata"]["resourceVersion"] = self._bump()
        self._pods[(namespace, name)] = out
        return copy.deepcopy(out)
