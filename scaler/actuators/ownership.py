"""Which workload owns a pod: its controller ``ownerReferences`` followed up to a top-level
object.

A selector is not ownership: a canary's pods (``app=vllm,track=canary``) match the main
Deployment's selector (``app=vllm``) too, and the HPA reads every pod its selector lists. The
actuator follows each listed pod's controller reference (a ReplicaSet, a StatefulSet, for a
LeaderWorkerSet's worker the leader pod) up to the object that has none, and keeps the pod for
the target only when that is the target (:class:`Owner.OWN`). A pod whose chain ends at another
workload is another's (:attr:`Owner.FOREIGN`, named); one whose chain cannot be followed (no
controller, an owner of a kind it does not read, a read refused) is :attr:`Owner.UNKNOWN`:
the selector's verdict stands unless another target lists it too (then neither counts it, as
the HPA's AmbiguousSelector; see :mod:`scaler.controller.loop`).

Only objects the controller already reads are read (apps/v1 Deployments, StatefulSets and
ReplicaSets: RBAC ``get``; pods from the listing itself), each at most once per
:data:`OWNER_TTL_SECONDS` (an object's uid and controller rarely change; a rollout's new
ReplicaSet is a new uid).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

__all__ = [
    "OWNER_TTL_SECONDS",
    "Owner",
    "OwnerCache",
    "OwnerRef",
    "Verdict",
    "controller_ref",
    "trace_owner",
]

#: How long an intermediate owner's own controller reference is reused, seconds.
OWNER_TTL_SECONDS = 600.0
#: The apps/v1 kinds that own pods (or ReplicaSets) and their plural resource names.
APPS_PLURALS = {"ReplicaSet": "replicasets", "StatefulSet": "statefulsets",
                "Deployment": "deployments"}  # fmt: skip
#: The longest chain followed: a LeaderWorkerSet's worker pod -> worker StatefulSet -> leader
#: pod -> leader StatefulSet -> LeaderWorkerSet, with one to spare.
MAX_DEPTH = 6


class Owner(StrEnum):
    """Whose pod a listed pod is."""

    OWN = "own"  # its chain of controllers ends at the target
    FOREIGN = "foreign"  # it ends at another workload
    UNKNOWN = "unknown"  # it cannot be followed


@dataclass(frozen=True, slots=True)
class OwnerRef:
    """One controller reference: ``apiVersion``, ``kind``, ``name`` and ``uid``."""

    api_version: str
    kind: str
    name: str
    uid: str

    @property
    def group(self) -> str:
        return self.api_version.rpartition("/")[0]

    def describe(self, namespace: str) -> str:
        return f"{self.kind} {namespace}/{self.name}"


@dataclass(frozen=True, slots=True)
class Verdict:
    """Whose pod it is, and for another's or an unknown one, said in words."""

    owner: Owner
    detail: str = ""


def controller_ref(refs: Any) -> OwnerRef | None:
    """The controller reference among ``metadata.ownerReferences`` (kubernetes-asyncio
    objects or plain dicts), or None."""
    for ref in refs or ():
        get = ref.get if isinstance(ref, Mapping) else lambda k, r=ref: getattr(r, _SNAKE[k])
        if get("controller"):
            return OwnerRef(
                str(get("apiVersion") or ""),
                str(get("kind") or ""),
                str(get("name") or ""),
                str(get("uid") or ""),
            )
    return None


_SNAKE = {"controller": "controller", "apiVersion": "api_version", "kind": "kind",
          "name": "name", "uid": "uid"}  # fmt: skip

#: Reads an apps/v1 object (kind's plural, name) of the namespace: its ``metadata`` as a dict.
ReadObject = Callable[[str, str], Awaitable[Mapping[str, Any]]]


class OwnerCache:
    """The controller references of intermediate owners, by uid, for :data:`OWNER_TTL_SECONDS`.

    Args:
        clock: seconds.
    """

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._seen: dict[str, tuple[OwnerRef | None, float]] = {}

    def get(self, uid: str) -> tuple[bool, OwnerRef | None]:
        """``(known, its controller)``."""
        hit = self._seen.get(uid)
        if hit is None or not 0 <= self._clock() - hit[1] <= OWNER_TTL_SECONDS:
            return False, None
        return True, hit[0]

    def put(self, uid: str, ref: OwnerRef | None) -> None:
        now = self._clock()
        if len(self._seen) > 50_000:  # bounded: drop what has expired
            self._seen = {
                k: v for k, v in self._seen.items() if 0 <= now - v[1] <= OWNER_TTL_SECONDS
            }
        self._seen[uid] = (ref, now)


async def trace_owner(
    first: OwnerRef | None,
    *,
    namespace: str,
    target: OwnerRef,
    pods: Mapping[str, Any],
    read: ReadObject,
    cache: OwnerCache,
) -> Verdict:
    """Follow a pod's controller reference ``first`` up to the object that has none.

    Args:
        first: the pod's controller reference (None: a bare pod).
        namespace: the pod's namespace (owners are in it).
        target: the target itself (its uid as the scale subresource answered it; '' when
            unknown: then its kind and name decide).
        pods: the listed pods by name (kubernetes-asyncio ``V1Pod``): a LeaderWorkerSet's
            worker StatefulSet is owned by its leader pod, listed with it.
        read: reads an apps/v1 object's metadata; raises on any failure.
        cache: the intermediate owners' references.

    Returns:
        A :class:`Verdict`; never raises.
    """
    ref = first
    for _ in range(MAX_DEPTH):
        if ref is None:
            return Verdict(Owner.UNKNOWN, "no controller ownerReference")
        if (target.uid and ref.uid == target.uid) or (
            not target.uid
            and (ref.kind, ref.name, ref.group) == (target.kind, target.name, target.group)
        ):
            return Verdict(Owner.OWN)
        if (ref.kind, ref.group) == (target.kind, target.group):
            return Verdict(Owner.FOREIGN, ref.describe(namespace))
        known, parent = cache.get(ref.uid)
        if not known:
            found = await _parent(ref, pods, read)
            if isinstance(found, str):
                return Verdict(Owner.UNKNOWN, found)
            parent = found
            cache.put(ref.uid, parent)
        if parent is None:
            # a top-level object that is not the target: another workload's pod
            return Verdict(Owner.FOREIGN, ref.describe(namespace))
        ref = parent
    return Verdict(Owner.UNKNOWN, "a chain of more than six owners")


async def _parent(
    ref: OwnerRef, pods: Mapping[str, Any], read: ReadObject
) -> OwnerRef | str | None:
    """The controller of ``ref`` (None: it has none), or why it cannot be told."""
    if ref.kind == "Pod" and ref.group == "":
        pod = pods.get(ref.name)
        if pod is None or str(pod.metadata.uid or "") != ref.uid:
            return f"owner Pod {ref.name} is not among the listed pods"
        return controller_ref(pod.metadata.owner_references)
    plural = APPS_PLURALS.get(ref.kind) if ref.group == "apps" else None
    if plural is None:
        return f"owner {ref.kind} {ref.name} is of a kind whose owners are not read"
    try:
        meta = await read(plural, ref.name)
    except Exception as err:  # a refused or failed read: the owner cannot be told
        return f"owner {ref.kind} {ref.name} cannot be read: {_reason(err)}"
    if str(meta.get("uid") or "") != ref.uid:
        return f"owner {ref.kind} {ref.name} was replaced"
    return controller_ref(meta.get("ownerReferences"))


def _reason(err: BaseException) -> str:
    status = getattr(err, "status", None)
    reason = getattr(err, "reason", None)
    if status:
        return f"HTTP {status} {reason or ''}".strip()
    return type(err).__name__
