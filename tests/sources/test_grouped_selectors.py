"""Default-selector targets share one per-pod group read by namespace; each keeps its own pods."""

from __future__ import annotations

from collections.abc import Callable

from scaler.config.vocabulary import SignalName
from scaler.core.signals import SignalStatus
from scaler.sources.prometheus import DropReason, PrometheusSource
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
    # no pod-name pattern anywhere: the pods are told apart by their exact names
    assert all("[a-z0-9]+" not in q for q in plan.queries.values())


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
    source = make_source()
    # a cycle before, each listed its gone pod (deleted since, its series still returned)
    await source.read(
        [a, b], {a.key: snapshot([*a_pods, "a-1x-gone"]), b.key: snapshot([*b_pods, "b-2y-gone"])}
    )
    result = await source.read([a, b], {a.key: snapshot(a_pods), b.key: snapshot(b_pods)})
    ra, rb = result.targets[a.key], result.targets[b.key]
    assert ra.signals[SignalName.QUEUE_DEPTH].value == 5.0
    assert ra.signals[SignalName.QUEUE_DEPTH].status is SignalStatus.OK
    assert rb.signals[SignalName.QUEUE_DEPTH].value == 7.0
    # each gone pod is the stale series of its own target only
    assert {d.pod for d in ra.dropped} == {"a-1x-gone"}
    assert {d.pod for d in rb.dropped} == {"b-2y-gone"}
    assert ra.series_found[QueryKind.WAITING] == 3 and rb.series_found[QueryKind.WAITING] == 2
    assert {(d.pod, d.reason) for d in ra.dropped} == {("a-1x-gone", DropReason.GONE)}
    assert result.queries_sent == 5  # no TTFT request rate: no second round
