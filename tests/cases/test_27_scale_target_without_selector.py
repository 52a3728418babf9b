"""Case 27 and its kind through the real code path: a scale target whose ``/scale`` answers no
pod selector.

The Kubernetes stand-in over HTTP with the real client holds the custom target: a kind whose
CRD declares a scale subresource without ``labelSelectorPath`` (the case), or one whose
``labelSelectorPath`` names a status field its operator has not written yet (the neighbour);
the fake Prometheus over HTTP answers its pods busy. The real source, actuator, metrics and
controller run on one fake clock. What a cluster-tier variant needs from a real server: a CRD
(``grove.io/v1alpha1 PodClique``, plural ``podcliques``) with ``subresources.scale`` giving
``specReplicasPath`` and ``statusReplicasPath`` and no ``labelSelectorPath`` (then ``/scale``
leaves ``status.selector`` out), or one with ``labelSelectorPath: .status.selector`` and an
object whose status lacks it; pods with its labels; and RBAC for the kind and its ``/scale``.
"""

from __future__ import annotations

from typing import Any

import pytest

from scaler.config.policy import parse_policy
from scaler.controller.report import TargetReport, report_json
from scaler.core.reasons import Reason
from tests.support.controller_harness import Harness, HarnessFactory, captured_logs, decision_of
from tests.support.fakeprom import case_file, kv, per_pod, ttft_answers
from tests.support.policies import case_target_doc

CASE = "27-scale-target-without-selector.md"
GROUP, PLURAL = "grove.io", "podcliques"
KEY = "llm/PodClique/qwen-decode"
PODS = ["qwen-decode-0", "qwen-decode-1", "qwen-decode-2"]
LABELS = {"app.kubernetes.io/name": "qwen-decode"}
SCALE = f"/apis/{GROUP}/v1alpha1/namespaces/llm/{PLURAL}/qwen-decode/scale"


def _policy() -> Any:
    target = case_target_doc(
        workload={"apiVersion": f"{GROUP}/v1alpha1", "kind": "PodClique", "plural": PLURAL,
                  "namespace": "llm", "name": "qwen-decode"},
    )  # fmt: skip
    return parse_policy({"targets": [target]})


def _busy() -> dict[str, Any]:
    """90 waiting, KV 0.9 and a TTFT of about 6 s over the three pods."""
    return {
        "waiting": per_pod(dict.fromkeys(PODS, "30")),
        "running": per_pod(dict.fromkeys(PODS, "8")),
        "kv_cache": kv(dict.fromkeys(PODS, "0.9")),
        **ttft_answers("6.0", "3"),
    }


async def _target(make_harness: HarnessFactory, *, selector_path: bool) -> Harness:
    h = await make_harness(replicas=1, policy=_policy(), answers=_busy())
    h.store.register_kind(GROUP, "v1alpha1", "PodClique", PLURAL, label_selector_path=selector_path)
    h.store.add_workload(GROUP, PLURAL, "llm", "qwen-decode", replicas=3, labels=LABELS)
    if selector_path:  # the operator has not written the status field yet
        h.store.set_scale_selector("llm", "qwen-decode", "", group=GROUP, plural=PLURAL)
    for name in PODS:
        h.store.add_pod("llm", name, LABELS, ready=True, created_at=h.clock.now - 3600)
    return h


async def _cycle(h: Harness) -> TargetReport:
    (report,) = await h.controller.run_cycle()
    return report


def _series(h: Harness, name: str) -> float | None:
    return h.value(name, target=KEY)


@pytest.mark.parametrize(
    "selector_path", [pytest.param(False, id="no labelSelectorPath"),
                      pytest.param(True, id="status not reconciled")],
)  # fmt: skip
async def test_case_27_a_scale_without_selector_writes_nothing_and_says_why(
    make_harness: HarnessFactory, selector_path: bool
) -> None:
    """Case 27: nothing is written (the HPA: SelectorRequired); the reason names the missing
    selector; replica counts of pods are not exported as 0 ready and no signal is invalid
    (no Prometheus-side alert); the selector-missing metric is what fires an alert."""
    case_file(CASE)
    h = await _target(make_harness, selector_path=selector_path)
    with captured_logs() as logs:
        reports = [await _cycle(h)]
        for _ in range(3):
            h.clock.advance(30)
            reports.append(await _cycle(h))
    for r in reports:
        d = decision_of(r)
        assert (d.reason, d.current_replicas, d.desired_replicas) == (
            Reason.SELECTOR_REQUIRED,
            3,
            3,
        )
        assert "answers no status.selector" in d.message and "labelSelectorPath" in d.message
    assert h.store.get_spec_replicas("llm", "qwen-decode", group=GROUP, plural=PLURAL) == 3
    assert not [r for r in h.kube.requests if r.method == "PATCH"]
    doc = report_json(reports[-1])
    assert doc["reason"] == "selector_required" and doc["replicas"] is None
    # exported: replicas asked for, the missing selector; no pod count, no signal at all
    assert _series(h, "vllm_scaler_current_replicas") == 3
    assert _series(h, "vllm_scaler_scale_selector_missing") == 1
    for gone in ("vllm_scaler_ready_replicas", "vllm_scaler_pending_replicas",
                 "vllm_scaler_stuck_replicas"):  # fmt: skip
        assert _series(h, gone) is None, gone
    assert not [
        s for m in h.metrics.registry.collect() if m.name == "vllm_scaler_signal_valid"
        for s in m.samples if s.labels.get("target") == KEY
    ]  # fmt: skip
    assert h.fake.requests == []  # no signal of its pods asked for: none can be told
    warned = [e for e in logs if e["event"] == "scale_selector_missing"]
    assert len(warned) == 1 and warned[0]["scale"] == f"{GROUP}/v1alpha1 {PLURAL}/qwen-decode/scale"
    events = [r for r in h.kube.requests if r.method == "POST" and r.path.endswith("/events")]
    assert len(events) == 1  # one SelectorRequired Warning, not one a cycle


async def test_case_27_once_the_selector_is_there_scaling_resumes(
    make_harness: HarnessFactory,
) -> None:
    """The operator writes the selector: the target is read and scaled from the next cycle
    (90 waiting on 3 replicas asks for 9), and the missing-selector metric goes to 0."""
    case_file(CASE)
    h = await _target(make_harness, selector_path=True)
    assert (await _cycle(h)).decision.reason is Reason.SELECTOR_REQUIRED  # type: ignore[union-attr]
    h.store.set_scale_selector(
        "llm", "qwen-decode", "app.kubernetes.io/name=qwen-decode", group=GROUP, plural=PLURAL
    )
    h.clock.advance(30)
    with captured_logs() as logs:
        report = await _cycle(h)
    d = report.decision
    assert d is not None and (d.reason, d.recommended_replicas, d.desired_replicas) == (
        Reason.STEP_LIMITED,
        9,
        7,
    )  # 90 / 10 asks for 9; +4 a period
    assert _series(h, "vllm_scaler_scale_selector_missing") == 0
    assert _series(h, "vllm_scaler_ready_replicas") == 3
    assert [e["event"] for e in logs if e["event"] == "scale_selector_found"] == [
        "scale_selector_found"
    ]
