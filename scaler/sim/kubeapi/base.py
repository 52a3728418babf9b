"""What every API group of the store shares: the clock, the global ``resourceVersion`` counter,
uids and the ``ObjectMeta`` stamped on new objects, and the record of a registered kind."""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

from scaler.sim.kubeapi.errors import JSON


def rfc3339(epoch_seconds: float) -> str:
    """Format epoch seconds as the API does: RFC3339 UTC truncated to whole seconds."""
    return datetime.fromtimestamp(int(epoch_seconds), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True, slots=True)
class Kind:
    """A registered resource kind at ``/apis/{group}/{version}/.../{plural}``."""

    group: str
    version: str
    kind: str
    plural: str
    builtin: bool  # strategic merge + unconditional update allowed
    #: the scale subresource answers a selector (a CRD's ``scale.labelSelectorPath`` is set)
    label_selector_path: bool = True


def owner_reference(obj: JSON) -> JSON:
    """The controller ``ownerReference`` that points at ``obj`` (a stored object), as the
    workload controllers stamp it on what they create."""
    meta = obj["metadata"]
    return {
        "apiVersion": obj.get("apiVersion", "v1"),
        "kind": obj.get("kind", "Pod"),
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


class StoreBase:
    """The state shared by the store's API groups (one per mixin, see :class:`KubeStore`).

    Args:
        now: clock returning epoch seconds; used for creationTimestamp and friends.
    """

    def __init__(self, now: Callable[[], float]) -> None:
        self._now = now
        self._rv = 0
        self._uids = itertools.count(1)

    def now(self) -> float:
        """The store's clock, epoch seconds (what the API server's ``Date`` header says)."""
        return self._now()

    @property
    def resource_version(self) -> str:
        """The newest resourceVersion handed out."""
        return str(self._rv)

    def _bump(self) -> str:
        self._rv += 1
        return str(self._rv)

    def _meta(self, namespace: str, name: str, labels: Mapping[str, str] | None) -> JSON:
        meta: JSON = {
            "name": name,
            "namespace": namespace,
            "uid": str(uuid.UUID(int=next(self._uids), version=4)),
            "resourceVersion": self._bump(),
            "creationTimestamp": rfc3339(self._now()),
        }
        if labels:
            meta["labels"] = dict(labels)
        return meta
