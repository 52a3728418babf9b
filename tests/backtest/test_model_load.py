"""The model load time a backtest assumes: each policy's own unless --model-load-seconds is
given, said in the text header and the JSON; and how the text shows an idle TTFT (a
range-query stand-in: no Prometheus)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from scaler.backtest.history import ReplicaHistory, ReplicaSource, make_grid
from scaler.backtest.pipeline import run_backtest
from scaler.backtest.replay import replay
from scaler.backtest.report import TargetBacktest, format_text, to_json
from scaler.config.policy import parse_policy
from scaler.config.vocabulary import SignalName
from scaler.core.signals import SignalReading, SignalStatus
from tests.support.policies import case_target_doc

START, STEP, STEPS = 1_000_000.0, 5.0, 40
POD = "vllm-5c4d9-aaaa0"
# queue depth only: 15 waiting for 10 per replica asks for 2 replicas from the first step
SIGNALS: dict[str, Any] = {
    "queue_depth": {"target_per_replica": 10},
    "kv_cache_usage": {"enabled": False},
    "ttft_p95": {"enabled": False},
}


def _signals(load: float) -> dict[str, Any]:
    return {**SIGNALS, "capacity": {"enabled": False, "model_load_seconds": load}}


def _policy(load: float = 20.0, shadow_load: float | None = None) -> Any:
    target = case_target_doc(signals=_signals(load))
    if shadow_load is not None:
        target["shadow"] = {"min_replicas": 1, "max_replicas": 10, "signals": _signals(shadow_load)}
    return parse_policy({"rate_window_seconds": 60, "targets": [target]})


def _history(q: str, start: float, end: float, step: float) -> list[dict[str, Any]]:
    """One pod with 15 requests waiting throughout; kube-state-metrics says 1 replica, ready."""
    values = [[START + STEP * i, "1"] for i in range(STEPS)]
    if q.startswith("max(kube_deployment"):
        return [{"metric": {}, "values": values}]
    labels = {"namespace": "llm", "pod": POD, "scaler_selector": "s0"}
    if "scaler_selector" not in q:
        return []
    if "vllm:num_requests_waiting" in q and q.startswith("label_replace(sum"):
        return [{"metric": labels, "values": [[t, "15"] for t, _ in values]}]
    if "vllm:num_requests_running" in q and "rate(" not in q:
        return [{"metric": labels, "values": values}]
    return []


def _run(policy: Any, model_load_seconds: float | None = None) -> Any:
    grid = make_grid(START, START + STEP * (STEPS - 1), STEP)
    (bt,) = run_backtest(
        _history, policy, policy.targets, grid, model_load_seconds=model_load_seconds
    )
    return bt


def _ready_after(steps: Any) -> float:
    """Seconds from the first step until the replica the replay added is ready."""
    assert steps[0].policy_replicas == 2  # the scale-up 1 -> 2 is at the first step
    return next(st.at for st in steps if st.policy_ready == 2) - START


def test_without_the_option_the_replay_uses_the_policys_model_load_seconds() -> None:
    bt = _run(_policy(load=20))
    assert bt.result.model_load_seconds == 20.0
    assert _ready_after(bt.result.steps) == 20.0
    # the field's default, 120 s, when the policy does not set it
    doc = case_target_doc(signals={**SIGNALS, "capacity": {"enabled": False}})
    unset = _run(parse_policy({"rate_window_seconds": 60, "targets": [doc]}))
    assert unset.result.model_load_seconds == 120.0
    assert _ready_after(unset.result.steps) == 120.0


def test_the_option_overrides_the_policy_and_its_shadow() -> None:
    bt = _run(_policy(load=20, shadow_load=45), model_load_seconds=60)
    assert bt.result.model_load_seconds == 60.0 and _ready_after(bt.result.steps) == 60.0
    assert bt.shadow.model_load_seconds == 60.0 and _ready_after(bt.shadow.steps) == 60.0


def test_a_shadow_replays_with_its_own_model_load_seconds() -> None:
    bt = _run(_policy(load=20, shadow_load=45))
    assert bt.result.model_load_seconds == 20.0 and _ready_after(bt.result.steps) == 20.0
    assert bt.shadow.model_load_seconds == 45.0 and _ready_after(bt.shadow.steps) == 45.0


def test_a_shadow_without_its_own_model_load_replays_with_the_policys() -> None:
    """The model load time is the workload's: a shadow that does not set it replays with the
    active policy's (20 s), not the field's 120 s default, and the header says so."""
    target = case_target_doc(signals=_signals(20))
    target["shadow"] = {"signals": {**SIGNALS, "capacity": {"enabled": False}}}
    bt = _run(parse_policy({"rate_window_seconds": 60, "targets": [target]}))
    assert bt.shadow.model_load_seconds == 20.0 and _ready_after(bt.shadow.steps) == 20.0
    header = format_text([bt], step_seconds=STEP).splitlines()[0]
    assert header.endswith("actual replicas from kube-state-metrics, model load 20 s")  # same: once


def test_the_header_and_the_json_say_the_model_load_of_each_replay() -> None:
    bt = _run(_policy(load=20, shadow_load=45))
    header = format_text([bt], step_seconds=STEP).splitlines()[0]
    assert header == (
        "llm/Deployment/vllm: 1970-01-12T13:46:40Z .. 1970-01-12T13:49:55Z, 40 steps of 5 s, "
        "actual replicas from kube-state-metrics, model load 20 s (shadow 45 s)"
    )
    alone = _run(_policy(load=20))
    assert (
        format_text([alone], step_seconds=STEP)
        .splitlines()[0]
        .endswith("actual replicas from kube-state-metrics, model load 20 s")
    )
    doc = to_json([bt], start=START, end=START, step_seconds=STEP, model_load_seconds=None,
                  plot=None)  # fmt: skip
    assert doc["model_load_seconds"] is None  # not given: per target
    (t,) = doc["targets"]
    assert (t["model_load_seconds"], t["shadow"]["model_load_seconds"]) == (20.0, 45.0)
    given = _run(_policy(load=20, shadow_load=45), model_load_seconds=60)
    doc = to_json([given], start=START, end=START, step_seconds=STEP, model_load_seconds=60,
                  plot=None)  # fmt: skip
    assert doc["model_load_seconds"] == 60
    (t,) = doc["targets"]
    assert (t["model_load_seconds"], t["shadow"]["model_load_seconds"]) == (60.0, 60.0)


def _idle_rows(ttft: dict[str, Any]) -> list[str]:
    """The text rows of a replay whose TTFT reading is idle at every step."""
    doc = case_target_doc(signals={**SIGNALS, "ttft_p95": ttft, "capacity": {"enabled": False}})
    p = parse_policy({"targets": [doc]}).targets[0]
    times = [START + 60.0 * i for i in range(3)]
    readings = {
        SignalName.QUEUE_DEPTH: SignalReading(SignalName.QUEUE_DEPTH, SignalStatus.OK, 0.0),
        SignalName.TTFT_P95: SignalReading(SignalName.TTFT_P95, SignalStatus.IDLE, 0.0),
    }
    spec: list[float | None] = [1.0, 2.0, 1.0]  # every step a row
    res = replay(p, times, [readings] * 3, spec, spec, model_load_seconds=0,
                 ttft_window_seconds=60.0)  # fmt: skip
    hist = ReplicaHistory(ReplicaSource.KUBE_STATE_METRICS, spec, spec, None, ())
    text = format_text([TargetBacktest(p, hist, res)], step_seconds=60)
    return [line for line in text.splitlines() if line[2:3].isdigit()]


def test_an_idle_ttft_reads_idle_as_in_recommend_and_sim() -> None:
    # enabled (the decision's evaluation) and read only for a shadow (the reading as read)
    for ttft in ({"target_seconds": 2.0}, {"enabled": False}):
        rows = _idle_rows(ttft)
        assert len(rows) == 3
        for row in rows:
            assert row.endswith("queue_depth=0.00/replica ttft_p95=idle"), (ttft, row)


class _FakeClient:
    """The range client of the command, answering from :func:`_history`."""

    def __init__(self, settings: object) -> None:
        pass

    def __call__(self, query: str, start: float, end: float, step: float) -> Any:
        return _history(query, start, end, step)

    def native_histograms(self) -> bool:
        return True

    def close(self) -> None:
        pass


def _command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *extra: str) -> Any:
    """``vllm-scaler backtest`` on :func:`_history` with a policy of 20 s and a shadow of 45."""
    import typer
    from typer.testing import CliRunner

    from scaler.backtest import history
    from scaler.backtest.cli import register

    monkeypatch.setattr(history, "PrometheusRangeClient", _FakeClient)
    target = case_target_doc(signals=_signals(20))
    target["shadow"] = {"min_replicas": 1, "max_replicas": 10, "signals": _signals(45)}
    path = tmp_path / "policy.yaml"
    path.write_text(yaml.safe_dump({"targets": [target]}), encoding="utf-8")
    app = typer.Typer()

    @app.callback()
    def main() -> None:
        """vllm-scaler (test stand-in)."""

    register(app)
    args = ["backtest", "--prometheus-url", "http://prometheus.invalid:9090", "--policy",
            str(path), "--start", f"{START:.0f}", "--end", f"{START + STEP * (STEPS - 1):.0f}",
            "--step", "5s", "--no-plot", "--no-progress", *extra]  # fmt: skip
    return CliRunner().invoke(app, args)


def test_the_command_replays_each_policy_with_its_own_unless_the_option_is_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = _command(tmp_path, monkeypatch)
    assert text.exit_code == 0, text.output
    assert "actual replicas from kube-state-metrics, model load 20 s (shadow 45 s)" in text.stdout
    doc = json.loads(_command(tmp_path, monkeypatch, "--output", "json").stdout)
    assert doc["model_load_seconds"] is None
    (t,) = doc["targets"]
    assert (t["model_load_seconds"], t["shadow"]["model_load_seconds"]) == (20.0, 45.0)
    given = _command(tmp_path, monkeypatch, "--output", "json", "--model-load-seconds", "60")
    doc = json.loads(given.stdout)
    assert doc["model_load_seconds"] == 60.0
    (t,) = doc["targets"]
    assert (t["model_load_seconds"], t["shadow"]["model_load_seconds"]) == (60.0, 60.0)
    bad = _command(tmp_path, monkeypatch, "--model-load-seconds", "-1")
    assert bad.exit_code == 2
    assert "--model-load-seconds: value -1: expected a number >= 0" in bad.output
