"""The ``autoscaling/v1 Scale`` subresource of every workload kind: read, PUT and PATCH."""

from __future__ import annotations

import copy

from scaler.sim.kubeapi.base import Kind
from scaler.sim.kubeapi.errors import (
    JSON,
    ApiError,
    DecodeError,
    bad_request,
    conflict,
    invalid,
    invalid_resource_version,
    name_mismatch,
    namespace_mismatch,
)
from scaler.sim.kubeapi.selectors import format_selector
from scaler.sim.kubeapi.workloads import ScaleChange, Workload, Workloads


class ScaleSubresource(Workloads):
    """``spec.replicas`` of the workloads as Scale objects (see the package docstring)."""

    def _scale_of(self, w: Workload) -> JSON:
        meta = w.obj["metadata"]
        spec: JSON = {}
        if w.obj["spec"]["replicas"]:
            spec["replicas"] = w.obj["spec"]["replicas"]  # omitempty: 0 is left out
        return {
            "kind": "Scale",
            "apiVersion": "autoscaling/v1",
            "metadata": {
                "name": meta["name"],
                "namespace": meta["namespace"],
                "uid": meta["uid"],
                "resourceVersion": meta["resourceVersion"],
                "creationTimestamp": meta["creationTimestamp"],
            },
            "spec": spec,
            "status": self._scale_status(w),
        }

    @staticmethod
    def _scale_status(w: Workload) -> JSON:
        """``status`` of the Scale: ``selector`` is left out (empty) for a CRD without
        ``labelSelectorPath`` and while the field it names is unset."""
        status: JSON = {"replicas": w.obj["status"].get("replicas", 0)}
        selector = (
            w.scale_selector
            if w.scale_selector is not None
            else format_selector(w.obj["spec"]["selector"]["matchLabels"])
        )
        if w.kind.label_selector_path and selector:
            status["selector"] = selector
        return status

    def get_scale(self, group: str, version: str, plural: str, namespace: str, name: str) -> JSON:
        """The ``autoscaling/v1 Scale`` of a workload.

        Raises:
            ApiError: 404 for an unknown kind/version or workload.
        """
        if self._kind(group, version, plural) is None:
            raise ApiError.generic(404)
        return self._scale_of(self._workload(group, plural, namespace, name))

    def write_scale(
        self,
        group: str,
        version: str,
        plural: str,
        namespace: str,
        name: str,
        new_scale: JSON,
        *,
        dry_run: bool = False,
        manager: str = "unknown",
    ) -> JSON:
        """Store ``spec.replicas`` of ``new_scale`` (an updated Scale object); a change makes
        ``manager`` (the request's ``fieldManager``) its owner in ``managedFields``.

        An empty ``resourceVersion`` is an unconditional update, for every kind (the scale
        subresource of a CRD allows it too); one that is no number is a 500 from the
        storage's parser.

        Raises:
            ApiError: 404, 400 (name mismatch; :class:`DecodeError` for a field of the wrong
                type), 409 (resourceVersion), 422 (replicas), 500 (resourceVersion no number).
        """
        kind = self._kind(group, version, plural)
        if kind is None:
            raise ApiError.generic(404)
        w = self._workload(group, plural, namespace, name)
        meta = new_scale.get("metadata") or {}
        if not isinstance(meta, dict):
            raise bad_request("metadata must be an object")
        if meta.get("name", name) != name:
            raise name_mismatch(meta.get("name"), name)
        if meta.get("namespace", namespace) != namespace:
            raise namespace_mismatch()
        rv = meta.get("resourceVersion") or ""
        if not isinstance(rv, str):
            raise DecodeError(
                "Scale", "json: cannot unmarshal number into Go struct field "
                "ObjectMeta.metadata.resourceVersion of type string",
            )  # fmt: skip
        if rv and not rv.isdigit():
            raise invalid_resource_version(rv)
        if rv and rv != w.obj["metadata"]["resourceVersion"]:
            raise conflict(group, plural, name)
        spec = new_scale.get("spec") or {}
        if not isinstance(spec, dict):
            raise DecodeError("Scale", "json: cannot unmarshal into Go struct field Scale.spec")
        replicas = spec.get("replicas", 0)
        if isinstance(replicas, bool) or not isinstance(replicas, int):
            what = "number " + str(replicas) if isinstance(replicas, float) else (
                "string" if isinstance(replicas, str) else type(replicas).__name__
            )  # fmt: skip
            raise DecodeError(
                "Scale",
                f"json: cannot unmarshal {what} into Go struct field ScaleSpec.spec.replicas "
                "of type int32",
            )
        if replicas < 0:
            raise self._negative_replicas(kind, name, replicas)
        old = int(w.obj["spec"]["replicas"])
        if dry_run:
            preview = copy.deepcopy(w)
            preview.obj["spec"]["replicas"] = replicas
            return self._scale_of(preview)
        if replicas != old:  # a no-op write leaves the resourceVersion alone
            w.obj["spec"]["replicas"] = replicas
            self._own_replicas(w, manager, subresource="scale")
            w.obj["metadata"]["generation"] += 1
            w.obj["status"]["observedGeneration"] = w.obj["metadata"]["generation"]
            new_rv = self._bump()
            w.obj["metadata"]["resourceVersion"] = new_rv
            self._notify(ScaleChange(group, plural, namespace, name, old, replicas, new_rv, "api"))
        return self._scale_of(w)

    @staticmethod
    def _negative_replicas(kind: Kind, name: str, replicas: int) -> ApiError:
        """422: the Scale's validation for a built-in kind; a CRD's scale is validated at
        its ``specReplicasPath`` of the custom object, in the CRD's words."""
        if kind.builtin:
            return invalid("Scale", "autoscaling", name, [(
                "spec.replicas", "FieldValueInvalid",
                f"Invalid value: {replicas}: must be greater than or equal to 0",
            )])  # fmt: skip
        return invalid(kind.kind, kind.group, name, [(
            ".spec.replicas", "FieldValueInvalid",
            f"Invalid value: {replicas}: should be a non-negative integer",
        )])  # fmt: skip

    def scale_kind(self, group: str, version: str, plural: str) -> Kind | None:
        """The registered kind at ``/apis/{group}/{version}/.../{plural}``, if any."""
        return self._kind(group, version, plural)
