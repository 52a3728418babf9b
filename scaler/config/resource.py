"""The ``VLLMAutoscaler`` resource: one target's policy beside its workload.

A namespaced custom resource (group :data:`GROUP`, version :data:`VERSION`) whose spec is a
target of the policy file without its namespace: ``scaleTargetRef`` (the HPA's apiVersion,
kind, name), min and max replicas, the signals, the scale-up and scale-down behaviour, the
tolerance, the capacity settings, the model-load timeout and the optional shadow policy,
spelled as the policy file spells them. Its namespace is the workload's.

:func:`target_of` validates a resource as the policy file's target it is (the same model,
:class:`~scaler.config.policy.TargetPolicy`, the same checks); :func:`resource_of` writes a
target of the file as a resource (``vllm-scaler as-resources``). The CRD's schema is
generated from the same model (:mod:`scaler.config.crd`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from scaler.config.policy import PolicyError, TargetPolicy
from scaler.config.policy_errors import validation_lines

__all__ = [
    "API_VERSION",
    "GROUP",
    "KIND",
    "LIST_KIND",
    "PLURAL",
    "SHORT_NAMES",
    "SINGULAR",
    "VERSION",
    "ResourceRef",
    "resource_of",
    "resources_in",
    "target_of",
]

GROUP = "autoscaling.vllm-scaler.io"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
KIND = "VLLMAutoscaler"
LIST_KIND = "VLLMAutoscalerList"
PLURAL = "vllmautoscalers"
SINGULAR = "vllmautoscaler"
SHORT_NAMES = ("vllmas",)


@dataclass(frozen=True, slots=True)
class ResourceRef:
    """One ``VLLMAutoscaler`` as the controller knows it (what Events and status name).

    Attributes:
        namespace, name: the resource.
        uid: its ``metadata.uid`` ('' when unknown).
        generation: its ``metadata.generation`` (the spec's version; 0 when unknown).
    """

    namespace: str
    name: str
    uid: str = ""
    generation: int = 0

    api_version = API_VERSION
    kind = KIND

    def key(self) -> str:
        """``namespace/name``: how logs, metrics and dashboards name the resource."""
        return f"{self.namespace}/{self.name}"

    @classmethod
    def of(cls, obj: Mapping[str, Any]) -> ResourceRef:
        """The reference of a resource object as the API answers it."""
        meta = obj.get("metadata") or {}
        generation = meta.get("generation")
        return cls(
            namespace=str(meta.get("namespace") or ""),
            name=str(meta.get("name") or ""),
            uid=str(meta.get("uid") or ""),
            generation=generation if isinstance(generation, int) else 0,
        )


def target_of(obj: Mapping[str, Any]) -> TargetPolicy:
    """The target policy a ``VLLMAutoscaler`` object defines: its spec and its namespace,
    validated as a target of the policy file is.

    Raises:
        PolicyError: the spec is missing or invalid; one line per problem, each naming the
            field as ``spec.<path>``, the value and what was expected.
    """
    ref = ResourceRef.of(obj)
    spec = obj.get("spec")
    source = f"{KIND} {ref.key()}"
    if not isinstance(spec, dict):
        raise PolicyError(f"{source}: spec: expected a mapping with scaleTargetRef")
    document = {**spec, "namespace": ref.namespace}
    try:
        return TargetPolicy.model_validate(document)
    except ValidationError as err:
        lines = validation_lines(err, TargetPolicy, source, document)
        shown = [f"spec.{line.removeprefix(f'{source}: ')}" for line in lines]
        raise PolicyError(f"invalid {source}\n  " + "\n  ".join(shown)) from None


def _items(documents: list[Any]) -> list[Any]:
    """The documents, a ``List`` (``kind: List`` or ``VLLMAutoscalerList``, as
    ``as-resources -o json`` and ``kubectl get -o yaml`` print them) opened into its items."""
    out: list[Any] = []
    for doc in documents:
        if isinstance(doc, dict) and doc.get("kind") in ("List", LIST_KIND):
            out.extend(doc.get("items") or [])
        elif doc is not None:  # an empty document (a trailing ---) holds nothing
            out.append(doc)
    return out


def resources_in(documents: list[Any], source: str) -> list[TargetPolicy] | None:
    """The targets of a file of ``VLLMAutoscaler`` resources (one document, several after
    ``---``, or a List of them), each validated by :func:`target_of` as the controller
    validates it; None when no document is a VLLMAutoscaler (a policy file). A resource
    without a namespace is in ``default``, as ``kubectl apply`` without ``-n`` puts it.

    Raises:
        PolicyError: every problem of every resource, a line each, the fields named
            ``spec.<path>`` under the resource's ``VLLMAutoscaler namespace/name``; a
            document that is no VLLMAutoscaler beside them, or another apiVersion, named by
            its place in the file.
    """
    items = _items(documents)
    if not any(isinstance(d, dict) and d.get("kind") == KIND for d in items):
        return None
    targets: list[TargetPolicy] = []
    problems: list[str] = []
    for i, doc in enumerate(items, start=1):
        where = f"{source}: resource {i}"
        if not isinstance(doc, dict) or doc.get("kind") != KIND:
            kind = doc.get("kind") if isinstance(doc, dict) else None
            problems.append(
                f"{where}: kind {kind!r}: expected {KIND} (a file of resources holds only them; "
                "a policy file is a mapping with 'targets')"
            )
            continue
        if doc.get("apiVersion") != API_VERSION:
            problems.append(
                f"{where}: apiVersion: value {doc.get('apiVersion')!r}: expected {API_VERSION}"
            )
            continue
        given = doc.get("metadata")
        meta: dict[str, Any] = given if isinstance(given, dict) else {}
        obj = {**doc, "metadata": {"namespace": "default", **meta}}
        try:
            targets.append(target_of(obj))
        except PolicyError as err:  # "invalid VLLMAutoscaler ns/name", then its spec. lines
            first, *rest = str(err).splitlines()
            problems += [f"{source}: {first.removeprefix('invalid ')}", *rest]
    if problems:
        raise PolicyError("invalid resources\n  " + "\n  ".join(problems))
    return targets


def resource_of(t: TargetPolicy, *, name: str | None = None) -> dict[str, Any]:
    """The ``VLLMAutoscaler`` object of a target of the policy file: in the workload's
    namespace, named after the workload unless ``name`` is given, its spec the target's
    fields as written (the defaults it left out stay out) and ``scaleTargetRef``."""
    written = t.model_dump(mode="json", by_alias=True, exclude_unset=True, exclude={"workload"})
    ref: dict[str, Any] = {
        "apiVersion": t.workload.api_version,
        "kind": t.workload.kind,
        "name": t.workload.name,
    }
    if t.workload.plural:
        ref["plural"] = t.workload.plural
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {"name": name or t.workload.name, "namespace": t.workload.namespace},
        "spec": {"scaleTargetRef": ref, **written},
    }
