"""The policy of the short simulated runs (fleet e2e, dashboards, backtest): fast and small."""

from __future__ import annotations

from typing import Any


def sim_policy(
    *, max_replicas: int, up_pods_per_period: int, down_window_seconds: float
) -> dict[str, Any]:
    """A policy file (as a dict) for ``Deployment llm/vllm`` on a sped-up fleet.

    An 8 s rate window over 1 s scrapes, 10 s step-limit periods, targets of 8 waiting
    requests per replica, KV cache 0.8 and TTFT p95 2 s; the scale-down window and the
    scale-up step are the caller's (seconds, pods).
    """
    return {
        "rate_window_seconds": 8,
        "targets": [
            {
                "workload": {
                    "apiVersion": "apps/v1",
                    "kind": "Deployment",
                    "namespace": "llm",
                    "name": "vllm",
                },
                "min_replicas": 1,
                "max_replicas": max_replicas,
                "signals": {
                    "queue_depth": {"target_per_replica": 8},
                    "kv_cache_usage": {"target_ratio": 0.8},
                    "ttft_p95": {"target_seconds": 2.0},
                },
                "scale_up": {
                    "stabilization_window_seconds": 0,
                    "max_replicas_per_period": up_pods_per_period,
                    "max_percent_per_period": 100,
                    "period_seconds": 10,
                },
                "scale_down": {
                    "stabilization_window_seconds": down_window_seconds,
                    "max_replicas_per_period": 1,
                    "max_percent_per_period": 50,
                    "period_seconds": 10,
                },
                "model_load_timeout_seconds": 30,
            }
        ],
    }
