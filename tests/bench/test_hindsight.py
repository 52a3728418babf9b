"""Hindsight references: the search, its exact replay, model load paid, rejected requests."""

from __future__ import annotations

from dataclasses import replace

import pytest

from scaler.bench.bound import gpu_seconds_lower_bound
from scaler.bench.capacity import minute_need
from scaler.bench.figures import figures_of_run
from scaler.bench.hindsight import (
    ScheduleController,
    SearchResult,
    fill_gaps,
    pay_model_load,
    replay_schedule,
    search_schedule,
)
from scaler.sim.catalog import open_trace
from scaler.sim.engine import ReplicaModel
from scaler.sim.trace import Trace, TraceRequest

MODEL = ReplicaModel()
INSTANT = replace(MODEL, model_load_seconds=0.0)
# Code trace minutes 13-19 at 1.25x: a burst of ~800 requests in minute 14 after a quiet one.
WINDOW = {"start_seconds": 13 * 60.0, "duration_seconds": 6 * 60.0, "rate_scale": 1.25}


@pytest.fixture(scope="module")
def trace() -> Trace:
    return open_trace("code", **WINDOW)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def found(trace: Trace) -> SearchResult:
    """The instant-start search on the window (the most costly step: searched once)."""
    return search_schedule(trace, model=MODEL, slo_seconds=2.0)


@pytest.mark.parametrize(
    ("replicas", "gap", "expected"),
    [
        pytest.param((3, 1, 3), 1, (3, 3, 3), id="one-minute-dip-kept"),
        pytest.param((3, 1, 1, 3), 1, (3, 1, 1, 3), id="two-minute-dip-released"),
        pytest.param((3, 1, 1, 3), 2, (3, 3, 3, 3), id="two-minute-dip-kept-at-two"),
        pytest.param((1, 4, 2, 4, 1), 1, (1, 4, 4, 4, 1), id="levels-filled-separately"),
        pytest.param((2, 5, 1, 1, 1, 5), 2, (2, 5, 1, 1, 1, 5), id="three-minute-gap-released"),
        pytest.param((1, 3, 1), 5, (1, 3, 1), id="no-later-start-nothing-to-keep"),
        pytest.param((2, 1, 2), 0, (2, 1, 2), id="instant-start-fills-nothing"),
    ],
)
def test_fill_gaps_keeps_a_replica_when_reloading_costs_more(
    replicas: tuple[int, ...], gap: int, expected: tuple[int, ...]
) -> None:
    assert fill_gaps(replicas, gap) == expected


def test_pay_model_load_leads_by_the_load_and_fills_dips_shorter_than_it() -> None:
    assert pay_model_load((3, 1, 1, 3), 120.0) == ((3, 3, 3, 3), 120)
    assert pay_model_load((3, 1, 1, 3), 90.5) == ((3, 1, 1, 3), 91)
    assert pay_model_load((3, 1, 3), 90.5) == ((3, 3, 3), 91)


@pytest.mark.parametrize(
    ("second", "lead", "expected"),
    [
        pytest.param(0, 0, 2, id="first-minute"),
        pytest.param(59, 0, 2, id="end-of-first-minute"),
        pytest.param(60, 0, 1, id="drop-on-time"),
        pytest.param(119, 0, 1, id="no-lead"),
        pytest.param(59, 120, 5, id="lead-covers-minute-2"),
        pytest.param(119, 60, 5, id="lead-of-a-minute"),
        pytest.param(600, 0, 3, id="last-count-holds"),
    ],
)
def test_schedule_controller_writes_increases_a_lead_early(
    second: int, lead: int, expected: int
) -> None:
    controller = ScheduleController([2, 1, 5, 3], lead_seconds=lead, name="s")
    assert controller.spec_at(second) == expected


def test_the_search_keeps_99_percent_and_its_replay_gives_exactly_its_figures(
    trace: Trace, found: SearchResult
) -> None:
    assert len(found.replicas) == 6
    assert found.share >= 0.99
    assert max(found.replicas) >= 4  # the burst needs several replicas...
    assert found.replicas[0] <= 2  # ...the quiet minute before it does not
    run = replay_schedule(trace, found.replicas, model=INSTANT, name="hindsight-instant")
    figures = figures_of_run(run, 2.0)
    within = sum(1 for r in run.requests if r.ttft is not None and r.ttft <= 2.0)
    assert (within, figures.requests - within) == (found.hits, found.misses)
    assert figures.slo_request_share == found.share
    # The replay wrote exactly the schedule, one write per change.
    writes = [(t, b) for t, _, b in run.scale_events]
    changes = [
        (60.0 * m, n) for m, n in enumerate(found.replicas) if m and n != found.replicas[m - 1]
    ]
    assert writes == changes
    assert figures.gpu_hours >= gpu_seconds_lower_bound(trace, MODEL, 2.0) / 3600


def test_a_minute_gets_the_fewest_replicas_that_keep_99_percent() -> None:
    burst = open_trace("code", start_seconds=14 * 60.0, duration_seconds=60.0, rate_scale=1.25)
    n = minute_need(list(burst.requests), MODEL, 2.0)
    assert n >= 3

    def share(count: int) -> float:
        run = replay_schedule(burst, [count], model=INSTANT, name="one")
        return figures_of_run(run, 2.0).slo_request_share

    assert share(n) >= 0.99 > share(n - 1)


def test_paying_model_load_costs_the_loads_and_keeps_the_service(
    trace: Trace, found: SearchResult
) -> None:
    schedule, lead = pay_model_load(found.replicas, MODEL.model_load_seconds)
    instant = figures_of_run(replay_schedule(trace, found.replicas, model=INSTANT, name="i"), 2.0)
    run = replay_schedule(trace, schedule, model=MODEL, lead_seconds=lead, name="l")
    paying = figures_of_run(run, 2.0)
    assert paying.slo_request_share >= 0.99
    assert paying.gpu_hours > instant.gpu_hours
    # Every added replica was created a model load before its minute and Ready at it.
    added = [p for p in run.pods if p.created_at > 0]
    assert added
    for pod in added:
        assert pod.ready_at is not None
        assert pod.ready_at - pod.created_at == pytest.approx(120.0, abs=1.0)
        assert pod.ready_at % 60 == pytest.approx(0.0, abs=1.0)


def test_rejected_requests_change_neither_the_search_nor_the_replay(
    trace: Trace, found: SearchResult
) -> None:
    # One request in seven made longer than the 32,768-token context, plus the original ones.
    long = [
        TraceRequest(r.arrival_seconds, 40_000, r.output_tokens)
        for i, r in enumerate(trace.requests)
        if i % 7 == 0
    ]
    mixed = replace(
        trace,
        requests=tuple(sorted([*trace.requests, *long], key=lambda r: r.arrival_seconds)),
    )
    plain = found
    with_long = search_schedule(mixed, model=MODEL, slo_seconds=2.0)
    assert with_long == plain
    a = figures_of_run(replay_schedule(trace, plain.replicas, model=INSTANT, name="x"), 2.0)
    b = figures_of_run(replay_schedule(mixed, plain.replicas, model=INSTANT, name="x"), 2.0)
    assert (b.rejected, b.requests - a.requests) == (len(long), len(long))
    assert (b.slo_request_share, b.gpu_hours, b.ttft_p95) == (
        a.slo_request_share,
        a.gpu_hours,
        a.ttft_p95,
    )
    assert gpu_seconds_lower_bound(mixed, MODEL, 2.0) == gpu_seconds_lower_bound(trace, MODEL, 2.0)
