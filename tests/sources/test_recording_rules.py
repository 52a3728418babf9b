"""The recording rules the project ships are the ones the controller looks for, and a target
(TTFT) or a namespace (throughput) reads them only while they are there and fresh."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from scaler.bench.scale import RECORDING_GROUP
from scaler.core.signals import SignalStatus
from scaler.sources.prometheus import Answer, QueryOutcome, split_answers
from scaler.sources.prometheus.split import recorded_throughput_namespaces
from scaler.sources.prometheus.ttft import plan_ttft
from scaler.sources.promql import (
    POD_GROUP_REGEX,
    THROUGHPUT_METRICS,
    QueryKind,
    build_query_plan,
    build_throughput_query,
    pod_group,
    recorded_freshness_metric,
    recorded_rate_metric,
    recorded_ttft_metric,
    recording_rule_expr,
    recording_rules,
)
from tests.support.fakeprom import snapshot, target

RULES = Path(__file__).resolve().parents[2] / "deploy" / "rules" / "vllm-scaler.rules.yaml"


def test_the_shipped_rule_records_what_the_controller_reads() -> None:
    doc = yaml.safe_load(RULES.read_text(encoding="utf-8"))
    [group] = [g for g in doc["groups"] if g["name"] == RECORDING_GROUP]
    assert group["interval"] == "30s"
    assert group["rules"] == recording_rules(60)
    assert group["rules"][0] == {
        "record": recorded_ttft_metric(60),
        "expr": recording_rule_expr(60),
    }
    # the policy's default window, and the name spells it as rules do
    assert recorded_ttft_metric(60).endswith(":rate1m")
    assert recorded_ttft_metric(90).endswith(":rate90s")


def test_the_pod_group_is_the_pod_name_up_to_its_last_dash_in_python_and_in_the_rule() -> None:
    import re

    for pod, group in [
        ("vllm-5d8f7c9b4-x2k9p", "vllm-5d8f7c9b4"),  # a Deployment's pod: its ReplicaSet
        ("vllm-70b-0", "vllm-70b"),  # a StatefulSet's ordinal pod
        ("vllm-0-1", "vllm-0"),  # a LeaderWorkerSet's worker: its group
        ("standalone", ""),  # no dash: label_replace leaves the label out
    ]:
        assert pod_group(pod) == group
        m = re.fullmatch(POD_GROUP_REGEX, pod)  # what label_replace does with "$1"
        assert (m.group(1) if m else "") == group


def _first_round(ages: dict[str, float], pods: list[str]) -> Any:
    """The first round's split answers: each pod with requests, each group's recorded age."""
    series = [
        ({"namespace": "llm", "pod": p, "scaler_selector": "s0", "scaler_histogram": "classic"},
         2.0)
        for p in pods
    ] + [
        ({"namespace": "llm", "scaler_pod_group": g, "scaler_selector": "s0",
          "scaler_histogram": "recorded"}, age)
        for g, age in ages.items()
    ]  # fmt: skip
    outcome = QueryOutcome(QueryKind.TTFT_RATE, SignalStatus.OK, series=len(series))
    return split_answers({QueryKind.TTFT_RATE: Answer(outcome, series)})


@pytest.mark.parametrize(
    ("ages", "query", "why"),
    [
        pytest.param({"vllm-5d8f": 14.0}, "recorded", "", id="fresh: read the recording"),
        pytest.param(
            {"vllm-5d8f": 75.0}, "raw", "are 75 s old", id="older than the window: raw buckets"
        ),
        pytest.param({"other-7c9d": 5.0}, "raw", "no recorded buckets", id="group not recorded"),
        pytest.param({}, "raw", "", id="no recording rule at all: raw, nothing to explain"),
    ],
)
def test_a_target_reads_the_recording_only_while_it_is_fresh(
    ages: dict[str, float], query: str, why: str
) -> None:
    t = target()
    own = ["vllm-5d8f-a", "vllm-5d8f-b"]
    plan = build_query_plan([t], rate_window_seconds=60)
    ttft = plan_ttft([t], {t.key: snapshot(own)}, {}, plan, _first_round(ages, own))
    route = ttft.routes[t.key]
    assert (route.query, route.asked, route.request_rate) == (query, True, 4.0)
    assert why in route.raw_because
    assert ttft.query is not None
    if query == "raw":  # exactly the target's two pods, by name
        assert r'pod=~"vllm\\-5d8f\\-a|vllm\\-5d8f\\-b"' in ttft.query
    else:
        assert 'scaler_pod_group=~"vllm\\\\-5d8f"' in ttft.query


def _running(ages: dict[tuple[str, str], float]) -> Any:
    """The ``running`` answer's split: one pod's series and the recorded throughput's ages."""
    series = [({"namespace": "a", "pod": "vllm-1-x", "scaler_selector": "s0"}, 1.0)] + [
        ({"namespace": ns, "scaler_recorded": counter, "scaler_selector": "s0"}, age)
        for (ns, counter), age in ages.items()
    ]
    outcome = QueryOutcome(QueryKind.RUNNING, SignalStatus.OK, series=len(series))
    return split_answers({QueryKind.RUNNING: Answer(outcome, series)})


def test_a_namespace_reads_recorded_throughput_only_with_every_counter_fresh() -> None:
    every = {(ns, c): 20.0 for ns in ("a", "b", "c", "d") for c in THROUGHPUT_METRICS}
    every[("b", THROUGHPUT_METRICS[1])] = 75.0  # older than the 60 s window
    del every[("c", THROUGHPUT_METRICS[2])]  # a counter the rules do not record there
    split = _running(every)
    group = split.pod_groups[QueryKind.RUNNING]["s0"]
    # the ages are not a pod's series: nothing is counted as a series without a pod label
    assert (group.count, group.no_pod_label, set(group.by_pod)) == (1, 0, {("a", "vllm-1-x")})
    fresh = recorded_throughput_namespaces(group, ["a", "b", "c", "d", "e"], 60.0)
    assert fresh == ["a", "d"]  # "e": no recording at all
    assert recorded_throughput_namespaces(None, ["a"], 60.0) == []


def test_the_throughput_query_reads_recorded_namespaces_and_the_rest_raw() -> None:
    targets = [
        target("vllm", "a"),
        target("vllm", "b"),
        target("x", "c", prometheus_matchers={"namespace": "c", "job": "vllm"}),
    ]
    plan = build_query_plan(targets, rate_window_seconds=60)
    assert (plan.default_group, plan.default_namespaces) == ("s0", ("a", "b"))
    assert build_throughput_query(plan, []) == plan.queries[QueryKind.THROUGHPUT]
    query = build_throughput_query(plan, ["a", "z"])  # "z": not a namespace of the plan
    for counter in THROUGHPUT_METRICS:  # each recorded rate tagged as the raw one is
        recorded = recorded_rate_metric(counter, 60)
        assert (
            f'label_replace(max by (namespace, pod) ({recorded}{{namespace="a"}}), '
            f'"scaler_metric", "{counter}", "", "")'
        ) in query
    # namespace b of the default group and the explicit group stay raw, each with its tag
    assert 'rate(vllm:generation_tokens_total{namespace="b"}[60s])' in query
    assert 'rate(vllm:generation_tokens_total{job="vllm",namespace="c"}[60s])' in query
    assert '"scaler_selector", "s1"' in query and '"z"' not in query
    assert recorded_rate_metric("vllm:request_success_total", 60) == (
        "namespace_pod:vllm_request_success:rate1m"
    )


def test_the_running_query_reads_the_recorded_timestamps_not_the_rates() -> None:
    """The recording's age per namespace and counter comes from the rules' own record of the
    rates' timestamps (one series each), never from the 24,000 recorded rates; without that
    record (rules of an earlier version) every namespace reads raw rates."""
    targets = [target("vllm", "a"), target("vllm", "b")]
    plan = build_query_plan(targets, rate_window_seconds=60)
    running = plan.queries[QueryKind.RUNNING]
    fresh = recorded_freshness_metric(60)
    assert fresh == "namespace_scaler_recorded:vllm_rate1m_timestamp_seconds:min"
    assert f'time() - {fresh}{{namespace=~"a|b"}}' in running
    for counter in THROUGHPUT_METRICS:
        assert recorded_rate_metric(counter, 60) not in running
    # the record is the last rule of the group (it reads what the rate rules wrote)
    assert recording_rules(60)[-1]["record"] == fresh
    assert all(recorded_rate_metric(c, 60) in recording_rules(60)[-1]["expr"]
               for c in THROUGHPUT_METRICS)  # fmt: skip
    # no record in the answer: no namespace is known fresh, all read raw
    group = _running({}).pod_groups[QueryKind.RUNNING]["s0"]
    assert recorded_throughput_namespaces(group, ["a", "b"], 60.0) == []
    assert build_throughput_query(plan, []) == plan.queries[QueryKind.THROUGHPUT]
