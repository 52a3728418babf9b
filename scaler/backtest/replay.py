"""Replay history through the decision core: what the policy would have done.

The model (simple, and honest about what it cannot know):

- The signals are what happened under the *actual* replica counts. Per-pod signals are sums
  over the pods (waiting requests, KV-cache usage), so they approximate demand whatever the
  replica count: the core divides them by the policy's own replicas. TTFT is the latency the
  actual fleet gave; with more or fewer replicas it would have been different, and the replay
  cannot know how. Treat a TTFT-driven decision as a hint, not a prediction.
- The policy keeps its own replica count R, starting at the actual ``spec.replicas`` at the
  first step; ``min(R, actual ready)`` of them are ready then and the rest become ready
  ``model_load_seconds`` after the start.
- Each step is one control cycle at that time (so the step is the control interval):
  :func:`~scaler.core.decide.decide` gets ``current = R``, ``ready`` = the policy's replicas
  whose model load has finished, ``starting`` = the rest, and the state it returned last step;
  every change is recorded with :func:`~scaler.core.state.record_write`, as the controller
  records a successful write.
- A replica added at time t is ready at ``t + model_load_seconds``. Removal is immediate (no
  draining, no stuck replicas); the core never scales down while replicas are loading, so a
  scale-down removes ready ones.
- The capacity signal (:mod:`scaler.core.capacity`) gets each step's throughput reading and
  the actual pods (history's, with their ready times; :mod:`.classify`), as the controller
  gives it the fleet it reads, and learns its estimate and forecast in the replay's own state
  from the first step (its seed, else nothing: a backtest starts as a controller that has
  just started). Demand is what the actual fleet served, so like queue depth it stands for
  the demand whatever the replica count; a capacity sample is taken, as live, only when the
  actual fleet was busy with TTFT within (or beyond) its target. Its model load time, the
  forecast's horizon, is ``model_load_seconds``: the load time of every replica of the replay
  (the controller learns it from its starts; history does not say when a pod was created).
- A step without actual replicas (the source had no sample: before the workload existed,
  a scrape gap) is a gap: its actual replicas are None, never made up, and
  :attr:`ReplaySummary.actual_missing_steps` counts it. The policy keeps deciding on the
  signals through a gap, its state carried, as the controller would (it starts from the first
  known actual ``spec.replicas``), but a gap is left out of every comparison with actual.
  Where only the ready count is missing, ``spec.replicas`` stands in for it.

Replica-hours integrate ``spec.replicas`` (asked for, so loading replicas count) over the
covered steps only (those with actual replicas), for actual, policy and shadow alike: each
step's count holds until the next step; ``covered_seconds`` says how much time that is.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from scaler.config.policy import TargetPolicy
from scaler.config.signal_specs import CapacityUnit
from scaler.config.vocabulary import SignalName
from scaler.core.capacity import demand_of
from scaler.core.decide import decide
from scaler.core.evaluation import SignalEvaluation
from scaler.core.load_time import LoadTimes
from scaler.core.observation import Observation, PodInfo, ReplicaCounts, ThroughputReading
from scaler.core.phases import SeasonalAsk
from scaler.core.reasons import Reason
from scaler.core.seasonal import SeasonalSchedule
from scaler.core.signals import SignalReading, SignalStatus
from scaler.core.sizing import CapacityView
from scaler.core.state import TargetState, record_write

__all__ = ["ReplayResult", "ReplayStep", "ReplaySummary", "ScaleChange", "fill_gaps", "replay"]


@dataclass(frozen=True, slots=True)
class ReplayStep:
    """One step of the replay.

    Attributes:
        at: Unix seconds.
        actual_replicas: actual ``spec.replicas``; None in a gap (no sample).
        actual_ready: actual ready replicas (``spec.replicas`` where only it is known); None
            in a gap.
        policy_replicas: the policy's ``spec.replicas`` after this step's decision.
        policy_ready: the policy's ready replicas when it decided.
        recommended: what the signals asked for (before stabilization, step limit, min/max).
        reason: the decision's reason.
        message: the decision's sentence.
        signals: the readings the decision saw.
        capacity: what the capacity signal saw and computed (demand, forecast, learned
            capacity, utilization); None when the policy does not enable it.
        evaluations: each enabled signal's evaluation (per-pod signals per replica).
        pods: the pods history showed at this step (those with a ``running`` sample, each
            with its ready time as inferred: :mod:`scaler.backtest.classify`); empty when
            not known.
        seasonal: what the seasonal forecast asked for at this step, as it would have been
            then (:func:`seasonal_schedule`); None without the capacity signal.
    """

    at: float
    actual_replicas: int | None
    actual_ready: int | None
    policy_replicas: int
    policy_ready: int
    recommended: int
    reason: Reason
    message: str
    signals: Mapping[SignalName, SignalReading]
    capacity: CapacityView | None = None
    evaluations: tuple[SignalEvaluation, ...] = ()
    pods: tuple[PodInfo, ...] = ()
    seasonal: SeasonalAsk | None = None


@dataclass(frozen=True, slots=True)
class ScaleChange:
    """A change of ``spec.replicas``: at (Unix seconds), from, to, and the policy's reason."""

    at: float
    from_replicas: int
    to_replicas: int
    reason: str = ""


@dataclass(frozen=True, slots=True)
class ReplaySummary:
    """Totals of one replay.

    Attributes:
        actual_replica_hours, policy_replica_hours: replica-hours of ``spec.replicas`` over
            the covered time only (steps with actual replicas).
        actual_peak, policy_peak: the largest ``spec.replicas`` (actual: at covered steps).
        actual_events, policy_events: every change of ``spec.replicas`` (actual: between
            consecutive covered steps).
        below_actual_steps: steps where the policy had fewer replicas than actual.
        above_actual_steps: steps where it had more.
        ttft_above_target_steps: steps whose observed TTFT (``ok``) was above the target;
            None when the policy does not enable ``ttft_p95``.
        risk_steps: steps below actual while the observed TTFT was above the target (the
            policy would have served a slow moment with less); None without ``ttft_p95``.
        relief_steps: steps above actual while the observed TTFT was above the target (the
            policy would have added capacity when it was needed); None without ``ttft_p95``.
        actual_missing_steps: steps without an actual sample (gaps).
        covered_seconds: the time the replica-hours cover (each covered step until the next).
        total_seconds: the whole replayed time (first step to last).
        signal_status: signal -> status -> steps.
        reasons: reason -> steps.
    """

    actual_replica_hours: float
    policy_replica_hours: float
    actual_peak: int
    policy_peak: int
    actual_events: tuple[ScaleChange, ...]
    policy_events: tuple[ScaleChange, ...]
    below_actual_steps: int
    above_actual_steps: int
    ttft_above_target_steps: int | None
    risk_steps: int | None
    relief_steps: int | None
    actual_missing_steps: int
    covered_seconds: float = 0.0
    total_seconds: float = 0.0
    signal_status: dict[str, dict[str, int]] = field(default_factory=dict)
    reasons: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ReplayResult:
    """The steps and the summary of one target's replay, and the model load time it assumed
    (``model_load_seconds``, seconds: every replica of the replay loads in it), and the unit
    of its steps' capacity numbers (``capacity_unit``: the policy's ``signals.capacity.unit``)."""

    target: str
    steps: tuple[ReplayStep, ...]
    summary: ReplaySummary
    model_load_seconds: float
    capacity_unit: CapacityUnit = CapacityUnit.WORK


def fill_gaps(values: Sequence[float | None]) -> tuple[list[int], int]:
    """Fill missing values: forward with the last known one, leading gaps with the first.

    Returns:
        The filled values (rounded to whole replicas) and how many were missing.

    Raises:
        ValueError: no value at all.
    """
    known = [v for v in values if v is not None]
    if not known:
        raise ValueError("no value at any step")
    last = known[0]
    out: list[int] = []
    missing = 0
    for v in values:
        if v is None:
            missing += 1
        else:
            last = v
        out.append(round(last))
    return out, missing


def _replica_hours(
    times: Sequence[float], replicas: Sequence[int], covered: Sequence[bool]
) -> float:
    """Replica-hours over the covered steps: step i's count holds until step i + 1."""
    total = 0.0
    for i in range(len(times) - 1):
        if covered[i]:
            total += replicas[i] * (times[i + 1] - times[i])
    return total / 3600.0


def _changes(times: Sequence[float], replicas: Sequence[int | None]) -> list[ScaleChange]:
    """Changes between consecutive known counts (a gap in between is skipped, not a change)."""
    out: list[ScaleChange] = []
    last: int | None = None
    for t, r in zip(times, replicas, strict=True):
        if r is None:
            continue
        if last is not None and r != last:
            out.append(ScaleChange(t, last, r))
        last = r
    return out


def seasonal_schedule(
    policy: TargetPolicy,
    times: Sequence[float],
    throughput: Sequence[ThroughputReading | None],
    *,
    horizon_seconds: float,
    interval_seconds: float,
) -> SeasonalSchedule:
    """The seasonal forecast of a replay from its own history: each 10-minute window's
    highest demand (the capacity signal's, :func:`~scaler.core.capacity.demand_of`, of the
    steps with a usable reading; None without one), refitted hourly on the windows that ended
    before each refit only (:class:`~scaler.core.seasonal.SeasonalSchedule`). A replay of less
    than three days has the forecast off throughout (it needs that much history)."""
    step = 600.0
    start = math.floor(times[0] / step) * step
    n = math.floor((times[-1] - start) / step) + 1
    peaks: list[float | None] = [None] * n
    for t, reading in zip(times, throughput, strict=True):
        if reading is None or reading.status is not SignalStatus.OK or not reading.pods:
            continue
        w = math.floor((t - start) / step)
        demand = demand_of(policy, reading)[0]
        old = peaks[w]
        peaks[w] = demand if old is None else max(old, demand)
    return SeasonalSchedule(
        peaks, 0, horizon_seconds, interval_seconds, step_seconds=step, start_at=start
    )


def replay(
    policy: TargetPolicy,
    times: Sequence[float],
    readings: Sequence[Mapping[SignalName, SignalReading]],
    actual_spec: Sequence[float | None],
    actual_ready: Sequence[float | None],
    *,
    model_load_seconds: float,
    ttft_window_seconds: float,
    throughput: Sequence[ThroughputReading | None] | None = None,
    pods: Sequence[tuple[PodInfo, ...]] | None = None,
) -> ReplayResult:
    """Replay one target's history through :func:`~scaler.core.decide.decide`.

    Args:
        policy: the target's policy.
        times: evaluation times, Unix seconds, increasing.
        readings: per step, one reading per enabled signal.
        actual_spec, actual_ready: the actual replicas per step (None where unknown).
        model_load_seconds: seconds from a scale-up until the new replicas are ready (the
            backtest gives the policy's ``signals.capacity.model_load_seconds`` unless
            ``--model-load-seconds`` is given).
        ttft_window_seconds: the TTFT ``rate()`` window (the policy's ``rate_window_seconds``).
        throughput: per step, the capacity signal's input (None: not read, at every step or
            at one).
        pods: per step, the actual pods (their ready times; None: unknown).

    Raises:
        ValueError: the sequences differ in length, are empty, or the actual replicas are
            unknown at every step.
    """
    n = len(times)
    if n == 0 or not len(readings) == len(actual_spec) == len(actual_ready) == n:
        raise ValueError("times, readings and actual replicas must have the same, non-zero length")
    if (throughput is not None and len(throughput) != n) or (pods is not None and len(pods) != n):
        raise ValueError("throughput and pods must have one entry per step")
    # filled only to start the policy from the first known count, never reported as actual
    spec, missing = fill_gaps(actual_spec)
    ready_known = [
        r if r is not None else s for r, s in zip(actual_ready, actual_spec, strict=True)
    ]
    ready = fill_gaps(ready_known)[0]
    covered = [v is not None for v in actual_spec]
    first = covered.index(True)

    r = max(spec[first], 0)
    start_ready = min(r, ready[first])
    # Time at which each of the policy's replicas is (or was) ready.
    ready_at = [-math.inf] * start_ready + [times[0] + model_load_seconds] * (r - start_ready)
    # Every replica of the replay loads in model_load_seconds: the load time the controller
    # would have learned from its own starts (the capacity forecast's horizon).
    state = TargetState.seeded(r, times[0])
    state = replace(state, load_times=LoadTimes(recent=(model_load_seconds,)))
    interval = times[1] - times[0] if n > 1 else 15.0
    schedule = (
        seasonal_schedule(
            policy,
            times,
            throughput,
            horizon_seconds=model_load_seconds + interval,
            interval_seconds=interval,
        )
        if throughput is not None and policy.signals.capacity_enabled
        else None
    )
    steps: list[ReplayStep] = []
    policy_events: list[ScaleChange] = []
    statuses: dict[str, dict[str, int]] = {}
    reasons: dict[str, int] = {}
    for i, now in enumerate(times):
        n_ready = sum(1 for t in ready_at if t <= now)
        counts = ReplicaCounts(current=r, status=r, ready=n_ready, starting=r - n_ready)
        observation = Observation(
            counts,
            readings[i],
            throughput=throughput[i] if throughput is not None else None,
            pods=pods[i] if pods is not None else (),
            seasonal=schedule(now) if schedule is not None else None,
        )
        decision = decide(
            policy,
            observation,
            state,
            now,
            ttft_window_seconds=ttft_window_seconds,
        )
        state = decision.state
        desired = decision.desired_replicas
        if desired != r:
            state = record_write(state, from_replicas=r, to_replicas=desired, now=now)
            policy_events.append(ScaleChange(now, r, desired, str(decision.reason)))
            if desired > r:
                ready_at.extend([now + model_load_seconds] * (desired - r))
            else:
                ready_at.sort()  # loading replicas (latest ready times) go first
                del ready_at[desired:]
            r = desired
        steps.append(
            ReplayStep(
                at=now,
                actual_replicas=spec[i] if covered[i] else None,
                actual_ready=ready[i] if covered[i] else None,
                policy_replicas=r,
                policy_ready=n_ready,
                recommended=decision.recommended_replicas,
                reason=decision.reason,
                message=decision.message,
                signals=readings[i],
                capacity=decision.capacity,
                seasonal=decision.seasonal,
                evaluations=decision.signals,
                pods=observation.pods,
            )
        )
        reasons[str(decision.reason)] = reasons.get(str(decision.reason), 0) + 1
        for name, reading in readings[i].items():
            per = statuses.setdefault(str(name), {})
            per[str(reading.status)] = per.get(str(reading.status), 0) + 1

    policy_r = [s.policy_replicas for s in steps]
    ttft_on = SignalName.TTFT_P95 in policy.signals.enabled()
    target_s = policy.signals.ttft_p95.target_seconds
    slow = [
        (rd := s.signals.get(SignalName.TTFT_P95)) is not None
        and rd.status is SignalStatus.OK
        and rd.value is not None
        and rd.value > target_s
        for s in steps
    ]
    below = [s.actual_replicas is not None and s.policy_replicas < s.actual_replicas for s in steps]
    above = [s.actual_replicas is not None and s.policy_replicas > s.actual_replicas for s in steps]
    summary = ReplaySummary(
        actual_replica_hours=_replica_hours(times, spec, covered),
        policy_replica_hours=_replica_hours(times, policy_r, covered),
        actual_peak=max(v for v, c in zip(spec, covered, strict=True) if c),
        policy_peak=max(policy_r),
        actual_events=tuple(_changes(times, [s.actual_replicas for s in steps])),
        policy_events=tuple(policy_events),
        below_actual_steps=sum(below),
        above_actual_steps=sum(above),
        ttft_above_target_steps=sum(slow) if ttft_on else None,
        risk_steps=sum(b and s for b, s in zip(below, slow, strict=True)) if ttft_on else None,
        relief_steps=sum(a and s for a, s in zip(above, slow, strict=True)) if ttft_on else None,
        actual_missing_steps=missing,
        covered_seconds=sum(times[i + 1] - times[i] for i in range(n - 1) if covered[i]),
        total_seconds=times[-1] - times[0],
        signal_status=statuses,
        reasons=reasons,
    )
    return ReplayResult(
        policy.key, tuple(steps), summary, model_load_seconds, policy.signals.capacity.unit
    )
