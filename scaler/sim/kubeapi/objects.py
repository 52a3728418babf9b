"""Plain objects: namespaced kinds without a scale subresource (built-in ones such as
Leases and HorizontalPodAutoscalers, and custom resources such as KEDA's ScaledObject),
with get, list, create, update and patch over HTTP."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from scaler.sim.kubeapi.base import Kind, StoreBase
from scaler.sim.kubeapi.errors import (
    JSON,
    ApiError,
    already_exists,
    bad_request,
    conflict,
    invalid,
    invalid_resource_version,
    name_mismatch,
    namespace_mismatch,
    not_found,
    resource_version_required,
)
from scaler.sim.kubeapi.leases import lease_causes
from scaler.sim.kubeapi.selectors import DNS_LABEL, DNS_SUBDOMAIN


class Objects(StoreBase):
    """Plain objects keyed by (group, plural, namespace, name), and their registered kinds."""

    def __init__(self, now: Callable[[], float]) -> None:
        super().__init__(now)
        self._object_kinds: dict[tuple[str, str], Kind] = {}
        self._objects: dict[tuple[str, str, str, str], JSON] = {}

    def register_object_kind(
        self,
        group: str,
        version: str,
        kind: str,
        plural: str,
        *,
        builtin: bool = False,
        unconditional_update: bool | None = None,
        create_on_update: bool = False,
    ) -> None:
        """Serve namespaced objects of a kind without a scale subresource (get, list, create,
        update, patch). ``builtin`` kinds accept strategic merge patches and, unless
        ``unconditional_update`` says otherwise, updates without a ``resourceVersion``;
        custom kinds (CRDs) neither. ``create_on_update``: a PUT of a missing object
        creates it. Unregistered kinds answer 404, as a cluster without the CRD does.
        """
        self._object_kinds[(group, plural)] = Kind(
            group, version, kind, plural, builtin,
            unconditional_update=unconditional_update, create_on_update=create_on_update,
        )  # fmt: skip

    def object_kind(self, group: str, version: str, plural: str) -> Kind | None:
        """The registered plain kind at ``/apis/{group}/{version}/.../{plural}``, if any."""
        k = self._object_kinds.get((group, plural))
        return k if k is not None and k.version == version else None

    def _plain_kind(self, group: str, version: str, plural: str) -> Kind:
        k = self.object_kind(group, version, plural)
        if k is None:
            raise ApiError.generic(404)
        return k

    def get_object(self, group: str, plural: str, namespace: str, name: str) -> JSON:
        """A copy of a stored plain object (ApiError 404 when missing)."""
        obj = self._objects.get((group, plural, namespace, name))
        if obj is None:
            raise not_found(group, plural, name)
        return copy.deepcopy(obj)

    def list_objects(self, group: str, plural: str, namespace: str) -> list[JSON]:
        """Copies of the plain objects of one kind in ``namespace``, by name."""
        return [
            copy.deepcopy(o)
            for (g, p, ns, _), o in sorted(self._objects.items())
            if (g, p, ns) == (group, plural, namespace)
        ]

    def delete_object(self, group: str, plural: str, namespace: str, name: str) -> None:
        """Remove a plain object (Python API only; ApiError 404 when missing)."""
        self.get_object(group, plural, namespace, name)
        del self._objects[(group, plural, namespace, name)]
        self._bump()

    def _check_object(self, kind: Kind, namespace: str, name: str, body: Any) -> JSON:
        if not isinstance(body, dict):
            raise bad_request("the body of the request is not a JSON object")
        api_version = f"{kind.group}/{kind.version}" if kind.group else kind.version
        if (
            body.get("kind", kind.kind) != kind.kind
            or body.get("apiVersion", api_version) != api_version
        ):
            raise bad_request(
                f"expected kind {kind.kind} apiVersion {api_version}, got kind "
                f"{body.get('kind')!r} apiVersion {body.get('apiVersion')!r}"
            )
        meta = body.get("metadata")
        if not isinstance(meta, dict):
            raise bad_request("metadata must be an object")
        if meta.get("namespace", namespace) != namespace:
            raise namespace_mismatch()
        annotations = meta.get("annotations") or {}
        if not isinstance(annotations, dict) or not all(
            isinstance(v, str) for v in annotations.values()
        ):
            raise bad_request("unable to decode: metadata.annotations: expected a map of strings")
        causes: list[tuple[str, str, str]] = []
        if not name or len(name) > 253 or not DNS_SUBDOMAIN.match(name):
            causes.append(
                (
                    "metadata.name",
                    "FieldValueInvalid",
                    f'Invalid value: "{name}": a lowercase RFC 1123 subdomain must consist of '
                    "lower case alphanumeric characters, '-' or '.'",
                )
            )
        if len(namespace) > 63 or not DNS_LABEL.match(namespace):
            causes.append(
                (
                    "metadata.namespace",
                    "FieldValueInvalid",
                    f'Invalid value: "{namespace}": a lowercase RFC 1123 label must consist of '
                    "lower case alphanumeric characters or '-', and must start and end with an "
                    "alphanumeric character",
                )
            )
        size = sum(len(k) + len(v) for k, v in annotations.items())
        if size > 256 * 1024:
            causes.append(
                (
                    "metadata.annotations",
                    "FieldValueTooLong",
                    f"Too long: may not be more than 262144 bytes (got {size})",
                )
            )
        if kind.kind == "Lease":
            causes += lease_causes(body.get("spec"))
        if causes:
            raise invalid(kind.kind, kind.group, name, causes)
        return body

    def create_object(
        self,
        group: str,
        version: str,
        plural: str,
        namespace: str,
        body: Any,
        *,
        dry_run: bool = False,
    ) -> JSON:
        """Create a plain object (POST).

        Raises:
            ApiError: 404 (kind), 400 (shape, namespace), 409 ``AlreadyExists``, 422.
        """
        kind = self._plain_kind(group, version, plural)
        name = (
            str(((body or {}).get("metadata") or {}).get("name") or "")
            if isinstance(body, dict)
            else ""
        )
        obj = self._check_object(kind, namespace, name, body)
        if (group, plural, namespace, name) in self._objects:
            raise already_exists(group, plural, name)
        out = copy.deepcopy(obj)
        out["kind"] = kind.kind
        out["apiVersion"] = f"{group}/{version}" if group else version
        meta = out["metadata"]
        meta.pop("resourceVersion", None)
        created = self._meta(namespace, name, meta.get("labels"))
        out["metadata"] = {**meta, **created}
        if not dry_run:
            self._objects[(group, plural, namespace, name)] = out
        return copy.deepcopy(out)

    def replace_object(
        self,
        group: str,
        version: str,
        plural: str,
        namespace: str,
        name: str,
        body: Any,
        *,
        dry_run: bool = False,
    ) -> tuple[JSON, bool]:
        """A PUT: :meth:`update_object`, or for a missing object of a kind that creates on
        update (a Lease) :meth:`create_object`. Returns the object and whether it was created.

        Raises:
            ApiError: as :meth:`update_object` and :meth:`create_object`.
        """
        kind = self._plain_kind(group, version, plural)
        if kind.create_on_update and (group, plural, namespace, name) not in self._objects:
            meta = (body or {}).get("metadata") if isinstance(body, dict) else None
            if isinstance(meta, dict) and meta.get("name", name) != name:
                raise name_mismatch(meta.get("name"), name)
            return self.create_object(
                group, version, plural, namespace, body, dry_run=dry_run
            ), True
        updated = self.update_object(
            group, version, plural, namespace, name, body, require_rv=True, dry_run=dry_run
        )
        return updated, False

    def update_object(
        self,
        group: str,
        version: str,
        plural: str,
        namespace: str,
        name: str,
        body: Any,
        *,
        require_rv: bool,
        dry_run: bool = False,
    ) -> JSON:
        """Replace a plain object (PUT; PATCH passes the patched object, ``require_rv`` False).

        A non-empty ``metadata.resourceVersion`` that differs is 409, one that is no number
        500; an empty one is 422 when ``require_rv`` for a kind that allows no unconditional
        update (custom kinds, Leases). An update that changes nothing keeps the
        resourceVersion.

        Raises:
            ApiError: 404 (see :meth:`replace_object` for a kind that creates on update),
                400, 409, 422, 500.
        """
        kind = self._plain_kind(group, version, plural)
        old = self._objects.get((group, plural, namespace, name))
        if old is None:
            raise not_found(group, plural, name)
        meta = (body or {}).get("metadata") if isinstance(body, dict) else None
        if isinstance(meta, dict) and meta.get("name", name) != name:
            raise name_mismatch(meta.get("name"), name)
        obj = self._check_object(kind, namespace, name, body)
        rv = obj["metadata"].get("resourceVersion") or ""
        if not isinstance(rv, str) or (rv and not rv.isdigit()):
            raise invalid_resource_version(rv)
        if rv and rv != old["metadata"]["resourceVersion"]:
            raise conflict(group, plural, name)
        if not rv and require_rv and not kind.allows_unconditional_update:
            raise resource_version_required(plural, group, name)
        out = copy.deepcopy(obj)
        out["kind"] = kind.kind
        out["apiVersion"] = old["apiVersion"]
        keep = ("name", "namespace", "uid", "creationTimestamp", "resourceVersion")
        out["metadata"] = {
            **{k: v for k, v in out["metadata"].items() if k not in keep},
            **{k: old["metadata"][k] for k in keep},
        }
        if out == old or dry_run:
            return out
        out["metadata"]["resourceVersion"] = self._bump()
        self._objects[(group, plural, namespace, name)] = out
        return copy.deepcopy(out)
