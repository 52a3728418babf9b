"""Who last wrote a workload's ``spec.replicas``, from its ``metadata.managedFields``.

The API server records, per field manager (the ``fieldManager`` of each write, or the
client's user agent), which fields it last set, by which operation, through which
subresource and when. Another autoscaler that is neither an HPA nor a KEDA ScaledObject
(an AIBrix PodAutoscaler, Knative's autoscaler, llm-d's variant autoscaler, a script, a
second vllm-scaler installation) shows there as the owner of ``f:spec.f:replicas``; an
outside write can then say who made it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

__all__ = ["ReplicasWriter", "WorkloadMeta", "parse_time", "replicas_writer"]


@dataclass(frozen=True, slots=True)
class ReplicasWriter:
    """The field manager that owns a workload's ``spec.replicas``.

    Attributes:
        manager: its name (``kube-controller-manager`` for an HPA, ``kubectl`` ...).
        operation: ``Update`` or ``Apply``.
        subresource: ``scale`` when written through the scale subresource, else ''.
        time: when it wrote, epoch seconds (None when the entry has no time).
    """

    manager: str
    operation: str = "Update"
    subresource: str = ""
    time: float | None = None

    def describe(self) -> str:
        """``field manager 'X' (an Update through the scale subresource at <RFC 3339>)``."""
        how = f"an {self.operation}" if self.operation[:1] in "AEIOU" else f"a {self.operation}"
        if self.subresource:
            how += f" through the {self.subresource} subresource"
        if self.time is not None:
            when = datetime.fromtimestamp(self.time, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
            how += f" at {when}"
        return f"field manager {self.manager!r} ({how})"


@dataclass(frozen=True, slots=True)
class WorkloadMeta:
    """What the controller reads from the workload object itself.

    Attributes:
        annotations: ``metadata.annotations`` (pause, pin).
        replicas_writer: the owner of ``spec.replicas`` (None when unknown).
    """

    annotations: dict[str, str]
    replicas_writer: ReplicasWriter | None = None


def parse_time(value: object) -> float | None:
    """Epoch seconds of a MicroTime / RFC3339 string; None when absent or unparsable."""
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def replicas_writer(meta: Mapping[str, Any]) -> ReplicasWriter | None:
    """The manager in ``meta["managedFields"]`` that owns ``f:spec.f:replicas`` (the latest
    writer when several share it through Apply); None when none does."""
    found: list[ReplicasWriter] = []
    for entry in meta.get("managedFields") or []:
        if not isinstance(entry, Mapping):
            continue
        fields = entry.get("fieldsV1")
        spec = fields.get("f:spec") if isinstance(fields, Mapping) else None
        if not isinstance(spec, Mapping) or "f:replicas" not in spec:
            continue
        found.append(
            ReplicasWriter(
                manager=str(entry.get("manager") or "unknown"),
                operation=str(entry.get("operation") or "Update"),
                subresource=str(entry.get("subresource") or ""),
                time=parse_time(entry.get("time")),
            )
        )
    if not found:
        return None
    return max(found, key=lambda w: w.time if w.time is not None else float("-inf"))
