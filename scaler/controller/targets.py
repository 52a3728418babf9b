"""Which targets a cycle scales: the policy file's and the ``VLLMAutoscaler`` resources' (pure).

The rule when both are used: both are allowed, each workload is scaled by one of them.

- The policy file's targets come first, as listed.
- A resource is validated as a target of the file is (:func:`scaler.config.resource.target_of`);
  one the controller refuses (what the CRD's schema cannot say, or a CRD installed without
  it) is not scaled and says why in its status (``InvalidSpec``).
- A resource whose workload the policy file names too is not scaled: the file's target is
  (an operator's file is not overridden by a resource someone else may create; the resource
  says so in its status, ``AmbiguousTarget``).
- Of two resources on one workload, the one created first scales it; the other is refused
  (``AmbiguousTarget``, naming the first), as the HPA refuses a second autoscaler of the
  same pods.

A resource that is deleted is simply no longer among the targets: nothing more is written to
its workload, whose replicas stay as they are.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from scaler.config.policy import PolicyError, TargetPolicy
from scaler.config.resource import ResourceRef, target_of

__all__ = ["Refused", "Target", "TargetSet", "resolve_targets"]


@dataclass(frozen=True, slots=True)
class Target:
    """One target of a cycle.

    Attributes:
        policy: how it is scaled.
        resource: the ``VLLMAutoscaler`` that defines it (None: the policy file's).
        status: that resource's status as last read (None for the file's targets).
    """

    policy: TargetPolicy
    resource: ResourceRef | None = None
    status: Mapping[str, Any] | None = None

    @property
    def key(self) -> str:
        return self.policy.key


@dataclass(frozen=True, slots=True)
class Refused:
    """A resource the cycle does not scale.

    Attributes:
        resource: the resource.
        reason: ``invalid_spec`` or ``ambiguous_target``.
        message: why, naming the fields or the other owner of the workload.
        status: its status as last read.
    """

    resource: ResourceRef
    reason: str
    message: str
    status: Mapping[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class TargetSet:
    """The targets and refused resources of one cycle.

    Attributes:
        targets: the policy file's, then the resources', each workload once.
        refused: the resources not scaled, with why.
        complete: the resources are known (watched and listed, or not watched at all):
            a target missing from ``targets`` is gone, not unknown yet.
    """

    targets: tuple[Target, ...]
    refused: tuple[Refused, ...] = ()
    complete: bool = True
    by_key: dict[str, Target] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        self.by_key.update({t.key: t for t in self.targets})


def _created(obj: Mapping[str, Any]) -> tuple[str, str, str]:
    meta = obj.get("metadata") or {}
    return (
        str(meta.get("creationTimestamp") or ""),
        str(meta.get("namespace") or ""),
        str(meta.get("name") or ""),
    )


def resolve_targets(
    policy_targets: Sequence[TargetPolicy],
    resources: Sequence[Mapping[str, Any]] = (),
    *,
    complete: bool = True,
) -> TargetSet:
    """The targets of a cycle from the policy file's and the resources (see the module
    docstring for the rule); ``complete``: the resources are all known."""
    targets = [Target(t) for t in policy_targets]
    from_file = {t.key for t in policy_targets}
    owners: dict[str, ResourceRef] = {}
    refused: list[Refused] = []
    for obj in sorted(resources, key=_created):
        ref = ResourceRef.of(obj)
        status = obj.get("status")
        status = status if isinstance(status, Mapping) else None
        try:
            policy = target_of(obj)
        except PolicyError as err:
            # the lines naming the fields, without the heading that names the resource
            lines = [line.strip() for line in str(err).splitlines()[1:]] or [str(err)]
            refused.append(Refused(ref, "invalid_spec", "; ".join(lines), status))
            continue
        key = policy.key
        if key in from_file:
            refused.append(
                Refused(
                    ref,
                    "ambiguous_target",
                    f"the policy file names {key} too: its target is scaled, this resource "
                    "is not (remove one of the two)",
                    status,
                )
            )
            continue
        first = owners.get(key)
        if first is not None:
            refused.append(
                Refused(
                    ref,
                    "ambiguous_target",
                    f"VLLMAutoscaler {first.key()} (created first) scales {key}: this resource "
                    "is not used (as the HPA, one autoscaler per workload)",
                    status,
                )
            )
            continue
        owners[key] = ref
        targets.append(Target(policy, ref, status))
    return TargetSet(tuple(targets), tuple(refused), complete)
