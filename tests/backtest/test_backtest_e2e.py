"""The backtest against a real Prometheus that scraped the simulated fleet.

One short run (:func:`tests.dashboards.sim_run.simulated_run`, about 55 s: 25 s of the code
trace sped up 4x and a 30 s tail, so that the capacity comparison has steps with no pod
starting or draining) with the real controller scaling; Prometheus scrapes the
fleet and the controller's ``/metrics`` every second. Every test reads that one history.
"""

from __future__ import annotations

import asyncio
import json
import math
import tempfile
from collections.abc import Callable, Iterator
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
from scaler.backtest.replay import ReplayStep
from scaler.config.policy import Policy, parse_policy
from scaler.config.settings import PrometheusSettings
from scaler.config.vocabulary import SignalName
from scaler.core.observation import PodInfo, WorkloadSnapshot
from scaler.core.sizing import CapacityView
from scaler.sim.prometheus_server import find_prometheus_binary
from tests.dashboards.sim_run import POLICY, SimRun, simulated_run
from tests.support.live_at import live_decisions

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
        cm = simulated_run(Path(tmp), trace_seconds=100.0, compress=4.0, tail_seconds=30.0)
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
    counts = [s.actual_replicas for s in bt.result.steps]
    # A step before the first scrape of the pods is a gap (None), never a made-up count:
    # gaps only lead, and every step after the first count has one.
    first = next(i for i, c in enumerate(counts) if c is not None)
    assert first < len(counts) // 4, counts
    pods = [c for c in counts[first:] if c is not None]
    assert len(pods) == len(counts) - first, counts
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
    assert result.stdout == ""  # nothing to report


def test_json_is_the_same_document_when_every_target_fails(run: SimRun, tmp_path: Path) -> None:
    doc = json.loads(json.dumps(POLICY))
    doc["targets"][0]["workload"]["name"] = "other"
    path = tmp_path / "policy.yaml"
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    plot = tmp_path / "bt.png"
    result = CliRunner().invoke(_app(), _args(run, path, "--plot", str(plot), "--output", "json"))
    assert result.exit_code == 1
    assert "llm/Deployment/other: no replica history" in result.stderr
    assert "left out" not in result.stderr  # there are no others to report
    out = json.loads(result.stdout)
    assert out["targets"] == [] and out["plot"] is None
    [failed] = out["failed_targets"]
    assert failed["target"] == "llm/Deployment/other"
    assert failed["error"].startswith("llm/Deployment/other: no replica history from ")
    # the document of a run with results, with none of them
    assert sorted(out) == [
        "end", "failed_targets", "model_load_seconds", "plot", "start", "step_seconds", "targets"
    ]  # fmt: skip
    assert (out["step_seconds"], out["model_load_seconds"]) == (1.0, 4.0)
    assert not plot.exists()  # nothing to draw


def test_a_target_without_replica_history_leaves_the_others_reported(
    run: SimRun, tmp_path: Path
) -> None:
    doc = json.loads(json.dumps(POLICY))
    other = json.loads(json.dumps(doc["targets"][0]))
    other["workload"]["name"] = "other"
    doc["targets"].insert(0, other)
    path = tmp_path / "policy.yaml"
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    result = CliRunner().invoke(_app(), _args(run, path, "--no-plot", "--output", "json"))
    assert result.exit_code == 1  # one target failed
    assert "llm/Deployment/other: no replica history" in result.stderr
    assert "left out 1 of 2 targets (llm/Deployment/other); reporting the others" in result.stderr
    out = json.loads(result.stdout)
    assert [t["target"] for t in out["targets"]] == ["llm/Deployment/vllm"]
    assert [f["target"] for f in out["failed_targets"]] == ["llm/Deployment/other"]
    assert out["targets"][0]["summary"]["actual_peak"] >= 1


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


# ------------------------------------------------------------------ the capacity signal


def _snapshot_at(run: SimRun, at: float) -> WorkloadSnapshot:
    """The fleet as the Kubernetes API listed it at ``at`` (the simulator's own pod times)."""
    pods = []
    for p in run.pods:
        if p.created_at > at or (p.deleted_at is not None and p.deleted_at <= at):
            continue
        terminating = p.terminating_since is not None and p.terminating_since <= at
        ready = p.ready_at is not None and p.ready_at <= at and not terminating
        pods.append(
            PodInfo(
                p.name,
                ready,
                terminating,
                at - p.created_at,
                ready_seconds=at - p.ready_at if ready and p.ready_at is not None else None,
            )
        )
    live = sum(1 for p in pods if not p.terminating)
    return WorkloadSnapshot("llm", live, live, "", "", tuple(pods))


def _steady_at(run: SimRun, at: float, settle: Callable[[str], float], gone: float) -> bool:
    """No pod of the fleet is terminating at ``at``, nor Ready for less than ``settle(pod)``
    seconds, nor deleted less than ``gone`` seconds before (the backtest sees pods in
    transition otherwise: see below)."""
    for p in run.pods:
        if p.deleted_at is not None and p.deleted_at <= at:
            if at - p.deleted_at < gone:
                return False
            continue
        if p.created_at > at:
            continue
        if p.terminating_since is not None and p.terminating_since <= at:
            return False
        if p.ready_at is not None and 0 <= at - p.ready_at < settle(p.name):
            return False
    return True


def _capacity_replay(run: SimRun) -> tuple[Policy, tuple[ReplayStep, ...]]:
    """The run's policy without its shadow, and the backtest's replay of it, one step a
    second."""
    doc = json.loads(json.dumps(POLICY))
    doc["targets"][0].pop("shadow")
    policy = parse_policy(doc)
    client = _client(run)
    try:
        (bt,) = run_backtest(
            client, policy, policy.targets, make_grid(run.start, run.end, 1), model_load_seconds=4
        )
    finally:
        client.close()
    return policy, bt.result.steps


def _history_snapshot(pods: tuple[PodInfo, ...]) -> WorkloadSnapshot:
    """The Kubernetes API's answer as history tells it: the pods a step of the replay saw."""
    return WorkloadSnapshot("llm", len(pods), len(pods), "", "", pods)


def test_on_the_pods_history_shows_the_capacity_replay_decides_exactly_as_the_live_loop(
    run: SimRun,
) -> None:
    """Given the pods the replay saw at each step (those with series, Ready since their first
    step with series), the live loop's path (:func:`tests.support.live_at.live_decisions`:
    the controller's instant queries evaluated at each step, observe, decide) reads the same
    demand, learns the same capacity, forecasts the same and decides the same at every step:
    the replay's only difference from the controller is what history cannot say about pods
    (pinned below)."""
    policy, steps = _capacity_replay(run)
    pods_at = {st.at: st.pods for st in steps}
    live = asyncio.run(
        live_decisions(
            run.prometheus_url,
            policy,
            steps,
            lambda at: _history_snapshot(pods_at[at]),
            model_load_seconds=4,
        )
    )

    def seen(cap: CapacityView | None) -> tuple[object, ...]:
        assert cap is not None
        numbers = (
            cap.demand_tokens_per_second,
            cap.forecast_tokens_per_second,
            cap.capacity_tokens_per_second,
        )
        return (*(None if x is None else pytest.approx(x, rel=1e-9) for x in numbers), cap.samples)

    table = [
        (round(st.at - steps[0].at), (st.recommended, st.policy_replicas, st.reason),
         (d.recommended_replicas, d.desired_replicas, d.reason))
        for st, d in zip(steps, live, strict=True)
    ]  # fmt: skip
    for st, d in zip(steps, live, strict=True):
        assert seen(d.capacity) == seen(st.capacity), (st.at - steps[0].at, st.message, d.message)
        assert (d.recommended_replicas, d.desired_replicas, d.reason, d.message) == (
            st.recommended, st.policy_replicas, st.reason, st.message,
        ), table  # fmt: skip
    # the steps exercised the capacity signal: demand read, pods starting after the first step
    # seconds of replica work per second: the trace keeps more than one replica busy
    assert max(st.capacity.demand_tokens_per_second or 0 for st in steps if st.capacity) > 1.0
    assert any(math.isfinite(p.ready_seconds or math.inf) for st in steps for p in st.pods)
    assert any("capacity" in st.message for st in steps)


def test_the_capacity_replay_decides_as_the_live_loop_within_the_ready_time_tolerance(
    run: SimRun,
) -> None:
    """A capacity policy replayed on the run's history decides as the live loop's path
    given the Kubernetes API's pods of each time and the replay's own replica counts.

    The one documented difference: history does not say when a pod became Ready, so the
    backtest counts it from its first step with series, up to one step plus one scrape later
    than the controller; and it counts a draining pod while it still exports series. While a
    pod is younger than 1.5 rate windows the capacity signal counts its rate at the others'
    mean, so the demand differs on a few steps around a pod's start or removal; every other
    step's demand is the same number and the learned capacity stays within a bounded band.
    The demand forecast keeps what it saw (a differing step's error stays in its burstiness
    for a quarter of an hour), so the recommendations can part afterwards: that they are the
    same given the same pods is the test above.
    """
    policy, steps = _capacity_replay(run)
    # the pods: each one that appeared during the run is counted from its first step with
    # series, never before its Ready time and after it by at most one step and one scrape (a
    # second each) plus the time Prometheus takes to start scraping a new target: file
    # discovery and the scrape manager each pass changes on at most every 5 s (1.7-6.1 s of
    # lag in the runs inspected)
    sim = {p.name: p for p in run.pods}
    lags = {
        p.name: (st.at - p.ready_seconds) - ready_at
        for st in steps
        for p in st.pods
        if p.ready_seconds is not None
        and math.isfinite(p.ready_seconds)
        and (ready_at := sim[p.name].ready_at) is not None
    }
    assert lags and all(-1e-6 <= lag <= 1 + 1 + 2 * 5 for lag in lags.values()), lags
    live = asyncio.run(
        live_decisions(
            run.prometheus_url,
            policy,
            steps,
            lambda at: _snapshot_at(run, at),
            model_load_seconds=4,
        )
    )
    views = [(st.capacity, d.capacity) for st, d in zip(steps, live, strict=True)]
    assert all(b is not None and lv is not None for b, lv in views)
    demands = [
        (b.demand_tokens_per_second, lv.demand_tokens_per_second)
        for b, lv in views
        if b is not None and lv is not None
    ]
    # the fleet served load: the demand is read (not learning from nothing: seeded)
    assert max(d for d, _ in demands if d is not None) > 1.0  # seconds of work per second
    # A step's demand is the rate served plus the backlog's growth over the last window, so
    # it reads the pods of that window's steps: a pod is in transition from its Ready time
    # until both sides count its whole window (history's count starts at its first step with
    # series, this pod's lag later, and a step rounds it), and from its draining until a
    # window after history last saw its series (up to the discovery lag bound after its
    # deletion).
    window = policy.rate_window_seconds
    bound = 1 + 1 + 2 * 5

    def settle(pod: str) -> float:
        return 1.5 * window + lags.get(pod, bound) + 1

    steady = [_steady_at(run, st.at, settle, window + bound) for st in steps]
    same_demand = [
        b == lv or (b is not None and lv is not None and b == pytest.approx(lv, rel=1e-9))
        for b, lv in demands
    ]
    table = [
        (round(st.at - steps[0].at), ok, d, st.recommended, x.recommended_replicas,
         st.policy_replicas, x.desired_replicas)
        for st, ok, d, x in zip(steps, steady, same_demand, live, strict=True)
    ]  # fmt: skip
    # the demand differs only while a pod is in transition (4 to 9 of 41 steps in three
    # runs), and the steps without one are enough to show it
    assert all(same for same, ok in zip(same_demand, steady, strict=True) if ok), table
    assert sum(steady) >= 8, table
    # the learned capacity: the same start (the seed), then within two of the learner's
    # largest steps of each other at every step: a pod in transition (Ready time unknown to
    # history) can give one side a sample the other does not see, which moves its estimate
    # by at most one bounded step (25% in log space at first) and is kept afterwards
    learned = [
        (b.capacity_tokens_per_second, lv.capacity_tokens_per_second)
        for b, lv in views
        if b is not None and lv is not None
    ]
    assert learned[0][0] == learned[0][1], learned
    band = math.exp(2 * 0.25)
    ratios = [bc / lc for bc, lc in learned if bc is not None and lc is not None]
    assert len(ratios) == sum(1 for bc, lc in learned if bc is not None or lc is not None)
    assert all(1 / band <= r <= band for r in ratios), learned
    # the replicas: the same at every step of the runs inspected (90% required), the
    # max_replicas bound and the scale-up step limit deciding most of them
    same_replicas = [
        st.policy_replicas == d.desired_replicas for st, d in zip(steps, live, strict=True)
    ]
    assert sum(same_replicas) >= 0.9 * len(steps), table


def test_time_before_the_fleet_existed_is_a_gap_left_out_of_the_totals(
    run: SimRun, policy_file: Path
) -> None:
    """A range that starts 60 s before the first sample: those steps have no actual replicas
    (null, never made up), and the replica-hours and the comparison cover the rest only."""
    args = _args(run, policy_file, "--output", "json", "--no-plot")
    args[args.index("--start") + 1] = f"{run.start - 60:.3f}"
    result = CliRunner().invoke(_app(), args)
    assert result.exit_code == 0, result.output
    (t,) = json.loads(result.stdout)["targets"]
    steps, s = t["steps"], t["summary"]
    gaps = [st for st in steps if st["actual_replicas"] is None]
    assert len(gaps) >= 60 and all(st["actual_ready"] is None for st in gaps)
    assert all(st["at"] < run.start + 1 for st in gaps[:60])
    assert s["actual_missing_steps"] == len(gaps)
    assert s["total_seconds"] == pytest.approx(len(steps) - 1)
    assert s["covered_seconds"] == pytest.approx(s["total_seconds"] - len(gaps), abs=1)
    # replica-hours over the covered steps only: each 1 s step's count, in hours
    known = [st["actual_replicas"] for st in steps[:-1] if st["actual_replicas"] is not None]
    assert s["actual_replica_hours"] == pytest.approx(sum(known) / 3600)
    # the step count is said up front on stderr (not a terminal here)
    assert f"vllm-scaler: {len(steps):,} steps of 1 s from " in result.stderr


def test_a_range_of_more_steps_than_the_limit_is_refused_naming_the_options(
    policy_file: Path,
) -> None:
    """No request is made (the address is unroutable): the refusal comes first."""
    result = CliRunner().invoke(
        _app(),
        ["backtest", "--prometheus-url", "http://127.0.0.1:9", "--policy", str(policy_file),
         "--start", "now-400d", "--step", "1s"],
    )  # fmt: skip
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert lines == [
        "vllm-scaler: --start 'now-400d' to --end 'now' at --step '1s' is 34,560,001 steps, "
        "more than the limit of 100,000: shorten the range, take a longer --step, or raise "
        "the limit with --max-steps (up to 1,000,000)"
    ]
    raised = CliRunner().invoke(
        _app(),
        ["backtest", "--prometheus-url", "http://127.0.0.1:9", "--policy", str(policy_file),
         "--start", "now-2d", "--step", "1s", "--max-steps", "0"],
    )  # fmt: skip
    assert raised.exit_code == 2 and "--max-steps" in raised.stderr


def _refused_at_start(policy_file: Path, *extra: str) -> str:
    """The one error line of a backtest refused before any request (the address is
    unroutable: a request would fail otherwise)."""
    result = CliRunner().invoke(
        _app(),
        ["backtest", "--prometheus-url", "http://127.0.0.1:9", "--policy", str(policy_file),
         *extra],
    )  # fmt: skip
    assert result.exit_code == 2
    assert result.stdout == ""
    [line] = result.stderr.splitlines()
    return line


@pytest.mark.parametrize("name", ["bt.xyz", "btnoext"])
def test_a_plot_matplotlib_cannot_write_is_refused_before_any_request(
    policy_file: Path, tmp_path: Path, name: str
) -> None:
    plot = tmp_path / name
    line = _refused_at_start(policy_file, "--plot", str(plot))
    assert line.startswith(
        f"vllm-scaler: --plot: value '{plot}': expected a file name ending in one of .png, "
        ".svg, .pdf, "
    ), line
    assert list(tmp_path.iterdir()) == []


def test_a_plot_with_no_plot_is_refused_naming_both(policy_file: Path, tmp_path: Path) -> None:
    plot = tmp_path / "bt.png"
    assert _refused_at_start(policy_file, "--plot", str(plot), "--no-plot") == (
        f"vllm-scaler: --plot: value '{plot}': expected either --plot or --no-plot, not both"
    )


def test_a_plot_that_fails_late_leaves_the_report_printed_on_one_line(
    run: SimRun, policy_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import scaler.backtest.report as report

    def unsupported(*args: object) -> Path:
        raise ValueError("Format 'xyz' is not supported (supported formats: eps, png)\nmore")

    monkeypatch.setattr(report, "plot_backtest", unsupported)
    plot = tmp_path / "bt.png"
    result = CliRunner().invoke(_app(), _args(run, policy_file, "--plot", str(plot), "-o", "json"))
    assert result.exit_code == 1
    assert "Traceback" not in result.stderr
    assert result.stderr.splitlines()[-1] == (
        "vllm-scaler: --plot: ValueError: Format 'xyz' is not supported (supported formats: "
        "eps, png)"
    )
    doc = json.loads(result.stdout)
    assert doc["plot"] is None and [t["target"] for t in doc["targets"]] == [KEY]


@pytest.mark.parametrize("max_steps", ["1000001", "99999999999999999999"])
def test_max_steps_has_a_ceiling(policy_file: Path, max_steps: str) -> None:
    """--max-steps cannot lift the limit past what one run holds in memory."""
    result = CliRunner().invoke(
        _app(),
        ["backtest", "--prometheus-url", "http://127.0.0.1:9", "--policy", str(policy_file),
         "--start", "0", "--step", "1s", "--max-steps", max_steps],
    )  # fmt: skip
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        f"vllm-scaler: --max-steps: value {max_steps}: expected a number >= 1 and <= 1000000"
    ]
