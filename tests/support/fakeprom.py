"""Helpers for the Prometheus source tests: a fake Prometheus HTTP API on loopback.

The fake is a real aiohttp server speaking the ``/api/v1/query`` protocol (POST form body).
It picks a canned answer per query by the metric name in the ``query`` field, and tags the
series the way the source's ``label_replace`` would (``scaler_selector`` / ``scaler_target``
taken from the query), so case inputs can be written in the cases' ``R[pod-0:"3"]`` shorthand.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from aiohttp import web

from scaler.config.policy import TargetPolicy, WorkloadRef
from scaler.core.observation import PodInfo, WorkloadSnapshot
from scaler.sources.prometheus import PrometheusSource
from scaler.sources.promql import (
    GENERATION_TOKENS_METRIC,
    METRIC_LABEL,
    PROMPT_TOKENS_METRIC,
    REQUESTS_METRIC,
    SELECTOR_LABEL,
    TARGET_LABEL,
    QueryKind,
)

TS = 1718000000

SHARED = Path(__file__).resolve().parents[2].parent / "shared"
CASES = SHARED / "cases"


def case_file(name: str) -> Path:
    """Path of the shared case file a test implements (documentation: never read, never
    skipped; the case's input is written out in the test itself)."""
    return CASES / name


def sample(pod: str | None, value: str, **labels: str) -> dict[str, Any]:
    """``pod-0:"3"`` of the cases: one vector sample (no pod label when ``pod`` is None)."""
    metric = dict(labels)
    if pod is not None:
        metric["pod"] = pod
    return {"metric": metric, "value": [TS, value]}


def R(*series: dict[str, Any]) -> dict[str, Any]:
    """``R[...]``: a successful vector answer."""
    return {"status": "success", "data": {"resultType": "vector", "result": list(series)}}


def per_pod(values: Mapping[str, str], **labels: str) -> dict[str, Any]:
    """An answer with one sample per pod."""
    return R(*(sample(p, v, **labels) for p, v in values.items()))


def kv(values: Mapping[str, str], name: str = "vllm:kv_cache_usage_perc") -> dict[str, Any]:
    """A KV-cache answer: the query keeps ``__name__``."""
    return per_pod(values, __name__=name)


def rates(values: Mapping[str, tuple[str, str, str] | str]) -> dict[str, Any]:
    """A throughput answer: per pod, the rates of finished requests, prompt tokens and
    generated tokens (``"0"`` for all three: a pod that produced no token)."""
    series = []
    for pod, triple in values.items():
        per = (triple, triple, triple) if isinstance(triple, str) else triple
        for metric, value in zip(
            (REQUESTS_METRIC, PROMPT_TOKENS_METRIC, GENERATION_TOKENS_METRIC), per, strict=True
        ):
            series.append(sample(pod, value, **{METRIC_LABEL: metric}))
    return R(*series)


@dataclass
class Reply:
    """A canned HTTP answer: JSON (dict) or raw text, with a status code."""

    body: dict[str, Any] | str
    status: int = 200
    stall: bool = False  # never answer (until the test ends)


_KIND_BY_METRIC: list[tuple[str, QueryKind]] = [
    ("time_to_first_token_seconds_bucket", QueryKind.TTFT_QUANTILE),
    ("time_to_first_token_seconds_count", QueryKind.TTFT_RATE),
    ("num_requests_waiting", QueryKind.WAITING),
    ("num_requests_running", QueryKind.RUNNING),
    ("kv_cache_usage_perc", QueryKind.KV_CACHE),
    ("generation_tokens_total", QueryKind.THROUGHPUT),
]
_TAG_RE = re.compile(r'"(scaler_selector|scaler_target)", "((?:[^"\\]|\\.)*)"')


def kind_of(query: str) -> QueryKind:
    for needle, kind in _KIND_BY_METRIC:
        if needle in query:
            return kind
    raise AssertionError(f"unexpected query {query!r}")


@dataclass
class FakePrometheus:
    """A fake Prometheus API. Set ``answers[kind]``; unset kinds answer ``R[]``."""

    answers: dict[QueryKind, dict[str, Any] | Reply] = field(default_factory=dict)
    requests: list[dict[str, str]] = field(default_factory=list)
    headers: list[Mapping[str, str]] = field(default_factory=list)
    url: str = ""
    release: asyncio.Event = field(default_factory=asyncio.Event)

    def set(self, **answers: dict[str, Any] | Reply) -> None:
        for name, ans in answers.items():
            self.answers[QueryKind(name)] = ans

    def kinds_asked(self) -> list[QueryKind]:
        return [kind_of(r["query"]) for r in self.requests]

    async def handle(self, request: web.Request) -> web.StreamResponse:
        form = await request.post()
        fields = {k: str(v) for k, v in form.items()}
        self.requests.append(fields)
        self.headers.append(dict(request.headers))
        query = fields.get("query", "")
        reply = self.answers.get(kind_of(query), R())
        if not isinstance(reply, Reply):
            reply = Reply(reply)
        if reply.stall:
            await self.release.wait()
        if isinstance(reply.body, str):
            return web.Response(status=reply.status, text=reply.body)
        return web.json_response(_tagged(reply.body, query), status=reply.status)


def _tagged(body: dict[str, Any], query: str) -> dict[str, Any]:
    """Add the label_replace tag of the query's first sub-expression to untagged series."""
    m = _TAG_RE.search(query)
    data = body.get("data")
    if m is None or not isinstance(data, dict) or not isinstance(data.get("result"), list):
        return body
    label, value = m.group(1), m.group(2).replace("$$", "$")
    body = json.loads(json.dumps(body))
    for item in body["data"]["result"]:
        metric = item.get("metric") if isinstance(item, dict) else None
        if isinstance(metric, dict) and SELECTOR_LABEL not in metric and TARGET_LABEL not in metric:
            metric[label] = value
    return body


@pytest.fixture
async def fake_prom() -> AsyncIterator[FakePrometheus]:
    fake = FakePrometheus()
    app = web.Application()
    app.router.add_post("/api/v1/query", fake.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    fake.url = f"http://127.0.0.1:{port}"
    try:
        yield fake
    finally:
        fake.release.set()  # let stalled handlers finish so cleanup is quick
        await runner.cleanup()


@pytest.fixture
async def http_client() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient() as client:
        yield client


@pytest.fixture
def make_source(
    http_client: httpx.AsyncClient, fake_prom: FakePrometheus
) -> Callable[..., PrometheusSource]:
    def make(timeout_seconds: float = 5.0, base_url: str | None = None) -> PrometheusSource:
        return PrometheusSource(
            http_client,
            base_url=base_url or fake_prom.url,
            timeout_seconds=timeout_seconds,
            rate_window_seconds=60,
        )

    return make


def target(name: str = "vllm", namespace: str = "llm", **kwargs: Any) -> TargetPolicy:
    """The cases' default target, ``Deployment llm/vllm``."""
    return TargetPolicy(
        workload=WorkloadRef(
            api_version="apps/v1", kind="Deployment", namespace=namespace, name=name
        ),
        **kwargs,
    )


def snapshot(
    ready: Iterable[str],
    *,
    terminating: Iterable[str] = (),
    not_ready: Iterable[str] = (),
    namespace: str = "llm",
) -> WorkloadSnapshot:
    pods = [PodInfo(p, ready=True, terminating=False, age_seconds=3600) for p in ready]
    pods += [PodInfo(p, ready=True, terminating=True, age_seconds=3600) for p in terminating]
    pods += [PodInfo(p, ready=False, terminating=False, age_seconds=30) for p in not_ready]
    return WorkloadSnapshot(
        namespace=namespace,
        spec_replicas=len(pods),
        status_replicas=len(pods),
        selector="app=vllm",
        resource_version="1",
        pods=tuple(pods),
    )


def pods(n: int) -> list[str]:
    return [f"pod-{i}" for i in range(n)]
