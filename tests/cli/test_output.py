"""One command line: ``--version``, and ``--output json`` printing one JSON document on stdout
for every command (``run``: JSON log lines, in ``test_no_secret_in_output.py``; ``backtest``:
``tests/backtest/test_backtest_e2e.py``), messages on stderr."""

from __future__ import annotations

import asyncio
import importlib.metadata
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from scaler.bench import scale
from scaler.cli import app
from scaler.dashboards import build_dashboards
from tests.support.controller_harness import KEY, HarnessFactory
from tests.support.fakeprom import pods, uniform_answers
from tests.support.policies import case_target_doc


def _invoke(args: list[str]) -> Any:
    return CliRunner().invoke(app, args)


def test_version() -> None:
    result = _invoke(["--version"])
    assert result.exit_code == 0
    assert result.stdout == f"vllm-scaler {importlib.metadata.version('vllm-scaler')}\n"


def _policy_file(tmp_path: Path) -> Path:
    path = tmp_path / "policy.yaml"
    path.write_text(yaml.safe_dump({"targets": [case_target_doc()]}))
    return path


@pytest.mark.parametrize(
    ("output", "check"),
    [
        pytest.param(
            "json",
            lambda out: (
                json.loads(out)
                == [
                    {
                        "target": KEY,
                        "min_replicas": 1,
                        "max_replicas": 10,
                        "signals": ["queue_depth", "kv_cache_usage", "ttft_p95", "capacity"],
                        "selector": 'namespace="llm"',
                        "backtest_selector": 'namespace="llm",pod=~"vllm-[a-z0-9]+-[a-z0-9]+"',
                        "shadow": None,
                    }
                ]
            ),
            id="json",
        ),
        pytest.param(
            "text",
            lambda out: (
                out == f"{KEY}: replicas 1..10, signals queue_depth, kv_cache_usage, ttft_p95, "
                "capacity\n"
                '  series    {namespace="llm"}, only those of the pods the Kubernetes API lists '
                "for Deployment llm/vllm (by exact name)\n"
                '  backtest  {namespace="llm",pod=~"vllm-[a-z0-9]+-[a-z0-9]+"} (history has no '
                "pod lists: the pod-name pattern)\n"
            ),
            id="text",
        ),
    ],
)
def test_check_policy_output(tmp_path: Path, output: str, check: Any) -> None:
    result = _invoke(["check-policy", str(_policy_file(tmp_path)), "-o", output])
    assert result.exit_code == 0, result.output
    assert check(result.stdout), result.stdout


def test_check_policy_without_an_argument_reads_policy_yaml_as_run_and_recommend_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _policy_file(tmp_path)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("VLLM_SCALER_POLICY_FILE", raising=False)
    result = _invoke(["check-policy"])
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith(f"{KEY}: replicas 1..10, ")


def test_dashboards_json_lists_what_it_wrote_and_what_is_stale(tmp_path: Path) -> None:
    names = list(build_dashboards())
    stale = _invoke(["dashboards", "--out", str(tmp_path), "--check", "-o", "json"])
    assert stale.exit_code == 1
    every = [str(tmp_path / n) for n in names]
    assert json.loads(stale.stdout) == {"out_of_date": every, "missing": every}
    wrote = _invoke(["dashboards", "--out", str(tmp_path), "-o", "json"])
    assert wrote.exit_code == 0
    assert json.loads(wrote.stdout) == {
        "dashboards": [str(tmp_path / n) for n in names],
        "previews": [],
    }
    fresh = _invoke(["dashboards", "--out", str(tmp_path), "--check", "-o", "json"])
    assert (fresh.exit_code, json.loads(fresh.stdout)) == (0, {"out_of_date": [], "missing": []})


async def test_recommend_json_is_the_only_thing_on_stdout(
    make_harness: HarnessFactory, tmp_path: Path
) -> None:
    """The real command in its own process; the client configuration line goes to stderr."""
    three = pods(3)
    answers = uniform_answers(
        three, waiting="1", running="1", kv_cache="0.5", ttft_p95="0.4", ttft_rate="2"
    )
    # the command runs on the wall clock: so does the API server it talks to
    h = await make_harness(replicas=3, ready=three, answers=answers, server_clock=time.time)
    env = {k: v for k, v in os.environ.items() if not k.startswith("VLLM_SCALER_")}
    env.update(
        VLLM_SCALER_PROMETHEUS_URL=h.prom.url,
        VLLM_SCALER_KUBECONFIG=str(h.kubeconfig),
        VLLM_SCALER_PROMETHEUS_HEADERS="X-Scope-OrgID=tenant-a",
    )
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "scaler", "recommend", "--once", "-o", "json",
        "--policy", str(_policy_file(tmp_path)), "--no-in-cluster",
        env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(), timeout=60)
    assert proc.returncode == 0, err.decode()
    [report] = json.loads(out)
    assert (report["target"], report["current_replicas"]) == (KEY, 3)
    assert err.decode().splitlines() == [
        f"vllm-scaler: prometheus {h.prom.url}/ (auth: none; headers: X-Scope-OrgID; "
        "CA: system; client certificate: none; timeout 10s)"
    ]
    assert h.fake.headers[0]["X-Scope-OrgID"] == "tenant-a"  # the headers were sent


def test_bench_json(tmp_path: Path) -> None:
    result = _invoke(
        ["bench", "--minutes", "3", "--rate-scale", "0.5", "--jobs", "1", "-o", "json",
         "--plot", str(tmp_path / "bench.png")]
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["duration_seconds"] == 180.0 and doc["rate_scale"] == 0.5
    # the SLO bounds each request's TTFT; its goal is a share of the requests, not a p95
    assert (doc["slo_ttft_seconds"], doc["slo_request_share_target"]) == (2.0, 0.99)
    assert "slo_ttft_p95_seconds" not in doc
    assert doc["plot"] == str(tmp_path / "bench.png") and (tmp_path / "bench.png").is_file()


def test_bench_without_a_plot(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    result = _invoke(
        ["bench", "--minutes", "3", "--rate-scale", "0.5", "--jobs", "1", "--no-plot"]
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert not (tmp_path / "out").exists()  # nothing drawn, not even the default path
    assert "plot" not in result.stdout.lower()


def test_bench_scale_output(monkeypatch: pytest.MonkeyPatch) -> None:
    """The result as JSON or as the table (the measurement itself: tests/bench/test_scale.py)."""
    figures = scale.ScaleFigures("vllm-scaler", 5, 2, 0.03, 0.031, 0.031, 0.0, 0)
    result = scale.ScaleResult(2, 1, 1, 56, 1.0, 57.2, 53.9, (figures,), 65.7)

    async def measured(**_: object) -> scale.ScaleResult:
        return result

    monkeypatch.setattr(scale.cli, "run_scale_bench", measured)
    as_json = _invoke(
        ["bench-scale", "--targets", "2", "--pods", "1", "--namespaces", "1", "-o", "json"]
    )
    assert as_json.exit_code == 0, as_json.output
    assert json.loads(as_json.stdout) == json.loads(json.dumps(result.as_json()))
    as_text = _invoke(["bench-scale", "--targets", "2", "--pods", "1", "--namespaces", "1"])
    assert as_text.stdout.strip() == scale.format_result(result).strip()


@pytest.mark.e2e
def test_sim_json(tmp_path: Path) -> None:
    """A short demo: decisions on stderr, one JSON summary on stdout."""
    result = _invoke(
        ["sim", "--start-minute", "14", "--minutes", "0.5", "--tail-seconds", "3",
         "--workdir", str(tmp_path), "-o", "json"]
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["requests"] == doc["served"] + doc["rejected"] + doc["cut"] + doc["unfinished"]
    assert doc["requests"] > 0
    assert doc["plot"] == str(tmp_path.resolve() / "demo.png")
    assert doc["failed_cycles"] == 0  # the controller ran, and none of its cycles failed
    assert "Decisions of vllm-scaler" in result.stderr
    # the live run first, then the bench's replays of the same slice
    labels = [row["label"] for row in doc["comparison"]]
    assert labels == [
        "vllm-scaler (this run, live)",
        "vllm-scaler (replay)",
        "KEDA + HPA on queue depth (replay)",
    ]
    assert all(row["requests"] == doc["requests"] for row in doc["comparison"])


@pytest.mark.parametrize(
    "matchers", [pytest.param(None, id="default"), pytest.param({"model_name": "m"}, id="matchers")]
)
def test_check_policy_prints_the_selector_the_controller_sends(
    tmp_path: Path, matchers: dict[str, str] | None
) -> None:
    """What check-policy calls the target's series is what the live per-pod queries select
    (the pod-name pattern is the backtest's only)."""
    from scaler.config.policy import load_policy
    from scaler.sources.promql import build_query_plan

    doc = case_target_doc()
    if matchers:
        doc["prometheus_matchers"] = matchers
    path = tmp_path / "policy.yaml"
    path.write_text(yaml.safe_dump({"targets": [doc]}))
    plan = build_query_plan(load_policy(path).targets, rate_window_seconds=60)
    [shown] = json.loads(_invoke(["check-policy", str(path), "-o", "json"]).stdout)
    assert shown["selector"] == plan.selectors[plan.selector_group[KEY]]
    assert all(shown["selector"] in q for q in plan.queries.values())
    text = _invoke(["check-policy", str(path)]).stdout
    assert "pod=~" not in text.splitlines()[1]
    if matchers:
        assert shown["selector"] == shown["backtest_selector"] == 'model_name="m"'
        assert text.splitlines()[2].endswith("(history has no pod lists: the same selector)")


def test_a_backtest_of_one_step_says_one_step(tmp_path: Path) -> None:
    """The count said up front takes its noun's number (nothing answers at the address)."""
    result = _invoke(
        ["backtest", "--policy", str(_policy_file(tmp_path)), "--start", "now-1h",
         "--end", "now-1h", "--step", "1h", "--prometheus-url", "http://127.0.0.1:9",
         "--no-plot", "--no-progress"]
    )  # fmt: skip
    assert "vllm-scaler: 1 step of 3600 s from " in result.stderr, result.stderr
