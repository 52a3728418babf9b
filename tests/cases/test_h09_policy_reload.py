"""h09: a policy changed while the controller runs (the real controller and the policy
watcher the composition root runs before each cycle, against the stand-ins over HTTP)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml

from scaler.config.policy import load_policy
from scaler.controller.reload import PolicyWatcher
from scaler.core.reasons import Reason
from tests.cases.hunt import busy
from tests.support.controller_harness import KEY, NS, HarnessFactory, captured_logs, make_harness
from tests.support.fakeprom import case_file
from tests.support.policies import case_target_doc

__all__ = ["make_harness"]

PODS = ["pod-0", "pod-1", "pod-2"]
OTHER = "llm/Deployment/vllm-b"


def write_policy(path: Path, targets: list[dict[str, Any]]) -> None:
    """Replace the file atomically, as the kubelet swaps a ConfigMap's files."""
    new = path.with_suffix(".new")
    new.write_text(yaml.safe_dump({"targets": targets}), encoding="utf-8")
    os.replace(new, path)


async def test_h09_changes_apply_before_the_next_cycle_and_a_broken_one_is_refused(
    make_harness: HarnessFactory, tmp_path: Path
) -> None:
    """h09: (1) a lower max applies, (2) an invalid file is refused and named, (3) a new
    target is read, (4) a removed one is forgotten with its metrics."""
    case_file("h09-policy-changed-at-runtime.md")
    path = tmp_path / "policy.yaml"
    write_policy(path, [case_target_doc()])
    policy = load_policy(path)
    h = await make_harness(replicas=3, ready=PODS, policy=policy)
    h.fake.set(**busy(dict.fromkeys(PODS, "20")))
    results: list[bool] = []

    def reloaded_ok(ok: bool) -> None:  # as the composition root wires it, and recorded
        results.append(ok)
        h.metrics.policy_reload_ok.set(ok)

    watcher = PolicyWatcher(path, policy, on_result=reloaded_ok)

    async def cycle() -> dict[str, Any]:
        change = watcher.check()
        if change is not None:
            h.controller.use_policy(change.policy, removed=change.removed)
        reports = await h.controller.run_cycle()
        h.clock.advance(30)
        return {r.target: r for r in reports}

    assert watcher.check() is None  # unchanged: not parsed again
    first = await cycle()
    assert h.replicas() == 6 and first[KEY].action == "scaled"

    write_policy(path, [case_target_doc(max_replicas=4)])  # (1)
    with captured_logs() as logs:
        after = await cycle()
    d = after[KEY].decision
    assert d is not None and (d.desired_replicas, d.reason) == (4, Reason.AT_MAX)
    assert after[KEY].action == "pods_ranked"  # the scale-down follows the ranking (case 20)
    [reloaded] = [e for e in logs if e["event"] == "policy_reloaded"]
    assert reloaded["changed"] == [KEY] and reloaded["added"] == []

    write_policy(path, [case_target_doc(max_replicas=-1)])  # (2)
    with captured_logs() as logs:
        still = await cycle()
    [refused] = [e for e in logs if e["event"] == "policy_reload_failed"]
    assert "targets[0].max_replicas" in refused["error"] and "-1" in refused["error"]
    assert str(path) in refused["error"]
    assert still[KEY].decision is not None and still[KEY].decision.desired_replicas == 4
    assert h.replicas() == 4
    assert results == [True, False]
    assert h.value("vllm_scaler_policy_last_reload_successful") == 0

    other = case_target_doc(max_replicas=4)
    other["workload"] = {**other["workload"], "name": "vllm-b"}
    h.store.add_deployment(NS, "vllm-b", 1, {"app": "vllm-b"})
    h.store.add_pod(NS, "vllm-b-x", {"app": "vllm-b"}, ready=True, created_at=h.clock.now - 60)
    write_policy(path, [case_target_doc(max_replicas=4), other])  # (3)
    both = await cycle()
    assert set(both) == {KEY, OTHER} and both[OTHER].decision is not None
    assert h.value("vllm_scaler_current_replicas", target=OTHER) == 1
    assert results[-1] is True
    assert h.value("vllm_scaler_policy_last_reload_successful") == 1

    write_policy(path, [case_target_doc(max_replicas=4)])  # (4)
    one = await cycle()
    assert set(one) == {KEY}
    assert h.value("vllm_scaler_current_replicas", target=OTHER) is None
    assert h.value("vllm_scaler_current_replicas", target=KEY) == 4
