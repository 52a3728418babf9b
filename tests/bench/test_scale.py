"""The scale benchmark at small scale: the query count does not grow with the targets.

A real Prometheus scrapes 20 targets x 8 pods; no timing is asserted (timings are what
``vllm-scaler bench-scale`` reports), only the query counts and that every query succeeded.
"""

from __future__ import annotations

import logging

import pytest
import structlog

from scaler.bench.scale import format_result, run_scale_bench
from scaler.sim.exposition import TTFT_BUCKETS
from scaler.sim.prometheus_server import PrometheusNotInstalledError, find_prometheus_binary

pytestmark = pytest.mark.e2e


async def test_query_count_is_constant_and_per_target_is_six_per_target() -> None:
    try:
        find_prometheus_binary()
    except PrometheusNotInstalledError as err:
        pytest.skip(str(err))
    saved = structlog.get_config()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.CRITICAL))
    try:
        r = await run_scale_bench(
            targets=20,
            pods_per_target=8,
            namespaces=4,
            cycles=3,
            per_target_cycles=1,
            scrape_interval_seconds=1.0,
            rate_window_seconds=20.0,  # 20 samples: reads a moment apart agree within 10 %
            background_seconds=2.0,
        )
    finally:
        structlog.configure(**saved)
    ours, keda, rules = r.approaches
    assert ours.queries_per_cycle == 6 and ours.failed_queries == 0
    assert keda.queries_per_cycle == 6 * 20 and keda.failed_queries == 0
    assert rules.queries_per_cycle == 6 and rules.failed_queries == 0
    # a cycle planned otherwise than the one before sends its dependent queries again
    for approach in (ours, rules):
        assert approach.queries_max_per_cycle <= 6 + min(2, approach.resending_cycles * 2)
    # grouped queries read what per-target ones read, and the recording rule what raw ones do
    assert r.disagreeing_signals == 0, r.disagreements
    assert r.rules_disagreeing_signals == 0, r.rules_disagreements
    assert (ours.ttft_recorded_targets, rules.ttft_recorded_targets) == (0, 20)
    assert r.rule_evaluations > 0 and r.rule_interval_seconds == 2.0  # two scrapes
    assert "queries/cycle" in format_result(r)
    # the floor query ran and the controller's own share is a part of the cycle
    assert r.ttft_selection_floor_seconds > 0
    assert 0 < ours.controller_cpu_p50_seconds <= ours.cycle_p50_seconds
    assert ours.controller_cpu_p50_seconds <= ours.controller_cpu_p95_seconds
    # the machine's floor: scraping's cores measured, each cycle's own work spread over the rest
    assert r.cores >= 1 and 0 < r.background_prometheus_cores <= r.background_cores < r.cores
    for approach in (ours, rules):
        assert approach.work_per_cycle_seconds >= approach.controller_cpu_p50_seconds * 0.5
        assert approach.cycle_floor_seconds == pytest.approx(
            approach.work_per_cycle_seconds / (r.cores - r.background_cores), rel=0.01
        )
    # per query: what was answered, and Prometheus' own timings of the same PromQL
    for approach in (ours, rules):
        by_kind = {q.kind: q for q in approach.queries}
        assert set(by_kind) == {
            "waiting", "running", "kv_cache", "ttft_rate", "throughput", "ttft_buckets"
        }  # fmt: skip
        assert by_kind["throughput"].series == 3 * 20 * 8
        assert all(q.prometheus_exec_seconds > 0 and q.response_mb > 0 for q in approach.queries)
    # the running query also carries each pod's sample age (one more series per pod) and the
    # recorded throughput's age per namespace and counter, read from the rules' record of the
    # rates' timestamps: one sample each, not every rate
    running = {a.approach: {q.kind: q for q in a.queries}["running"] for a in (ours, rules)}
    assert running[ours.approach].series == running[ours.approach].samples == 2 * 20 * 8
    assert running[rules.approach].series == running[rules.approach].samples == 2 * 20 * 8 + 4 * 3
    assert (ours.throughput_recorded_namespaces, rules.throughput_recorded_namespaces) == (0, 4)
    # recorded throughput: the rules' per-pod rates, read as they are (no rate() at query time)
    throughput = {a.approach: {q.kind: q for q in a.queries}["throughput"] for a in (ours, rules)}
    assert throughput[rules.approach].samples == 3 * 20 * 8
    assert throughput[ours.approach].samples > 3 * 20 * 8
    # raw buckets: 8 pods' buckets per target; recorded: one pod group per target
    buckets = len(TTFT_BUCKETS) + 1
    # the summed rates and, per bound, how many histogram series have it (mixed layouts)
    assert {q.kind: q.series for q in ours.queries}["ttft_buckets"] == 2 * 20 * buckets
    assert {q.kind: q.series for q in rules.queries}["ttft_buckets"] == 20 * buckets
    assert {q.kind: q.samples for q in rules.queries}["ttft_buckets"] == 20 * buckets
    assert {q.kind: q.samples for q in ours.queries}["ttft_buckets"] > 20 * 8 * buckets
    assert ours.load_average >= 0 and "prom exec s" in format_result(r)


def test_without_ttft_the_plan_has_the_four_per_pod_queries() -> None:
    from scaler.bench.scale.fleet import fleet
    from scaler.sources.promql import QueryKind, build_query_plan

    policies, pods = fleet(10, 2, 2, ttft=False)
    assert len(pods) == 20
    plan = build_query_plan(policies, rate_window_seconds=60)
    assert set(plan.queries) == {
        QueryKind.WAITING,
        QueryKind.RUNNING,
        QueryKind.KV_CACHE,
        QueryKind.THROUGHPUT,
    }
    with_ttft, _ = fleet(10, 2, 2)
    # the first round; the TTFT bucket query follows from its answers
    assert set(build_query_plan(with_ttft, rate_window_seconds=60).queries) == {
        QueryKind.WAITING,
        QueryKind.RUNNING,
        QueryKind.KV_CACHE,
        QueryKind.TTFT_RATE,
        QueryKind.THROUGHPUT,
    }
