"""The backtest against a real Prometheus that scraped the simulated fleet.

One short run (:func:`tests.dashboards.sim_run.simulated_run`, about 40 s: 25 s of the code
trace sped up 4x and a 15 s tail) with the real controller scaling; Prometheus scrapes the
fleet and the controller's ``/metrics`` every second. Every test reads that one history.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import typer
import yaml
from typer.testing import CliRunner

from scaler.backtest.cli import register
from scaler.backtest.history import (
    HistoryError,
    PrometheusRangeClient,
    ReplicaSource,
    make_grid,
    read_matrix,
)
from scaler.backtest.pipeline import run_backtest
from scaler.config.policy import parse_policy
from scaler.config.settings import PrometheusSettings
from scaler.config.vocabulary import SignalName
from scaler.sim.prometheus_server import find_prometheus_binary
from tests.dashboards.sim_run import POLICY, SimRun, simulated_run

pytestmark = pytest.mark.e2e

KEY = "llm/Deployment/vllm"


@pytest.fixture(scope="module")
def run() -> Iterator[SimRun]:
    """One simulated run for the whole module; Prometheus keeps serving its history."""
    try:
        find_prometheus_binary()
    except Exception as err:  # the message says how to install it
        pytest.skip(str(err))
    with tempfile.TemporaryDirectory() as tmp, asyncio.Runner() as runner:
        cm = simulated_run(Path(tmp), trace_seconds=100.0, compress=4.0, tail_seconds=15.0)
        sim = runner.run(cm.__aenter__())
        try:
            yield sim
        finally:
            runner.run(cm.__aexit__(None, None, None))


@pytest.fixture(scope="module")
def policy_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("policy") / "policy.yaml"
    path.write_text(yaml.safe_dump(POLICY), encoding="utf-8")
    return path


def _app() -> typer.Typer:
    app = typer.Typer()

    @app.callback()
    def main() -> None:
        """vllm-scaler (test stand-in)."""

    register(app)
    return app


def _args(run: SimRun, policy_file: Path, *extra: str) -> list[str]:
    return [
        "backtest", "--prometheus-url", run.prometheus_url, "--policy", str(policy_file),
        "--start", f"{run.start:.3f}", "--end", f"{run.end:.3f}", "--step", "1s",
        "--model-load-seconds", "4", *extra,
    ]  # fmt: skip


def test_json_shows_what_happened_and_what_the_policy_would_do(
    run: SimRun, policy_file: Path, tmp_path: Path
) -> None:
    plot = tmp_path / "bt.png"
    result = CliRunner().invoke(
        _app(), _args(run, policy_file, "--output", "json", "--plot", str(plot))
    )
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["plot"] == str(plot) and plot.stat().st_size > 10_000
    (t,) = doc["targets"]
    assert t["target"] == KEY
    # No kube-state-metrics in the simulation: the controller's own gauges are next.
    assert t["replica_source"] == "vllm-scaler"
    steps = t["steps"]
    assert len(steps) == make_grid(run.start, run.end, 1).count
    s = t["summary"]
    # What happened: the controller's scale-ups, seen through its own gauge.
    peak = max(to for _, to in run.scale_events)
    assert peak > 1
    assert s["actual_peak"] == peak
    assert any(e["to"] == peak for e in s["actual_scale_events"])
    # The signals were read the controller's way, and the burst makes the policy scale up.
    status = s["signal_status"]
    assert status["queue_depth"].get("ok", 0) > len(steps) // 2
    assert status["ttft_p95"].get("ok", 0) + status["ttft_p95"].get("idle", 0) > len(steps) // 2
    assert s["policy_peak"] > 1
    assert any(e["reason"] in ("scale_up", "step_limited") for e in s["policy_scale_events"])
    hours = len(steps) / 3600
    assert 0 < s["actual_replica_hours"] <= peak * hours
    assert 0 < s["policy_replica_hours"] <= POLICY["targets"][0]["max_replicas"] * hours  # type: ignore[index]
    assert isinstance(s["risk_steps"], int) and isinstance(s["relief_steps"], int)
    assert {st["reason"] for st in steps} <= set(s["reasons"])


def test_text_report_with_progress(run: SimRun, policy_file: Path, tmp_path: Path) -> None:
    plot = tmp_path / "bt.png"
    result = CliRunner().invoke(_app(), _args(run, policy_file, "--progress", "--plot", str(plot)))
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert f"{KEY}:" in out and "actual replicas from vllm-scaler" in out
    assert "replica-hours  actual" in out and "scale events   actual" in out
    assert out.rstrip().endswith(f"plot            {plot}")


def _client(run: SimRun) -> PrometheusRangeClient:
    """The backtest's client, from the Prometheus settings every command uses."""
    settings = PrometheusSettings(prometheus_url=run.prometheus_url, prometheus_timeout_seconds=60)
    return PrometheusRangeClient(settings)


def test_chunked_reads_equal_one_read(run: SimRun) -> None:
    """Many small range requests give exactly what one request gives (no gap, no overlap)."""
    policy = parse_policy(POLICY)
    grid = make_grid(run.start, run.end, 1)
    client = _client(run)
    try:
        one = run_backtest(client, policy, policy.targets, grid, model_load_seconds=4)
        many = run_backtest(
            client, policy, policy.targets, grid, model_load_seconds=4, max_points=7
        )
    finally:
        client.close()
    a, b = one[0].result, many[0].result
    assert [s.policy_replicas for s in a.steps] == [s.policy_replicas for s in b.steps]
    assert [s.actual_replicas for s in a.steps] == [s.actual_replicas for s in b.steps]
    assert [s.signals for s in a.steps] == [s.signals for s in b.steps]
    assert [s.reason for s in a.steps] == [s.reason for s in b.steps]


def test_pod_count_fallback(run: SimRun) -> None:
    policy = parse_policy(POLICY)
    grid = make_grid(run.start, run.end, 1)
    client = _client(run)
    try:
        (bt,) = run_backtest(
            client,
            policy,
            policy.targets,
            grid,
            model_load_seconds=4,
            replica_sources=(ReplicaSource.VLLM_PODS,),
        )
    finally:
        client.close()
    assert bt.replicas.source is ReplicaSource.VLLM_PODS
    pods = [s.actual_replicas for s in bt.result.steps]
    assert min(pods) >= 1
    # Pods with series: the replicas running (and loading or draining) at each step.
    assert max(pods) >= max(to for _, to in run.scale_events) - 1
    # The per-step pod count of the signals equals the replica source's count.
    assert bt.result.steps[-1].signals[SignalName.QUEUE_DEPTH].pods_with_data == pods[-1]


def test_prometheus_refuses_more_than_11000_points_and_chunks_get_through(run: SimRun) -> None:
    grid = make_grid(run.end - 4 * 3600, run.end, 1)  # 14,401 steps
    assert grid.count > 11_000
    client = _client(run)
    query = "max(vllm_scaler_current_replicas)"
    try:
        with pytest.raises(HistoryError, match="11,000"):
            read_matrix(client, query, grid, max_points=grid.count)
        matrix = read_matrix(client, query, grid)
    finally:
        client.close()
    # Data at the end of the range, none from hours before the run (Prometheus started with it).
    assert grid.index_of(grid.end) in matrix
    assert grid.times[min(matrix)] > run.start - 120


def test_missing_replica_history_is_an_error_naming_the_queries(
    run: SimRun, tmp_path: Path
) -> None:
    doc = json.loads(json.dumps(POLICY))
    doc["targets"][0]["workload"]["name"] = "other"
    path = tmp_path / "policy.yaml"
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    result = CliRunner().invoke(_app(), _args(run, path, "--no-plot"))
    assert result.exit_code == 1
    assert "llm/Deployment/other: no replica history" in result.stderr
    assert "vllm_scaler_current_replicas" in result.stderr


def test_a_shadow_policy_gets_its_own_timeline_and_replica_hours(
    run: SimRun, tmp_path: Path
) -> None:
    """The backtest replays the target's shadow policy on the same history beside the active
    one: both timelines, both replica-hours, in JSON and in the text report."""
    doc = json.loads(json.dumps(POLICY))
    doc["targets"][0]["shadow"] = {
        "signals": {"queue_depth": {"target_per_replica": 2}, "ttft_p95": {"target_seconds": 2.0}},
        "max_replicas": 8,
    }
    path = tmp_path / "policy.yaml"
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    result = CliRunner().invoke(_app(), _args(run, path, "--output", "json"))
    assert result.exit_code == 0, result.output
    (t,) = json.loads(result.stdout)["targets"]
    shadow = t["shadow"]
    assert len(shadow["steps"]) == len(t["steps"])
    # a quarter of the active policy's queue target: it asks for more at the burst
    assert shadow["peak"] >= t["summary"]["policy_peak"]
    assert shadow["replica_hours"] >= t["summary"]["policy_replica_hours"] > 0
    assert {st["reason"] for st in shadow["steps"]} <= set(shadow["reasons"])
    text = CliRunner().invoke(_app(), _args(run, path)).stdout
    assert "time      actual  policy  shadow  reason" in text
    assert ", shadow " in text.split("replica-hours  actual", 1)[1].splitlines()[0]
    assert "                 shadow " in text
