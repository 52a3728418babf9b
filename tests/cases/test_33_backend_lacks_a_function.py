"""Case 33 and its kind on a real backend: a PromQL function the backend lacks.

Debian's VictoriaMetrics (1.79, the version the case names) holds two hours of a target's
history, imported with its timestamps (``/api/v1/import/prometheus``): replica counts from
kube-state-metrics, vLLM's gauges, the TTFT classic histogram and the token counters. Its
MetricsQL has no ``histogram_count``. Every command that reads it learns that once and builds
its queries from it: the backtest (the case), ``run``/``recommend`` (the controller's source),
and the dashboards, whose expressions use none of the functions only some backends have.
"""

from __future__ import annotations

import asyncio
import json
import math
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import yaml
from typer.testing import CliRunner

from scaler.backtest.history import HistoryError, PrometheusRangeClient, make_grid, read_matrix
from scaler.cli import app
from scaler.config.policy import parse_policy
from scaler.config.settings import PrometheusSettings
from scaler.config.vocabulary import SignalName
from scaler.core.observation import PodInfo, WorkloadSnapshot
from scaler.core.signals import SignalStatus
from scaler.sim.prometheus_server import wait_for_series
from scaler.sim.victoria_metrics import (
    VictoriaMetricsNotInstalledError,
    VictoriaMetricsServer,
    find_victoria_metrics_binary,
)
from scaler.sources.prometheus import PrometheusSource
from scaler.sources.prometheus.backend import OPTIONAL_FUNCTIONS
from scaler.sources.promql import QueryKind, build_query_plan
from tests.support.fakeprom import case_file

pytestmark = pytest.mark.e2e

CASE = "33-backend-lacks-a-function.md"
KEY = "llm/Deployment/vllm"
PODS = ("vllm-5d8f7c9b4-x2k9p", "vllm-5d8f7c9b4-q4m7z")
POLICY = {"targets": [{"workload": {"apiVersion": "apps/v1", "kind": "Deployment",
                                    "namespace": "llm", "name": "vllm"}}]}  # fmt: skip
STEP = 15  # seconds between the imported samples (a scrape interval)
HOURS = 2
LE = ("0.5", "1.0", "2.5", "5.0", "+Inf")
# per pod and scrape: first tokens in each bucket (cumulative), prompt and generated tokens
PER_SCRAPE = {"0.5": 6, "1.0": 9, "2.5": 11, "5.0": 12, "+Inf": 12}


def _history(end: float) -> str:
    """Two hours of the target's series, Prometheus' text format with millisecond times."""
    lines = []
    start = end - HOURS * 3600
    for i in range(int(HOURS * 3600 / STEP) + 1):
        ms = int((start + i * STEP) * 1000)
        for name in ("kube_deployment_spec_replicas", "kube_deployment_status_replicas_ready"):
            lines.append(f'{name}{{namespace="llm",deployment="vllm"}} 2 {ms}')
        for pod in PODS:
            at = f'namespace="llm",pod="{pod}",engine="0"'
            lines += [
                f"vllm:num_requests_running{{{at}}} 3 {ms}",
                f"vllm:num_requests_waiting{{{at}}} 4 {ms}",
                f"vllm:kv_cache_usage_perc{{{at}}} 0.4 {ms}",
                f"vllm:prompt_tokens_total{{{at}}} {i * 6000} {ms}",
                f"vllm:generation_tokens_total{{{at}}} {i * 1200} {ms}",
                f'vllm:request_success_total{{{at},finished_reason="stop"}} {i * 12} {ms}',
                f"vllm:time_to_first_token_seconds_count{{{at}}} {i * 12} {ms}",
                f"vllm:time_to_first_token_seconds_sum{{{at}}} {i * 9.0} {ms}",
            ]
            for le in LE:
                bucket = f'vllm:time_to_first_token_seconds_bucket{{{at},le="{le}"}}'
                lines.append(f"{bucket} {i * PER_SCRAPE[le]} {ms}")
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def vm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, float]]:
    """VictoriaMetrics holding the history (its URL, and the history's end)."""
    try:
        find_victoria_metrics_binary()
    except VictoriaMetricsNotInstalledError as err:
        pytest.skip(str(err))
    tmp = tmp_path_factory.mktemp("vm")
    end = float(math.floor(time.time() / STEP) * STEP)
    # no result cache: the history is imported, not scraped, and queried at once
    no_cache = ["-search.disableCache"]
    with VictoriaMetricsServer(
        tmp, sd_file=tmp / "sd.json", scrape_interval_seconds=1.0, extra_args=no_cache
    ) as server:
        url = server.url
        httpx.post(f"{url}/api/v1/import/prometheus", content=_history(end)).raise_for_status()
        httpx.get(f"{url}/internal/force_flush").raise_for_status()
        # imported rows become searchable a moment later: wait until the whole history is
        points = int(HOURS * 3600 / STEP) + 1
        whole = f"count_over_time(kube_deployment_spec_replicas[{HOURS + 1}h]) >= {points}"
        asyncio.run(wait_for_series(url, whole, timeout=30))
        yield url, end


def test_case_33_the_backtest_reads_victoria_metrics_as_recommend_does(
    vm: tuple[str, float], tmp_path: Path
) -> None:
    """Case 33: ``vllm-scaler backtest`` with the default policy on VictoriaMetrics 1.79: the
    backend is asked once, its queries read classic histograms only, and the history is
    replayed: queue, KV cache and TTFT read as in the history."""
    case_file(CASE)
    url, end = vm
    policy = tmp_path / "policy.yaml"
    policy.write_text(yaml.safe_dump(POLICY), encoding="utf-8")
    args = ["backtest", "--prometheus-url", url, "--policy", str(policy), "--start",
            f"{end - 3600:.0f}", "--end", f"{end:.0f}", "--step", "60s", "--output", "json",
            "--no-plot", "--no-progress"]  # fmt: skip
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "no native-histogram functions (histogram_count, histogram_fraction)" in result.stderr
    (t,) = json.loads(result.stdout)["targets"]
    assert t["replica_source"] == "kube-state-metrics"
    status = t["summary"]["signal_status"]
    steps = len(t["steps"])
    assert status["queue_depth"] == {"ok": steps}
    assert status["kv_cache_usage"] == {"ok": steps}
    assert status["ttft_p95"] == {"ok": steps}
    # 8 waiting over 2 replicas; p95 of the imported buckets (11 of 12 by 2.5 s, 12 by 5 s)
    first = t["steps"][0]["signals"]
    assert (first["queue_depth"]["value"], first["queue_depth"]["per_replica"]) == (8.0, 4.0)
    assert 2.5 < first["ttft_p95"]["value"] <= 5.0


def test_case_33_an_error_of_the_backend_shows_its_cause(vm: tuple[str, float]) -> None:
    """Case 33: a query the backend refuses is reported with its cause (the end of
    VictoriaMetrics' message), the query shortened, never the cause."""
    case_file(CASE)
    url, end = vm
    client = PrometheusRangeClient(PrometheusSettings(prometheus_url=url))
    plan = build_query_plan(parse_policy(POLICY).targets, rate_window_seconds=60)
    query = plan.queries[QueryKind.TTFT_RATE]  # as sent to a backend with native histograms
    assert "histogram_count" in query and len(query) > 300
    with pytest.raises(HistoryError) as caught:
        read_matrix(client, query, make_grid(end - 600, end, 60))
    message = str(caught.value)
    assert 'unknown func "histogram_count"' in message
    assert "HTTP 422" in message
    assert f"({len(query)} characters)" in message  # the query, shortened
    assert len(message) < len(query)
    assert client.native_histograms() is False
    client.close()


async def test_case_33_the_controller_asks_once_and_sends_no_function_the_backend_lacks(
    vm: tuple[str, float],
) -> None:
    """Case 33's other commands: the controller's source (``run``, ``recommend``) asks the
    backend once and reads every signal of the target with classic histograms only."""
    case_file(CASE)
    url, _ = vm
    pods = tuple(PodInfo(p, ready=True, terminating=False, age_seconds=7200) for p in PODS)
    snap = WorkloadSnapshot("llm", 2, 2, "app=vllm", "1", pods)
    target = parse_policy(POLICY).targets[0]
    async with httpx.AsyncClient() as http:
        source = PrometheusSource(http, base_url=url, timeout_seconds=10, rate_window_seconds=60)
        assert await source.probe() is None  # answered: it is a backend that can be queried
        assert source.native_histograms is False
        result = await source.read([target], {KEY: snap})
    sent = [o.query for o in result.queries.values()]
    assert not [q for q in sent if any(f in q for f in OPTIONAL_FUNCTIONS)]
    # the history ends now: the instant queries read its last samples
    readings = result.readings(KEY)
    assert readings[SignalName.QUEUE_DEPTH].value == 8.0
    assert readings[SignalName.QUEUE_DEPTH].status is SignalStatus.OK
    assert readings[SignalName.TTFT_P95].status is SignalStatus.OK


def test_case_33_the_dashboards_use_no_function_only_some_backends_have() -> None:
    """Case 33's dashboards' check: the dashboards' queries (previews read them as they are)
    name none of the functions that some Prometheus-compatible backends lack."""
    case_file(CASE)
    root = Path(__file__).resolve().parents[2] / "dashboards"
    exprs = []
    for path in sorted(root.glob("*.json")):
        doc = json.loads(path.read_text(encoding="utf-8"))
        for panel in doc.get("panels", []):
            exprs += [t.get("expr", "") for t in panel.get("targets", [])]
    assert len(exprs) > 10
    assert [e for e in exprs if any(f"{f}(" in e for f in OPTIONAL_FUNCTIONS)] == []
