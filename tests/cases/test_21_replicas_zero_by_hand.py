"""Case 21: ``spec.replicas`` 0, set by a person or an idler, disables scaling (HPA's rule).

The real controller against the Kubernetes stand-in over HTTP and the fake Prometheus.
"""

from __future__ import annotations

import json
from io import StringIO
from pathlib import Path

from scaler.config.settings import Settings
from scaler.controller.app import RunOptions, serve
from scaler.core.reasons import Reason
from tests.support.controller_harness import (
    KEY,
    NAME,
    NS,
    Harness,
    HarnessFactory,
    captured_logs,
    case_policy,
)
from tests.support.fakeprom import case_file, kv, per_pod, ttft_answers

SIGNALS = ("queue_depth", "kv_cache_usage", "ttft_p95")


def idle(pods: list[str]) -> dict[str, object]:
    return {
        "waiting": per_pod(dict.fromkeys(pods, "0")),
        "running": per_pod(dict.fromkeys(pods, "0")),
        "kv_cache": kv(dict.fromkeys(pods, "0.02")),
        **ttft_answers("NaN", "0"),
    }


def park(h: Harness) -> None:
    """An idler sets replicas to 0; the Deployment controller deletes the pods."""
    h.store.external_scale(NS, NAME, 0)
    for p in h.store.list_pods(NS, "app=vllm"):
        h.store.delete_pod(NS, p["metadata"]["name"])


def unpark(h: Harness, pods: list[str]) -> None:
    h.store.external_scale(NS, NAME, len(pods))
    h.add_ready(pods)
    h.fake.set(**idle(pods))


async def test_case_21_zero_replicas_is_disabled_not_a_failed_read(
    make_harness: HarnessFactory,
) -> None:
    """Case 21: at spec.replicas 0 nothing is written; reported as disabled, not a failure."""
    case_file("21-replicas-zero-by-hand.md")
    h = await make_harness(replicas=0)  # no pods; every vLLM query would answer R[]
    with captured_logs() as logs:
        reports = [await h.cycle()] + [await h.next_cycle() for _ in range(3)]
    for r in reports:
        d = r.decision
        assert d is not None and d.reason is Reason.SCALING_DISABLED
        assert (d.current_replicas, d.desired_replicas, r.action) == (0, 0, "none")
    assert h.replicas() == 0 and h.patches() == []
    # one Event, not one per cycle; nothing else written
    writes = [(r.method, r.path) for r in h.writes()]
    assert writes == [("POST", f"/api/v1/namespaces/{NS}/events")]
    [event] = h.store.events(NS)
    assert (event["reason"], event["type"]) == ("ScalingDisabled", "Normal")
    assert "spec.replicas is 0" in event["message"]
    # a metric and the decision reason, no read or query failure
    assert h.target_value("vllm_scaler_scaling_disabled") == 1
    assert h.decisions("scaling_disabled") == 4
    assert h.target_value("vllm_scaler_desired_replicas") == 0
    assert h.fake.requests == []  # nothing asked of Prometheus for it
    for sig in SIGNALS:
        for reason in ("empty", "absent"):
            assert h.query_errors(sig, reason) == 0
        assert h.signal_valid(sig) is None  # no stale signal series either
    assert h.count("vllm_scaler_target_read_errors_total", target=KEY, outcome="not_found") == 0
    levels = {e["log_level"] for e in logs if e.get("target") == KEY}
    assert levels == {"info"}  # no warning, no error
    assert [e["event"] for e in logs if e["event"] == "scaling_disabled"] == ["scaling_disabled"]


async def test_case_21_scaling_resumes_from_the_new_replicas_with_a_fresh_history(
    make_harness: HarnessFactory,
) -> None:
    """Case 21: above 0 again, scaling resumes from there with a fresh stabilization history."""
    case_file("21-replicas-zero-by-hand.md")
    pods = ["vllm-6d4cf56db6-aaaaa", "vllm-6d4cf56db6-bbbbb"]
    h = await make_harness(replicas=2, ready=pods, answers=idle(pods))
    await h.cycle()
    while h.replicas() == 2:  # idle: 2 -> 1 after the 300 s window
        await h.next_cycle()
    assert h.replicas() == 1
    park(h)  # a minute later the idler parks it; its idle history is still in the window
    report = await h.next_cycle(60)
    assert report.decision is not None and report.decision.reason is Reason.SCALING_DISABLED
    assert h.target_value("vllm_scaler_scaling_disabled") == 1
    fresh = ["vllm-6d4cf56db6-ccccc", "vllm-6d4cf56db6-ddddd", "vllm-6d4cf56db6-eeeee"]
    unpark(h, fresh)  # a person sets 3 (the load is still idle)
    resumed_at = h.clock.now + 30
    with captured_logs() as logs:
        report = await h.next_cycle()
    d = report.decision
    assert d is not None and h.target_value("vllm_scaler_scaling_disabled") == 0
    # Not an outside write to fight, and no scale-down on the old idle history: the window
    # starts again from 3.
    assert (d.current_replicas, d.desired_replicas, d.reason) == (3, 3, Reason.STABILIZED)
    assert not d.outside_write
    assert any(e["event"] == "scaling_resumed" and e["replicas"] == 3 for e in logs)
    while h.replicas() == 3:
        report = await h.next_cycle()
    assert h.clock.now - resumed_at == 300 and h.replicas() == 2
    assert h.count("vllm_scaler_outside_writes_total", target=KEY) == 0


async def test_case_21_recommend_check_accepts_a_target_at_zero(
    make_harness: HarnessFactory, tmp_path: Path
) -> None:
    """Case 21: the start-up check does not fail on a target at 0 without series."""
    case_file("21-replicas-zero-by-hand.md")
    h = await make_harness(replicas=0, policy=case_policy())
    settings = Settings(
        prometheus_url=h.prom.url, kubeconfig=h.kubeconfig, in_cluster=False, metrics_port=0
    )
    out = StringIO()
    options = RunOptions(dry_run=True, once=True, output="json", check_queries=True)
    code = await serve(settings, h.policy, options, out=out, clock=h.clock)
    assert code == 0
    [doc] = json.loads(out.getvalue())
    assert (doc["reason"], doc["current_replicas"], doc["action"]) == (
        "scaling_disabled",
        0,
        "none",
    )
    assert doc["signals"] == [] and h.writes() == []
