"""A latency histogram with two names (ITL: ``vllm:inter_token_latency_seconds``, before vLLM
0.11 ``vllm:time_per_output_token_seconds``): each pod is read under one name, the current one
where it exports both, and the second round asks each name over exactly the pods read under
it, so no binary operator is applied to a rate (Prometheus gives a binary operation's series in
an arbitrary order, and a sum over them would differ in its last bits from one evaluation to
the next)."""

from __future__ import annotations

from scaler.config.vocabulary import SignalName
from scaler.core.signals import SignalStatus
from scaler.sources.prometheus import Answer, QueryOutcome, split_answers
from scaler.sources.prometheus.histograms import history_histogram_plan, plan_histogram
from scaler.sources.promql import QueryKind, build_query_plan
from tests.support.fakeprom import snapshot, target

ITL = SignalName.ITL_P95
NEW, OLD = "vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds"


def test_the_first_round_reads_each_pod_under_the_first_name_it_has() -> None:
    policy = target(signals={"itl_p95": {"enabled": True, "target_seconds": 0.1}})
    query = build_query_plan([policy], rate_window_seconds=60).queries[QueryKind.ITL_RATE]
    # each name's rate is taken once per pod across an HA pair's copies (case 35)
    one_copy = "max without (prometheus_replica, replica, __replica__)"
    assert (
        f"label_replace(sum by (namespace, pod) ({one_copy} "
        f'(rate({NEW}_count{{namespace="llm"}}[60s]))), '
        '"scaler_histogram", "classic", "", "") or on (namespace, pod) '
        f"label_replace(sum by (namespace, pod) ({one_copy} "
        f'(rate({OLD}_count{{namespace="llm"}}[60s]))), '
        '"scaler_histogram", "classic:1", "", "")'
    ) in query


def test_a_mixed_fleet_asks_each_name_over_its_own_pods_and_history_excludes_newer() -> None:
    policy = target(signals={"itl_p95": {"enabled": True, "target_seconds": 0.1}})
    plan = build_query_plan([policy], rate_window_seconds=60)
    # pod a: only the current name; pod b: only the old one; pod c: both (0.11)
    series = [
        ({"namespace": "llm", "pod": "a", "scaler_selector": "s0", "scaler_histogram": "classic"},
         5.0),
        ({"namespace": "llm", "pod": "b", "scaler_selector": "s0", "scaler_histogram": "classic:1"},
         5.0),
        ({"namespace": "llm", "pod": "c", "scaler_selector": "s0", "scaler_histogram": "classic"},
         5.0),
    ]  # fmt: skip
    outcome = QueryOutcome(QueryKind.ITL_RATE, SignalStatus.OK, series=len(series))
    split = split_answers({QueryKind.ITL_RATE: Answer(outcome, series)})
    snap = {policy.key: snapshot(["a", "b", "c"])}
    planned = plan_histogram(ITL.spec, [policy], snap, {}, plan, split)
    route = planned.routes[policy.key]
    assert (route.names, route.pods, route.request_rate) == ((0, 1), ("a", "b", "c"), 15.0)
    assert planned.query is not None
    assert f'rate({NEW}_bucket{{namespace="llm",pod=~"a|c"}}[60s])' in planned.query
    assert f'rate({OLD}_bucket{{namespace="llm",pod=~"b"}}[60s])' in planned.query
    assert " or on " not in planned.query and " unless " not in planned.query
    assert '"scaler_name", "1"' in planned.query  # the old name's parts are told apart
    history = history_histogram_plan(ITL.spec, [policy], rate_window_seconds=60).query
    assert history is not None and f"unless on (namespace, pod, le) rate({NEW}_bucket" in history


def test_the_parts_of_two_names_are_added_up_per_le() -> None:
    key = "llm/Deployment/vllm"
    rows = [
        ({"scaler_target": key, "le": "0.1"}, 1.0),
        ({"scaler_target": key, "le": "+Inf"}, 2.0),
        ({"scaler_target": key, "le": "0.1", "scaler_name": "1"}, 3.0),
        ({"scaler_target": key, "le": "+Inf", "scaler_name": "1"}, 4.0),
        ({"scaler_target": key, "le": "+Inf", "scaler_layout": "series"}, 1.0),
        ({"scaler_target": key, "le": "+Inf", "scaler_layout": "series", "scaler_name": "1"}, 2.0),
    ]
    outcome = QueryOutcome(QueryKind.ITL_BUCKETS, SignalStatus.OK, series=len(rows))
    split = split_answers({QueryKind.ITL_BUCKETS: Answer(outcome, rows)})
    series = split.buckets[QueryKind.ITL_BUCKETS]
    assert series.buckets[key] == {0.1: 4.0, float("inf"): 6.0}
    assert series.counts[key] == {float("inf"): 3.0}
    assert key not in series.faults
