"""Hindsight references: replica schedules chosen knowing the whole trace, replayed like any
policy.

A schedule gives a replica count per minute. :class:`ScheduleController` plays it through the
same loop, fleet, routing and accounting as the policies (:mod:`scaler.bench.simulate`): the
count of minute ``m`` is written at second ``60 m``, state (queues, running batches, draining
pods, the router) carries across minutes, removed replicas drain and are paid until they are
gone. Two variants:

- **instant start** (:func:`search_schedule`): replicas added at a minute are Ready at once
  (model load 0). The cheapest schedule this search finds that keeps at least ``share`` of the
  accepted requests within the TTFT SLO.
- **paying model load** (:func:`pay_model_load`): every replica added for minute ``m`` is
  created ``model_load_seconds`` before it (the write of ``spec.replicas`` is moved that much
  earlier) and paid while loading; removed replicas drain as always. Replicas needed before
  the first load could finish inside the window exist, ready, at time 0 (as every policy's
  starting replicas do). This is what a policy with a perfect forecast would do, the
  yardstick of the benchmark's goals.

The search (forward, one minute at a time, state carried):

1. The state at the start of minute ``m`` is the replay of the minutes already chosen. A
   candidate count ``c`` is tried on a copy of it (:meth:`Simulation.fork`) for that minute.
2. A request is *decided* once its first token came (a hit if within the SLO) or once
   ``arrival + SLO`` passed without it (a miss); rejected requests never count. ``c`` is
   acceptable when the hits are at least ``share`` of every request decided so far once all
   of the minute's own requests are decided: the trial holds ``c`` for ``SLO`` seconds into
   the next minute for those of its last seconds (without this look-ahead a minute's choice
   ignored them, and the next minute met misses it could no longer prevent). The state carried
   on is the trial's at the end of the minute, and only what was decided by then is counted
   as final. The last minute runs until every request is decided and is checked on the whole
   replay, so the replay's share meets the goal (unless no count could, point 4). The allowance
   follows the load: a minute may spend 1% of what has arrived.
3. The count is the smallest acceptable ``c``: gallop from the previous minute's count (down
   while acceptable, or up until acceptable) by doubling steps, then bisect. Bisection assumes
   more replicas never decide fewer hits, which holds for least-request routing up to noise and
   on average for random routing; the guarantee does not depend on it (the chosen count was
   itself replayed and found acceptable), only the minimality does. A run that cannot reach an
   acceptable share by the end of the minute stops early.
4. If no count up to ``max_replicas`` is acceptable (requests queued before the minute, whose
   fate the minute cannot change, already used the allowance), the minute gets the smallest
   count that misses no more than ``max_replicas`` would.

The search is greedy, so its schedule is not proven cheapest: spending the allowance where
extra replicas cost most (a short burst) could save more. It costs a few replays of each
minute (2 to 3.5 per minute on the bundled traces and the synthetic shapes; 1-6 s for an hour
of trace), each from a copy of the state.

Paying model load starts from the instant schedule (the service each minute needs) and
provides it at least cost when every start costs ``model_load_seconds`` of loading: at each
replica level, an off-gap of ``g`` minutes is filled when ``60 g <= model_load_seconds``
(keeping the replica costs no more than reloading it). The replay of that schedule is what the
benchmark reports; if its share falls short (random routing draws differ once the counts
differ), the instant search is run again with the goal raised by the shortfall.

A constant fleet is a schedule too: the benchmark reports the cheapest fixed fleet under a
reference's name when it keeps the share at fewer GPU-hours (it happens where the needs per
minute are noisy, e.g. long prompts colliding under random routing, and the load-paying
schedule keeps too many replicas through their peaks).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from scaler.bench.simulate import RunRecord, Simulation, TickContext
from scaler.sim.engine import ReplicaModel, SimRequest
from scaler.sim.routing import Routing
from scaler.sim.trace import Trace

__all__ = [
    "ScheduleController",
    "SearchResult",
    "fill_gaps",
    "pay_model_load",
    "replay_schedule",
    "search_schedule",
]

_MINUTE = 60
# Seconds between checks of a trial run for an early stop.
_CHECK_EVERY = 10


class ScheduleController:
    """Writes a per-minute replica schedule (a :class:`~scaler.bench.simulate.Controller`).

    Args:
        replicas: count per minute; the last holds after the schedule ends.
        lead_seconds: each increase is written this many seconds before its minute (the model
            load a perfect forecast pays); 0 for instant start.
        name: the label in reports.
    """

    reads_prometheus = False

    def __init__(self, replicas: Sequence[int], *, lead_seconds: int = 0, name: str) -> None:
        if not replicas or min(replicas) < 1:
            raise ValueError(f"replicas: expected counts >= 1 per minute, got {list(replicas)}")
        self.name = name
        self.interval_seconds = 1
        self.replicas = list(replicas)
        self.lead_seconds = lead_seconds

    def spec_at(self, second: int) -> int:
        """``spec.replicas`` at ``second``: the minute's count, or a later minute's larger one
        whose lead has begun."""
        last = len(self.replicas) - 1
        minute = second // _MINUTE
        spec = self.replicas[min(minute, last)]
        for later in range(minute + 1, min(last, (second + self.lead_seconds) // _MINUTE) + 1):
            spec = max(spec, self.replicas[later])
        return spec

    def observe(self, ctx: TickContext) -> None:
        """Nothing to observe."""

    def decide(self, ctx: TickContext) -> int:
        """The schedule's count now."""
        return self.spec_at(round(ctx.now))

    def close(self) -> None:
        """Nothing to release."""


@dataclass(frozen=True, slots=True)
class SearchResult:
    """What :func:`search_schedule` found.

    Attributes:
        replicas: the count per minute.
        hits, misses: accepted requests within / not within the SLO in the search's replay
            (the replay of ``replicas`` gives exactly these).
        trials: minute replays tried.
    """

    replicas: tuple[int, ...]
    hits: int
    misses: int
    trials: int

    @property
    def share(self) -> float:
        """Share of accepted requests within the SLO, 0-1 (NaN without any)."""
        total = self.hits + self.misses
        return self.hits / total if total else math.nan


def _fate(r: SimRequest, slo: float, now: float) -> bool | None:
    """True (hit) / False (miss) once decided at ``now``, None while open or for a rejected
    request."""
    if r.rejected:
        return None
    if r.first_token_at is not None:
        return r.first_token_at - r.arrival <= slo
    if r.arrival + slo <= now:
        return False
    return None


def _count(
    requests: Sequence[SimRequest], slo: float, now: float, *, before: float = math.inf
) -> tuple[int, int]:
    """Hits and misses decided at ``now`` among the requests that arrived before ``before``."""
    hits = misses = 0
    for r in requests:
        if r.arrival >= before:
            continue
        fate = _fate(r, slo, now)
        if fate is True:
            hits += 1
        elif fate is False:
            misses += 1
    return hits, misses


def _meets(hits: int, misses: int, share: float) -> bool:
    return hits >= share * (hits + misses) - 1e-9


def _new_sim(
    trace: Trace,
    replicas: Sequence[int],
    *,
    model: ReplicaModel,
    routing: Routing | str,
    seed: int,
    termination_grace_seconds: float,
    lead_seconds: int = 0,
    record: bool = False,
    name: str = "hindsight",
) -> Simulation:
    controller = ScheduleController(replicas, lead_seconds=lead_seconds, name=name)
    # Replicas the first minutes need that could not load inside the window exist at 0, ready,
    # as every policy's starting replicas do.
    return Simulation(
        trace,
        controller,
        model=model,
        initial_replicas=controller.spec_at(0),
        termination_grace_seconds=termination_grace_seconds,
        seed=seed,
        routing=routing,
        record=record,
    )


def search_schedule(
    trace: Trace,
    *,
    model: ReplicaModel,
    slo_seconds: float,
    share: float = 0.99,
    routing: Routing | str = Routing.RANDOM,
    seed: int = 0,
    termination_grace_seconds: float = 120.0,
    max_replicas: int = 128,
    first_minute_only: bool = False,
) -> SearchResult:
    """The instant-start hindsight schedule (the search in the module docstring).

    Args:
        trace: the arrivals.
        model: the replica model (its model load is ignored: replicas start instantly).
        slo_seconds: the TTFT SLO, seconds.
        share: the share of accepted requests to keep within the SLO, 0-1.
        routing, seed, termination_grace_seconds: as the policies' runs.
        max_replicas: the largest count tried for a minute.
        first_minute_only: stop after minute 0 (the starting fleet of every policy).

    Raises:
        ValueError: ``share`` outside (0, 1] or ``max_replicas`` below 1.
    """
    if not 0 < share <= 1 or max_replicas < 1:
        raise ValueError(
            f"share must be in (0, 1] and max_replicas >= 1, got {share}, {max_replicas}"
        )
    search = _Search(
        trace,
        model=replace(model, model_load_seconds=0.0),
        slo_seconds=slo_seconds,
        share=share,
        routing=routing,
        seed=seed,
        termination_grace_seconds=termination_grace_seconds,
        max_replicas=max_replicas,
    )
    minutes = 1 if first_minute_only else search.minutes
    for minute in range(minutes):
        search.choose(minute)
    return SearchResult(tuple(search.chosen), search.hits, search.misses, search.trials)


_Trial = tuple[bool, Simulation, int, int]  # acceptable, state after it, hits, misses


class _Search:
    """The state of :func:`search_schedule` between minutes."""

    def __init__(
        self,
        trace: Trace,
        *,
        model: ReplicaModel,
        slo_seconds: float,
        share: float,
        routing: Routing | str,
        seed: int,
        termination_grace_seconds: float,
        max_replicas: int,
    ) -> None:
        self.trace = trace
        self.model = model
        self.slo_seconds = slo_seconds
        self.share = share
        self.routing = routing
        self.seed = seed
        self.termination_grace_seconds = termination_grace_seconds
        self.max_replicas = max_replicas
        self.minutes = max(1, math.ceil(trace.duration_seconds / _MINUTE - 1e-9))
        self.accepted_before = _accepted_prefix(trace, model.max_model_len)
        self.chosen: list[int] = []
        self.hits = self.misses = self.trials = 0
        self.state: Simulation | None = None

    def trial(self, minute: int, count: int, *, stop_early: bool = True) -> _Trial:
        """Minute ``minute`` with ``count`` replicas, from the state the chosen minutes left.

        Acceptable: the running share holds once every request that arrived before the end of
        the minute is decided, the count held for ``SLO`` seconds into the next minute (the
        requests of the minute's last seconds are decided there). Returns the state at the
        end of the minute and the hits and misses decided by then on the way there.
        """
        self.trials += 1
        plan = [*self.chosen, count]
        if self.state is None:
            sim = _new_sim(
                self.trace, plan, model=self.model, routing=self.routing, seed=self.seed,
                termination_grace_seconds=self.termination_grace_seconds,
            )  # fmt: skip
        else:
            sim = self.state.fork()
            assert isinstance(sim.controller, ScheduleController)
            sim.controller.replicas = plan
        last = minute == self.minutes - 1
        end = (minute + 1) * _MINUTE
        boundary: Simulation | None = None
        tally = (0, 0)
        if last:
            sim.run_until(2**62)
            h, m = _count(sim.fleet.requests, self.slo_seconds, float(sim.tick - 1))
            return _meets(self.hits + h, self.misses + m, self.share), sim, h, m
        horizon = end + math.ceil(self.slo_seconds) + 1
        while True:
            stop = end if boundary is None else horizon
            sim.run_until(min(stop, sim.tick + _CHECK_EVERY))
            now = float(sim.tick - 1)
            if boundary is None and sim.tick >= end:
                tally = _count(sim.fleet.requests, self.slo_seconds, now)
                boundary = sim.fork()
                assert isinstance(sim.controller, ScheduleController)
                sim.controller.replicas = [*plan, count]  # held into the next minute
            h, m = _count(sim.fleet.requests, self.slo_seconds, now, before=end)
            if sim.done or sim.tick >= horizon:
                ok = _meets(self.hits + h, self.misses + m, self.share)
                return ok, boundary or sim, *tally
            if stop_early:
                # Hits still possible: every open request of the minute plus every accepted
                # arrival of it not yet routed (over-counted by a second: safe).
                open_now = sum(
                    1
                    for r in sim.fleet.requests
                    if r.arrival < end and _fate(r, self.slo_seconds, now) is None
                )
                top = len(self.accepted_before) - 1
                future = (
                    self.accepted_before[min(end, top)]
                    - self.accepted_before[min(max(0, sim.tick - 2), top)]
                    if sim.tick < end + 2
                    else 0
                )
                if not _meets(self.hits + h + open_now + future, self.misses + m, self.share):
                    return False, boundary or sim, *tally

    def choose(self, minute: int) -> None:
        """Pick minute ``minute``'s count and move the state to its end."""
        tried: dict[int, _Trial] = {}

        def ok(count: int) -> bool:
            if count not in tried:
                tried[count] = self.trial(minute, count)
            return tried[count][0]

        hint = min(max(1, self.chosen[-1] if self.chosen else 1), self.max_replicas)
        count = _smallest(ok, hint, self.max_replicas)
        if count is None:
            # Nothing meets the running share: the fewest replicas missing no more than the
            # most would (whole runs: a stopped one has not counted all its misses).
            tried = {}

            def no_worse(c: int) -> bool:
                if c not in tried:
                    tried[c] = self.trial(minute, c, stop_early=False)
                return tried[c][3] <= tried[self.max_replicas][3]

            no_worse(self.max_replicas)
            count = _smallest(no_worse, hint, self.max_replicas) or self.max_replicas
        _, state, h, m = tried[count]
        self.hits += h
        self.misses += m
        self.chosen.append(count)
        # Keep only what the next minutes need: open requests, live pods.
        now = float(state.tick - 1)
        state.fleet.requests = [
            r
            for r in state.fleet.requests
            if not r.rejected and _fate(r, self.slo_seconds, now) is None
        ]
        state.fleet.gone.clear()
        state.fleet.scale_changes.clear()
        state.events.clear()
        self.state = state


def _accepted_prefix(trace: Trace, max_model_len: int) -> list[int]:
    """``out[s]``: accepted requests arriving before second ``s`` (one entry per second)."""
    seconds = math.ceil(trace.duration_seconds) + 2
    out = [0] * (seconds + 1)
    for r in trace.requests:
        if r.prompt_tokens + max(1, r.output_tokens) <= max_model_len:
            out[min(seconds, math.floor(r.arrival_seconds) + 1)] += 1
    for s in range(1, len(out)):
        out[s] += out[s - 1]
    return out


def _smallest(ok: Callable[[int], bool], hint: int, cap: int) -> int | None:
    """The smallest ``n`` in ``[1, cap]`` with ``ok(n)``, assuming ``ok`` is monotone;
    galloping from ``hint`` then bisecting. None when ``ok(cap)`` is false."""
    if ok(hint):
        hi, step = hint, 1
        while hi - step >= 1 and ok(hi - step):
            hi -= step
            step *= 2
        lo = max(0, hi - step)
    else:
        lo, step = hint, 1
        while True:
            hi = min(cap, lo + step)
            if ok(hi):
                break
            if hi == cap:
                return None
            lo, step = hi, step * 2
    # ok(hi); lo == 0 or not ok(lo)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if ok(mid):
            hi = mid
        else:
            lo = mid
    return hi


def fill_gaps(replicas: Sequence[int], gap_minutes: int) -> tuple[int, ...]:
    """At each replica level, fill every off-gap of at most ``gap_minutes`` minutes between
    two on-periods (keeping a replica through a short dip instead of reloading it).

    Returns a schedule ``>=`` ``replicas`` minute by minute.
    """
    out = list(replicas)
    top = max(out, default=0)
    for level in range(1, top + 1):
        on = [n >= level for n in replicas]
        m = 0
        while m < len(on):
            if on[m]:
                m += 1
                continue
            start = m
            while m < len(on) and not on[m]:
                m += 1
            if start > 0 and m < len(on) and m - start <= gap_minutes:
                for i in range(start, m):
                    out[i] = max(out[i], level)
    return tuple(out)


def replay_schedule(
    trace: Trace,
    replicas: Sequence[int],
    *,
    model: ReplicaModel,
    lead_seconds: int = 0,
    routing: Routing | str = Routing.RANDOM,
    seed: int = 0,
    termination_grace_seconds: float = 120.0,
    name: str,
) -> RunRecord:
    """The recorded replay of a schedule (``model.model_load_seconds`` is the time to Ready;
    ``lead_seconds`` how early increases are written)."""
    return _new_sim(
        trace, replicas, model=model, routing=routing, seed=seed,
        termination_grace_seconds=termination_grace_seconds, lead_seconds=lead_seconds,
        record=True, name=name,
    ).finish()  # fmt: skip


def pay_model_load(
    instant: Sequence[int], model_load_seconds: float
) -> tuple[tuple[int, ...], int]:
    """The schedule paying model load for the service of ``instant``, and its lead in whole
    seconds (see the module docstring)."""
    lead = math.ceil(model_load_seconds)
    return fill_gaps(instant, lead // _MINUTE), lead
