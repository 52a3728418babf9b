"""Workloads: the kinds with a ``scale`` subresource (apps/v1 Deployment, StatefulSet and
ReplicaSet, and registered custom kinds such as LeaderWorkerSet), their status computed from
the pods, and the callbacks that see every change of ``spec.replicas``."""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Literal

from scaler.sim.kubeapi.base import Kind, rfc3339
from scaler.sim.kubeapi.errors import JSON, not_found, qualified
from scaler.sim.kubeapi.pods import Pods, pod_ready
from scaler.sim.kubeapi.selectors import LabelSelector, format_selector, parse_label_selector


@dataclass(frozen=True, slots=True)
class ScaleChange:
    """A change of a workload's ``spec.replicas``, as given to ``on_scale_change`` callbacks.

    ``source`` is ``"api"`` for a PUT/PATCH through the server and ``"external"`` for
    :meth:`KubeStore.external_scale` (another writer such as ``kubectl scale``).
    """

    group: str
    plural: str
    namespace: str
    name: str
    old_replicas: int
    new_replicas: int
    resource_version: str
    source: Literal["api", "external"]


@dataclass(slots=True)
class Workload:
    """A stored workload object and its parsed selector."""

    kind: Kind
    obj: JSON
    selector: LabelSelector = field(default_factory=LabelSelector)
    #: what the scale subresource answers as ``status.selector`` when it is not the workload's
    #: own selector (a CRD's ``labelSelectorPath`` pointing at a status field its operator
    #: writes: a LeaderWorkerSet's leaders only, or '' before the operator wrote it)
    scale_selector: str | None = None


ScaleCallback = Callable[[ScaleChange], None]


def _controller_uid(meta: JSON) -> str | None:
    """The uid of the controller among ``meta``'s ``ownerReferences``, if any."""
    for ref in meta.get("ownerReferences") or ():
        if ref.get("controller"):
            return str(ref.get("uid"))
    return None


class Workloads(Pods):
    """Workload objects keyed by (group, plural, namespace, name), driven from Python."""

    def __init__(self, now: Callable[[], float]) -> None:
        super().__init__(now)
        self._kinds: dict[tuple[str, str], Kind] = {}
        self._workloads: dict[tuple[str, str, str, str], Workload] = {}
        self._callbacks: list[ScaleCallback] = []

    def register_kind(
        self,
        group: str,
        version: str,
        kind: str,
        plural: str,
        *,
        builtin: bool = False,
        label_selector_path: bool = True,
    ) -> None:
        """Register a kind with a ``scale`` subresource, e.g.
        ``("leaderworkerset.x-k8s.io", "v1", "LeaderWorkerSet", "leaderworkersets")``.

        ``builtin`` kinds accept strategic merge patches and unconditional PUTs (as the
        apps kinds do); custom kinds behave like CRDs. ``label_selector_path`` False: a CRD
        whose scale subresource declares no ``labelSelectorPath``, so ``/scale`` answers no
        ``status.selector``.
        """
        self._kinds[(group, plural)] = Kind(
            group, version, kind, plural, builtin, label_selector_path
        )

    def _kind(self, group: str, version: str, plural: str) -> Kind | None:
        k = self._kinds.get((group, plural))
        return k if k is not None and k.version == version else None

    def add_workload(
        self,
        group: str,
        plural: str,
        namespace: str,
        name: str,
        *,
        replicas: int,
        labels: Mapping[str, str],
        owner: JSON | None = None,
    ) -> JSON:
        """Create a workload of a registered kind selecting pods with ``labels``.

        ``labels`` become ``spec.selector.matchLabels`` and the pod template labels;
        ``owner`` (an :func:`~scaler.sim.kubeapi.base.owner_reference`) its controller, as a
        Deployment owns its ReplicaSets. Returns a copy of the stored object.

        Raises:
            KeyError: the kind is not registered. ValueError: it exists or replicas < 0.
        """
        kind = self._kinds[(group, plural)]
        key = (group, plural, namespace, name)
        if key in self._workloads:
            raise ValueError(f"{qualified(group, plural)} {namespace}/{name} exists")
        if replicas < 0:
            raise ValueError("replicas must be >= 0")
        obj: JSON = {
            "apiVersion": f"{group}/{kind.version}" if group else kind.version,
            "kind": kind.kind,
            "metadata": {
                **self._meta(namespace, name, labels),
                "generation": 1,
                **({"ownerReferences": [dict(owner)]} if owner is not None else {}),
            },
            "spec": {
                "replicas": replicas,
                "selector": {"matchLabels": dict(labels)},
                "template": {
                    "metadata": {"labels": dict(labels)},
                    "spec": {"containers": [{"name": "vllm", "image": "vllm/vllm-openai"}]},
                },
            },
            "status": {"observedGeneration": 1},
        }
        w = Workload(kind, obj, parse_label_selector(format_selector(labels)))
        self._workloads[key] = w
        self._refresh_status(w, bump=False)
        return copy.deepcopy(obj)

    def add_deployment(
        self, namespace: str, name: str, replicas: int, labels: Mapping[str, str]
    ) -> JSON:
        """Create an apps/v1 Deployment (see :meth:`add_workload`)."""
        return self.add_workload(
            "apps", "deployments", namespace, name, replicas=replicas, labels=labels
        )

    def add_statefulset(
        self, namespace: str, name: str, replicas: int, labels: Mapping[str, str]
    ) -> JSON:
        """Create an apps/v1 StatefulSet (see :meth:`add_workload`)."""
        return self.add_workload(
            "apps", "statefulsets", namespace, name, replicas=replicas, labels=labels
        )

    def _workload(self, group: str, plural: str, namespace: str, name: str) -> Workload:
        w = self._workloads.get((group, plural, namespace, name))
        if w is None:
            raise not_found(group, plural, name)
        return w

    def get_workload(
        self, namespace: str, name: str, *, group: str = "apps", plural: str = "deployments"
    ) -> JSON:
        """A copy of the stored workload object.

        Raises:
            ApiError: 404 when it does not exist.
        """
        return copy.deepcopy(self._workload(group, plural, namespace, name).obj)

    def get_spec_replicas(
        self, namespace: str, name: str, *, group: str = "apps", plural: str = "deployments"
    ) -> int:
        """``spec.replicas`` of a workload (ApiError 404 when missing)."""
        return int(self._workload(group, plural, namespace, name).obj["spec"]["replicas"])

    def external_scale(
        self,
        namespace: str,
        name: str,
        replicas: int,
        *,
        group: str = "apps",
        plural: str = "deployments",
        manager: str = "kubectl",
        subresource: str | None = "scale",
    ) -> str:
        """Another writer (``kubectl scale``: field manager ``kubectl``, through the scale
        subresource) sets ``spec.replicas``. Returns the new RV.

        Always bumps the resourceVersion, so a client holding the old one conflicts.
        """
        w = self._workload(group, plural, namespace, name)
        old = int(w.obj["spec"]["replicas"])
        w.obj["spec"]["replicas"] = replicas
        self._own_replicas(w, manager, subresource=subresource)
        rv = self._bump()
        w.obj["metadata"]["resourceVersion"] = rv
        w.obj["metadata"]["generation"] += 1
        w.obj["status"]["observedGeneration"] = w.obj["metadata"]["generation"]
        if old != replicas:
            self._notify(ScaleChange(group, plural, namespace, name, old, replicas, rv, "external"))
        return rv

    def delete_workload(
        self, namespace: str, name: str, *, group: str = "apps", plural: str = "deployments"
    ) -> None:
        """Delete a workload (its pods stay until deleted; ApiError 404 when missing)."""
        self._workload(group, plural, namespace, name)
        del self._workloads[(group, plural, namespace, name)]
        self._bump()

    def touch_workload(
        self, namespace: str, name: str, *, group: str = "apps", plural: str = "deployments"
    ) -> str:
        """Another writer updates the workload without touching replicas (an annotation).

        Returns the new resourceVersion.
        """
        w = self._workload(group, plural, namespace, name)
        rv = self._bump()
        w.obj["metadata"]["resourceVersion"] = rv
        annotations = w.obj["metadata"].setdefault("annotations", {})
        annotations["sim.vllm-scaler/touched"] = rv
        return rv

    def on_scale_change(self, callback: ScaleCallback) -> Callable[[], None]:
        """Call ``callback(change)`` whenever a workload's spec.replicas changes.

        Called synchronously inside the request handler, before the response is sent.
        Returns a function that unsubscribes.
        """
        self._callbacks.append(callback)
        return lambda: self._callbacks.remove(callback)

    def _own_replicas(self, w: Workload, manager: str, *, subresource: str | None) -> None:
        """Record in ``metadata.managedFields`` that ``manager`` now owns ``spec.replicas``
        (an Update: the field moves to it from its former owner, whose entry is dropped once
        it owns nothing), as the API server's field manager does."""
        entries = []
        for entry in w.obj["metadata"].get("managedFields") or []:
            spec = (entry.get("fieldsV1") or {}).get("f:spec") or {}
            if "f:replicas" in spec:
                spec = {k: v for k, v in spec.items() if k != "f:replicas"}
                fields = {k: v for k, v in entry["fieldsV1"].items() if k != "f:spec"}
                if spec:
                    fields["f:spec"] = spec
                if not fields:
                    continue
                entry = {**entry, "fieldsV1": fields}
            entries.append(entry)
        mine: JSON = {
            "manager": manager,
            "operation": "Update",
            "apiVersion": w.obj.get("apiVersion", "apps/v1"),
            "time": rfc3339(self._now()),
            "fieldsType": "FieldsV1",
            "fieldsV1": {"f:spec": {"f:replicas": {}}},
        }
        if subresource is not None:
            mine["subresource"] = subresource
        entries.append(mine)
        w.obj["metadata"]["managedFields"] = entries

    def _notify(self, change: ScaleChange) -> None:
        for cb in list(self._callbacks):
            cb(change)

    def set_workload_spec(
        self,
        namespace: str,
        name: str,
        fields: Mapping[str, object],
        *,
        group: str = "apps",
        plural: str = "deployments",
    ) -> None:
        """Set fields of a workload's ``spec`` beside replicas and selector (a
        LeaderWorkerSet's ``leaderWorkerTemplate``), as its manifest would."""
        w = self._workload(group, plural, namespace, name)
        w.obj["spec"].update(copy.deepcopy(dict(fields)))
        w.obj["metadata"]["resourceVersion"] = self._bump()

    def set_scale_selector(
        self,
        namespace: str,
        name: str,
        selector: str | None,
        *,
        group: str = "apps",
        plural: str = "deployments",
    ) -> None:
        """What the workload's scale subresource answers as ``status.selector`` (its operator
        writing the status field the CRD's ``labelSelectorPath`` names; '' before it does);
        None: the workload's own selector again. ``status.replicas`` counts the pods it
        selects (a LeaderWorkerSet's leaders: its groups)."""
        w = self._workload(group, plural, namespace, name)
        w.scale_selector = selector
        self._refresh_status(w)

    def _counts(self, w: Workload, pod: JSON) -> bool:
        """Whether ``pod`` is one of ``w``'s, as its controller counts them: pods whose
        controller ``ownerReferences`` lead to it (directly, or through a ReplicaSet it
        owns), and pods without a controller that its selector matches (it would adopt
        them; a Deployment's ReplicaSets adopt only what their own selectors match). A
        status field its operator writes (:attr:`Workload.scale_selector`) counts what that
        selector matches."""
        labels = pod["metadata"].get("labels", {})
        if w.scale_selector:
            return parse_label_selector(w.scale_selector).matches(labels)
        uid = w.obj["metadata"]["uid"]
        owner = _controller_uid(pod["metadata"])
        owned = [
            o for o in self._workloads.values()
            if o.obj["metadata"]["namespace"] == w.obj["metadata"]["namespace"]
            and _controller_uid(o.obj["metadata"]) == uid
        ]  # fmt: skip
        if owner is not None:
            return owner == uid or any(o.obj["metadata"]["uid"] == owner for o in owned)
        if not w.selector.matches(labels):
            return False
        return not owned or any(o.selector.matches(labels) for o in owned)

    def _refresh_status(self, w: Workload, *, bump: bool = True) -> None:
        ns = w.obj["metadata"]["namespace"]
        active = [
            p
            for (pns, _), p in self._pods.items()
            if pns == ns
            and "deletionTimestamp" not in p["metadata"]
            and p["status"]["phase"] not in ("Succeeded", "Failed")
            and self._counts(w, p)
        ]
        ready = sum(1 for p in active if pod_ready(p))
        status: JSON = {"observedGeneration": w.obj["metadata"]["generation"]}
        # int32 omitempty fields: zero values are left out, as the API serializes them.
        for k, v in (
            ("replicas", len(active)),
            ("readyReplicas", ready),
            ("availableReplicas", ready),
        ):
            if v:
                status[k] = v
        if status != w.obj["status"]:
            w.obj["status"] = status
            if bump:
                w.obj["metadata"]["resourceVersion"] = self._bump()

    def _pods_changed(self, namespace: str) -> None:
        # A pod change may alter a workload's status, and so bump its resourceVersion.
        for (_, _, ns, _), w in self._workloads.items():
            if ns == namespace:
                self._refresh_status(w)

    def set_workload_annotations(
        self,
        namespace: str,
        name: str,
        annotations: Mapping[str, str | None],
        *,
        group: str = "apps",
        plural: str = "deployments",
    ) -> str:
        """Another writer (``kubectl annotate``) sets or (with None) removes annotations.

        Returns the new resourceVersion.
        """
        w = self._workload(group, plural, namespace, name)
        current = w.obj["metadata"].setdefault("annotations", {})
        for k, v in annotations.items():
            if v is None:
                current.pop(k, None)
            else:
                current[k] = v
        if not current:
            del w.obj["metadata"]["annotations"]
        rv = self._bump()
        w.obj["metadata"]["resourceVersion"] = rv
        return rv
