"""The dependent queries sent with the first round, as the previous read planned them.

The throughput query depends on the running answer (where the recorded rates are fresh) and
the TTFT query on the request rates. A source that read the same per-pod plan before sends
both with the first round and reads their answers when this read's first answers plan the
same; otherwise it sends them again as planned now, and reads exactly what a source without
a previous read reads. Each test compares with such a fresh source over the same answers.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import pytest

from scaler.config.vocabulary import SignalName
from scaler.core.signals import SignalStatus
from scaler.sources.prometheus import PrometheusSource, SourceResult
from scaler.sources.promql import (
    RECORDED_LABEL,
    SELECTOR_LABEL,
    THROUGHPUT_METRICS,
    QueryKind,
    recorded_rate_metric,
)
from tests.support.fakeprom import (
    FakePrometheus,
    Histograms,
    R,
    Reply,
    histograms,
    rates,
    sample,
    snapshot,
    target,
)

SourceFactory = Callable[..., PrometheusSource]
TTFT = SignalName.TTFT_P95
PODS = {"vllm": ["vllm-5d8f-p0", "vllm-5d8f-p1"], "beta": ["beta-7c9d-p0", "beta-7c9d-p1"]}
EVERY = [p for ps in PODS.values() for p in ps]


def _running(throughput_age: str | None) -> dict[str, Any]:
    """Every pod running one request and, unless None, the recorded throughput's age in
    namespace llm (seconds; older than the 60 s window reads raw)."""
    series = [sample(p, "1", namespace="llm") for p in EVERY]
    if throughput_age is not None:
        labels = {"namespace": "llm", SELECTOR_LABEL: "s0"}
        series += [
            sample(None, throughput_age, **labels, **{RECORDED_LABEL: c})
            for c in THROUGHPUT_METRICS
        ]
    return R(*series)


def _answers(
    fake: FakePrometheus, *, recorded: bool = True, throughput_age: str | None = "5"
) -> None:
    # p0 answers at 0.5 s, p1 at 2 s: a target's p95 tells which pods were summed
    buckets = {p: {"1.0": 1.0 if p.endswith("p0") else 0.0, "4.0": 1.0, "+Inf": 1.0} for p in EVERY}
    h = Histograms(buckets, recorded=recorded)
    fake.set(
        running=_running(throughput_age),
        throughput=rates(dict.fromkeys(EVERY, ("1", "10", "20"))),
        **histograms(h),
    )


async def _read(source: PrometheusSource, names: list[str]) -> SourceResult:
    targets = [target(n) for n in names]
    return await source.read(targets, {t.key: snapshot(PODS[t.workload.name]) for t in targets})


def _sent(fake: FakePrometheus) -> Mapping[QueryKind, list[str]]:
    out: dict[QueryKind, list[str]] = {}
    for kind, r in zip(fake.kinds_asked(), fake.requests, strict=True):
        out.setdefault(kind, []).append(r["query"])
    return out


def _same_readings(a: SourceResult, b: SourceResult) -> None:
    """TTFT, throughput and how each was read are equal target by target (the per-pod
    signals also depend on the stall detector's memory, which a fresh source lacks)."""
    assert a.targets.keys() == b.targets.keys()
    for key, ra in a.targets.items():
        rb = b.targets[key]
        assert ra.signals[TTFT] == rb.signals[TTFT], key
        assert (ra.ttft_query, ra.ttft_metric) == (rb.ttft_query, rb.ttft_metric), key
        assert ra.throughput == rb.throughput, key
    assert a.throughput_recorded_namespaces == b.throughput_recorded_namespaces


async def test_the_steady_state_sends_six_queries_at_once_and_reads_the_same(
    fake_prom: FakePrometheus, make_source: SourceFactory
) -> None:
    _answers(fake_prom)
    source = make_source()
    first = await _read(source, ["vllm", "beta"])
    planned = _sent(fake_prom)
    fake_prom.requests.clear()
    second = await _read(source, ["vllm", "beta"])
    # the same six queries, the dependent two among them, each sent once
    assert _sent(fake_prom) == planned
    assert (second.queries_sent, second.unused_queries) == (6, 0)
    _same_readings(second, first)
    ttft = second.targets[target("vllm").key].signals[TTFT]
    assert (ttft.status, ttft.value, second.targets[target("vllm").key].ttft_query) == (
        SignalStatus.OK,
        pytest.approx(1.0 + 3.0 * 0.9 / 1.0),  # rank 1.9 of 2: in the (1, 4] bucket
        "recorded",
    )
    assert second.throughput_recorded_namespaces == 1
    assert recorded_rate_metric(THROUGHPUT_METRICS[0], 60) in planned[QueryKind.THROUGHPUT][0]


async def test_the_early_queries_go_with_the_first_round(
    fake_prom: FakePrometheus, make_source: SourceFactory
) -> None:
    """The request rates never answer: the TTFT query was sent all the same (with the first
    round), its answer is not read, and TTFT reads the request rates' timeout, as before."""
    _answers(fake_prom)
    source = make_source(timeout_seconds=0.5)
    await _read(source, ["vllm"])
    fake_prom.requests.clear()
    fake_prom.answers[QueryKind.TTFT_RATE] = Reply(R(), stall=True)
    result = await _read(source, ["vllm"])
    assert QueryKind.TTFT_BUCKETS in fake_prom.kinds_asked()
    assert QueryKind.TTFT_BUCKETS not in result.queries
    assert (result.queries_sent, result.unused_queries) == (6, 1)
    ttft = result.targets[target("vllm").key].signals[TTFT]
    assert ttft.status is SignalStatus.TIMEOUT and "ttft_rate query" in ttft.detail


async def test_a_target_that_appears_is_read_again_as_planned_now(
    fake_prom: FakePrometheus, make_source: SourceFactory
) -> None:
    _answers(fake_prom, recorded=False)  # raw: each target's own pods by name
    source = make_source()
    await _read(source, ["vllm"])
    fake_prom.requests.clear()
    result = await _read(source, ["vllm", "beta"])
    sent = _sent(fake_prom)[QueryKind.TTFT_BUCKETS]
    assert len(sent) == 2 and "beta" not in sent[0] and "beta" in sent[1]
    assert result.queries[QueryKind.TTFT_BUCKETS].query == sent[1]
    assert (result.queries_sent, result.unused_queries) == (7, 1)
    _same_readings(result, await _read(make_source(), ["vllm", "beta"]))


async def test_a_target_that_disappears_reads_the_early_answer(
    fake_prom: FakePrometheus, make_source: SourceFactory
) -> None:
    """The early TTFT query asked for both targets: it covers the one left, whose series are
    the same in it; the other's are never looked up."""
    _answers(fake_prom, recorded=False)
    source = make_source()
    await _read(source, ["vllm", "beta"])
    fake_prom.requests.clear()
    result = await _read(source, ["vllm"])
    sent = _sent(fake_prom)[QueryKind.TTFT_BUCKETS]
    assert len(sent) == 1 and "beta" in sent[0]
    assert (result.queries_sent, result.unused_queries) == (6, 0)
    _same_readings(result, await _read(make_source(), ["vllm"]))
    assert result.targets[target("vllm").key].signals[TTFT].status is SignalStatus.OK


@pytest.mark.parametrize("stale", ["ttft", "throughput", "both"])
async def test_a_recording_that_goes_stale_between_reads_falls_back_to_raw_as_before(
    fake_prom: FakePrometheus, make_source: SourceFactory, stale: str
) -> None:
    _answers(fake_prom)
    source = make_source()
    before = await _read(source, ["vllm", "beta"])
    assert before.throughput_recorded_namespaces == 1
    assert {r.ttft_query for r in before.targets.values()} == {"recorded"}
    fake_prom.requests.clear()
    _answers(
        fake_prom,
        recorded=stale == "throughput",
        throughput_age="75" if stale != "ttft" else "5",  # older than the 60 s window
    )
    result = await _read(source, ["vllm", "beta"])
    sent = _sent(fake_prom)
    again = {QueryKind.TTFT_BUCKETS} if stale == "ttft" else {QueryKind.THROUGHPUT}
    if stale == "both":
        again |= {QueryKind.TTFT_BUCKETS}
    assert {k for k, qs in sent.items() if len(qs) == 2} == again
    assert (result.queries_sent, result.unused_queries) == (5 + 1 + len(again), len(again))
    for kind in again:  # the answer read is the one planned now: raw
        assert result.queries[kind].query == sent[kind][1]
        assert ":rate1m" not in sent[kind][1]
    fresh = await _read(make_source(), ["vllm", "beta"])
    _same_readings(result, fresh)
    assert {r.ttft_query for r in result.targets.values()} == (
        {"raw"} if stale != "throughput" else {"recorded"}
    )
    assert result.throughput_recorded_namespaces == (1 if stale == "ttft" else 0)
