"""A target's throughput as the decision core's capacity signal reads it (pure).

:func:`throughput_of` turns what the source read of a target (per-pod request and token rates,
each pod's waiting requests and KV-cache usage) into a
:class:`~scaler.core.observation.ThroughputReading`.
"""

from __future__ import annotations

from scaler.core.observation import PodLoad, ThroughputReading
from scaler.core.signals import SignalStatus
from scaler.sources.prometheus.readings import TargetReadings

__all__ = ["throughput_of"]


def throughput_of(readings: TargetReadings) -> ThroughputReading:
    """The capacity signal's input from one target's readings.

    Each ready pod with its three rates (:attr:`TargetReadings.throughput`), its prefix-cache
    hits where it exports them, and, where read, its waiting requests and KV-cache usage
    (:attr:`TargetReadings.gauges`). Stalled pods
    (frozen gauges, hung engines) are left out, as the per-pod signals leave them out, and
    make a complete reading ``partial``: usable to scale up, never to scale down.
    """
    t = readings.throughput
    pods = {
        name: PodLoad(
            requests_per_second=r.requests_per_second,
            prompt_tokens_per_second=r.prompt_tokens_per_second,
            generation_tokens_per_second=r.generation_tokens_per_second,
            waiting=g.waiting if (g := readings.gauges.get(name)) is not None else None,
            kv_cache_usage=g.kv_cache if g is not None else None,
            cached_prompt_tokens_per_second=r.cached_prompt_tokens_per_second,
            prefill_seconds_per_second=r.prefill_seconds_per_second,
            decode_seconds_per_second=r.decode_seconds_per_second,
        )
        for name, r in sorted(t.pods.items())
        if name not in readings.stalled
    }
    if readings.stalled and t.status is SignalStatus.OK:
        left = ", ".join(sorted(readings.stalled))
        return ThroughputReading(SignalStatus.PARTIAL, pods, f"stalled pods left out: {left}")
    return ThroughputReading(t.status, pods, t.detail)
