"""End to end: a real Prometheus (or VictoriaMetrics) scrapes the simulated fleet replaying a
slice of a real trace, and the real controller scales it through the Kubernetes API stand-in
over HTTP.

Asserts a scale-up during the burst, a scale-down after it, no direction reversal within a
stabilization window, no request cut by a scale-down, and that ``vllm-scaler recommend
--once --output json`` (the real command, in its own process) prints the documented fields
with the values the cluster and the policy hold.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import sys
import time
from pathlib import Path

import pytest
import yaml

from scaler.config.policy import parse_policy
from scaler.controller.loop import Controller
from scaler.controller.report import TargetReport
from scaler.sim.cluster import SimCluster
from scaler.sim.demo import NAMED_TRACES
from scaler.sim.engine import ReplicaModel
from scaler.sim.fleet import FleetConfig
from scaler.sim.prometheus_server import find_prometheus_binary, wait_for_series
from scaler.sim.trace import load_trace
from scaler.sim.victoria_metrics import find_victoria_metrics_binary
from tests.support.controller_harness import decision_of
from tests.support.sim_policy import sim_policy

DOWN_WINDOW_SECONDS = 20.0
INTERVAL_SECONDS = 2.0
POLICY = sim_policy(max_replicas=6, up_pods_per_period=4, down_window_seconds=DOWN_WINDOW_SECONDS)

pytestmark = pytest.mark.e2e


def _backend_or_skip(backend: str) -> None:
    find = {"prometheus": find_prometheus_binary, "victoria-metrics": find_victoria_metrics_binary}
    try:
        find[backend]()
    except Exception as err:  # the message says how to install it
        pytest.skip(str(err))


async def _recommend_json(env: dict[str, str]) -> list[dict[str, object]]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "scaler", "recommend", "--once", "--output", "json",
        env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(), timeout=60)
    assert proc.returncode == 0, err.decode()
    parsed = json.loads(out)
    assert isinstance(parsed, list)
    return parsed


@pytest.mark.parametrize(
    "backend",
    [
        pytest.param("prometheus", id="prometheus"),
        pytest.param("victoria-metrics", id="victoria-metrics"),
    ],
)
async def test_fleet_scales_up_in_a_burst_and_down_after_it(tmp_path: Path, backend: str) -> None:
    _backend_or_skip(backend)
    policy_file = tmp_path / "policy.yaml"
    policy_file.write_text(yaml.safe_dump(POLICY))
    policy = parse_policy(POLICY)
    # Code trace minutes 13-16: quiet, a burst of 632 requests/minute, 299, quiet again.
    trace = load_trace(
        NAMED_TRACES["code"],
        start_seconds=13 * 60,
        duration_seconds=3 * 60,
        compress=4,
        rate_scale=0.4,
        seed=1,
    )
    cluster = SimCluster(
        tmp_path,
        FleetConfig(model=ReplicaModel(model_load_seconds=4.0), termination_grace_seconds=30),
        scrape_interval_seconds=1.0,
        clock=time.time,
        backend=backend,
    )
    fleet = cluster.fleet
    reports: list[tuple[float, TargetReport]] = []
    recommended: list[tuple[int, list[dict[str, object]]]] = []
    stop = asyncio.Event()
    scaled_up = asyncio.Event()
    cluster.store.on_scale_change(lambda c: scaled_up.set() if c.new_replicas >= 2 else None)
    start = time.time()

    async def control(controller: Controller) -> None:
        while not stop.is_set():
            for r in await controller.run_cycle():
                reports.append((time.time() - start, r))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=INTERVAL_SECONDS)

    async def recommend_once_scaled() -> None:
        env = {
            **os.environ,
            "VLLM_SCALER_PROMETHEUS_URL": cluster.prometheus.url,
            "VLLM_SCALER_KUBECONFIG": str(cluster.kubeconfig),
            "VLLM_SCALER_POLICY_FILE": str(policy_file),
            "VLLM_SCALER_IN_CLUSTER": "false",
        }
        await scaled_up.wait()
        if not stop.is_set():
            # (That the dry run sends only GETs is pinned in tests/controller; here the
            # controller writes concurrently.)
            recommended.append((fleet.spec_replicas, await _recommend_json(env)))

    try:
        await cluster.start()
        await wait_for_series(cluster.prometheus.url, "vllm:num_requests_running", timeout=30)
        async with cluster.controller(policy) as controller:
            tasks = [
                asyncio.create_task(control(controller)),
                asyncio.create_task(recommend_once_scaled()),
            ]
            await cluster.runtime.replay(trace, tail_seconds=55, stop=asyncio.Event())
            stop.set()
            scaled_up.set()
            await asyncio.gather(*tasks)
    finally:
        stop.set()
        scaled_up.set()
        await cluster.stop()

    events = [(when - start, c.old_replicas, c.new_replicas) for when, c in fleet.scale_changes]
    ups = [e for e in events if e[2] > e[1]]
    downs = [e for e in events if e[2] < e[1]]
    burst_end = trace.duration_seconds
    assert ups, f"no scale-up; events {events}"
    assert ups[0][0] < burst_end, f"first scale-up after the trace ended: {events}"
    assert downs, f"no scale-down; events {events}"
    assert max(e[0] for e in downs) > ups[-1][0]
    assert fleet.spec_replicas < max(e[2] for e in ups)
    # No direction reversal within a stabilization window.
    for a, b in itertools.pairwise(events):
        if (a[2] > a[1]) != (b[2] > b[1]):
            assert b[0] - a[0] >= DOWN_WINDOW_SECONDS - INTERVAL_SECONDS, f"flap: {a} then {b}"
    # Every scale-down was a scale_down/step_limited/at_min decision, never on bad data.
    for _, r in reports:
        d = decision_of(r)
        if d.desired_replicas < d.current_replicas:
            # no signal at fault; a capacity signal still learning asks for nothing
            assert not any(e.status.blocks_scale_down for e in d.signals)
            assert all(
                e.status.usable_for_scale_down or e.desired_replicas is None for e in d.signals
            )
    assert sum(1 for r in fleet.requests if r.cut) == 0
    assert fleet.requests and sum(1 for r in fleet.requests if r.done) > 0.9 * len(fleet.requests)

    assert recommended, "recommend never ran"
    spec_then, rows = recommended[0]
    assert len(rows) == 1
    row = rows[0]
    assert row["target"] == "llm/Deployment/vllm"
    assert isinstance(row["current_replicas"], int) and row["current_replicas"] >= 2
    assert abs(row["current_replicas"] - spec_then) <= 4  # it may have moved while it ran
    assert isinstance(row["desired_replicas"], int)
    assert 1 <= row["desired_replicas"] <= 6
    assert isinstance(row["reason"], str) and row["reason"]
    signals = row["signals"]
    assert isinstance(signals, list)
    by_name = {s["name"]: s for s in signals}
    # the policy's capacity signal is on (by default, with TTFT)
    assert set(by_name) == {"queue_depth", "kv_cache_usage", "ttft_p95", "capacity"}
    assert by_name["queue_depth"]["target"] == 8
    assert by_name["kv_cache_usage"]["target"] == 0.8
    assert by_name["ttft_p95"]["target"] == 2.0
    for s in signals:
        assert isinstance(s["valid"], bool)
        if s["valid"]:
            assert isinstance(s["value"], float) and s["value"] >= 0
    assert by_name["queue_depth"]["valid"] is True
