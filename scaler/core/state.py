"""Per-target decision state carried from one cycle to the next.

The state is an immutable value: :func:`scaler.core.decide.decide` returns a new one, and
:func:`record_write` records a successful write to the scale subresource. All times are
seconds on the controller's clock (any monotonic-enough float; the tests use a fake clock).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from scaler.config.signal_specs import CapacityUnit
from scaler.core.capacity import CapacityEstimate, CapacityMemory
from scaler.core.cost_fit import CostFit
from scaler.core.forecast import DemandForecast
from scaler.core.load_time import RECENT_STARTS, LoadTimes


@dataclass(frozen=True, slots=True)
class Recommendation:
    """A replica count the signals asked for at a time (after the guards, before stabilization)."""

    at: float
    replicas: int


@dataclass(frozen=True, slots=True)
class ScaleEvent:
    """A write of ``spec.replicas`` that this controller made."""

    at: float
    from_replicas: int
    to_replicas: int


@dataclass(frozen=True, slots=True)
class LearningFloor:
    """The fewest replicas a scale-down may leave while the capacity signal is learning.

    Set when TTFT scaled up a fleet of ``replicas - 1`` while the capacity signal had no
    estimate: those replicas broke the SLO at the demand of that time, ``level`` (the demand
    forecast's level, weighted tokens/s). See :func:`scaler.core.phases.learning_floor`.
    """

    replicas: int
    level: float


@dataclass(frozen=True, slots=True)
class TargetState:
    """What one target's decisions remember.

    Attributes:
        recommendations: timestamped recommendations within the longest stabilization window
            (HPA keeps the same list); seeded with the current replicas on start so that a
            restarted controller never scales down at once.
        scale_events: our own writes within the longest step-limit period.
        last_written_replicas: the value we last wrote, to notice writes by someone else.
        last_rewrite_at: when we last overwrote someone else's value (once per cooldown).
        last_starting_at: the last cycle (seconds, controller clock) that saw replicas
            starting; TTFT may not ask for more replicas until two TTFT rate windows after it
            (see :func:`scaler.core.decide.decide`).
        last_blocked_at: the last cycle (seconds, controller clock) whose history entry is the
            current replicas held for want of valid signals (``no_valid_signals``,
            ``scale_down_blocked_missing_signal``), or at which the history was seeded (a
            start, a resume after a hole). A scale-down window shortened by a steady fall
            never reaches back past it: after an outage or a restart a whole window of good
            samples still passes before a scale-down.
        capacity: the capacity signal's memory: one replica's learned capacity at the SLO, the
            demand forecast, the pods queued at the last cycle (:mod:`scaler.core.capacity`).
        load_times: the model load times observed (:mod:`scaler.core.load_time`).
        learning_floor: while the capacity signal is learning, the replicas TTFT last showed
            to be too few and the demand then (:class:`LearningFloor`); None once it has an
            estimate.
    """

    recommendations: tuple[Recommendation, ...] = ()
    scale_events: tuple[ScaleEvent, ...] = ()
    last_written_replicas: int | None = None
    last_rewrite_at: float | None = None
    last_starting_at: float | None = None
    last_blocked_at: float | None = None
    capacity: CapacityMemory = field(default_factory=CapacityMemory)
    load_times: LoadTimes = field(default_factory=LoadTimes)
    learning_floor: LearningFloor | None = None

    @classmethod
    def seeded(cls, current_replicas: int, now: float) -> TargetState:
        """A fresh state whose history holds the current replicas at ``now`` (a seeded cycle,
        ``last_blocked_at``)."""
        return cls().reseeded(current_replicas, now)

    def reseeded(
        self, current_replicas: int, now: float, *, keep_history: bool = False
    ) -> TargetState:
        """This state with the current replicas recorded at ``now`` (seconds) as a seeded
        cycle, which also marks ``last_blocked_at`` (a window shortened by a steady fall never
        reaches back past it); the earlier history is dropped unless ``keep_history``."""
        kept = self.recommendations if keep_history else ()
        return replace(
            self,
            recommendations=(*kept, Recommendation(now, current_replicas)),
            last_blocked_at=now,
        )


def record_write(
    state: TargetState, *, from_replicas: int, to_replicas: int, now: float
) -> TargetState:
    """Return ``state`` after a successful write of ``to_replicas`` to the scale subresource."""
    return replace(
        state,
        scale_events=(*state.scale_events, ScaleEvent(now, from_replicas, to_replicas)),
        last_written_replicas=to_replicas,
    )


# ----------------------------------------------------------------------- persistence
#
# A new leader resumes the decision state the previous one kept (stabilization history, own
# writes for the step limits, the last value written and the last re-apply over an outside
# write, the learned capacity, the demand forecast and the model load times, so that it does
# not relearn from nothing). The encoding is plain JSON-able data, compacted without changing
# any decision: decide() only asks "is a recommendation of N inside the window", and for a
# given N the newest timestamp answers that, so one entry per distinct replica count is kept.

STATE_FORMAT_VERSION = 1


def compact(state: TargetState) -> TargetState:
    """``state`` with one recommendation per distinct replica count (the newest), in time order.

    Lossless for :func:`scaler.core.decide.decide`: the stabilization windows take the min/max
    over recommendations newer than a cut, which only depends on each count's newest time.
    """
    newest: dict[int, float] = {}
    for r in state.recommendations:
        newest[r.replicas] = max(r.at, newest.get(r.replicas, r.at))
    recs = tuple(
        Recommendation(at, n) for n, at in sorted(newest.items(), key=lambda kv: (kv[1], kv[0]))
    )
    return replace(state, recommendations=recs)


def encode_state(state: TargetState) -> dict[str, object]:
    """A JSON-able dict of a (compacted) state (learned rates to six significant digits).

    Keys added after the first format (``c`` capacity estimate, ``cb`` the bounds seen before
    it, ``cs`` the highest rate per replica served with room, ``cf`` the cost fit's sums,
    ``d`` demand forecast, ``l``
    model load times, ``lw`` pods whose start is watched, ``b`` the last blocked or seeded
    cycle, ``df`` since when the demand falls and its lowest level, ``dh`` the demand's last
    high, its level and the lowest level since, ``lf`` the learning floor's replicas and
    demand level) are left out while empty, so a state without them encodes as before.
    """
    s = compact(state)
    out: dict[str, object] = {
        "r": [[r.at, r.replicas] for r in s.recommendations],
        "e": [[e.at, e.from_replicas, e.to_replicas] for e in s.scale_events],
        "w": s.last_written_replicas,
        "rw": s.last_rewrite_at,
        "st": s.last_starting_at,
    }
    if s.last_blocked_at is not None:
        out["b"] = s.last_blocked_at
    cap = s.capacity
    if cap.estimate is not None:
        c = cap.estimate
        out["c"] = [_sig(c.tokens_per_second), c.samples, c.learned_at]
    if cap.forecast is not None:
        d = cap.forecast
        out["d"] = [_sig(d.level), _sig(d.trend), _sig(d.burstiness), d.at, d.samples]
        if d.falling_since is not None and d.trough is not None:
            out["df"] = [d.falling_since, _sig(d.trough)]
        if d.high_at is not None and d.high is not None and d.low is not None:
            out["dh"] = [d.high_at, _sig(d.high), _sig(d.low)]
    if cap.lower is not None or cap.upper is not None:
        out["cb"] = [None if b is None else _sig(b) for b in (cap.lower, cap.upper)]
    if cap.served is not None:
        out["cs"] = _sig(cap.served)
    f = cap.fit
    if f.windows:
        out["cf"] = [
            *(_sig(x) for x in (f.prefill_measured, f.prefill_priced)),
            *(_sig(x) for x in (f.decode_measured, f.decode_priced)),
            f.learned_at,
            f.windows,
        ]
    if cap.unit != CapacityUnit.WEIGHTED_TOKENS.value and (
        cap.estimate is not None
        or cap.forecast is not None
        or "cb" in out
        or "cs" in out
        or "cf" in out
    ):
        out["cu"] = cap.unit  # the unit of the numbers above (absent: weighted tokens)
    if s.load_times.recent:
        out["l"] = [_sig(x) for x in s.load_times.recent]
    if s.load_times.watching:
        out["lw"] = sorted(s.load_times.watching)
    if s.learning_floor is not None:
        out["lf"] = [s.learning_floor.replicas, _sig(s.learning_floor.level)]
    return out


def _sig(x: float) -> float:
    """``x`` to six significant digits: learned rates need no more, and the state of every
    target shares one Lease annotation."""
    return float(f"{x:.6g}")


def _finite(x: object, what: str, *, positive: bool = False) -> float:
    value = float(x)  # type: ignore[arg-type]
    if not math.isfinite(value) or value < 0 or (positive and value == 0):
        raise ValueError(f"{what} {x!r} is not a finite number >= 0")
    return value


def _decode_capacity(data: object) -> CapacityEstimate | None:
    if data is None:
        return None
    if not isinstance(data, list) or len(data) != 3:
        raise ValueError(f"capacity {data!r} is not [tokens/s, samples, learned_at]")
    value, samples, at = data
    return CapacityEstimate(
        _finite(value, "capacity", positive=True),
        int(samples),
        None if at is None else float(at),
    )


def _decode_demand(data: object, falling: object, high: object) -> DemandForecast | None:
    if data is None:
        return None
    if not isinstance(data, list) or len(data) != 5:
        raise ValueError(f"demand {data!r} is not [level, trend, burstiness, at, samples]")
    level, trend, burst, at, samples = data
    trend_value = float(trend)
    if not math.isfinite(trend_value):
        raise ValueError(f"demand trend {trend!r} is not finite")
    since, trough = None, None
    if falling is not None:
        if not isinstance(falling, list) or len(falling) != 2:
            raise ValueError(f"demand fall {falling!r} is not [since, trough]")
        since, trough = float(falling[0]), _finite(falling[1], "demand trough")
        if not math.isfinite(since):  # a NaN start would read as a fall of any length
            raise ValueError(f"demand fall start {falling[0]!r} is not finite")
    high_at, high_level, low = None, None, None
    if high is not None:
        if not isinstance(high, list) or len(high) != 3:
            raise ValueError(f"demand high {high!r} is not [at, high, low]")
        high_at = float(high[0])
        if not math.isfinite(high_at):  # a NaN time would read as a high of any age
            raise ValueError(f"demand high time {high[0]!r} is not finite")
        high_level, low = _finite(high[1], "demand high"), _finite(high[2], "demand low")
    return DemandForecast(
        _finite(level, "demand level"),
        trend_value,
        _finite(burst, "demand burstiness"),
        float(at),
        int(samples),
        since,
        trough,
        high_at,
        high_level,
        low,
    )


def _decode_cost_fit(data: object) -> CostFit:
    if data is None:
        return CostFit()
    if not isinstance(data, list) or len(data) != 6:
        raise ValueError(
            f"cost fit {data!r} is not [prefill measured, prefill priced, decode measured, "
            "decode priced, learned_at, windows]"
        )
    pm, pp, dm, dp, at, windows = data
    return CostFit(
        _finite(pm, "cost fit prefill measured"),
        _finite(pp, "cost fit prefill priced"),
        _finite(dm, "cost fit decode measured"),
        _finite(dp, "cost fit decode priced"),
        None if at is None else float(at),
        int(windows),
    )


def _decode_capacity_memory(data: dict[str, object]) -> CapacityMemory:
    bounds = data.get("cb") or [None, None]
    if not isinstance(bounds, list) or len(bounds) != 2:
        raise ValueError(f"capacity bounds {bounds!r} are not [lower, upper]")
    lower, upper = (None if b is None else _finite(b, "capacity bound") for b in bounds)
    served = data.get("cs")
    unit = data.get("cu", CapacityUnit.WEIGHTED_TOKENS.value)
    if unit not in {u.value for u in CapacityUnit}:
        raise ValueError(f"capacity unit {unit!r} is not one of {', '.join(CapacityUnit)}")
    return CapacityMemory(
        _decode_capacity(data.get("c")),
        _decode_demand(data.get("d"), data.get("df"), data.get("dh")),
        lower,
        upper,
        served=None if served is None else _finite(served, "capacity served", positive=True),
        unit=str(unit),
        fit=_decode_cost_fit(data.get("cf")),
    )


def _decode_learning_floor(data: object) -> LearningFloor | None:
    if data is None:
        return None
    if not isinstance(data, list) or len(data) != 2:
        raise ValueError(f"learning floor {data!r} is not [replicas, demand level]")
    replicas, level = data
    return LearningFloor(int(replicas), _finite(level, "learning floor level", positive=True))


def _names(data: object, what: str) -> frozenset[str]:
    if not isinstance(data, list) or not all(isinstance(x, str) for x in data):
        raise ValueError(f"{what} {data!r} is not a list of names")
    return frozenset(data)


def _decode_load_times(recent: object, watching: object) -> LoadTimes:
    if not isinstance(recent, list):
        raise ValueError(f"model load times {recent!r} are not a list")
    return LoadTimes(
        recent=tuple(_finite(x, "model load time") for x in recent)[-RECENT_STARTS:],
        watching=_names(watching, "pods starting"),
    )


def decode_state(data: object) -> TargetState:
    """The inverse of :func:`encode_state`.

    Raises:
        ValueError: ``data`` is not an encoded state.
    """
    if not isinstance(data, dict):
        raise ValueError("state is not an object")
    try:
        recs = tuple(Recommendation(float(at), int(n)) for at, n in data.get("r") or [])
        events = tuple(ScaleEvent(float(at), int(a), int(b)) for at, a, b in data.get("e") or [])
        written = data.get("w")
        rewrite = data.get("rw")
        starting = data.get("st")  # absent in states saved before it existed
        blocked = data.get("b")  # likewise
        return TargetState(
            recommendations=tuple(sorted(recs, key=lambda r: r.at)),
            scale_events=tuple(sorted(events, key=lambda e: e.at)),
            last_written_replicas=None if written is None else int(written),
            last_rewrite_at=None if rewrite is None else float(rewrite),
            last_starting_at=None if starting is None else float(starting),
            last_blocked_at=None if blocked is None else float(blocked),
            # absent in states saved before the capacity signal existed
            capacity=_decode_capacity_memory(data),
            load_times=_decode_load_times(data.get("l") or [], data.get("lw") or []),
            learning_floor=_decode_learning_floor(data.get("lf")),  # absent before it existed
        )
    except (TypeError, ValueError) as err:
        raise ValueError(f"not an encoded target state: {err}") from None


def resume(
    state: TargetState, *, saved_at: float, current_replicas: int, now: float, max_gap: float
) -> TargetState:
    """The state a new leader starts from, given what the previous leader saved.

    When the save is recent (``now - saved_at <= max_gap``, a takeover) the history is kept as
    it is, so the stabilization window and step limits continue where they were. When it is
    older (both instances were down), the history has a hole of unknown length: the current
    replicas are added at ``now``, as :func:`decide` seeds a fresh start, so a restart never
    scales down at once (nor after a window shortened by a steady fall: the seeding counts as
    a blocked cycle); the own writes are kept for the step limits either way.
    """
    if now - saved_at <= max_gap and state.recommendations:
        return state
    return state.reseeded(current_replicas, now, keep_history=True)
