"""The benchmark's sawtooth figure, the figures of a part of the trace window, and the reactive
reference's schedule."""

from __future__ import annotations

import pytest

from scaler.bench.figures import SAWTOOTH_SECONDS, sawtooth, window_figures
from scaler.bench.runner import reactive_schedule
from scaler.bench.simulate import FleetSample, PodRecord, RunRecord
from scaler.sim.engine import SimRequest


def _run(
    events: list[tuple[float, int, int]],
    arrivals_per_second: list[int],
    *,
    requests: list[SimRequest] | None = None,
    pods: list[PodRecord] | None = None,
) -> RunRecord:
    samples = [
        FleetSample(float(t), a, 1, 1, 0, 0, 0, 0) for t, a in enumerate(arrivals_per_second)
    ]
    return RunRecord(
        "p", float(len(samples)), requests or [], pods or [], samples, scale_events=events
    )


@pytest.mark.parametrize(
    ("events", "rate_after", "teeth"),
    [
        pytest.param([(600.0, 5, 4), (780.0, 4, 5)], 2, 1, id="up-3-min-after-down-steady"),
        pytest.param([(600.0, 5, 4), (780.0, 4, 5)], 4, 0, id="up-after-the-load-doubled"),
        pytest.param([(600.0, 5, 4), (600.0 + SAWTOOTH_SECONDS + 1, 4, 5)], 2, 0,
                     id="up-more-than-5-min-later"),
        pytest.param([(600.0, 5, 4), (700.0, 4, 3), (800.0, 3, 5), (850.0, 5, 6)], 2, 2,
                     id="each-scale-up-counts-once"),
        pytest.param([(600.0, 4, 5), (700.0, 5, 6)], 2, 0, id="no-scale-down-no-tooth"),
    ],
)  # fmt: skip
def test_sawtooth(events: list[tuple[float, int, int]], rate_after: int, teeth: int) -> None:
    """Scale-ups within 5 minutes after a scale-down while the arrival rate has not risen by
    more than a quarter count as teeth."""
    arrivals = [2] * 700 + [rate_after] * 600
    assert sawtooth(_run(events, arrivals)) == teeth


def test_window_figures_count_arrivals_and_pod_time_inside_the_window() -> None:
    """A half's share is over the accepted requests that arrived in it (rejected ones left
    out); its GPU-hours are the pods' time inside it."""
    reqs = [
        SimRequest(0, 10.0, 100, 10, first_token_at=10.5),
        SimRequest(1, 20.0, 100, 10, first_token_at=25.0),  # 5 s: a miss
        SimRequest(2, 70.0, 100, 10, first_token_at=70.2),
        SimRequest(3, 80.0, 99_999, 10, rejected=True),
    ]
    pods = [PodRecord(0.0, 0.0, None), PodRecord(30.0, 60.0, 90.0)]
    run = _run([], [0] * 120, requests=reqs, pods=pods)
    first = window_figures(run, 2.0, 0.0, 60.0)
    second = window_figures(run, 2.0, 60.0, 120.0)
    assert (first.requests, first.slo_request_share) == (2, 0.5)
    assert (second.requests, second.slo_request_share) == (1, 1.0)
    assert first.gpu_hours == pytest.approx((60 + 30) / 3600)
    assert second.gpu_hours == pytest.approx((60 + 30) / 3600)


def test_the_second_half_counts_the_arrival_at_the_very_end() -> None:
    """The last arrival defines a file's window: the halves together hold every accepted
    request."""
    from scaler.bench.figures import figures_of_run

    reqs = [
        SimRequest(0, 0.0, 100, 10, first_token_at=0.5),
        SimRequest(1, 60.0, 100, 10, first_token_at=60.5),
        SimRequest(2, 120.0, 100, 10, first_token_at=120.5),
    ]
    run = _run([], [0] * 120, requests=reqs, pods=[PodRecord(0.0, 0.0, None)])
    halves = figures_of_run(run, 2.0).halves
    assert [h.requests for h in halves] == [1, 2]
    assert (halves[1].start_seconds, halves[1].end_seconds) == (60.0, 120.0)


def test_the_reactive_reference_holds_each_need_for_five_minutes() -> None:
    """Each minute: the largest instant-start need of it and the four minutes before it."""
    assert reactive_schedule((1, 1, 6, 1, 1, 1, 1, 1, 2)) == (1, 1, 6, 6, 6, 6, 6, 1, 2)
    assert reactive_schedule((3,), hold_minutes=5) == (3,)
