"""The words every layer shares: the names of the signals vllm-scaler scales on, and the
shape of a Kubernetes name.

The lowest layer, so that the policy (:mod:`scaler.config.policy`), the decision core, the
sources and the telemetry all speak of the same signals without importing each other.
"""

from __future__ import annotations

from enum import StrEnum

__all__ = ["DNS_LABEL", "DNS_SUBDOMAIN", "SignalName"]

#: A DNS label (RFC 1123), as a namespace's name: at most 63 characters (checked apart).
DNS_LABEL = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
#: A DNS subdomain (RFC 1123), as most objects' names (a Deployment's, a Lease's): dot-separated
#: DNS labels, at most 253 characters (checked apart).
DNS_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"


class SignalName(StrEnum):
    """The signals vllm-scaler scales on.

    - ``queue_depth``: requests waiting in vLLM's scheduler
      (``vllm:num_requests_waiting``, summed over engines per pod). Per-pod signal.
    - ``kv_cache_usage``: KV-cache usage as a 0-1 ratio (``vllm:kv_cache_usage_perc``,
      ``vllm:gpu_cache_usage_perc`` before vLLM 0.9.2; max over engines per pod). Per-pod signal.
    - ``ttft_p95``: time to first token, 95th percentile, seconds
      (``histogram_quantile`` over ``vllm:time_to_first_token_seconds_bucket``).
      Target-level signal.
    - ``capacity``: the demand the fleet will see (weighted tokens per second, from vLLM's
      ``vllm:prompt_tokens_total`` and ``vllm:generation_tokens_total``) over what one replica
      serves at the TTFT target, learned online. Derived by the decision core from the
      target's throughput, not read by a query of its own.
    """

    QUEUE_DEPTH = "queue_depth"
    KV_CACHE_USAGE = "kv_cache_usage"
    TTFT_P95 = "ttft_p95"
    CAPACITY = "capacity"

    @property
    def unit(self) -> str:
        """The unit of the signal's value and target in a decision (``recommend`` prints it):
        waiting requests per replica, a 0-1 ratio per replica, seconds, or weighted tokens
        per second per replica (prompt tokens plus the generation weight times generated)."""
        return _UNITS[self]

    @property
    def per_pod(self) -> bool:
        """True for signals read per pod and summed over the target's ready pods."""
        return self in (SignalName.QUEUE_DEPTH, SignalName.KV_CACHE_USAGE)

    @property
    def queried(self) -> bool:
        """True for signals with a query of their own (capacity is derived from throughput)."""
        return self is not SignalName.CAPACITY


_UNITS = {
    SignalName.QUEUE_DEPTH: "waiting_requests_per_replica",
    SignalName.KV_CACHE_USAGE: "ratio_per_replica",
    SignalName.TTFT_P95: "seconds",
    SignalName.CAPACITY: "weighted_tokens_per_second_per_replica",
}
