"""What the decision core sees of a target this cycle, from the Kubernetes snapshot and the
source's readings (pure: the one place both meet)."""

from __future__ import annotations

from dataclasses import replace

from scaler.config.policy import TargetPolicy
from scaler.core.load_time import startup_timeout_seconds
from scaler.core.observation import Observation, WorkloadSnapshot
from scaler.core.state import TargetState
from scaler.sources.prometheus import TargetReadings
from scaler.sources.prometheus.demand import throughput_of

__all__ = ["observe"]


def observe(
    t: TargetPolicy,
    snap: WorkloadSnapshot,
    readings: TargetReadings,
    state: TargetState | None,
    *,
    removing: int = 0,
) -> Observation:
    """What the decision core sees of a target: the replica counts (a pod not ready counts as
    starting until the startup guard the learned model load time sets,
    :func:`~scaler.core.load_time.startup_timeout_seconds`; ready pods in vLLM's sleep mode,
    from the readings, count as sleeping), the signals, the throughput and the pods."""
    learned = state.load_times.median_seconds if state is not None else None
    timeout = startup_timeout_seconds(t.model_load_timeout_seconds, learned)
    counts = snap.counts(timeout, removing=removing)
    if readings.sleeping:
        counts = replace(counts, sleeping=len(readings.sleeping & snap.ready_pod_names))
    return Observation(
        counts,
        readings.signals,
        throughput=throughput_of(readings),
        pods=snap.pods,
    )
