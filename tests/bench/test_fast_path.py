"""The fast path for long replays (decode runs, arrivals that advance only their replica)
against the step-by-step, every-replica-at-every-arrival replay, on an hour of a trace."""

from __future__ import annotations

import pytest

from scaler.bench.controllers import FixedController, KpaController
from scaler.bench.figures import figures_of_run
from scaler.bench.kpa import KpaConfig
from scaler.bench.simulate import Controller, simulate
from scaler.sim.catalog import open_trace
from scaler.sim.engine import ReplicaModel


@pytest.mark.parametrize(
    "make",
    [
        pytest.param(lambda: FixedController(3), id="fixed"),
        pytest.param(lambda: KpaController(KpaConfig(6.0)), id="kpa"),
    ],
)
def test_the_fast_path_gives_the_figures_of_the_exact_one(make: object) -> None:
    trace = open_trace("conv")  # 58 minutes, 19,366 requests
    runs = []
    for quick in (True, False):
        controller: Controller = make()  # type: ignore[operator]
        run = simulate(trace, controller, model=ReplicaModel(), initial_replicas=2, fast=quick)
        runs.append(figures_of_run(run, 2.0, slo_itl_seconds=0.1))
    fast, exact = runs
    assert fast.slo_request_share == pytest.approx(exact.slo_request_share, abs=0.001)
    assert fast.itl_request_share == pytest.approx(exact.itl_request_share, abs=0.001)
    assert fast.ttft_p95 == pytest.approx(exact.ttft_p95, rel=0.01)
    # Pods change state at whole seconds on the fast path (at the arrival that saw it, else).
    assert fast.gpu_hours == pytest.approx(exact.gpu_hours, rel=0.005)
    assert fast.scale_events == exact.scale_events
    assert fast.requests == exact.requests == len(trace.requests)
