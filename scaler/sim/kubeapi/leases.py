"""coordination.k8s.io/v1 Lease validation (the objects themselves are plain objects)."""

from __future__ import annotations

import re
from typing import Any

from scaler.sim.kubeapi.errors import DecodeError

MICRO_TIME = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}(Z|[+-]\d{2}:\d{2})$")


def lease_causes(spec: Any) -> list[tuple[str, str, str]]:
    """Validation of a coordination.k8s.io/v1 Lease spec (MicroTime format is a decode error).

    Raises:
        ApiError: 400 when a time is not a MicroTime (``2006-01-02T15:04:05.000000Z``).
    """
    if spec is None:
        return []
    if not isinstance(spec, dict):
        raise DecodeError("Lease", "json: cannot unmarshal into Go struct field Lease.spec")
    causes: list[tuple[str, str, str]] = []
    for f in ("acquireTime", "renewTime"):
        v = spec.get(f)
        if v is not None and (not isinstance(v, str) or not MICRO_TIME.match(v)):
            raise DecodeError(
                "Lease",
                f'parsing time "{v}" as "2006-01-02T15:04:05.000000Z07:00": cannot parse "Z" '
                'as ".000000"',
            )
    holder = spec.get("holderIdentity")
    if holder is not None and not isinstance(holder, str):
        raise DecodeError(
            "Lease",
            "json: cannot unmarshal into Go struct field LeaseSpec.spec.holderIdentity of type "
            "string",
        )
    for f, minimum in (("leaseDurationSeconds", 1), ("leaseTransitions", 0)):
        v = spec.get(f)
        if v is None:
            continue
        if isinstance(v, bool) or not isinstance(v, int):
            raise DecodeError(
                "Lease", f"json: cannot unmarshal into Go struct field LeaseSpec.spec.{f} of type "
                "int32",
            )  # fmt: skip
        if v < minimum:
            causes.append(
                (
                    f"spec.{f}",
                    "FieldValueInvalid",
                    f"Invalid value: {v}: must be greater than "
                    + ("0" if minimum == 1 else "or equal to 0"),
                )
            )
    return causes
