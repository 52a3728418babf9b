"""h16: ready pods beyond spec.replicas are not the fleet TTFT doubles (the real controller
against the Kubernetes stand-in over HTTP and the fake Prometheus)."""

from __future__ import annotations

from scaler.config.vocabulary import SignalName
from tests.cases.hunt import busy
from tests.support.controller_harness import HarnessFactory, decision_of, make_harness
from tests.support.fakeprom import case_file, per_pod, ttft_answers
from tests.support.policies import case_policy

__all__ = ["make_harness"]

ACTIVE = [f"vllm-6d4cf56db6-a{i}" for i in range(4)]
PREVIEW = [f"vllm-7c9f8d6b5-p{i}" for i in range(4)]


async def test_h16_ttft_doubles_the_replicas_asked_for_not_the_preview_pods(
    make_harness: HarnessFactory,
) -> None:
    """h16: 4 active busy pods and 4 idle preview pods at TTFT ratio 3: TTFT asks for 8."""
    case_file("h16-idle-surplus-pods-are-not-the-fleet.md")
    h = await make_harness(replicas=4, policy=case_policy(max_replicas=20))
    h.add_ready([*ACTIVE, *PREVIEW])
    answers = busy(dict.fromkeys(ACTIVE, "5"))
    answers["waiting"] = per_pod({**dict.fromkeys(ACTIVE, "5"), **dict.fromkeys(PREVIEW, "0")})
    answers["running"] = per_pod({**dict.fromkeys(ACTIVE, "1"), **dict.fromkeys(PREVIEW, "0")})
    answers["kv_cache"]["data"]["result"] += per_pod(
        dict.fromkeys(PREVIEW, "0.0"), __name__="vllm:kv_cache_usage_perc"
    )["data"]["result"]
    h.fake.set(**{**answers, **ttft_answers("6", "4")})
    report = await h.cycle()
    d = decision_of(report)
    ttft = next(e for e in d.signals if e.name is SignalName.TTFT_P95)
    assert ttft.desired_replicas == 8, (ttft, d.message)
    assert d.recommended_replicas == 8
