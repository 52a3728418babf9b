"""Default-selector targets share one per-pod group read by namespace; TTFT per namespace."""

from __future__ import annotations

from collections.abc import Callable

from scaler.config.vocabulary import SignalName
from scaler.core.signals import SignalStatus
from scaler.sources.prometheus import PrometheusSource
from scaler.sources.promql import QueryKind, build_query_plan
from tests.support.fakeprom import FakePrometheus, kv, per_pod, snapshot, target

SourceFactory = Callable[..., PrometheusSource]


def test_default_targets_share_one_group_read_by_namespace() -> None:
    a, b, c = target("a"), target("b"), target("c", namespace="other")
    custom = target("d", prometheus_matchers={"namespace": "llm", "model_name": "m"})
    plan = build_query_plan([a, b, c, custom], rate_window_seconds=60)
    # every default-selector target, whatever its namespace, is in one group read by namespace
    assert plan.selector_group == {a.key: "s0", b.key: "s0", c.key: "s0", custom.key: "s1"}
    assert plan.selectors["s0"] == 'namespace=~"llm|other"'
    assert plan.selectors["s1"] == 'model_name="m",namespace="llm"'
    assert plan.queries[QueryKind.WAITING].count("label_replace") == 2
    # TTFT: one expression for a and b (the target key taken from the pod name), c and d alone
    ttft = plan.queries[QueryKind.TTFT_QUANTILE]
    assert ttft.count("label_replace") == 3
    assert '"scaler_target", "llm/Deployment/$1", "pod", "(a|b)-[a-z0-9]+-[a-z0-9]+"' in ttft
    assert "sum by (le, scaler_target)" in ttft


async def test_grouped_series_are_split_per_target(
    fake_prom: FakePrometheus, make_source: SourceFactory
) -> None:
    a, b = target("a"), target("b")
    a_pods, b_pods = ["a-1x-p0", "a-1x-p1"], ["b-2y-p0"]
    waiting = {"a-1x-p0": "2", "a-1x-p1": "3", "b-2y-p0": "7", "a-1x-gone": "50", "b-2y-gone": "9"}
    fake_prom.set(
        waiting=per_pod(waiting),
        running=per_pod(dict.fromkeys(waiting, "1")),
        kv_cache=kv(dict.fromkeys(waiting, "0.5")),
    )
    result = await make_source().read([a, b], {a.key: snapshot(a_pods), b.key: snapshot(b_pods)})
    ra, rb = result.targets[a.key], result.targets[b.key]
    assert ra.signals[SignalName.QUEUE_DEPTH].value == 5.0
    assert ra.signals[SignalName.QUEUE_DEPTH].status is SignalStatus.OK
    assert rb.signals[SignalName.QUEUE_DEPTH].value == 7.0
    # each gone pod is the stale series of its own target only
    assert {d.pod for d in ra.dropped} == {"a-1x-gone"}
    assert {d.pod for d in rb.dropped} == {"b-2y-gone"}
    assert ra.series_found[QueryKind.WAITING] == 3 and rb.series_found[QueryKind.WAITING] == 2
    assert result.queries_sent == 6
