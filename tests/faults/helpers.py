"""Answers and policies shared by the fault tests."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from scaler.config.policy import Policy
from scaler.controller.report import TargetReport
from scaler.core.reasons import Reason
from tests.support.controller_harness import Harness, case_policy
from tests.support.fakeprom import Ttft, kv, per_pod

QUERY_KINDS = ("waiting", "running", "kv_cache", "ttft_rate", "ttft_buckets", "throughput")
SIGNALS = ("queue_depth", "kv_cache_usage", "ttft_p95")


def names(n: int) -> list[str]:
    return [f"pod-{i}" for i in range(n)]


def serving(
    waiting: Mapping[str, str], kv_value: str = "0.1", ttft: str = "0.5", rate: str = "2"
) -> dict[str, Any]:
    """Answers of scraped vLLM pods with the given queue per pod."""
    return {
        "waiting": per_pod(waiting),
        "running": per_pod(dict.fromkeys(waiting, "1")),
        "kv_cache": kv(dict.fromkeys(waiting, kv_value)),
        "ttft_rate": Ttft(ttft, rate),
        "ttft_buckets": Ttft(ttft, rate),
    }


def quiet(pods: list[str]) -> dict[str, Any]:
    """Light load on every pod: the signals ask for the minimum."""
    return serving(dict.fromkeys(pods, "0"))


def busy(pods: list[str], per_pod_waiting: int = 30) -> dict[str, Any]:
    """Heavy queues: the signals ask for more replicas."""
    return serving(dict.fromkeys(pods, str(per_pod_waiting)), kv_value="0.9", ttft="3.0")


def no_window_policy(**overrides: Any) -> Policy:
    """The cases' policy with no scale-down window: good data scales down at once, so a
    hold is the fault's doing and recovery shows in the very next cycle."""
    rules = {"stabilization_window_seconds": 0, "max_replicas_per_period": 1, "period_seconds": 15}
    return case_policy(scale_down=rules, **overrides)


async def recovery_scales_down(h: Harness) -> TargetReport:
    """The first good cycle decides 4 -> 3 and ranks the pods by pod-deletion-cost; the
    scale-down is written in the next cycle, which reads that ranking back (no window held
    the scale-down, so nothing could rank the pods ahead of it)."""
    r = await h.next_cycle()
    assert r.decision is not None and r.decision.reason is Reason.STEP_LIMITED
    assert (r.decision.desired_replicas, r.action, h.replicas()) == (3, "pods_ranked", 4)
    r = await h.next_cycle()
    assert (r.action, h.replicas()) == ("scaled", 3)
    return r
