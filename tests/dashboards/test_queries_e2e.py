"""Every dashboard query and alert expression against real data, on both backends.

A real Prometheus and a real VictoriaMetrics both scrape the simulated fleet and the
in-process controller's own /metrics (job ``vllm-scaler``) during ~40 s of the code trace
(:mod:`tests.dashboards.sim_run`; one run serves both). Then, on each backend:
the variable queries find the namespace, target and model; every panel query (variables
substituted as Grafana would, as the dashboard opens and with one target and model chosen)
returns at least one finite sample over the run; the annotation finds the scale events; every
alert expression evaluates; the previews render.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio
import yaml

from scaler import dashboards as dash
from scaler.sim.prometheus_server import find_prometheus_binary
from scaler.sim.victoria_metrics import (
    VictoriaMetricsNotInstalledError,
    find_victoria_metrics_binary,
)
from tests.dashboards.sim_run import DASHBOARDS_POLICY, SimRun, simulated_run

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="module")]

ROOT = Path(__file__).resolve().parents[2]
BUILTINS = {"__rate_interval": "1m", "__interval": "15s", "__range": "1m"}


def _post(url: str, path: str, data: dict[str, Any]) -> dict[str, Any]:
    body: dict[str, Any] = httpx.post(f"{url}{path}", data=data, timeout=30).json()
    return body


def _finite_samples(result: list[dict[str, Any]]) -> int:
    """Samples that Grafana draws: NaN (0/0 of an idle window) and infinities are gaps."""
    points = [v for s in result for v in (s.get("values") or [s.get("value")]) if v]
    return sum(1 for _, v in points if math.isfinite(float(v)))


def _check_everything(url: str, start: float, end: float, model: str, out: Path) -> None:
    expected = {
        dash.DECISIONS_UID: {
            "namespace": ["llm"],
            "resource": [],  # the run's target is the policy file's: no VLLMAutoscaler
            "target": ["llm/Deployment/vllm"],
            "model": [model],
        },
        # The fleet's target shows ns/Kind/name but its value is the workload name.
        dash.FLEET_UID: {"namespace": ["llm"], "target": ["vllm"], "model": [model]},
    }
    failures = []
    for doc in dash.build_dashboards().values():
        options = dash.resolve_variables(url, doc, start=start, end=end)
        assert options == expected[doc["uid"]], doc["uid"]
        # each target shown with where its policy comes from (the row title's text)
        texts = dash.resolve_variable_texts(url, doc, start=start, end=end)
        assert list(texts["target"].values()) == ["llm/Deployment/vllm (policy file)"]
        alls = dash.all_values(doc, options)
        # As the dashboard opens ("All" targets and models), and with one of each chosen.
        opened = dash.selected_values(doc, options)
        every = {k: dash.ALL for k in options if k != "namespace"}
        assert opened == {"namespace": "llm", **every}
        for values in (opened, {k: v[0] if v else dash.ALL for k, v in options.items()}):
            for q in [*dash.panel_queries(doc), *dash.annotation_queries(doc)]:
                expr = dash.substitute(q.expr, values, builtins=BUILTINS, all_values=alls)
                if q.instant:
                    body = _post(url, "/api/v1/query", {"query": expr, "time": end})
                else:
                    data = {"query": expr, "start": start, "end": end, "step": 1}
                    body = _post(url, "/api/v1/query_range", data)
                if body.get("status") != "success":
                    failures.append(f"{q.panel} {q.ref_id}: error {body.get('error')}: {expr}")
                elif not _finite_samples(body["data"]["result"]):
                    if q.panel.startswith("Seasonal forecast") and q.ref_id != "A":
                        # the forecast needs three days of history and this run has minutes:
                        # only its actual-demand query (A) has data; the others must parse
                        continue
                    failures.append(f"{q.panel} {q.ref_id}: no data: {expr}")
    rules = ROOT / "deploy" / "rules" / "vllm-scaler.rules.yaml"
    doc = yaml.safe_load(rules.read_text(encoding="utf-8"))
    for rule in (r for g in doc["groups"] for r in g["rules"]):
        body = _post(url, "/api/v1/query", {"query": rule["expr"], "time": end})
        if body.get("status") != "success":
            name = rule.get("alert") or rule["record"]
            failures.append(f"rule {name}: error {body.get('error')}")
    assert not failures, "\n".join(failures)
    # The controller is up and scraped, so the "down" alert's expression, as shipped, is quiet.
    down_expr = next(
        r["expr"] for g in doc["groups"] for r in g["rules"] if r.get("alert") == "VllmScalerDown"
    )
    down = _post(url, "/api/v1/query", {"query": down_expr})
    assert down["data"]["result"] == []
    pngs = dash.render_previews(url, out, start=start, end=end, builtins=BUILTINS)
    assert sorted(p.name for p in pngs) == ["vllm-fleet.png", "vllm-scaler-decisions.png"]
    assert all(p.stat().st_size > 10_000 for p in pngs)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def run(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[SimRun]:
    """One simulated run scraped by Prometheus and, where installed, VictoriaMetrics."""
    try:
        find_prometheus_binary()
    except Exception as err:  # the message says how to install it
        pytest.skip(str(err))
    try:
        find_victoria_metrics_binary()
        victoria_metrics = True
    except Exception:
        victoria_metrics = False  # its test row skips with the reason
    workdir = tmp_path_factory.mktemp("dashboards-run")
    async with simulated_run(
        workdir,
        trace_seconds=100.0,
        compress=4.0,
        tail_seconds=15.0,
        victoria_metrics=victoria_metrics,
        policy_doc=DASHBOARDS_POLICY,
    ) as run:
        yield run


@pytest.mark.parametrize(
    "backend",
    [
        pytest.param("prometheus", id="prometheus"),
        pytest.param("victoria-metrics", id="victoria-metrics"),
    ],
)
async def test_every_dashboard_query_and_alert_works_on_a_simulated_run(
    run: SimRun, backend: str, tmp_path: Path
) -> None:
    if backend not in run.backends:
        try:
            find_victoria_metrics_binary()
        except VictoriaMetricsNotInstalledError as err:  # the message says how to install it
            pytest.skip(str(err))
    assert run.scale_events, "the slice should make the controller scale"
    # Blocking HTTP in a thread: the fleet and our /metrics keep serving on this loop.
    await asyncio.to_thread(
        _check_everything,
        run.backends[backend],
        run.start,
        run.end,
        run.model_name,
        tmp_path / "previews",
    )
