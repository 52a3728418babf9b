"""The benchmark's hindsight rows, on every routing seed: the cheapest constant fleet, the
instant-start schedule, the optimal load-paying schedule (the yardstick,
:mod:`scaler.bench.optimal`) and the best reactive schedule.

Every row is found once, on the trace as a whole, and replayed on each routing seed; the
constant fleet and the yardstick are chosen on the mean share over the seeds, so a row is not
one lucky routing. The share they keep is the share of accepted requests within both SLOs
(TTFT and ITL).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

from scaler.bench.figures import PolicyFigures, figures_of_run
from scaler.bench.hindsight import SearchResult, replay_schedule, search_schedule
from scaler.bench.optimal import (
    Evaluation,
    Evaluator,
    OptimalResult,
    budget_for,
    optimal_schedule,
)
from scaler.bench.simulate import RunRecord
from scaler.sim.engine import ReplicaModel
from scaler.sim.routing import Routing
from scaler.sim.trace import Trace

__all__ = [
    "FIXED",
    "HINDSIGHT",
    "INSTANT",
    "REACTIVE",
    "REACTIVE_HOLD_MINUTES",
    "REFERENCE_SHARE",
    "ReferenceSetup",
    "References",
    "Yardstick",
    "cheapest_constant",
    "find_yardstick",
    "reactive_schedule",
    "run_references",
]

#: The share of accepted requests within both SLOs the references keep.
REFERENCE_SHARE = 0.99
#: Row names.
FIXED = "fixed"
INSTANT = "hindsight-instant"
HINDSIGHT = "hindsight-load"
REACTIVE = "hindsight-reactive"
#: The scale-down window the reactive reference keeps replicas through (HPA's default), minutes.
REACTIVE_HOLD_MINUTES = 5
_MINUTE = 60


def reactive_schedule(
    instant: Sequence[int], hold_minutes: int = REACTIVE_HOLD_MINUTES
) -> tuple[int, ...]:
    """The reactive reference: each minute the largest instant-start need of that minute and
    the ``hold_minutes - 1`` before it.

    Replayed with no lead, it is a policy that knows the exact need of each minute at its start
    (before any of its requests arrive), asks for it at once, gets the added replicas a model
    load later, and keeps them through a scale-down window. No policy that reacts to load it
    has seen does better; what it misses, only a forecast of load not seen yet could serve.
    """
    return tuple(max(instant[max(0, m - hold_minutes + 1) : m + 1]) for m in range(len(instant)))


@dataclass(frozen=True, slots=True)
class ReferenceSetup:
    """What the references are computed with.

    Attributes:
        trace: the arrivals.
        model: the replica model (its model load is the lead).
        slo_seconds, slo_itl_seconds: the SLOs.
        routing: how requests reach the replicas.
        seeds: the routing seeds.
        max_replicas: the bench's one maximum (no row above it).
        fixed_start: where the constant-fleet walk starts (the busiest minutes' need).
        step_seconds: the trace's load step, for the reaction times (None: none).
    """

    trace: Trace
    model: ReplicaModel
    slo_seconds: float
    slo_itl_seconds: float
    routing: str
    seeds: tuple[int, ...]
    max_replicas: int
    fixed_start: int
    step_seconds: float | None = None

    def figures(self, run: RunRecord) -> PolicyFigures:
        """A run's figures as the bench reports them (the SLOs, the load step's reaction)."""
        return figures_of_run(
            run, self.slo_seconds, step_seconds=self.step_seconds,
            lead_seconds=self.model.model_load_seconds, slo_itl_seconds=self.slo_itl_seconds,
        )  # fmt: skip


@dataclass(frozen=True, slots=True)
class References:
    """The hindsight rows.

    Attributes:
        rows: per row name, its figures on each seed (seed order).
        schedules: per row name, its count per minute.
        optimal: how the yardstick was found, and its near-minimality check.
        instant_trials: minute replays the instant-start search took.
    """

    rows: dict[str, tuple[PolicyFigures, ...]]
    schedules: dict[str, tuple[int, ...]]
    optimal: OptimalResult
    instant_trials: int


def cheapest_constant(
    ev: Evaluator, start: int, max_replicas: int, share: float = REFERENCE_SHARE
) -> Evaluation | None:
    """The smallest constant fleet in ``[1, max_replicas]`` whose mean share over the seeds
    is at least ``share``, walking from ``start`` (down while the next smaller still keeps it,
    else up); None when the maximum does not keep it."""
    minutes = ev.minutes

    def meets(n: int) -> Evaluation | None:
        e = ev.evaluate((n,) * minutes)
        return e if e.share >= share - 1e-12 else None

    n = min(max(1, start), max_replicas)
    found = meets(n)
    if found is not None:
        while n > 1:
            smaller = meets(n - 1)
            if smaller is None:
                break
            n, found = n - 1, smaller
        return found
    while n < max_replicas:
        n += 1
        found = meets(n)
        if found is not None:
            return found
    return None


@dataclass(frozen=True, slots=True)
class Yardstick:
    """The optimal load-paying reference and what it was found from (:func:`find_yardstick`).

    Attributes:
        instant: the instant-start search (each minute's need).
        optimal: the reference (:func:`~scaler.bench.optimal.optimal_schedule`).
        fixed: the cheapest constant fleet that keeps the share (None: none up to the maximum).
    """

    instant: SearchResult
    optimal: OptimalResult
    fixed: Evaluation | None


def find_yardstick(setup: ReferenceSetup) -> Yardstick:
    """The needs, the optimal load-paying reference and the cheapest constant fleet (its
    candidate), on every routing seed of ``setup``; its cost is ``optimal.replays`` replays
    of the trace plus the search (a few replays of each minute)."""
    ev = Evaluator(
        setup.trace, setup.model, setup.seeds, setup.slo_seconds, setup.slo_itl_seconds,
        setup.routing, setup.figures,
    )  # fmt: skip
    instant = search_schedule(
        setup.trace, model=setup.model, slo_seconds=setup.slo_seconds, share=REFERENCE_SHARE,
        routing=setup.routing, seed=setup.seeds[0], max_replicas=setup.max_replicas,
    )  # fmt: skip
    constant: list[Evaluation | None] = []

    def fixed() -> Evaluation | None:
        if not constant:
            constant.append(cheapest_constant(ev, setup.fixed_start, setup.max_replicas))
        return constant[0]

    optimal = optimal_schedule(
        ev, instant.replicas, share=REFERENCE_SHARE, fixed=fixed,
        budget=budget_for(setup.trace.duration_seconds),
    )  # fmt: skip
    return Yardstick(instant, optimal, fixed())


def run_references(setup: ReferenceSetup) -> References:
    """The constant fleet, the instant-start, the optimal load-paying and the reactive rows."""
    model = setup.model
    found = find_yardstick(setup)
    instant, needs, optimal, fixed_eval = (
        found.instant,
        found.instant.replicas,
        found.optimal,
        found.fixed,
    )
    minutes = max(1, math.ceil(setup.trace.duration_seconds / _MINUTE - 1e-9))
    fixed_schedule = (
        fixed_eval.replicas if fixed_eval is not None else (setup.max_replicas,) * minutes
    )
    schedules = {
        FIXED: fixed_schedule,
        INSTANT: needs,
        HINDSIGHT: optimal.best.replicas,
        REACTIVE: reactive_schedule(needs),
    }
    instant_model = replace(model, model_load_seconds=0.0)
    lead = math.ceil(model.model_load_seconds)
    plans: dict[str, tuple[ReplicaModel, int]] = {
        FIXED: (model, 0),
        INSTANT: (instant_model, 0),
        HINDSIGHT: (model, lead),
        REACTIVE: (model, 0),
    }
    rows: dict[str, tuple[PolicyFigures, ...]] = {}
    for name, schedule in schedules.items():
        m, lead_seconds = plans[name]
        runs = []
        for seed in setup.seeds:
            run = replay_schedule(
                setup.trace, schedule, model=m, lead_seconds=lead_seconds,
                routing=Routing(setup.routing), seed=seed, name=name,
            )  # fmt: skip
            runs.append(setup.figures(run))
        rows[name] = tuple(runs)
    return References(rows, schedules, optimal, instant.trials)
