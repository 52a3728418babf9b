"""Per-step classification: the live source's rules on hand-built vectors (no Prometheus)."""

from __future__ import annotations

import asyncio
import math
from typing import Any
from urllib.parse import parse_qs

import httpx
import pytest

from scaler.backtest.classify import readings_at_step
from scaler.config.policy import TargetPolicy, parse_policy
from scaler.config.vocabulary import SignalName
from scaler.core.observation import PodInfo, WorkloadSnapshot
from scaler.core.signals import SignalStatus
from scaler.sources.prometheus import PrometheusSource
from scaler.sources.promql import QueryKind, build_query_plan

KEY = "llm/Deployment/vllm"
POLICY = parse_policy(
    {
        "rate_window_seconds": 60,
        "targets": [
            {"workload": {"apiVersion": "apps/v1", "kind": "Deployment", "namespace": "llm",
                          "name": "vllm"}}
        ],
    }
)  # fmt: skip
TARGET: TargetPolicy = POLICY.targets[0]
PLAN = build_query_plan(POLICY.targets, rate_window_seconds=60)
A, B = "vllm-7d9f-aaaaa", "vllm-7d9f-bbbbb"

Sample = tuple[dict[str, str], float]


def pod(name: str, **extra: str) -> dict[str, str]:
    return {"namespace": "llm", "pod": name, "scaler_selector": "s0", **extra}


def kv(name: str, metric: str = "vllm:kv_cache_usage_perc") -> dict[str, str]:
    return pod(name, __name__=metric)


def tgt(le: str) -> dict[str, str]:
    return {"scaler_target": KEY, "le": le}


def vectors(
    *,
    running: dict[str, float],
    waiting: dict[str, float] | None = None,
    kv_new: dict[str, float] | None = None,
    kv_old: dict[str, float] | None = None,
    ttft: float | None = None,
    rate: float | None = None,
) -> dict[QueryKind, list[Sample]]:
    """The per-step vectors; TTFT as ``rate`` first tokens/s spread over the running pods and
    bucket rates whose p95 is ``ttft`` (a ``+Inf`` bucket alone for NaN)."""
    each = (rate or 0.0) / max(1, len(running))
    buckets: list[Sample] = []
    if ttft is not None and rate is not None:
        buckets = [(tgt("+Inf"), rate)]
        if not math.isnan(ttft):
            buckets.append((tgt(repr(ttft)), 0.95 * rate))
    out: dict[QueryKind, list[Sample]] = {
        QueryKind.RUNNING: [(pod(p), v) for p, v in running.items()],
        QueryKind.WAITING: [(pod(p), v) for p, v in (waiting or {}).items()],
        QueryKind.KV_CACHE: [(kv(p), v) for p, v in (kv_new or {}).items()]
        + [(kv(p, "vllm:gpu_cache_usage_perc"), v) for p, v in (kv_old or {}).items()],
        QueryKind.TTFT_RATE: []
        if rate is None
        else [(pod(p, scaler_histogram="classic"), each) for p in running],
        QueryKind.TTFT_BUCKETS: buckets,
    }
    return out


def read(v: dict[QueryKind, list[Sample]]) -> Any:
    return readings_at_step(POLICY.targets, PLAN, v, rate_window_seconds=60)[KEY]


def test_per_pod_sums_and_kv_new_name_preferred() -> None:
    r = read(
        vectors(
            running={A: 3, B: 4},
            waiting={A: 5, B: 7},
            kv_new={A: 0.5},
            kv_old={A: 0.9, B: 0.25},
            ttft=1.5,
            rate=2.0,
        )
    )
    assert r.pods == 2
    q = r.signals[SignalName.QUEUE_DEPTH]
    assert (q.status, q.value, q.pods_with_data) == (SignalStatus.OK, 12.0, 2)
    k = r.signals[SignalName.KV_CACHE_USAGE]
    assert k.status is SignalStatus.OK and k.value == pytest.approx(0.75)
    assert r.kv_metric == "vllm:kv_cache_usage_perc,vllm:gpu_cache_usage_perc"
    t = r.signals[SignalName.TTFT_P95]
    assert (t.status, t.value) == (SignalStatus.OK, 1.5)


def test_partial_when_a_pod_has_no_series() -> None:
    r = read(vectors(running={A: 1, B: 1}, waiting={A: 6}, kv_new={A: 0.5, B: 0.5}))
    q = r.signals[SignalName.QUEUE_DEPTH]
    assert (q.status, q.value, q.pods_missing) == (SignalStatus.PARTIAL, 6.0, 1)


def test_ttft_idle_only_when_the_rate_is_zero() -> None:
    base = {"running": {A: 0.0}, "waiting": {A: 0.0}, "kv_new": {A: 0.0}}
    idle = read(vectors(**base, ttft=math.nan, rate=0.0)).signals[SignalName.TTFT_P95]
    assert idle.status is SignalStatus.IDLE
    busy = read(vectors(**base, ttft=math.nan, rate=0.5)).signals[SignalName.TTFT_P95]
    assert busy.status is SignalStatus.NAN
    unknown = read(vectors(**base, ttft=math.nan)).signals[SignalName.TTFT_P95]  # type: ignore[arg-type]
    assert unknown.status is SignalStatus.ABSENT  # no request-rate series: no histogram


def test_non_finite_values_are_invalid() -> None:
    r = read(
        vectors(
            running={A: 1}, waiting={A: math.inf}, kv_new={A: math.nan}, ttft=2.0, rate=math.inf
        )
    )
    assert r.signals[SignalName.QUEUE_DEPTH].status is SignalStatus.INF
    assert r.signals[SignalName.KV_CACHE_USAGE].status is SignalStatus.NAN
    assert r.signals[SignalName.TTFT_P95].status is SignalStatus.INF


def test_no_pods_is_empty_and_missing_signal_with_pods_is_absent() -> None:
    r = read(vectors(running={}))
    assert r.pods == 0
    assert r.signals[SignalName.QUEUE_DEPTH].status is SignalStatus.EMPTY
    r = read(vectors(running={A: 1}, kv_new={A: 0.1}))
    assert r.signals[SignalName.QUEUE_DEPTH].status is SignalStatus.ABSENT
    assert r.signals[SignalName.TTFT_P95].status is SignalStatus.ABSENT


@pytest.mark.parametrize(
    "v",
    [
        pytest.param(
            vectors(running={A: 3, B: 4}, waiting={A: 5, B: 7}, kv_new={A: 0.5}, kv_old={B: 0.2},
                    ttft=1.5, rate=2.0),
            id="every signal ok, KV cache names mixed",
        ),
        pytest.param(
            vectors(running={A: 1, B: 1}, waiting={A: 6}, kv_old={A: 0.5, B: 0.5}, ttft=math.nan,
                    rate=0.0),
            id="partial queue, old KV name, idle TTFT",
        ),
        pytest.param(
            vectors(running={A: 1}, waiting={A: math.inf}, kv_new={A: -1.0}, ttft=math.nan,
                    rate=1.0),
            id="Inf queue, negative KV, NaN TTFT under load",
        ),
        pytest.param(vectors(running={A: 1}), id="only running series: absent"),
    ],
)  # fmt: skip
def test_same_readings_as_the_live_source(v: dict[QueryKind, list[Sample]]) -> None:
    """The live PrometheusSource, answering the same vectors, reads exactly the same."""
    by_query = {q: v.get(k, []) for k, q in PLAN.queries.items()}  # throughput: none

    def handler(request: httpx.Request) -> httpx.Response:
        query = parse_qs(request.content.decode())["query"][0]
        # the second round names the pods the live source lists; history asks by pattern
        series = by_query.get(query, v[QueryKind.TTFT_BUCKETS])
        result = [{"metric": labels, "value": [1.0, _fmt(value)]} for labels, value in series]
        return httpx.Response(
            200, json={"status": "success", "data": {"resultType": "vector", "result": result}}
        )

    ready = sorted({labels["pod"] for labels, _ in v[QueryKind.RUNNING]})
    snap = WorkloadSnapshot(
        namespace="llm",
        spec_replicas=len(ready),
        status_replicas=len(ready),
        selector="",
        resource_version="1",
        pods=tuple(PodInfo(p, ready=True, terminating=False, age_seconds=1000) for p in ready),
    )

    async def live() -> Any:
        async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client:
            src = PrometheusSource(
                client, base_url="http://prom", timeout_seconds=5, rate_window_seconds=60
            )
            return await src.read(POLICY.targets, {KEY: snap})

    got = asyncio.run(live()).targets[KEY]
    mine = read(v)
    assert mine.signals.keys() == got.signals.keys()
    for name, reading in got.signals.items():
        assert _same(mine.signals[name], reading), name
    assert mine.kv_metric == got.kv_metric


def _fmt(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(value)


def _same(a: Any, b: Any) -> bool:
    def key(r: Any) -> tuple[Any, ...]:
        v = "nan" if r.value is not None and math.isnan(r.value) else r.value
        return (r.status, v, r.pods_with_data, r.pods_missing, r.source_metric, r.detail)

    return key(a) == key(b)


def test_targets_sharing_a_namespace_selector_count_only_their_own_pods() -> None:
    two = parse_policy(
        {
            "targets": [
                {"workload": {"apiVersion": "apps/v1", "kind": "Deployment", "namespace": "llm",
                              "name": n}}
                for n in ("vllm", "big")
            ]
        }
    )  # fmt: skip
    plan = build_query_plan(two.targets, rate_window_seconds=60)
    gid = plan.selector_group["llm/Deployment/vllm"]
    assert plan.selector_group["llm/Deployment/big"] == gid  # one shared selector

    def labels(p: str) -> dict[str, str]:
        return {"namespace": "llm", "pod": p, "scaler_selector": gid}

    mine, theirs = "vllm-7d9f-aaaaa", "big-5c6d-zzzzz"
    v: dict[QueryKind, list[Sample]] = {
        QueryKind.RUNNING: [(labels(mine), 1.0), (labels(theirs), 1.0)],
        QueryKind.WAITING: [(labels(mine), 3.0), (labels(theirs), 40.0)],
        QueryKind.KV_CACHE: [],
        QueryKind.TTFT_RATE: [],
        QueryKind.TTFT_BUCKETS: [],
    }
    got = readings_at_step(two.targets, plan, v, rate_window_seconds=60)
    assert got["llm/Deployment/vllm"].signals[SignalName.QUEUE_DEPTH].value == 3.0
    assert got["llm/Deployment/big"].signals[SignalName.QUEUE_DEPTH].value == 40.0


def test_frozen_pods_are_recognised_across_steps_with_the_threaded_history() -> None:
    """History replays the live source's stall detector: the histories of one step are
    handed to the next, and a pod frozen on three steps is left out of the queue."""
    v = vectors(running={A: 106, B: 1}, waiting={A: 15, B: 2}, kv_new={A: 0.904, B: 0.1})
    counters = ("vllm:request_success_total", "vllm:prompt_tokens_total")
    v[QueryKind.THROUGHPUT] = [
        (pod(p, scaler_metric=m), 0.0 if p == A else 5.0)
        for p in (A, B)
        for m in (*counters, "vllm:generation_tokens_total")
    ]
    history: dict[str, Any] = {}
    statuses = []
    for _ in range(3):
        step = readings_at_step(POLICY.targets, PLAN, v, rate_window_seconds=60, history=history)
        history = {k: r.pod_history for k, r in step.items() if r.pod_history}
        statuses.append(step[KEY].signals[SignalName.QUEUE_DEPTH].status)
    assert statuses == [SignalStatus.OK, SignalStatus.OK, SignalStatus.FROZEN]
    assert step[KEY].signals[SignalName.QUEUE_DEPTH].value == 2.0  # B's only
    again = readings_at_step(POLICY.targets, PLAN, v, rate_window_seconds=60)
    assert again[KEY].signals[SignalName.QUEUE_DEPTH].status is SignalStatus.OK  # no history
