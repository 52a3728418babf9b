"""The one policy builder of the tests: the defaults of the shared cases' README.

One target ``Deployment llm/vllm``, min 1, max 10, targets of 10 waiting requests per
replica, KV cache 0.8 and TTFT p95 2 s, a 300 s scale-down window of one replica per 60 s
(everything else the policy file's defaults). Keyword overrides replace whole fields of the
target (``signals={...}`` replaces every signal's block).
"""

from __future__ import annotations

from typing import Any

from scaler.config.policy import Policy, TargetPolicy, parse_policy

NS = "llm"
NAME = "vllm"

#: The serve tests' policy file: one Deployment ``llm/vllm``, at most 4 replicas, every other
#: field the policy file's default (so the shipped defaults are what those tests run).
SERVE_POLICY: dict[str, Any] = {
    "targets": [
        {
            "workload": {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "namespace": NS,
                "name": NAME,
            },
            "max_replicas": 4,
        }
    ]
}


def case_target_doc(**overrides: Any) -> dict[str, Any]:
    """The cases' target as a policy-file mapping, ``overrides`` merged in."""
    target: dict[str, Any] = {
        "workload": {"apiVersion": "apps/v1", "kind": "Deployment", "namespace": NS, "name": NAME},
        "min_replicas": 1,
        "max_replicas": 10,
        "signals": {
            "queue_depth": {"target_per_replica": 10},
            "kv_cache_usage": {"target_ratio": 0.8},
            "ttft_p95": {"target_seconds": 2.0},
        },
        "scale_down": {
            "stabilization_window_seconds": 300,
            "max_replicas_per_period": 1,
            "period_seconds": 60,
        },
    }
    target.update(overrides)
    return target


def case_policy(**overrides: Any) -> Policy:
    """The cases' policy file with its one target (``overrides`` merged into the target)."""
    return parse_policy({"targets": [case_target_doc(**overrides)]}, source="case-policy")


def case_target(**overrides: Any) -> TargetPolicy:
    """The cases' target policy (``overrides`` merged in)."""
    return case_policy(**overrides).targets[0]
