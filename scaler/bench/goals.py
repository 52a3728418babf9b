"""The goals the benchmark checks for vllm-scaler on a trace, as the project states them.

- (a) on steady or gradual load: at least 99% of the accepted requests within both SLOs
  (TTFT and ITL), at no more than 1.2x the GPU-hours of the optimal load-paying reference;
- (b) on bursts from idle shorter than a model load (:data:`BURST_TRACES`): a share within
  both SLOs at least the hindsight-reactive reference's minus one point, at no more than 1.2x
  its GPU-hours;
- (c) no baseline row (KEDA, HPA on KV, KPA-style) both cheaper and better;
- (d) no sawtooth and no request cut by a scale-down;
- (e) the learned capacity within 25% of the replica model's true capacity on the trace's mix,
  10 minutes after each shift of the mix, the cache-hit rate or the replicas asleep (on a trace
  without shifts: at the end of each window).

Shares and GPU-hours are means over the routing seeds.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from scaler.bench.figures import RowFigures

__all__ = [
    "BASELINES",
    "BURST_TRACES",
    "CAPACITY_TOLERANCE",
    "COST_GOAL",
    "CapacityCheck",
    "Goal",
    "goals_for",
]

#: Traces whose bursts start from idle and end before a model load could answer them.
BURST_TRACES = frozenset({"code", "synthetic:flash"})
#: The rows a policy is compared with for "no baseline both cheaper and better".
BASELINES = ("keda-queue", "hpa-kv", "kpa")
#: The most GPU-hours a policy may spend over its reference.
COST_GOAL = 1.2
#: How far the learned capacity may be from the true one, a fraction.
CAPACITY_TOLERANCE = 0.25
_SHARE = 0.99
_REACTIVE_MARGIN = 0.01


@dataclass(frozen=True, slots=True)
class Goal:
    """One goal, with the measured number and whether it is met."""

    text: str
    measured: str
    met: bool


@dataclass(frozen=True, slots=True)
class CapacityCheck:
    """The learned capacity against the true one at one instant.

    Attributes:
        at_seconds: when it is read (10 minutes after a shift, or a window's end).
        after: what changed (``start`` for the first segment).
        true: the replica model's true capacity on the segment's mix, in the learned unit.
        learned: the learned capacity then (None: nothing learned yet).
    """

    at_seconds: float
    after: str
    true: float
    learned: float | None

    @property
    def ratio(self) -> float:
        """Learned over true (NaN without an estimate)."""
        return math.nan if self.learned is None or self.true <= 0 else self.learned / self.true

    @property
    def within(self) -> bool:
        """Within :data:`CAPACITY_TOLERANCE` of the truth."""
        return abs(self.ratio - 1) <= CAPACITY_TOLERANCE


def _pct(x: float) -> str:
    return f"{100 * x:.2f}%"


def goals_for(
    trace: str,
    rows: Mapping[str, RowFigures],
    capacity: Sequence[CapacityCheck],
    *,
    reference: str = "hindsight-load",
    reactive: str = "hindsight-reactive",
) -> tuple[Goal, ...]:
    """The goals for the ``vllm-scaler`` row on ``trace`` (see the module docstring)."""
    us = rows["vllm-scaler"]
    share = us.mean("both_request_share")
    cost = us.mean("gpu_hours")
    goals: list[Goal] = []
    if trace in BURST_TRACES:
        ref = rows[reactive]
        floor = ref.mean("both_request_share") - _REACTIVE_MARGIN
        ratio = cost / ref.mean("gpu_hours") if ref.mean("gpu_hours") else math.inf
        goals.append(
            Goal(
                f"(b) within both SLOs at least {reactive}'s minus 1 point ({_pct(floor)})",
                _pct(share),
                share >= floor,
            )
        )
        goals.append(
            Goal(
                f"(b) GPU-hours <= {COST_GOAL:g}x {reactive}'s", f"{ratio:.2f}x", ratio <= COST_GOAL
            )
        )
    else:
        ref = rows[reference]
        ratio = cost / ref.mean("gpu_hours") if ref.mean("gpu_hours") else math.inf
        goals.append(
            Goal(">= 99% of accepted requests within both SLOs", _pct(share), share >= _SHARE)
        )
        goals.append(
            Goal(
                f"(a) GPU-hours <= {COST_GOAL:g}x {reference}'s",
                f"{ratio:.2f}x",
                ratio <= COST_GOAL,
            )
        )
    dominating = [
        name
        for name in BASELINES
        if name in rows
        and rows[name].mean("gpu_hours") < cost
        and rows[name].mean("both_request_share") > share
    ]
    goals.append(
        Goal(
            f"(c) no baseline ({', '.join(BASELINES)}) both cheaper and better",
            ", ".join(dominating) if dominating else "none",
            not dominating,
        )
    )
    saw = sum(r.sawtooth for r in us.runs)
    cut = sum(r.cut for r in us.runs)
    goals.append(
        Goal("(d) no sawtooth, no request cut", f"{saw} teeth, {cut} cut", not saw and not cut)
    )
    if capacity:
        learned_all = all(not math.isnan(c.ratio) for c in capacity)
        goals.append(
            Goal(
                "(e) learned capacity within 25% of the true one (10 min after each shift)",
                ", ".join(
                    f"{c.after} {'none' if math.isnan(c.ratio) else f'{c.ratio:.2f}x'}"
                    for c in capacity
                ),
                learned_all and all(c.within for c in capacity),
            )
        )
    return tuple(goals)
