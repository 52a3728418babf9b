"""The throughput query's per-pod rates on the readings, and series faults that stay with
their own pod or target (parsing, splitting, the source over HTTP)."""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest

from scaler.config.vocabulary import SignalName
from scaler.core.signals import SignalStatus
from scaler.sources.prometheus import (
    Answer,
    BadSeries,
    PodRates,
    PrometheusSource,
    QueryOutcome,
    split_answers,
)
from scaler.sources.prometheus.answers import BadResponse, parse_vector
from scaler.sources.promql import POD_GROUP_LABEL, SELECTOR_LABEL, TARGET_LABEL, QueryKind
from tests.support.fakeprom import (
    TS,
    FakePrometheus,
    Histograms,
    R,
    histograms,
    kv,
    per_pod,
    rates,
    sample,
    snapshot,
)
from tests.support.fakeprom import target as make_target

KEY = "llm/Deployment/vllm"
Q = SignalName.QUEUE_DEPTH
SourceFactory = Callable[..., PrometheusSource]


def _vector(*items: object) -> dict[str, object]:
    return {"status": "success", "data": {"resultType": "vector", "result": list(items)}}


def test_a_malformed_series_is_kept_aside_with_the_labels_that_can_be_read() -> None:
    series, bad, _ = parse_vector(
        _vector(
            {"metric": {"pod": "a"}, "value": [TS, "1"]},
            {"metric": {"pod": "b", "zone": 3}, "value": [TS, "2"]},
            {"metric": {"pod": "c"}, "value": [TS, "lots"]},
            {"metric": {"pod": "d"}, "value": [TS]},
            {"metric": ["pod", "e"], "value": [TS, "1"]},
            "not an object",
        )
    )
    assert series == [({"pod": "a"}, 1.0)]
    assert bad == [
        BadSeries({"pod": "b"}, "result[1].metric is not a label map"),
        BadSeries({"pod": "c"}, "result[2]: sample value 'lots' is not a number"),
        BadSeries({"pod": "d"}, 'result[3].value is not [timestamp, "value"]'),
        BadSeries({}, "result[4].metric is not a label map"),
        BadSeries({}, "result[5] is not an object"),
    ]


@pytest.mark.parametrize(
    "body",
    [
        pytest.param({"status": "success"}, id="no data"),
        pytest.param({"status": "success", "data": {"resultType": "matrix", "result": []}},
                     id="a matrix"),
        pytest.param({"status": "success", "data": {"resultType": "vector", "result": 3}},
                     id="result not a list"),
    ],
)  # fmt: skip
def test_an_answer_that_is_not_a_vector_is_still_bad_as_a_whole(body: object) -> None:
    with pytest.raises(BadResponse):
        parse_vector(body)


def _answer(kind: QueryKind, *series: tuple[dict[str, str], float]) -> Answer:
    return Answer(QueryOutcome(kind, SignalStatus.OK, series=len(series)), list(series))


def test_split_keeps_faults_with_their_pod_and_leaves_out_series_of_no_group() -> None:
    waiting = _answer(
        QueryKind.WAITING,
        ({SELECTOR_LABEL: "s0", "namespace": "llm", "pod": "a"}, 1.0),
        ({SELECTOR_LABEL: "s0", "namespace": "llm", "pod": "a"}, 2.0),
        ({SELECTOR_LABEL: "s0", "namespace": "llm", "pod": "b"}, 3.0),
        ({"namespace": "llm", "pod": "c"}, 4.0),
        ({"pod": "d"}, 5.0),
    )
    split = split_answers({QueryKind.WAITING: waiting})
    grp = split.pod_groups[QueryKind.WAITING]["s0"]
    assert grp.by_pod[("llm", "b")] == {"waiting": 3.0}
    fault = grp.fault("llm", "a")
    assert fault is not None and fault.status is SignalStatus.DUPLICATE_SERIES
    assert grp.fault("llm", "b") is None
    lost = split.unattributed[QueryKind.WAITING]
    assert lost.count == 2 and "'pod': 'c'" in lost.first
    assert split.answers[QueryKind.WAITING].outcome.ok  # not failed as a whole


def test_split_keeps_faults_with_their_target() -> None:
    def bucket(key: str, le: str) -> dict[str, str]:
        return {TARGET_LABEL: key, "le": le}

    group = {"namespace": "llm", POD_GROUP_LABEL: "vllm-5d8f"}
    buckets = Answer(
        QueryOutcome(QueryKind.TTFT_BUCKETS, SignalStatus.OK),
        [
            (bucket("a", "1.0"), 1.0),
            (bucket("a", "+Inf"), 2.0),
            (bucket("b", "1.0"), 2.0),
            (bucket("b", "1.0"), 3.0),  # b's bucket twice
            (bucket("d", "soon"), 3.0),  # not a bound
            ({**group, "le": "+Inf"}, 4.0),
            ({**group, "le": "+Inf"}, 5.0),  # a recorded group's bucket twice
            ({"le": "+Inf"}, 6.0),  # nobody's
        ],
        (BadSeries(bucket("c", "+Inf"), "result[8]: sample value 'x' is not a number"),),
    )
    split = split_answers({QueryKind.TTFT_BUCKETS: buckets})
    assert split.ttft is not None
    assert split.ttft.buckets["a"] == {1.0: 1.0, math.inf: 2.0}
    assert {k: f.status for k, f in split.ttft.faults.items()} == {
        "b": SignalStatus.DUPLICATE_SERIES,
        "c": SignalStatus.BAD_RESPONSE,
        "d": SignalStatus.BAD_RESPONSE,
    }
    assert {g: f.status for g, f in split.ttft.group_faults.items()} == {
        ("llm", "vllm-5d8f"): SignalStatus.DUPLICATE_SERIES
    }
    assert split.unattributed[QueryKind.TTFT_BUCKETS].count == 1
    assert split.answers[QueryKind.TTFT_BUCKETS].outcome.ok  # not failed as a whole


async def test_per_pod_rates_are_on_the_readings(
    fake_prom: FakePrometheus, make_source: SourceFactory
) -> None:
    fake_prom.set(
        running=per_pod({"pod-0": "3", "pod-1": "4"}),
        throughput=rates({"pod-0": ("1.5", "1200", "300"), "pod-1": ("0.5", "400", "100")}),
    )
    result = await make_source().read([make_target()], {KEY: snapshot(["pod-0", "pod-1"])})
    tp = result.targets[KEY].throughput
    assert tp.status is SignalStatus.OK and tp.missing == frozenset()
    assert tp.pods == {
        "pod-0": PodRates(1.5, 1200.0, 300.0),
        "pod-1": PodRates(0.5, 400.0, 100.0),
    }
    assert tp.total == PodRates(2.0, 1600.0, 400.0)
    assert tp.pods["pod-0"].tokens_per_second == 1500.0


@pytest.mark.parametrize(
    ("throughput", "status", "pods", "detail"),
    [
        pytest.param(rates({"pod-0": "1"}), SignalStatus.PARTIAL, {"pod-0"},
                     "1 of 2 ready pods have no rates: pod-1", id="a pod ready for one scrape"),
        pytest.param(R(), SignalStatus.EMPTY, set(), "started less than two scrapes ago",
                     id="no rates for any pod yet"),
        pytest.param(rates({"pod-0": "1", "pod-1": ("NaN", "1", "1")}), SignalStatus.NAN,
                     {"pod-0"}, "pod pod-1: vllm:request_success_total rate nan",
                     id="a NaN rate"),
        pytest.param(
            R(*rates({"pod-0": "1", "pod-1": "2"})["data"]["result"],
              sample("pod-1", "3", scaler_metric="vllm:prompt_tokens_total")),
            SignalStatus.DUPLICATE_SERIES, {"pod-0"}, "pod pod-1: duplicate series",
            id="a duplicated counter",
        ),
    ],
)  # fmt: skip
async def test_throughput_names_what_is_wrong_per_pod(
    fake_prom: FakePrometheus,
    make_source: SourceFactory,
    throughput: dict[str, object],
    status: SignalStatus,
    pods: set[str],
    detail: str,
) -> None:
    fake_prom.set(running=per_pod({"pod-0": "3", "pod-1": "4"}), throughput=throughput)
    result = await make_source().read([make_target()], {KEY: snapshot(["pod-0", "pod-1"])})
    tp = result.targets[KEY].throughput
    assert (tp.status, set(tp.pods)) == (status, pods)
    assert detail in tp.detail
    assert all(math.isfinite(r.requests_per_second) for r in tp.pods.values())


async def test_a_series_that_names_no_group_is_left_out_and_reported(
    fake_prom: FakePrometheus, make_source: SourceFactory
) -> None:
    """A series without the selector tag is nobody's: the target's pods read as usual."""
    stray = sample("pod-0", "500", scaler_target="someone")  # the fake tags only bare series
    fake_prom.set(
        waiting=R(*per_pod({"pod-0": "3", "pod-1": "4"})["data"]["result"], stray),
        running=per_pod({"pod-0": "1", "pod-1": "1"}),
        kv_cache=kv({"pod-0": "0.1", "pod-1": "0.1"}),
    )
    result = await make_source().read([make_target()], {KEY: snapshot(["pod-0", "pod-1"])})
    r = result.readings(KEY)[Q]
    assert (r.status, r.value) == (SignalStatus.OK, 7.0)
    lost = result.unattributed[QueryKind.WAITING]
    assert lost.count == 1 and "someone" in lost.first
    assert result.queries[QueryKind.WAITING].ok


async def test_a_broken_recorded_pod_group_touches_only_the_target_that_reads_it(
    fake_prom: FakePrometheus, make_source: SourceFactory
) -> None:
    """Two targets read their TTFT from the recording rule; one bucket of one target's pod
    group comes twice: that target is ``duplicate_series``, the other reads its quantile."""
    a, b = make_target("vllm"), make_target("beta")
    pods = {a.key: ["vllm-5d8f-p0", "vllm-5d8f-p1"], b.key: ["beta-7c9d-p0", "beta-7c9d-p1"]}
    every = [p for ps in pods.values() for p in ps]

    def duplicate(round_: str, result: list[dict[str, object]]) -> None:
        if round_ == "ttft_buckets":
            labels = {"namespace": "llm", "scaler_pod_group": "beta-7c9d", "le": "1.0"}
            result.append({"metric": labels, "value": [TS, "9"]})

    h = Histograms({p: {"1.0": 0.95, "+Inf": 1.0} for p in every}, recorded=True, edit=duplicate)
    fake_prom.set(running=per_pod(dict.fromkeys(every, "1")), **histograms(h))
    result = await make_source().read([a, b], {k: snapshot(ps) for k, ps in pods.items()})
    ra, rb = result.targets[a.key], result.targets[b.key]
    assert ra.ttft_query == rb.ttft_query == "recorded"
    ok, broken = ra.signals[SignalName.TTFT_P95], rb.signals[SignalName.TTFT_P95]
    assert (ok.status, ok.value) == (SignalStatus.OK, pytest.approx(1.0))
    assert broken.status is SignalStatus.DUPLICATE_SERIES and broken.value is None
    assert "beta-7c9d" in broken.detail
    assert result.queries[QueryKind.TTFT_BUCKETS].ok  # not failed as a whole
