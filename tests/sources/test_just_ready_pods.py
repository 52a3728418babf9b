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
from tests.support.fakeprom import FakePrometheus, per_pod, snapshot
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
