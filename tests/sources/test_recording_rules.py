"""The TTFT recording rule the project ships is the one the controller looks for, and a
target reads it only while it is there and fresh."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from scaler.bench.scale import RECORDING_GROUP
from scaler.core.signals import SignalStatus
from scaler.sources.prometheus import Answer, QueryOutcome, split_answers
from scaler.sources.prometheus.ttft import plan_ttft
from scaler.sources.promql import (
    POD_GROUP_REGEX,
    QueryKind,
    build_query_plan,
    pod_group,
    recorded_ttft_metric,
    recording_rule_expr,
)
from tests.support.fakeprom import snapshot, target

RULES = Path(__file__).resolve().parents[2] / "deploy" / "rules" / "vllm-scaler.rules.yaml"


def test_the_shipped_rule_records_what_the_controller_reads() -> None:
    doc = yaml.safe_load(RULES.read_text(encoding="utf-8"))
    [group] = [g for g in doc["groups"] if g["name"] == RECORDING_GROUP]
    assert group["interval"] == "30s"
    assert group["rules"] == [{"record": recorded_ttft_metric(60), "expr": recording_rule_expr(60)}]
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
