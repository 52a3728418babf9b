"""What every API group of the store shares: the clock, the global ``resourceVersion`` counter,
uids and the ``ObjectMeta`` stamped on new objects, and the record of a registered kind."""

from __future__ import annotations

import hashlib
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
    builtin: bool  # strategic merge patches accepted
    #: the scale subresource answers a selector (a CRD's ``scale.labelSelectorPath`` is set)
    label_selector_path: bool = True
    #: a PUT without ``resourceVersion`` is accepted (the kind's strategy's
    #: ``AllowUnconditionalUpdate``; None: as ``builtin``, which CRDs' strategy refuses)
    unconditional_update: bool | None = None
    #: a PUT of a missing object creates it (``AllowCreateOnUpdate``: Leases)
    create_on_update: bool = False

    @property
    def allows_unconditional_update(self) -> bool:
        return self.builtin if self.unconditional_update is None else self.unconditional_update


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
            # random-looking (as the API's are: a ReplicaSet breaks ties by uid), yet the
            # same in every run
            "uid": str(
                uuid.UUID(
                    bytes=hashlib.sha256(str(next(self._uids)).encode()).digest()[:16], version=4
                )
            ),
            "resourceVersion": self._bump(),
            "creationTimestamp": rfc3339(self._now()),
        }
        if labels:
            meta["labels"] = dict(labels)
        return meta
