"""The capacity signal's sizing: the demand, the backlog, the horizon, the replicas asked for.

Pure: no I/O, no clock reads. :func:`evaluate_capacity` runs the signal each cycle: it lets
:mod:`scaler.core.capacity` learn what one replica serves at the SLO from the window
(:func:`~scaler.core.capacity.learn_from_window`), then sizes the fleet for the demand.

**Demand** is the sum over the ready pods of their weighted token rates (a pod Ready for less
than 1.5 rate windows has a rate over a window it served only part of: it is counted at the
mean of the others), plus the work already waiting (waiting requests times the mean weighted
tokens per finished request) spread over the horizon. The forecast
(:mod:`scaler.core.forecast`) extends it to the horizon: the model load time learned from the
target's own starts (:mod:`scaler.core.load_time`) plus half the rate window, by which the
rates lag.

**The decision.** ``desired = ceil(forecast demand / (capacity x target_utilization))``,
through the same tolerance band as the other signals and combined with them by max: the
capacity signal adds replicas before the queue builds and keeps them while the forecast needs
them (a scale-down goes only as low as the remaining replicas serve the forecast at the target
utilization); the queue, KV-cache and TTFT signals stay as safety nets (TTFT adds one replica
at most when this signal measures the demand below its target utilization and fewer than half
the pods are busy: :func:`scaler.core.guards.not_load`). The replicas above
what it asks for are a known surplus: a scale-down may remove a share of them per period
(``scale_down.max_surplus_percent_per_period``, :func:`scaler.core.decide.limit_step`), so a
fleet the queue took far past the need after a surge comes back in minutes, not at one
replica a minute; and once the demand has fallen for a whole scale-down window without a rise,
that window shortens to follow the fall (:func:`scaler.core.decide.down_window_seconds`).
Until an estimate exists the signal is ``learning``: it asks for nothing
and holds back nothing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from scaler.config.policy import TargetPolicy
from scaler.config.signal_specs import CapacityCost, CapacityUnit
from scaler.config.vocabulary import SignalName
from scaler.config.wording import counted
from scaler.core.capacity import (
    READY_WINDOWS,
    CapacityEstimate,
    CapacityMemory,
    CapacitySample,
    demand_of,
    learn_from_window,
    sizing_capacity,
    work_cost,
)
from scaler.core.cost_fit import learn_cost
from scaler.core.evaluation import SignalEvaluation, banded, ceil_replicas
from scaler.core.forecast import DemandForecast, observe_demand
from scaler.core.observation import Observation, ThroughputReading
from scaler.core.signals import SignalStatus

__all__ = [
    "CapacityView",
    "arrival_rate",
    "evaluate_capacity",
    "forecast_demand",
    "horizon_seconds",
    "human",
]


@dataclass(frozen=True, slots=True)
class CapacityView:
    """What the capacity signal saw and computed this cycle (for messages, metrics, reports).

    Attributes:
        demand_tokens_per_second: weighted tokens/s the ready pods served over the rate
            window (a lower bound when the reading is ``partial``); None when unusable.
        waiting_tokens: weighted tokens of the requests waiting (None: unknown).
        forecast_tokens_per_second: the demand the horizon is sized for (forecast peak plus
            the waiting work spread over the horizon); None when unusable.
        capacity_tokens_per_second: the estimate used (None: still learning).
        utilization: demand over what the ready replicas serve at the estimate, a 0-1+ ratio
            (None when either is unknown).
        horizon_seconds: the forecast horizon, seconds.
        model_load_seconds: the learned model load time (None: none observed yet).
        sample: this cycle's capacity sample, if one was taken.
        samples: samples the estimate rests on.
        served_tokens_per_second: the rate the ready pods served over the window, in the
            signal's unit (``demand_tokens_per_second`` is the rate arriving: this plus the
            backlog's growth); None when unusable.
        prefill_factor, decode_factor: the online fit's scale of the cost profile's prefill
            and decode prices (1: the profile; :mod:`scaler.core.cost_fit`).
        cost_windows: the windows the fit learned from (0: the profile as given).
    """

    demand_tokens_per_second: float | None
    waiting_tokens: float | None
    forecast_tokens_per_second: float | None
    capacity_tokens_per_second: float | None
    utilization: float | None
    horizon_seconds: float
    model_load_seconds: float | None
    sample: CapacitySample | None
    samples: int
    served_tokens_per_second: float | None = None
    prefill_factor: float = 1.0
    decode_factor: float = 1.0
    cost_windows: int = 0


def _settled_demand(
    policy: TargetPolicy, observation: Observation, window_seconds: float, cost: CapacityCost
) -> tuple[float, float | None, bool]:
    """``(demand, demand per finished request, settled)`` of this cycle's throughput reading.

    A pod Ready for less than 1.5 rate windows has a rate over a window it served only part
    of, which reads low (a new pod, or every pod of a fleet that just started). When some pods
    have a whole window, the others are counted at their mean rate (a Service or gateway
    spreads requests over the ready pods); when none has, the reading is taken as it is and
    ``settled`` is False (the forecast does not learn a trend or burstiness from it).
    """
    reading = observation.throughput
    assert reading is not None
    since = {p.name: p.ready_seconds for p in observation.pods if p.ready and not p.terminating}
    full = READY_WINDOWS * window_seconds
    whole = {
        name: pod
        for name, pod in reading.pods.items()
        if (r := since.get(name)) is not None and r >= full
    }
    # The work per finished request is a ratio of two rates over the same window: a pod's
    # part-window reads low in both, so it is taken over every pod, never from the Ready times
    # (which history knows only to a scrape: the backlog priced with it would differ).
    demand, per_request = demand_of(policy, reading, cost)
    if not whole or len(whole) == len(reading.pods):
        return demand, per_request, bool(whole)
    demand, _ = demand_of(policy, ThroughputReading(reading.status, whole), cost)
    return demand * len(reading.pods) / len(whole), per_request, True


def horizon_seconds(
    policy: TargetPolicy, learned_load_seconds: float | None, window_seconds: float
) -> float:
    """The forecast horizon, seconds: the model load time (learned, else the policy's
    ``capacity.model_load_seconds``) plus half the rate window, by which the rates lag."""
    load = (
        learned_load_seconds
        if learned_load_seconds is not None
        else policy.signals.capacity.model_load_seconds
    )
    return load + window_seconds / 2


def forecast_demand(
    policy: TargetPolicy,
    forecast: DemandForecast | None,
    demand: float,
    waiting_tokens: float | None,
    horizon: float,
    drain_seconds: float | None = None,
) -> float:
    """The demand the fleet is sized for, in the signal's unit per second: the forecast's peak
    over the horizon (the demand read now before a forecast exists), plus the waiting work to
    drain within ``drain_seconds`` (default: the horizon; the policy's
    ``backlog_drain_seconds``). A backlog is work to do once, not a rate: as it drains, this
    term shrinks and the extra replicas it asked for are released."""
    peak = demand
    if forecast is not None:
        # never below the rate arriving now: the level, smoothed over minutes, lags a step
        peak = max(demand, forecast.peak(horizon, policy.signals.capacity.headroom))
    return peak + (waiting_tokens or 0.0) / (drain_seconds or horizon)


def human(x: float) -> str:
    """Tokens/s in a short human form: 812, 5.2k, 41.2k, 1.3M."""
    if x >= 1e6:
        return f"{x / 1e6:.3g}M"
    if x >= 1e3:
        return f"{x / 1e3:.3g}k"
    return f"{x:.3g}"


def evaluate_capacity(
    policy: TargetPolicy,
    observation: Observation,
    memory: CapacityMemory,
    learned_load_seconds: float | None,
    now: float,
    *,
    window_seconds: float,
) -> tuple[SignalEvaluation, CapacityView, CapacityMemory]:
    """The capacity signal's evaluation this cycle, and the estimate and forecast after it.

    Args:
        policy: the target's policy (``signals.capacity`` enabled).
        observation: this cycle's observation (throughput, TTFT reading, pods).
        memory: what the signal kept from the last cycle.
        learned_load_seconds: the learned model load time (None: none observed).
        now: the controller's clock, seconds.
        window_seconds: the ``rate()`` window of the throughput and TTFT queries, seconds.

    Returns:
        ``(evaluation, view, memory)``. The evaluation's value is the forecast
        demand per replica asked for and its target the capacity times the target utilization,
        both in weighted tokens/s; ``demand_replicas`` is ``ceil(forecast / (capacity x
        utilization))``. Its status is the throughput reading's, or ``learning`` while no
        estimate exists. Never raises.
    """
    counts = observation.replicas
    reading = observation.throughput
    cap = policy.signals.capacity
    if memory.unit != cap.unit.value:
        # Learned in another unit (a state saved before this one): start again, as a new
        # target does, rather than read weighted tokens as seconds of work.
        memory = CapacityMemory(unit=cap.unit.value)
    if cap.unit is CapacityUnit.WORK and cap.fit_cost and counts.sleeping == 0:
        # an engine asleep serves nothing: its zeros would lower the means the fit's guards
        # read, so a window with one asleep teaches no price (as it gives no capacity sample)
        fit = learn_cost(cap.cost, memory.fit, reading, now, window_seconds=window_seconds)
        memory = replace(memory, fit=fit)
    cost = work_cost(policy, memory)
    memory, sample = learn_from_window(
        policy, observation, memory, cost, now, window_seconds=window_seconds
    )
    estimate, forecast = memory.estimate, memory.forecast
    horizon = horizon_seconds(policy, learned_load_seconds, window_seconds)
    u = policy.signals.capacity.target_utilization
    sizing = sizing_capacity(policy, memory)
    per_replica = sizing * u if sizing is not None else 0.0
    if reading is None or not reading.status.usable_for_scale_up:
        status = reading.status if reading is not None else SignalStatus.EMPTY
        detail = reading.detail if reading is not None else "no throughput reading"
        if estimate is None:
            # Nothing learned and no seed: whatever the demand, the signal could ask for
            # nothing, so an unusable reading holds nothing back either (still learning).
            status = SignalStatus.LEARNING
            detail = f"no capacity estimate yet; demand unknown ({detail})"
        view = CapacityView(
            None, None, None, _tps(estimate), None, horizon, learned_load_seconds, sample,
            estimate.samples if estimate else 0, None, *_prices(policy, memory),
        )  # fmt: skip
        evaluation = SignalEvaluation(
            SignalName.CAPACITY, status, None, per_replica, None, None, None, False, detail
        )
        return evaluation, view, replace(memory, forecast=forecast)
    demand, per_request, settled = _settled_demand(policy, observation, window_seconds, cost)
    waiting = [p.waiting for p in reading.pods.values() if p.waiting is not None]
    waiting_tokens = (
        math.fsum(waiting) * per_request if waiting and per_request is not None else None
    )
    backlog = _backlog(memory.backlog, waiting_tokens, now, window_seconds)
    memory = replace(memory, backlog=backlog)
    served_demand = demand
    demand = arrival_rate(demand, backlog)
    if reading.status is SignalStatus.OK and settled:
        forecast = observe_demand(forecast, demand, now)
    drain = cap.backlog_drain_seconds or horizon
    wanted = forecast_demand(policy, forecast, demand, waiting_tokens, horizon, drain)
    awake = counts.ready - counts.sleeping
    utilization = served_demand / (sizing * awake) if sizing is not None and awake > 0 else None
    view = CapacityView(
        demand, waiting_tokens, wanted, _tps(estimate), utilization, horizon,
        learned_load_seconds, sample, estimate.samples if estimate else 0, served_demand,
        *_prices(policy, memory),
    )  # fmt: skip
    current = counts.current
    value = wanted / max(current, 1)
    if estimate is None:
        evaluation = SignalEvaluation(
            SignalName.CAPACITY,
            SignalStatus.LEARNING,
            value,
            0.0,
            None,
            None,
            None,
            False,
            f"demand {human(demand)} {cap.unit_text}; no capacity estimate yet (no seed, and the "
            "fleet has not yet been busy close to the TTFT target)",
        )
        return evaluation, view, replace(memory, forecast=forecast)
    headroom = cap.standing_headroom
    needed = wanted * (1 + headroom) / per_replica + counts.sleeping
    proposed = ceil_replicas(needed)
    ratio = needed / max(current, 1)
    ttft_target = policy.signals.ttft_p95.target_seconds
    assert sizing is not None
    served = (
        ""
        if sizing == estimate.tokens_per_second
        else f" (half the rate served with room; the estimate {human(estimate.tokens_per_second)} "
        f"rests on {estimate.samples} sample{'s' if estimate.samples > 1 else ''})"
    )
    unit = cap.unit_text
    arrival = (
        f" (arriving; {human(served_demand)} served)"
        if abs(demand - served_demand) > 0.05 * max(served_demand, 1e-12)
        else ""
    )
    extra = f", standing headroom {headroom:g}" if headroom else ""
    if view.cost_windows:
        unit += (
            f" (prices fitted on {counted(view.cost_windows, 'window')}: "
            f"prefill x{view.prefill_factor:.2f}, "
            f"decode x{view.decode_factor:.2f} the profile)"
        )
    asleep = (
        f", +{counts.sleeping} asleep (vLLM sleep mode: no capacity, kept beside the awake)"
        if counts.sleeping
        else ""
    )
    desired = banded(policy, ratio, proposed, current)
    held = f" (held at {desired}: inside the tolerance band)" if desired != proposed else ""
    # a reading without some pods' rates (not the just-Ready ones) says which
    partial = f"; {reading.detail}" if reading.status is not SignalStatus.OK else ""
    detail = (
        f"demand {human(demand)} {unit}{arrival}, forecast {human(wanted)} over {horizon:.0f} s, "
        f"capacity {human(sizing)} per replica at TTFT p95 <= {ttft_target:g} s{served}, "
        f"target utilization {u:g}{extra}{asleep}: {proposed}{held}{partial}"
    )
    evaluation = SignalEvaluation(
        SignalName.CAPACITY,
        reading.status,
        value,
        per_replica,
        ratio,
        proposed,
        desired,
        True,
        detail,
    )
    return evaluation, view, replace(memory, forecast=forecast)


def _backlog(
    history: tuple[tuple[float, float], ...],
    waiting: float | None,
    now: float,
    window_seconds: float,
) -> tuple[tuple[float, float], ...]:
    """The waiting work of the cycles of the last rate window, this one's added (an unknown
    backlog empties the history: a growth across a gap is not measured)."""
    if waiting is None or not math.isfinite(waiting):
        return ()
    kept = tuple((t, w) for t, w in history if 0 <= now - t <= window_seconds and t < now)
    return (*kept, (now, waiting))


def arrival_rate(served: float, backlog: tuple[tuple[float, float], ...]) -> float:
    """The demand arriving, in the signal's unit per second: the rate served over the window
    plus how fast the backlog grew over it (less, while it drains: a fleet draining a burst's
    queue serves more than arrives, and sizing on that rate would size the backlog as if it
    were a steady load). The served rate alone without a backlog history of at least two
    cycles; never below 0."""
    if len(backlog) < 2:
        return served
    (t0, w0), (t1, w1) = backlog[0], backlog[-1]
    if t1 <= t0:
        return served
    return max(0.0, served + (w1 - w0) / (t1 - t0))


def _prices(policy: TargetPolicy, memory: CapacityMemory) -> tuple[float, float, int]:
    """``(prefill factor, decode factor, windows)`` of the fit in use (1, 1, 0: none)."""
    cap = policy.signals.capacity
    fit = memory.fit
    if cap.unit is not CapacityUnit.WORK or not cap.fit_cost or not fit.windows:
        return 1.0, 1.0, 0
    return fit.prefill_factor, fit.decode_factor, fit.windows


def _tps(estimate: CapacityEstimate | None) -> float | None:
    return estimate.tokens_per_second if estimate is not None else None
