"""h03: a restarted vLLM container is loading its model again, not stuck (the real controller
against the Kubernetes stand-in over HTTP and the fake Prometheus)."""

from __future__ import annotations

from scaler.core.reasons import Reason
from scaler.sim.kubeapi.base import rfc3339
from tests.cases.hunt import busy, condition
from tests.support.controller_harness import NS, T0, HarnessFactory, captured_logs, make_harness
from tests.support.fakeprom import case_file, ttft_answers
from tests.support.policies import case_policy

__all__ = ["make_harness"]

PODS = ["vllm-6d4cf56db6-b2mzq", "vllm-6d4cf56db6-f7x9k", "vllm-6d4cf56db6-q8wvn"]
RESTARTED = PODS[2]


async def test_h03_a_restarted_container_is_starting_from_its_restart(
    make_harness: HarnessFactory,
) -> None:
    """h03: an old pod whose vLLM container was OOM-killed counts as starting from the
    restart: TTFT stays capped, nothing is stuck, and its reload teaches 210 s."""
    case_file("h03-container-restart-reloads-the-model.md")
    h = await make_harness(replicas=3, policy=case_policy(model_load_timeout_seconds=600))
    h.add_ready(PODS, age=6 * 3600)
    h.store.set_pod_status(
        NS,
        RESTARTED,
        conditions=[
            condition("PodScheduled", True, T0 - 6 * 3600),
            condition("Ready", False, T0 - 30),
        ],
        containerStatuses=[
            {
                "name": "vllm",
                "ready": False,
                "restartCount": 1,
                "image": "vllm/vllm-openai",
                "imageID": "",
                "lastState": {
                    "terminated": {
                        "reason": "OOMKilled",
                        "exitCode": 137,
                        "finishedAt": rfc3339(T0 - 30),
                    }
                },
            }
        ],
    )
    serving = PODS[:2]
    h.fake.set(**{**busy(dict.fromkeys(serving, "12")), **ttft_answers("6", "4")})
    timeline: list[tuple[float, int, Reason, int, int]] = []
    with captured_logs() as logs:
        for i in range(10):
            if i:
                h.clock.advance(30)
            if h.clock.now - T0 == 180:  # the model is loaded again
                h.store.set_pod_ready(NS, RESTARTED)
                serving = PODS
                h.fake.set(**{**busy(dict.fromkeys(serving, "8")), **ttft_answers("1.5", "6")})
            report = await h.cycle()
            d = report.decision
            assert d is not None
            timeline.append(
                (h.clock.now - T0, h.replicas(), d.reason, d.replicas.starting, d.replicas.stuck)
            )
    assert {r for _, r, *_ in timeline} == {3}, timeline  # no replica added for the reload
    assert {st for *_, st in timeline} == {0}
    before = [(why, s) for t, _, why, s, _ in timeline if t < 180]
    assert set(before) == {(Reason.WAITING_FOR_STARTING, 1)}, before
    assert not [e for e in logs if e["event"] == "replicas_stuck"]
    assert "ReplicasStuck" not in {e["reason"] for e in h.store.events(NS)}
    assert h.target_value("vllm_scaler_model_load_seconds") == 210
