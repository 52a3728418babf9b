"""The virtual-time benchmark: determinism, the references reached by their own replay, the
lower bound under every row that serves, Little's law, reaction times."""

from __future__ import annotations

from dataclasses import replace

import pytest

from scaler.bench.bound import gpu_seconds_lower_bound
from scaler.bench.figures import figures_of_run, littles_law
from scaler.bench.hindsight import replay_schedule
from scaler.bench.report import as_json, format_table
from scaler.bench.runner import HINDSIGHT, BenchOptions, BenchResult, run_bench
from scaler.bench.simulate import TickContext, simulate
from scaler.sim.catalog import open_trace
from scaler.sim.engine import ReplicaModel
from scaler.sim.trace import Trace, TraceRequest

# Six busy minutes of the code trace: bursts that need several replicas.
WINDOW = {"start_seconds": 13 * 60.0, "duration_seconds": 6 * 60.0, "rate_scale": 1.25}
OPTIONS = BenchOptions(trace="code", **WINDOW)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def result() -> BenchResult:
    return run_bench(OPTIONS)


def _numbers(r: BenchResult) -> dict[str, object]:
    doc = as_json(r)
    doc.pop("elapsed_seconds")
    return doc


def test_same_inputs_same_numbers(result: BenchResult) -> None:
    again = run_bench(replace(OPTIONS, jobs=2))  # processes do not change the numbers
    assert _numbers(again) == _numbers(result)


@pytest.mark.parametrize(
    ("name", "load", "lead"),
    [
        pytest.param("hindsight-instant", 0.0, 0, id="instant"),
        pytest.param(HINDSIGHT, 120.0, 120, id="paying-model-load"),
    ],
)
def test_the_references_are_reached_by_their_own_replay(
    result: BenchResult, name: str, load: float, lead: int
) -> None:
    trace = open_trace("code", **WINDOW)  # type: ignore[arg-type]
    row = result.by_name(name)
    run = replay_schedule(
        trace,
        result.hindsight_replicas[name],
        model=ReplicaModel(model_load_seconds=load),
        lead_seconds=lead,
        name=name,
    )
    assert figures_of_run(run, 2.0) == row
    assert row.slo_request_share >= 0.99


def test_the_lower_bound_is_under_every_row_that_keeps_99_percent(result: BenchResult) -> None:
    trace = open_trace("code", **WINDOW)  # type: ignore[arg-type]
    bound = gpu_seconds_lower_bound(trace, ReplicaModel(), 2.0) / 3600
    assert result.lower_bound_gpu_hours == bound
    serving = [p for p in result.policies if p.slo_request_share >= 0.99]
    assert {"fixed", "hindsight-instant", HINDSIGHT} <= {p.name for p in serving}
    for p in serving:
        assert bound <= p.gpu_hours, p.name
    assert result.by_name("hindsight-instant").gpu_hours <= result.by_name(HINDSIGHT).gpu_hours


def test_the_report_states_routing_rejections_and_the_reference(result: BenchResult) -> None:
    doc = as_json(result)
    assert doc["routing"] == "random" and doc["reference"] == HINDSIGHT
    assert doc["rejected"] == 0 and all(p["rejected"] == 0 for p in doc["policies"])
    assert doc["summary"].startswith("read AzureLLMInferenceTrace_code.csv: ")
    ref = next(p for p in doc["policies"] if p["name"] == HINDSIGHT)
    assert ref["gpu_hours_vs_hindsight_load"] == 1.0
    table = format_table(result)
    assert table.splitlines()[0] == result.summary
    assert "routing random" in table and "lower bound" in table and " rej " in table
    assert "oracle" not in table and "oracle" not in str(doc)


def test_the_vllm_scaler_row_names_its_control_interval(result: BenchResult) -> None:
    top = result.max_replicas
    described = f"vllm-scaler, shipped default policy, max {top} (every row's), 15 s interval"
    assert described in format_table(result)
    slower = run_bench(replace(OPTIONS, duration_seconds=120.0, control_interval_seconds=30))
    top = slower.max_replicas
    described = f"vllm-scaler, shipped default policy, max {top} (every row's), 30 s interval"
    assert described in format_table(slower)
    assert as_json(slower)["policies"][0]["description"] == described


def test_vllm_scaler_cuts_nothing(result: BenchResult) -> None:
    assert result.by_name("vllm-scaler").cut == 0


def test_routing_reaches_every_row() -> None:
    gateway = run_bench(replace(OPTIONS, routing="least-request"))
    assert gateway.routing == "least-request" == as_json(gateway)["routing"]
    assert "routing least-request" in format_table(gateway)
    assert gateway.by_name("hindsight-instant").slo_request_share >= 0.99


def test_reaction_to_the_flash_step() -> None:
    flash = run_bench(
        BenchOptions(
            trace="synthetic:flash", start_seconds=360.0, duration_seconds=420.0, rate_scale=2.0
        )
    )
    assert flash.step_seconds == 240.0
    us = flash.by_name("vllm-scaler").reaction
    assert us is not None and us.first_write_seconds is not None
    # Within one control interval plus one scrape interval, then a model load.
    assert 0 < us.first_write_seconds <= 30
    assert us.first_ready_seconds == pytest.approx(us.first_write_seconds + 120.0, abs=1.0)
    load = flash.by_name(HINDSIGHT).reaction
    assert load is not None
    if len(set(flash.hindsight_replicas[HINDSIGHT])) > 1:
        # A schedule that pays model load writes a model load before the step ...
        assert load.first_write_seconds == -120.0
        assert load.first_ready_seconds == pytest.approx(0.0, abs=1.0)
    else:  # ... unless a constant fleet is cheaper for the window (no write at all)
        assert load.first_write_seconds is None
    fixed = flash.by_name("fixed").reaction
    assert fixed is not None and fixed.first_write_seconds is None
    assert "reaction to the load step at 240 s" in format_table(flash)


class _Fixed:
    """A controller that never changes the replica count."""

    name = "fixed"
    interval_seconds = 15

    def observe(self, ctx: TickContext) -> None:
        pass

    def decide(self, ctx: TickContext) -> int:
        return ctx.fleet.spec_replicas

    def close(self) -> None:
        pass


def test_littles_law_holds() -> None:
    trace = open_trace("conv", start_seconds=600.0, duration_seconds=300.0)
    run = simulate(trace, _Fixed(), model=ReplicaModel(), initial_replicas=2)
    assert all(r.done for r in run.requests)
    in_system, rate_times_wait = littles_law(run)
    assert in_system > 1.0
    assert in_system == pytest.approx(rate_times_wait, rel=0.03)


class _RateReader:
    """A controller that reads the emulated Prometheus' counter rates once, over a short and
    a long window, and never scales."""

    name = "reader"
    interval_seconds = 1
    rate_window_seconds = 1200.0  # the longest window it queries

    def __init__(self, at: float) -> None:
        self.at = at
        self.rates: dict[float, dict[str, tuple[float, float, float]]] = {}

    def observe(self, ctx: TickContext) -> None:
        pass

    def decide(self, ctx: TickContext) -> int:
        if ctx.now == self.at:
            self.rates = {w: ctx.tsdb.counter_rates(ctx.now, w) for w in (300.0, 1200.0)}
        return ctx.fleet.spec_replicas

    def close(self) -> None:
        pass


def test_a_rate_window_longer_than_the_default_retention_reads_the_whole_window() -> None:
    """The emulated Prometheus keeps samples as long as the controller's longest rate()
    window: at a steady load, a 20-minute rate equals a 5-minute one (when only 15 minutes
    were kept, the 20-minute rate read about three quarters of the load)."""
    steady = Trace(
        tuple(TraceRequest(float(t), 200, 20) for t in range(1600)), "steady", "steady", 1600.0
    )
    reader = _RateReader(at=1500.0)
    simulate(steady, reader, model=ReplicaModel(), initial_replicas=1)
    (short,) = reader.rates[300.0].values()
    (long,) = reader.rates[1200.0].values()
    assert short[0] == pytest.approx(1.0, rel=0.05)  # one request finished per second
    for a, b in zip(short, long, strict=True):
        assert b == pytest.approx(a, rel=0.05)
