"""A target's shadow policy through the real path (fake Prometheus over HTTP, the Kubernetes
stand-in with the real client): decided on the same readings with its own state, never
written, exported, shown beside the active decision by ``recommend``, persisted."""

from __future__ import annotations

import json
from io import StringIO
from typing import Any

from scaler.config.settings import Settings
from scaler.controller.app import RunOptions, serve
from scaler.controller.lease_state import STATE_ANNOTATION
from scaler.core.state import decode_state
from tests.controller.test_leader_election import lease, serve_load
from tests.support.controller_harness import KEY, T0, Harness, HarnessFactory
from tests.support.fakeprom import pods, uniform_answers
from tests.support.policies import case_policy, case_target_doc
from tests.support.replicas import Cluster, ReplicaSetSim, open_instance

SHADOW = {
    "signals": {
        "queue_depth": {"target_per_replica": 4},
        "kv_cache_usage": {"enabled": False},
        "ttft_p95": {"target_seconds": 2.0},
    },
    "max_replicas": 10,
}


def _settings(h: Harness) -> Settings:
    return Settings(
        prometheus_url=h.prom.url,
        kubeconfig=h.kubeconfig,
        in_cluster=False,
        metrics_port=0,
        prometheus_timeout_seconds=5,
    )


def _load(h: Harness, waiting: str) -> None:
    four = pods(4)
    h.fake.set(
        **uniform_answers(
            four,
            waiting=waiting,
            running="2",
            kv_cache="0.3",
            ttft_p95="0.4",
            ttft_rate="3",
        )
    )


async def _recommend(h: Harness, output: str) -> str:
    out = StringIO()
    options = RunOptions(dry_run=True, once=True, output=output)  # type: ignore[arg-type]
    assert await serve(_settings(h), h.policy, options, out=out, clock=h.clock) == 0
    return out.getvalue()


async def test_recommend_shows_active_and_shadow_side_by_side(
    make_harness: HarnessFactory,
) -> None:
    """24 waiting on 4 replicas: the active policy (10 per replica) asks for 3 and its window
    holds 4, the shadow
    (4 per replica, no KV signal) would go to 6; recommend prints both, in two columns
    (table) and under "shadow" (JSON), and writes nothing."""
    policy = case_policy(shadow=SHADOW)
    h = await make_harness(replicas=4, ready=pods(4), policy=policy)
    _load(h, "6")

    [obj] = json.loads(await _recommend(h, "json"))
    assert (obj["desired_replicas"], obj["reason"]) == (4, "stabilized")
    shadow: dict[str, Any] = obj["shadow"]
    assert (shadow["current_replicas"], shadow["desired_replicas"]) == (4, 6)
    assert shadow["reason"] == "scale_up"
    assert [s["name"] for s in shadow["signals"]] == ["queue_depth", "ttft_p95", "capacity"]
    assert shadow["signals"][0]["value"] == 6.0 and shadow["signals"][0]["target"] == 4.0

    text = await _recommend(h, "text")
    lines = text.splitlines()
    head = next(
        i for i, line in enumerate(lines) if line.split() == ["signal", "active", "shadow", "unit"]
    )
    desired, queue, kv_row, ttft, capacity = lines[head + 1 : head + 6]
    assert desired.split()[1:] == ["4", "[stabilized]", "6", "[scale_up]"]
    assert queue.split()[1:-1] == ["6", "/", "10", "=", "0.60", "->", "3",
                                   "6", "/", "4", "=", "1.50", "->", "6"]  # fmt: skip
    assert kv_row.split()[-2] == "off" and kv_row.split()[0] == "kv_cache_usage"
    assert ttft.split()[0] == "ttft_p95"
    # on by default with TTFT in both; no seed and no throughput yet: learning in both
    assert capacity.split()[0] == "capacity" and capacity.split()[1:3] == ["learning", "learning"]
    # the learning detail once, below the table (the shadow's is the same: not repeated)
    assert lines[head + 6].startswith("  capacity: no capacity estimate yet")
    assert text.count("no capacity estimate yet") == 1
    assert lines[head + 7].startswith("  shadow: scale up 4 -> 6 (queue_depth 6 vs target 4")
    assert set(h.kube.methods()) == {"GET"} and h.replicas() == 4


async def test_recommend_text_has_one_layout_and_shows_an_idle_ttft_as_idle(
    make_harness: HarnessFactory,
) -> None:
    """Without a shadow, the text report is the same table with only the active column; an
    idle TTFT (no requests: no quantile) reads ``idle (no requests)``, never a measured 0."""
    h = await make_harness(replicas=4, ready=pods(4), policy=case_policy())
    four = pods(4)
    h.fake.set(
        **uniform_answers(
            four,
            waiting="0",
            running="0",
            kv_cache="0.1",
            ttft_p95="NaN",
            ttft_rate="0",
        )
    )
    [obj] = json.loads(await _recommend(h, "json"))
    ttft_json = next(s for s in obj["signals"] if s["name"] == "ttft_p95")
    assert ttft_json["status"] == "idle"

    lines = (await _recommend(h, "text")).splitlines()
    head = next(i for i, line in enumerate(lines) if line.split() == ["signal", "active", "unit"])
    rows = {line.split()[0]: line for line in lines[head + 1 :] if line.startswith("  ")}
    assert rows["ttft_p95"].split()[1:] == ["idle", "(no", "requests)", "seconds"]
    assert "0.00" not in rows["ttft_p95"]
    assert rows["queue_depth"].split()[1:-1] == ["0", "/", "10", "=", "0.00", "->", "0"]
    assert not any(line.startswith("  shadow") for line in lines)


async def test_the_shadow_is_decided_every_cycle_never_written_and_exported(
    make_harness: HarnessFactory,
) -> None:
    """The leader scales by the active policy only; the shadow's recommendation and reason are
    exported every cycle from its own state (its scale-down window is its own)."""
    h = await make_harness(replicas=4, ready=pods(4), policy=case_policy(shadow=SHADOW))
    _load(h, "6")
    [report] = await h.controller.run_cycle()
    assert report.shadow is not None and report.shadow.desired_replicas == 6
    assert report.decision is not None and report.decision.desired_replicas == 4
    assert h.replicas() == 4  # the shadow never writes
    metric = h.metrics.registry.get_sample_value
    assert metric("vllm_scaler_shadow_desired_replicas", {"target": KEY}) == 6
    assert (
        metric("vllm_scaler_shadow_last_decision_reason", {"target": KEY, "reason": "scale_up"})
        == 1
    )
    assert h.controller.shadow_state(KEY) is report.shadow.state
    assert h.controller.state(KEY) is not report.shadow.state

    _load(h, "0")  # idle: the shadow's own 300 s window holds it at 4 as well
    h.clock.advance(30)
    [report] = await h.controller.run_cycle()
    assert report.shadow is not None
    assert (report.shadow.desired_replicas, report.shadow.reason) == (4, "stabilized")


async def test_a_shadow_like_the_active_policy_follows_its_step_limits(
    make_harness: HarnessFactory,
) -> None:
    """A shadow with the active policy's very settings recommends what the active one
    decides, step-limited scale-ups included: its step limits count the workload's real
    changes (the active policy's writes), not only its own (it has none)."""
    same = {k: v for k, v in case_target_doc().items() if k != "workload"}
    h = await make_harness(replicas=1, ready=pods(1), policy=case_policy(shadow=same))
    one = pods(1)
    h.fake.set(
        **uniform_answers(
            one,
            waiting="80",
            running="2",
            kv_cache="0.3",
            ttft_p95="0.4",
            ttft_rate="3",
        )
    )
    steps = []
    for _ in range(3):  # within one 60 s scale-up period
        [report] = await h.controller.run_cycle()
        assert report.decision is not None and report.shadow is not None
        steps.append(
            (
                (report.decision.desired_replicas, str(report.decision.reason)),
                (report.shadow.desired_replicas, str(report.shadow.reason)),
            )
        )
        h.clock.advance(15)
    # the larger of +4 replicas and +100% per 60 s from 1: 5, then held there for the period
    assert steps == [((5, "step_limited"), (5, "step_limited"))] * 3
    assert h.replicas() == 5


async def test_a_new_leader_resumes_the_shadow_state(make_harness: HarnessFactory) -> None:
    """The shadow's decision state travels on the Lease with the active one: after a crash the
    new leader's shadow continues the shadow's own stabilization history."""
    h = await make_harness(
        replicas=4,
        ready=[f"vllm-p{i}" for i in range(4)],
        policy=case_policy(shadow=SHADOW),
    )
    rs = ReplicaSetSim(h.store, h.clock)
    async with open_instance(h, "a") as a, open_instance(h, "b") as b:
        cluster = Cluster(h, [a], before_cycle=lambda: serve_load(h, rs))
        await cluster.run_until(T0 + 100)
        doc = json.loads(lease(h)["metadata"]["annotations"][STATE_ANNOTATION])
        saved = decode_state(doc["shadows"][KEY])
        assert [r.replicas for r in saved.recommendations] == [4, 10, 0]
        cluster.start(b)
        cluster.kill(a)
        while not b.leading():
            await cluster.run_until(h.clock.now + 1)
        await cluster.run_until(h.clock.now + 15)
        resumed = b.controller.shadow_state(KEY)
        assert resumed is not None
        # the shadow's 10 from before the load drop is still in its window after the takeover,
        # and holds it at the replicas there are (a fresh history would hold them too, but
        # from the takeover on, not from A's cycles)
        assert 10 in [r.replicas for r in resumed.recommendations]
        shadow = b.reports[-1][1].shadow
        assert shadow is not None
        assert (shadow.desired_replicas, shadow.reason) == (4, "stabilized")
