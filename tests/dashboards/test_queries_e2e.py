"""Every dashboard query and alert expression against real data.

A real Prometheus scrapes the simulated fleet and the in-process controller's own /metrics
(job ``vllm-scaler``) during ~40 s of the code trace (:mod:`tests.dashboards.sim_run`). Then:
the variable queries find the namespace, target and model; every panel query (variables
substituted as Grafana would) returns at least one series over the run; the annotation finds
the scale events; every alert expression evaluates; the previews render.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from scaler import dashboards as dash
from scaler.sim.prometheus_server import find_prometheus_binary
from tests.dashboards.sim_run import SCALER_JOB, simulated_run

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
BUILTINS = {"__rate_interval": "1m", "__interval": "15s", "__range": "1m"}


def _post(url: str, path: str, data: dict[str, Any]) -> dict[str, Any]:
    body: dict[str, Any] = httpx.post(f"{url}{path}", data=data, timeout=30).json()
    return body


def _check_everything(url: str, start: float, end: float, model: str, out: Path) -> None:
    expected = {
        dash.DECISIONS_UID: {
            "namespace": ["llm"],
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
        values = {k: v[0] for k, v in options.items()}
        for q in [*dash.panel_queries(doc), *dash.annotation_queries(doc)]:
            expr = dash.substitute(q.expr, values, builtins=BUILTINS)
            if q.instant:
                body = _post(url, "/api/v1/query", {"query": expr, "time": end})
            else:
                data = {"query": expr, "start": start, "end": end, "step": 1}
                body = _post(url, "/api/v1/query_range", data)
            if body.get("status") != "success":
                failures.append(f"{q.panel} {q.ref_id}: error {body.get('error')}: {expr}")
            elif not body["data"]["result"]:
                failures.append(f"{q.panel} {q.ref_id}: no series: {expr}")
    rules = ROOT / "deploy" / "rules" / "vllm-scaler.rules.yaml"
    doc = yaml.safe_load(rules.read_text(encoding="utf-8"))
    for rule in (r for g in doc["groups"] for r in g["rules"]):
        body = _post(url, "/api/v1/query", {"query": rule["expr"], "time": end})
        if body.get("status") != "success":
            name = rule.get("alert") or rule["record"]
            failures.append(f"rule {name}: error {body.get('error')}")
    assert not failures, "\n".join(failures)
    # The controller is up and scraped, so the "down" alert is quiet.
    down = _post(url, "/api/v1/query", {"query": 'absent(up{job=~".*vllm-scaler.*"} == 1)'})
    assert down["data"]["result"] == []
    pngs = dash.render_previews(url, out, start=start, end=end, builtins=BUILTINS)
    assert sorted(p.name for p in pngs) == ["vllm-fleet.png", "vllm-scaler-decisions.png"]
    assert all(p.stat().st_size > 10_000 for p in pngs)


async def test_every_dashboard_query_and_alert_works_on_a_simulated_run(tmp_path: Path) -> None:
    try:
        find_prometheus_binary()
    except Exception as err:  # the message says how to install it
        pytest.skip(str(err))
    async with simulated_run(tmp_path, trace_seconds=100.0, compress=4.0, tail_seconds=15.0) as run:
        assert run.scale_events, "the slice should make the controller scale"
        assert SCALER_JOB
        # Blocking HTTP in a thread: the fleet and our /metrics keep serving on this loop.
        await asyncio.to_thread(
            _check_everything,
            run.prometheus_url,
            run.start,
            run.end,
            run.model_name,
            tmp_path / "previews",
        )
