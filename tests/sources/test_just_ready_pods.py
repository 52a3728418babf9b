"""A pod that has just turned Ready may not have been scraped yet: Prometheus scrapes each
pod once per scrape interval, so for up to the sample-age limit (three intervals, at least
45 s) after Ready its series can be missing. Its queue is then unknown, not a fault: the
signal is read on the pods scraped and stays usable (a partial reading would block the next
scale-down and warn on every scale-up). Past that limit a ready pod without series is a
fault again (``partial``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import pytest

from scaler.config.vocabulary import SignalName
from scaler.core.observation import WorkloadSnapshot
from scaler.core.signals import SignalStatus
from scaler.sources.prometheus import PrometheusSource
from scaler.sources.prometheus.readings import sample_age_limit_seconds
from tests.support.fakeprom import FakePrometheus, per_pod, rates, snapshot
from tests.support.fakeprom import target as make_target

KEY = "llm/Deployment/vllm"
#: the limit with the scrape interval not found yet (30 s assumed): 90 s
LIMIT = sample_age_limit_seconds(None)
SourceFactory = Callable[..., PrometheusSource]


def _fleet(new_pod_ready_seconds: float | None) -> WorkloadSnapshot:
    """pod-0 Ready for an hour and scraped; pod-1 Ready for ``new_pod_ready_seconds``."""
    snap = snapshot(["pod-0", "pod-1"])
    pods = tuple(
        replace(p, ready_seconds=new_pod_ready_seconds if p.name == "pod-1" else 3600.0)
        for p in snap.pods
    )
    return replace(snap, pods=pods)


@pytest.mark.parametrize(
    ("ready_seconds", "status", "missing"),
    [
        pytest.param(5.0, SignalStatus.OK, False, id="ready 5 s: not scraped yet"),
        pytest.param(LIMIT - 1, SignalStatus.OK, False, id="ready just under the limit"),
        pytest.param(LIMIT + 1, SignalStatus.PARTIAL, True, id="ready past the limit: a fault"),
        pytest.param(None, SignalStatus.PARTIAL, True, id="ready time unknown: a fault"),
    ],
)
async def test_a_pod_ready_for_less_than_the_sample_age_limit_is_not_missing(
    fake_prom: FakePrometheus,
    make_source: SourceFactory,
    ready_seconds: float | None,
    status: SignalStatus,
    missing: bool,
) -> None:
    assert LIMIT == 90.0
    fake_prom.set(
        running=per_pod({"pod-0": "3"}),
        waiting=per_pod({"pod-0": "12"}),
    )
    result = await make_source().read([make_target()], {KEY: _fleet(ready_seconds)})
    readings = result.targets[KEY]
    queue = readings.signals[SignalName.QUEUE_DEPTH]
    assert queue.status is status, queue
    assert queue.value == 12.0  # the scraped pod's queue; the new pod's is not known yet
    assert (SignalName.QUEUE_DEPTH in readings.pods_missing) is missing
    if status is SignalStatus.OK:
        assert "not scraped yet: pod-1" in queue.detail


@pytest.mark.parametrize(
    ("ready_seconds", "status"),
    [
        pytest.param(5.0, SignalStatus.OK, id="ready 5 s: no rate yet"),
        # rate() needs a second sample: one scrape interval (30 s assumed) past the limit
        pytest.param(LIMIT + 29, SignalStatus.OK, id="ready one interval past the limit"),
        pytest.param(LIMIT + 31, SignalStatus.PARTIAL, id="past both: a fault"),
        pytest.param(None, SignalStatus.PARTIAL, id="ready time unknown: a fault"),
    ],
)
async def test_a_pod_ready_too_recently_for_rates_keeps_the_throughput_usable(
    fake_prom: FakePrometheus,
    make_source: SourceFactory,
    ready_seconds: float | None,
    status: SignalStatus,
) -> None:
    """The capacity signal's throughput: the new pod has no ``rate()`` yet. It is named in
    the detail and stays among the missing (so nothing is learned from the window), but the
    reading is not ``partial`` (which warned after every scale-up in the demo)."""
    fake_prom.set(
        running=per_pod({"pod-0": "3"}),
        throughput=rates({"pod-0": ("1.5", "1200", "300")}),
    )
    result = await make_source().read([make_target()], {KEY: _fleet(ready_seconds)})
    tp = result.targets[KEY].throughput
    assert tp.status is status, tp
    assert set(tp.pods) == {"pod-0"} and tp.missing == frozenset({"pod-1"})
    expected = (
        "Ready too recently for rates: pod-1"
        if status is SignalStatus.OK
        else ("1 of 2 ready pods have no rates: pod-1")
    )
    assert expected in tp.detail
