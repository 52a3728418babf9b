"""``serve`` in recommend mode (dry run, once, JSON) and ``check-policy``, end to end.

``serve`` builds its own clients from ``Settings`` (Prometheus URL, kubeconfig), so these tests
exercise the composition root against the fake Prometheus and the Kubernetes stand-in.
"""

from __future__ import annotations

import json
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from scaler.cli import app
from scaler.config.settings import Settings
from scaler.controller.app import RunOptions, StartupError, serve
from tests.faults.helpers import serving
from tests.support.controller_harness import KEY, Harness, HarnessFactory
from tests.support.fakeprom import R, Reply, Ttft, case_file, kv, per_pod, pods, ttft_answers

DOCUMENTED = {"target", "current_replicas", "desired_replicas", "reason", "signals"}
SIGNAL_KEYS = {"name", "unit", "value", "target", "valid"}


def _settings(h: Harness) -> Settings:
    return Settings(
        prometheus_url=h.prom.url,
        kubeconfig=h.kubeconfig,
        in_cluster=False,
        metrics_port=0,
        prometheus_timeout_seconds=5,
    )


async def _recommend(h: Harness, *, check_queries: bool = False) -> list[dict[str, Any]]:
    out = StringIO()
    options = RunOptions(dry_run=True, once=True, output="json", check_queries=check_queries)
    code = await serve(_settings(h), h.policy, options, out=out, clock=h.clock)
    assert code == 0
    parsed = json.loads(out.getvalue())
    assert isinstance(parsed, list)
    return parsed


def _by_name(obj: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {s["name"]: s for s in obj["signals"]}


async def test_recommend_json_case_05_dry_run_scale_up(make_harness: HarnessFactory) -> None:
    """Case 05: the dry-run recommendation scales up on the valid signals and writes nothing."""
    case_file("05-one-signal-missing.md")
    five = pods(5)
    h = await make_harness(replicas=5, ready=five)
    h.fake.set(
        waiting=per_pod(dict.fromkeys(five, "16")),  # 80 waiting
        running=per_pod(dict.fromkeys(five, "1")),
        kv_cache=kv(dict.fromkeys(five, "0.10")),
        ttft_rate=Ttft("1.0", "4"),
        ttft_buckets=Reply(
            {"status": "error", "errorType": "timeout", "error": "query timed out"}, status=503
        ),
    )
    [obj] = await _recommend(h)

    assert set(obj) >= DOCUMENTED
    assert obj["target"] == KEY
    assert (obj["current_replicas"], obj["desired_replicas"]) == (5, 8)
    assert obj["reason"] == "scale_up"
    assert obj["action"] == "dry_run"
    signals = _by_name(obj)
    # the capacity signal is on by default with TTFT: no seed and no estimate yet
    assert list(signals) == ["queue_depth", "kv_cache_usage", "ttft_p95", "capacity"]
    for s in signals.values():
        assert set(s) >= SIGNAL_KEYS
    assert (signals["queue_depth"]["value"], signals["queue_depth"]["target"]) == (16.0, 10.0)
    assert signals["queue_depth"]["valid"] is True
    assert signals["kv_cache_usage"]["value"] == pytest.approx(0.1)
    assert (signals["kv_cache_usage"]["target"], signals["kv_cache_usage"]["valid"]) == (0.8, True)
    assert signals["ttft_p95"] == {
        **signals["ttft_p95"],
        "value": None,
        "target": 2.0,
        "valid": False,
        "status": "query_error",
    }
    assert (signals["capacity"]["status"], signals["capacity"]["valid"]) == ("learning", False)
    assert signals["capacity"]["desired_replicas"] is None
    # no estimate yet: no target (not 0), and each value says its unit
    assert signals["capacity"]["target"] is None
    assert signals["capacity"]["unit"] == "work_seconds_per_second_per_replica"
    assert [s["unit"] for s in signals.values()] == [
        "waiting_requests_per_replica",
        "ratio_per_replica",
        "seconds",
        "work_seconds_per_second_per_replica",
    ]
    # the capacity view's numbers carry that unit in their keys (seconds of replica work
    # per second, the default unit work), not tokens/s
    capacity = obj["capacity"]
    assert capacity["unit"] == "work_seconds_per_second"
    assert {
        "demand_work_seconds_per_second",
        "forecast_demand_work_seconds_per_second",
        "capacity_work_seconds_per_second_per_replica",
        "waiting_work_seconds",
    } <= set(capacity)
    assert not [k for k in capacity if "tokens" in k]
    assert capacity["capacity_work_seconds_per_second_per_replica"] is None  # learning
    # read verbs only: nothing was written, not even an Event
    assert h.kube.methods() and set(h.kube.methods()) == {"GET"}
    assert h.replicas() == 5
    assert h.store.events() == []


async def test_recommend_text_shows_a_learning_capacity_signal_as_learning(
    make_harness: HarnessFactory,
) -> None:
    """A capacity signal without an estimate yet is learning, not invalid, and has no target."""
    three = pods(3)
    h = await make_harness(replicas=3, ready=three)
    h.fake.set(**serving(dict.fromkeys(three, "1"), kv_value="0.5", ttft="1.0", rate="4"))
    out = StringIO()
    options = RunOptions(dry_run=True, once=True, output="text")
    assert await serve(_settings(h), h.policy, options, out=out, clock=h.clock) == 0
    lines = out.getvalue().splitlines()
    [line] = [x for x in lines if x.strip().startswith("capacity ")]
    assert "INVALID" not in line
    assert line.split() == ["capacity", "learning", "work_seconds_per_second_per_replica"]
    # the detail once, below the table, without repeating "learning"
    [note] = [x for x in lines if x.startswith("  capacity: ")]
    assert note.count("no capacity estimate yet") == 1 and "learning" not in note
    [queue] = [x for x in lines if x.strip().startswith("queue_depth")]
    assert queue.split() == ["queue_depth", "1", "/", "10", "=", "0.10", "->", "1",
                             "waiting_requests_per_replica"]  # fmt: skip


async def test_recommend_json_case_01_holds_without_valid_signals(
    make_harness: HarnessFactory,
) -> None:
    """Case 01: the dry-run recommendation holds when no signal is valid, and says so."""
    case_file("01-empty-result-is-not-zero.md")
    h = await make_harness(replicas=6, ready=pods(6))  # every query answers R[]
    [obj] = await _recommend(h)
    assert (obj["current_replicas"], obj["desired_replicas"]) == (6, 6)
    assert obj["reason"] == "no_valid_signals"
    assert obj["action"] == "none"
    assert [(s["name"], s["value"], s["valid"], s["status"]) for s in obj["signals"]] == [
        ("queue_depth", None, False, "empty"),
        ("kv_cache_usage", None, False, "empty"),
        ("ttft_p95", None, False, "empty"),
        ("capacity", None, False, "learning"),
    ]
    assert set(h.kube.methods()) == {"GET"}


def _case_07(h: Harness, *, kv_answer: dict[str, Any]) -> None:
    four = pods(4)
    h.fake.set(
        waiting=per_pod(dict(zip(four, ["2", "0", "1", "3"], strict=True))),
        running=per_pod(dict.fromkeys(four, "1")),
        kv_cache=kv_answer,
        **ttft_answers("1.0", "4"),
    )


async def test_recommend_check_queries_case_07_no_kv_series_fails_naming_query(
    make_harness: HarnessFactory,
) -> None:
    """Case 07: the dry-run recommendation fails at start, naming a query with no series."""
    case_file("07-renamed-kv-metric.md")
    h = await make_harness(replicas=4, ready=pods(4))
    _case_07(h, kv_answer=R())  # neither KV name
    out = StringIO()
    options = RunOptions(dry_run=True, once=True, output="json", check_queries=True)
    with pytest.raises(StartupError) as err:
        await serve(_settings(h), h.policy, options, out=out, clock=h.clock)
    message = str(err.value)
    assert message.startswith(
        f"{KEY}: signal kv_cache_usage has no series (absent): its pods' "
        "vllm:num_requests_running series exist, so the metric of this signal is missing or "
        "renamed; the query that returned nothing: label_replace(max by (namespace, pod, "
        "__name__) "
    )
    assert "\n" not in message  # one line
    assert '{__name__=~"vllm:kv_cache_usage_perc|vllm:gpu_cache_usage_perc"' in message
    assert "queue_depth" not in message and "ttft_p95" not in message  # those have series
    assert out.getvalue() == ""  # no round was printed
    assert set(h.kube.methods()) == {"GET"}


async def test_recommend_check_queries_passes_with_the_old_kv_name(
    make_harness: HarnessFactory,
) -> None:
    """Case 07: the start-up check passes when only the old KV-cache name has series."""
    case_file("07-renamed-kv-metric.md")
    h = await make_harness(replicas=4, ready=pods(4))
    _case_07(h, kv_answer=kv(dict.fromkeys(pods(4), "0.25"), name="vllm:gpu_cache_usage_perc"))
    [obj] = await _recommend(h, check_queries=True)
    assert obj["kv_cache_metric"] == "vllm:gpu_cache_usage_perc"
    assert _by_name(obj)["kv_cache_usage"]["value"] == 0.25
    assert obj["reason"] == "stabilized"  # 6 waiting and KV 0.25 ask for fewer than 4


def test_check_policy_invalid_file_exits_2_naming_file_field_value(tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(
        "targets:\n"
        "  - workload: {apiVersion: apps/v1, kind: Deployment, namespace: llm, name: vllm}\n"
        "    min_replicas: 0\n",
        encoding="utf-8",
    )
    result = CliRunner().invoke(app, ["check-policy", str(path)])
    assert result.exit_code == 2, result.output
    assert f"{path}: targets[0].min_replicas: value 0:" in result.output
    assert "expected a number >= 1" in result.output


def test_check_policy_missing_file_names_the_positional_argument(tmp_path: Path) -> None:
    """check-policy takes the file as an argument: the hint names it, not ``--policy``."""
    path = tmp_path / "missing.yaml"
    result = CliRunner().invoke(app, ["check-policy", str(path)])
    assert result.exit_code == 2, result.output
    assert result.output == (
        f"vllm-scaler: {path}: cannot read policy file: No such file or directory; "
        "expected a readable file given as the POLICY_FILE argument\n"
    )


def test_check_policy_names_a_shadow(tmp_path: Path) -> None:
    """check-policy lists the shadow policy's range and signals after the active one's."""
    path = tmp_path / "policy.yaml"
    path.write_text(
        "targets:\n"
        "  - workload: {apiVersion: apps/v1, kind: Deployment, namespace: llm, name: vllm}\n"
        "    shadow: {max_replicas: 6, signals: {kv_cache_usage: {enabled: false}}}\n",
        encoding="utf-8",
    )
    result = CliRunner().invoke(app, ["check-policy", str(path)])
    assert result.exit_code == 0, result.output
    first = result.output.splitlines()[0]  # the series and backtest selectors follow
    assert first.endswith("; shadow: replicas 1..6, signals queue_depth, ttft_p95, capacity")


def test_check_policy_valid_file_exits_0(tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(
        "targets:\n"
        "  - workload: {apiVersion: apps/v1, kind: Deployment, namespace: llm, name: vllm}\n",
        encoding="utf-8",
    )
    result = CliRunner().invoke(app, ["check-policy", str(path)])
    assert result.exit_code == 0, result.output
    assert result.output.startswith("llm/Deployment/vllm: replicas 1..10")
