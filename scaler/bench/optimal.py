"""The yardstick: the cheapest load-paying schedule found for a trace, and the check that it is
near-minimal.

A schedule is a replica count per minute whose increases are written a model load ahead (the
replicas load, paid, before their minute; :class:`~scaler.bench.hindsight.ScheduleController`).
Its *share* is the share of accepted requests within both SLOs (TTFT and ITL), averaged over
the routing seeds; its cost the GPU-hours, averaged too. The reference keeps at least
``share`` (99%) at the fewest GPU-hours this procedure finds:

1. **Needs.** The instant-start search (:func:`~scaler.bench.hindsight.search_schedule`)
   gives each minute's need: the fewest replicas, started at once, that keep the running TTFT
   share, state carried from minute to minute.
2. **Optimum for the needs.** With identical replicas that cost a minute each while they exist
   and a model load each time one starts, the cheapest schedule at or above the needs
   decomposes by level (the ``k``-th replica exists wherever at least ``k`` are needed):
   level by level, an off-gap between two on-periods is filled exactly when the minutes it
   spans cost no more than a reload (``60 g <= model_load_seconds``:
   :func:`~scaler.bench.hindsight.fill_gaps`). It is the solution of the dynamic programme over
   replicas per minute with the model load as the cost of adding one, in closed form.
3. **Repair.** Its replay is the truth: while its share falls short, the minutes whose
   arrivals missed most get one more replica in their need (the minutes in a model load
   before them too, since their replicas serve the queue they leave) and step 2 is redone.
4. **Descent.** Then replica-minutes are removed while the share holds: a candidate takes one
   replica off one on-period at one level (the whole period, or its first or last minute),
   the largest saving first, screened on the first routing seed and accepted on all of them.
   The cheapest constant fleet that keeps the share and the needs plus one or two replicas
   every minute are candidates too.
5. **Check.** From the result, a fresh neighbourhood (the largest removals, the constant
   fleets one replica either side of the cheapest that keeps the share, the needs plus a
   margin) is replayed on every seed, and the cheapest candidate that keeps the share is
   reported with its saving: the reference is *near-minimal* when none saves more than 3%.

Random routing makes every replay a draw: a removal can keep the share by luck on one seed.
Averaging over the seeds, and screening before confirming, keeps that luck out of the
reference; what is left of it shows in the check.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

from scaler.bench.figures import PolicyFigures, itl_within
from scaler.bench.hindsight import fill_gaps, replay_schedule
from scaler.bench.simulate import RunRecord
from scaler.sim.engine import ReplicaModel
from scaler.sim.routing import Routing
from scaler.sim.trace import Trace

__all__ = [
    "DAYS_BUDGET",
    "HOURS_BUDGET",
    "NEAR_MINIMAL_SAVING",
    "Budget",
    "Candidate",
    "Evaluation",
    "Evaluator",
    "NearMinimality",
    "OptimalResult",
    "budget_for",
    "optimal_schedule",
    "removals",
]

#: A reference is near-minimal when no schedule around it keeps the share at this much less.
NEAR_MINIMAL_SAVING = 0.03
_MINUTE = 60


@dataclass(frozen=True, slots=True)
class Budget:
    """How many replays the procedure may spend.

    Attributes:
        repairs: repair rounds before it gives up raising the needs.
        screens: removals screened per descent round.
        rounds: descent rounds (and check-then-descend rounds).
        check_removals: the largest removals the check replays on every seed.
    """

    repairs: int = 8
    screens: int = 12
    rounds: int = 8
    check_removals: int = 6


#: Traces up to three hours.
HOURS_BUDGET = Budget()
#: Longer traces (a day is 24 of the hour-long replays a candidate costs).
DAYS_BUDGET = Budget(repairs=4, screens=3, rounds=2, check_removals=3)


def budget_for(duration_seconds: float) -> Budget:
    """:data:`HOURS_BUDGET` up to three hours, :data:`DAYS_BUDGET` beyond."""
    return HOURS_BUDGET if duration_seconds <= 3 * 3600 else DAYS_BUDGET


@dataclass(frozen=True, slots=True)
class Evaluation:
    """A schedule replayed on every routing seed.

    Attributes:
        replicas: the count per minute.
        shares: each seed's share of accepted requests within both SLOs, 0-1.
        gpu_hours: each seed's GPU-hours.
        misses: requests outside either SLO by arrival minute, summed over the seeds.
    """

    replicas: tuple[int, ...]
    shares: tuple[float, ...]
    gpu_hours: tuple[float, ...]
    misses: tuple[int, ...]

    @property
    def share(self) -> float:
        """The mean share over the seeds."""
        return sum(self.shares) / len(self.shares)

    @property
    def cost(self) -> float:
        """The mean GPU-hours over the seeds."""
        return sum(self.gpu_hours) / len(self.gpu_hours)


def _misses_by_minute(run: RunRecord, slo: float, slo_itl: float, minutes: int) -> list[int]:
    out = [0] * minutes
    for r in run.requests:
        if r.rejected:
            continue
        if r.ttft is not None and r.ttft <= slo and itl_within(r, slo_itl):
            continue
        out[min(minutes - 1, int(r.arrival // _MINUTE))] += 1
    return out


@dataclass(slots=True)
class Evaluator:
    """Replays load-paying schedules of ``trace`` on every seed, remembering each one.

    Args:
        trace: the arrivals.
        model: the replica model (its model load is the lead).
        seeds: the routing seeds.
        slo_seconds, slo_itl_seconds: the SLOs.
        routing: how requests reach the replicas.
        figures: turns a run into the bench's figures (for the rows it reports).
    """

    trace: Trace
    model: ReplicaModel
    seeds: tuple[int, ...]
    slo_seconds: float
    slo_itl_seconds: float
    routing: Routing | str
    figures: Callable[[RunRecord], PolicyFigures]
    replays: int = 0
    _seen: dict[tuple[tuple[int, ...], int], tuple[float, float, list[int]]] = field(
        default_factory=dict
    )

    @property
    def minutes(self) -> int:
        """Minutes of the trace window."""
        return max(1, math.ceil(self.trace.duration_seconds / _MINUTE - 1e-9))

    @property
    def lead_seconds(self) -> int:
        """How early a schedule's increases are written: the model load."""
        return math.ceil(self.model.model_load_seconds)

    def run(self, replicas: Sequence[int], seed: int, name: str = "schedule") -> RunRecord:
        """The recorded replay of ``replicas`` with routing seed ``seed``."""
        self.replays += 1
        return replay_schedule(
            self.trace, replicas, model=self.model, lead_seconds=self.lead_seconds,
            routing=self.routing, seed=seed, name=name,
        )  # fmt: skip

    def evaluate(self, replicas: Sequence[int], seeds: int | None = None) -> Evaluation:
        """``replicas`` replayed on the first ``seeds`` seeds (all by default); each replay
        is made once."""
        use = self.seeds[: seeds or len(self.seeds)]
        key = tuple(replicas)
        shares, hours, misses = [], [], [0] * self.minutes
        for seed in use:
            if (key, seed) not in self._seen:
                run = self.run(key, seed)
                f = self.figures(run)
                by_minute = _misses_by_minute(
                    run, self.slo_seconds, self.slo_itl_seconds, self.minutes
                )
                self._seen[(key, seed)] = (f.both_request_share, f.gpu_hours, by_minute)
            share, hour, by_minute = self._seen[(key, seed)]
            shares.append(share)
            hours.append(hour)
            misses = [a + b for a, b in zip(misses, by_minute, strict=True)]
        return Evaluation(key, tuple(shares), tuple(hours), tuple(misses))


@dataclass(frozen=True, slots=True)
class Candidate:
    """A schedule around the reference and what it is."""

    label: str
    replicas: tuple[int, ...]


def removals(replicas: Sequence[int]) -> Iterator[Candidate]:
    """Every schedule one replica below ``replicas`` on one on-period at one level (the whole
    period, or only its first or last minute), the top levels (the peaks) first and the
    longest spans first within a level; never below one replica."""
    out: list[tuple[int, int, int, Candidate]] = []  # sort key: top levels, long spans first
    top = max(replicas, default=0)
    for level in range(2, top + 1):
        m = 0
        while m < len(replicas):
            if replicas[m] < level:
                m += 1
                continue
            start = m
            while m < len(replicas) and replicas[m] >= level:
                m += 1
            spans = {(start, m), (start, start + 1), (m - 1, m)}
            for a, b in spans:
                lowered = tuple(n - 1 if a <= i < b else n for i, n in enumerate(replicas))
                label = f"one replica fewer at level {level}, minutes {a}-{b - 1}"
                out.append((-level, -(b - a), a, Candidate(label, lowered)))
    for *_, c in sorted(out, key=lambda x: x[:3]):
        yield c


@dataclass(frozen=True, slots=True)
class NearMinimality:
    """The check of a reference (step 5 of the module docstring).

    Attributes:
        tried: candidates replayed on every seed.
        cheapest: the cheapest that keeps the share (the reference itself when none is).
        saving: its GPU-hours below the reference's, a fraction (0 when it is the reference).
    """

    tried: int
    cheapest: Candidate
    cheapest_gpu_hours: float
    saving: float

    @property
    def near_minimal(self) -> bool:
        """No candidate keeps the share at more than :data:`NEAR_MINIMAL_SAVING` less."""
        return self.saving <= NEAR_MINIMAL_SAVING


@dataclass(frozen=True, slots=True)
class OptimalResult:
    """The reference and how it was found.

    Attributes:
        best: the reference's evaluation (its schedule, shares and GPU-hours per seed).
        label: what it is (the optimum for the needs, repaired and descended, or a candidate).
        history: ``(what, mean GPU-hours, mean share)`` of every schedule accepted on the way.
        check: the near-minimality check.
        replays: trace replays the procedure took.
    """

    best: Evaluation
    label: str
    history: tuple[tuple[str, float, float], ...]
    check: NearMinimality
    replays: int


def _repair(replicas: Sequence[int], misses: Sequence[int], lead_minutes: int) -> list[int]:
    """The needs raised by one replica at the minutes with the most misses (those holding half
    of them) and the ``lead_minutes`` before each."""
    total = sum(misses)
    order = sorted(range(len(misses)), key=lambda m: (-misses[m], m))
    raised = list(replicas)
    covered = 0
    for m in order:
        if misses[m] == 0 or covered >= total / 2:
            break
        covered += misses[m]
        for i in range(max(0, m - lead_minutes), m + 1):
            raised[i] = replicas[i] + 1
    return raised


def optimal_schedule(
    ev: Evaluator,
    needs: Sequence[int],
    *,
    share: float,
    fixed: Callable[[], Evaluation | None],
    budget: Budget = HOURS_BUDGET,
) -> OptimalResult:
    """The reference (the module docstring's procedure) for the instant-start ``needs``.

    Args:
        ev: replays schedules on the seeds.
        needs: each minute's instant-start need (step 1).
        share: the share within both SLOs to keep, 0-1.
        fixed: the cheapest constant fleet that keeps ``share`` (evaluated), or None when no
            fleet up to the maximum does; called once.
        budget: the replays it may spend.
    """
    gap = ev.lead_seconds // _MINUTE
    lead_minutes = math.ceil(ev.lead_seconds / _MINUTE)
    history: list[tuple[str, float, float]] = []

    def keeps(e: Evaluation) -> bool:
        return e.share >= share - 1e-12

    current_needs = list(needs)
    best = ev.evaluate(fill_gaps(current_needs, gap))
    label = "optimum for the instant-start needs"
    history.append((label, best.cost, best.share))
    for _ in range(budget.repairs):
        if keeps(best):
            break
        current_needs = _repair(current_needs, best.misses, lead_minutes)
        best = ev.evaluate(fill_gaps(current_needs, gap))
        label = "optimum for the needs, repaired"
        history.append((label, best.cost, best.share))

    # Other kinds of schedule: a constant fleet, the needs plus a margin.
    alternatives = [Candidate("needs + 1 replica", fill_gaps([n + 1 for n in needs], gap))]
    alternatives.append(Candidate("needs + 2 replicas", fill_gaps([n + 2 for n in needs], gap)))
    for c in alternatives:
        e = ev.evaluate(c.replicas)
        if keeps(e) and (not keeps(best) or e.cost < best.cost):
            best, label = e, c.label
            history.append((label, e.cost, e.share))
    constant = fixed()
    if constant is not None and keeps(constant) and (not keeps(best) or constant.cost < best.cost):
        best, label = constant, "cheapest constant fleet"
        history.append((label, best.cost, best.share))

    rejected: set[tuple[int, ...]] = set()
    check = None
    for _ in range(budget.rounds):
        best, label = _descend(ev, best, label, share, rejected, history, budget)
        check = _check(ev, best, needs, gap, share, constant, budget)
        if check.near_minimal:
            break
        # The check found a cheaper schedule: it becomes the reference, and is descended from.
        best, label = ev.evaluate(check.cheapest.replicas), check.cheapest.label
        history.append((label, best.cost, best.share))
    assert check is not None
    return OptimalResult(best, label, tuple(history), check, ev.replays)


def _descend(
    ev: Evaluator,
    best: Evaluation,
    label: str,
    share: float,
    rejected: set[tuple[int, ...]],
    history: list[tuple[str, float, float]],
    budget: Budget,
) -> tuple[Evaluation, str]:
    """Step 4: remove replica-minutes while the share holds (screened on the first seed,
    accepted on all)."""
    for _ in range(budget.rounds):
        if best.share < share - 1e-12:
            break
        screened = 0
        for cand in removals(best.replicas):
            if cand.replicas in rejected:
                continue
            if screened >= budget.screens:
                return best, label
            screened += 1
            first = ev.evaluate(cand.replicas, seeds=1)
            if first.share < share or first.cost >= best.cost:
                rejected.add(cand.replicas)
                continue
            full = ev.evaluate(cand.replicas)
            if full.share >= share - 1e-12 and full.cost < best.cost:
                best, label = full, "optimum, replica-minutes removed"
                history.append((cand.label, full.cost, full.share))
                break
            rejected.add(cand.replicas)
        else:
            return best, label
    return best, label


def _check(
    ev: Evaluator,
    best: Evaluation,
    needs: Sequence[int],
    gap: int,
    share: float,
    constant: Evaluation | None,
    budget: Budget,
) -> NearMinimality:
    """Step 5: a fresh neighbourhood of ``best``, every candidate on every seed."""
    candidates: list[Candidate] = []
    for i, cand in enumerate(removals(best.replicas)):
        if i >= budget.check_removals:
            break
        candidates.append(cand)
    level = constant.replicas[0] if constant is not None else max(best.replicas)
    for n in (level - 1, level, level + 1):
        if n >= 1:
            candidates.append(Candidate(f"constant fleet of {n}", (n,) * ev.minutes))
    for k in (0, 1, 2):
        candidates.append(
            Candidate(f"needs + {k} replicas", fill_gaps([n + k for n in needs], gap))
        )
    cheapest = Candidate("the reference", best.replicas)
    cheapest_cost = best.cost
    tried = 0
    for cand in candidates:
        if cand.replicas == best.replicas:
            continue
        tried += 1
        e = ev.evaluate(cand.replicas)
        if e.share >= share - 1e-12 and e.cost < cheapest_cost:
            cheapest, cheapest_cost = cand, e.cost
    saving = (best.cost - cheapest_cost) / best.cost if best.cost > 0 else 0.0
    return NearMinimality(tried, cheapest, cheapest_cost, saving)
