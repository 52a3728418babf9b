"""A toy fleet for the capacity signal's tests: observations of ready, settled pods serving a
demand, with a TTFT that follows the load per replica.

The fleet's replicas each serve at most :data:`BOUNDARY` weighted tokens/s within the TTFT
target: below 60% of it TTFT p95 is 0.3 s, from there it climbs linearly to the 2 s target at
the boundary, and beyond it TTFT is 6 s. A pod has a request waiting once the load per replica
passes 60% of the boundary (busy). Demand is prompt tokens only (no generated tokens), so the
weighted rate is the prompt rate.
"""

from __future__ import annotations

from scaler.config.vocabulary import SignalName
from scaler.core.observation import (
    Observation,
    PodInfo,
    PodLoad,
    ReplicaCounts,
    ThroughputReading,
)
from scaler.core.signals import SignalReading, SignalStatus

#: Weighted tokens/s one replica serves at the TTFT target.
BOUNDARY = 10_000.0
#: Requests per second per 1,000 tokens/s (a mean request of 1,000 prompt tokens).
_REQUESTS_PER_TOKEN = 1 / 1000


def ttft_p95(per_replica: float) -> float:
    """The fleet's TTFT p95 at a load per replica (weighted tokens/s), seconds."""
    knee = 0.6 * BOUNDARY
    if per_replica <= knee:
        return 0.3
    if per_replica <= BOUNDARY:
        return 0.3 + 1.7 * (per_replica - knee) / (BOUNDARY - knee)
    return 6.0


def pod_names(n: int) -> list[str]:
    """``n`` pod names of the Deployment."""
    return [f"vllm-5d8f7c9b4-p{i:03d}" for i in range(n)]


def fleet_observation(
    replicas: int,
    demand: float,
    *,
    ready_seconds: float = 3600.0,
    throughput_status: SignalStatus = SignalStatus.OK,
    ttft_status: SignalStatus | None = None,
) -> Observation:
    """``replicas`` ready pods (Ready for ``ready_seconds``) sharing ``demand`` weighted
    tokens/s; ``throughput_status``/``ttft_status`` other than ok make those readings fail."""
    names = pod_names(replicas)
    per = demand / replicas if replicas else 0.0
    busy = per > 0.6 * BOUNDARY
    pods = tuple(
        PodInfo(n, ready=True, terminating=False, age_seconds=ready_seconds + 120.0,
                ready_seconds=ready_seconds)
        for n in names
    )  # fmt: skip
    if throughput_status is SignalStatus.OK:
        loads = {
            n: PodLoad(
                requests_per_second=per * _REQUESTS_PER_TOKEN,
                prompt_tokens_per_second=per,
                generation_tokens_per_second=0.0,
                waiting=1.0 if busy else 0.0,
                kv_cache_usage=0.2,
            )
            for n in names
        }
        throughput = ThroughputReading(SignalStatus.OK, loads)
    else:
        throughput = ThroughputReading(throughput_status, detail="test fault")
    if ttft_status is not None:
        ttft = SignalReading(SignalName.TTFT_P95, ttft_status, None, detail="test fault")
    elif demand == 0:
        ttft = SignalReading(SignalName.TTFT_P95, SignalStatus.IDLE, 0.0)
    else:
        ttft = SignalReading(SignalName.TTFT_P95, SignalStatus.OK, ttft_p95(per))
    counts = ReplicaCounts(current=replicas, status=replicas, ready=replicas)
    return Observation(counts, {SignalName.TTFT_P95: ttft}, throughput=throughput, pods=pods)
