"""The capacity signal: the demand the fleet will see over what one replica serves at the SLO.

Pure: no I/O, no clock reads. Inputs are the target's throughput per ready pod (rates over the
``rate()`` window of vLLM's counters ``vllm:request_success_total``,
``vllm:prompt_tokens_total`` and ``vllm:generation_tokens_total``, summed over engines), each
pod's waiting requests and KV-cache usage, the TTFT reading and the pods' Ready times.

**Units.** Demand and capacity are *seconds of one replica's engine work per second* (unit
``work``, the default): :meth:`~scaler.config.signal_specs.CapacityCost.work_seconds` of the
prompt tokens computed (``vllm:prompt_tokens_total`` less ``vllm:prefix_cache_hits_total``),
and the generated tokens priced by their context (a decode step reads the batch's KV cache, and
the batch a replica runs at capacity is bounded by its KV cache over the context). A shift of
the request mix or of the prefix-cache hit rate then changes the demand, not the capacity.
Unit ``weighted_tokens`` keeps the earlier *weighted tokens per second*: prompt tokens plus
``generation_token_weight`` (default 16) times generated tokens. What a replica serves at the
SLO still depends on the mix beyond that price (how often a long prompt blocks the head of the
queue, how long requests wait for KV blocks): that is what is learned, on the target's own mix.

**Capacity estimator.** A cycle gives a sample, at most one per rate window (consecutive
cycles share most of it), when the reading can be trusted: every ready pod has its rates and
has been Ready for 1.5 rate windows, no pod is draining, TTFT is ``ok``. The sample is the
fleet's weighted tokens per second per ready replica, ``x``, and it is one of two kinds:

- *within the SLO*: TTFT p95 at or under its target while the fleet is busy (a pod has a
  request waiting, or KV-cache usage at the KV signal's target): a replica serves at least
  ``x`` within the SLO;
- *beyond the SLO*: TTFT p95 above its target by more than the scale-up tolerance while at
  least half the pods are busy, at this cycle and the one before: at ``x`` per replica the
  SLO broke, a replica's capacity is below ``x``. Here ``x`` is the rate offered, the work
  left waiting at the end of the window added; but when every pod has had a request waiting
  at every cycle for a whole window (saturated), the rate it served, which is all a replica
  can serve and more than it serves within the SLO (the queue is demand, not capacity: a
  long-prompt mix queued behind a full KV cache offers several times what it is served).
  With fewer pods busy the breach is one pod's
  bad luck (a long prompt at the head of its queue), not the fleet's load; an overload that
  does not last two cycles is a burst shorter than the window, whose rate hides in the
  window's mean (on the bench's bursty ``code`` trace such samples put the estimate at a
  third of a replica's rate).

The estimate starts from the seed, or else from the first sample within the SLO whose TTFT
is at least half its target (requests queue: the fleet is near its capacity, not merely
busy), or between a rate served within the SLO and one at which it broke at most twice as
high (their geometric mean). Then a sample within the SLO above the estimate raises it, a
sample beyond the SLO below the estimate lowers it, by one step
``eta_n = max(0.04, 0.25 / sqrt(n))`` in log space, never past the sample; a sample on the
estimate's own side says nothing new.

An estimate can rest on a single window whose TTFT came from a burst shorter than the window
rather than from the load, at a mean rate far below what a replica serves; it rises only one
bounded step per window afterwards. The signal therefore sizes with at least half the highest
rate per replica the fleet has served with room (a trusted window with TTFT p95 under half
its target, busy or not; dropped by a breach at or below it: :func:`sizing_capacity`), so
such an estimate cannot ask for many times the replicas a steady load needs. The estimate
itself, its metric and its learning are not changed by it.

Why bounds and not an average: the controller itself decides how loaded the replicas are. An
average of the rates observed learns the operating point instead of the capacity: with more
replicas than needed each serves less, the average falls, the signal asks for more replicas,
and the estimate spirals down (3.3x the GPU-hours of the hindsight schedule on the bench's
``conv`` trace, with the median of busy pods' rates). A rate served within the SLO is only
evidence that capacity is at least that much, and a rate at which the SLO broke that it is
less; only such evidence moves the estimate, so it settles at the load where the SLO starts to
break, and the target utilization keeps the fleet below that. Hence the estimator is

- robust to **outliers**: one sample moves it by one bounded step (25% at first, 4% after 40
  samples), whatever its size;
- unmoved by **idle periods** and **outages**: no sample, no decay. An idle hour is not
  evidence that replicas got slower, and a missing reading is never zero;
- robust to **mixed prompt lengths**: the rates of a whole window over the whole fleet
  average hundreds of requests, and the weighting prices prompt and generated tokens;
- **bounded** by the policy's ``min_tokens_per_second`` and ``max_tokens_per_second``;
- **seeded** by ``seed_prompt_tokens_per_second`` and ``seed_generation_tokens_per_second``:
  a seed counts as :data:`SEED_WEIGHT` samples, so a few observations correct a wrong one.

**Prices.** In unit ``work`` the estimate is in the prices of the online fit
(:mod:`scaler.core.cost_fit`) at the time it was learned; when the fit moves them, the
estimate and the rates beside it are re-expressed in the new prices by the ratio of the next
usable window's demand priced both ways (:attr:`CapacityMemory.priced_in`).

**The sizing** (the demand, the backlog, the horizon and the replicas asked for) is
:mod:`scaler.core.sizing`'s; this module learns what one replica serves.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from scaler.config.policy import TargetPolicy
from scaler.config.signal_specs import CapacityCost, CapacityUnit
from scaler.config.vocabulary import SignalName
from scaler.core.cost_fit import CostFit, priced_cost
from scaler.core.forecast import DemandForecast
from scaler.core.observation import Observation, PodLoad, ThroughputReading
from scaler.core.signals import SignalStatus

__all__ = [
    "READY_WINDOWS",
    "SEED_WEIGHT",
    "CapacityEstimate",
    "CapacityMemory",
    "CapacitySample",
    "busy_pods",
    "capacity_sample",
    "demand_of",
    "half_busy",
    "learn_capacity",
    "learn_from_window",
    "overloaded",
    "priced_policy",
    "saturated_pods",
    "seeded_estimate",
    "served_with_room",
    "sizing_capacity",
    "work_cost",
]

#: Samples a seed counts as.
SEED_WEIGHT = 8
#: The largest step of the estimate per sample, in log space (at the first samples).
_STEP_FIRST = 0.25
#: The smallest step per sample, in log space: the estimate keeps following a change of mix.
_STEP_LAST = 0.04
#: A pod counts for capacity only after it has been Ready this many rate windows.
READY_WINDOWS = 1.5
#: Without a seed, an estimate may also start between a rate served within the SLO and one at
#: which it broke, once the first is at least this share of the second (a wider bracket says
#: too little: a busy pod at a trickle of load is a lower bound of almost nothing).
_BRACKET = 0.5
#: A TTFT quantile at least this share of its target shows queueing: the fleet is near its
#: capacity (without a seed, an estimate starts only from such a sample).
_NEAR_TARGET = 0.5


@dataclass(frozen=True, slots=True)
class CapacityEstimate:
    """One replica's capacity at the SLO, as learned so far.

    Attributes:
        tokens_per_second: weighted tokens per second one replica serves at the TTFT target.
        samples: samples learned from (a seed counts as :data:`SEED_WEIGHT`).
        learned_at: controller time of the last sample, seconds (None: only the seed).
    """

    tokens_per_second: float
    samples: int
    learned_at: float | None = None


@dataclass(frozen=True, slots=True)
class CapacityMemory:
    """What the capacity signal carries from cycle to cycle (part of the decision state).

    Attributes:
        estimate: one replica's learned capacity (None: nothing learned and no seed).
        forecast: the demand forecast (None: no valid demand reading yet).
        lower: before an estimate exists, the highest rate per replica served within the SLO
            while busy (None: none yet).
        upper: before an estimate exists, the lowest rate per replica at which the SLO broke
            (None: none yet).
        overloaded: at least half the pods were busy at the last cycle (an overload that
            lasts two cycles is the fleet's load, not a burst inside one window).
        served: the highest rate per replica served with room, weighted tokens/s: a trusted
            window whose TTFT p95 was under half its target (no queueing), busy or not; half
            of it is the least capacity the signal sizes with (:func:`sizing_capacity`).
            None: none yet, or a later breach at or below it.
        unit: the unit every number here is in (:class:`CapacityUnit`): memory in another unit
            than the policy's (a state saved before the unit ``work``) is dropped, never
            read as if it were in the new one.
        backlog: ``(controller seconds, waiting work)`` of the cycles of the last rate window
            (not persisted: a new leader starts without it): how fast the backlog grew or
            drained, which tells the arrival rate from the rate served.
        fit: the online fit of the cost profile's prefill and decode prices to the fleet
            (:mod:`scaler.core.cost_fit`; unit ``work`` with ``capacity.fit_cost``).
        saturated_since: controller time since which every ready pod has had a request
            waiting at every cycle (None: not at the last cycle; not persisted): a fleet
            saturated for a whole window served what it can serve at most.
        priced_in: the prices of unit ``work`` the estimate and the rates beside it are in
            (None: not yet known; not persisted, so a restart takes them as the current
            ones): when the fit moves the prices, they are re-expressed in the new ones
            (:func:`learn_from_window`).
    """

    estimate: CapacityEstimate | None = None
    forecast: DemandForecast | None = None
    lower: float | None = None
    upper: float | None = None
    overloaded: bool = False
    served: float | None = None
    unit: str = CapacityUnit.WEIGHTED_TOKENS.value
    backlog: tuple[tuple[float, float], ...] = ()
    fit: CostFit = field(default_factory=CostFit)
    saturated_since: float | None = None
    priced_in: CapacityCost | None = None


def seeded_estimate(policy: TargetPolicy) -> CapacityEstimate | None:
    """The estimate a target starts from: its seed, clamped to the bounds, or None."""
    cap = policy.signals.capacity
    seed = cap.seed_tokens_per_second
    if seed is None:
        return None
    return CapacityEstimate(_bounded(policy, seed), SEED_WEIGHT)


def _bounded(policy: TargetPolicy, value: float) -> float:
    low, high = policy.signals.capacity.bounds
    return min(high, max(low, value))


def work_cost(policy: TargetPolicy, memory: CapacityMemory | None) -> CapacityCost:
    """The prices the signal's unit ``work`` uses for ``policy``: its ``capacity.cost``
    scaled by the memory's online fit (:func:`scaler.core.cost_fit.priced_cost`), or the
    profile as it is with ``capacity.fit_cost`` off or no memory. Pure: a caller that reads a
    target's demand elsewhere (a history of it) prices it the signal's way with this."""
    cap = policy.signals.capacity
    if memory is None or not cap.fit_cost:
        return cap.cost
    return priced_cost(cap.cost, memory.fit)


def priced_policy(policy: TargetPolicy, memory: CapacityMemory | None) -> TargetPolicy:
    """``policy`` with its ``capacity.cost`` the prices the signal uses now
    (:func:`work_cost`): a reader of the target's demand elsewhere (its history, which
    :func:`demand_of` prices with the policy's profile) then prices it as the live signal
    does. ``policy`` itself when the prices are the profile's."""
    cost = work_cost(policy, memory)
    cap = policy.signals.capacity
    if cost is cap.cost:
        return policy
    signals = policy.signals.model_copy(update={"capacity": cap.model_copy(update={"cost": cost})})
    return policy.model_copy(update={"signals": signals})


def demand_of(
    policy: TargetPolicy, reading: ThroughputReading, cost: CapacityCost | None = None
) -> tuple[float, float | None]:
    """``(demand, demand per finished request)`` over the reading's pods in the signal's unit
    (the second is None when no request finished in the window).

    Unit ``work``: seconds of replica work per second, :meth:`CapacityCost.work_seconds
    <scaler.config.signal_specs.CapacityCost.work_seconds>` of the fleet's computed prompt
    tokens (``vllm:prompt_tokens_total`` less ``vllm:prefix_cache_hits_total``) and generated
    tokens, the context being the fleet's mean prompt plus half its mean output per finished
    request over the window (0 when none finished). Unit ``weighted_tokens``: prompt tokens
    plus ``generation_token_weight`` times generated tokens per second. ``cost``: the prices
    of unit ``work`` (default the policy's profile; the signal passes :func:`work_cost`).
    """
    cap = policy.signals.capacity
    pods = reading.pods.values()
    requests = math.fsum(p.requests_per_second for p in pods)
    if cap.unit is CapacityUnit.WORK:
        prompt = math.fsum(p.prompt_tokens_per_second for p in pods)
        generated = math.fsum(p.generation_tokens_per_second for p in pods)
        computed = math.fsum(p.computed_prompt_tokens_per_second for p in pods)
        context = (prompt + generated / 2) / requests if requests > 0 else 0.0
        work = (cost or cap.cost).work_seconds(computed, generated, context)
        return work, (work / requests if requests > 0 else None)
    tokens = math.fsum(
        cap.weighted(p.prompt_tokens_per_second, p.generation_tokens_per_second) for p in pods
    )
    return tokens, (tokens / requests if requests > 0 else None)


@dataclass(frozen=True, slots=True)
class CapacitySample:
    """One cycle's evidence on a replica's capacity.

    Attributes:
        tokens_per_second: the weighted tokens/s per ready replica the fleet served over the
            rate window.
        within_slo: TTFT was within its target while the fleet was busy (a replica serves at
            least this within the SLO), or beyond it by more than the tolerance (at this rate
            per replica the SLO broke: capacity is below it).
        near_target: within the SLO, with TTFT at least half its target: requests queue,
            the fleet is near its capacity.
    """

    tokens_per_second: float
    within_slo: bool
    near_target: bool = False


def busy_pods(policy: TargetPolicy, reading: ThroughputReading | None) -> int | None:
    """Ready pods with a request waiting or their KV cache at the KV signal's target, from a
    usable throughput reading (None without one)."""
    if reading is None or not reading.status.usable_for_scale_up or not reading.pods:
        return None
    return _busy_pods(policy, reading.pods)


def _busy_pods(policy: TargetPolicy, pods: Mapping[str, PodLoad]) -> int:
    """Ready pods with a request waiting or their KV cache at the KV signal's target."""
    kv = policy.signals.kv_cache_usage
    busy = 0
    for pod in pods.values():
        if (pod.waiting is not None and pod.waiting >= 1) or (
            kv.enabled and pod.kv_cache_usage is not None and pod.kv_cache_usage >= kv.target_ratio
        ):
            busy += 1
    return busy


def overloaded(policy: TargetPolicy, reading: ThroughputReading | None) -> bool:
    """At least half the ready pods of a usable reading are busy (a request waiting, or the KV
    cache at the KV signal's target)."""
    busy = busy_pods(policy, reading)
    return busy is not None and reading is not None and half_busy(busy, len(reading.pods))


def saturated_pods(reading: ThroughputReading | None) -> bool:
    """Every ready pod of a usable reading has a request waiting (vLLM's
    ``vllm:num_requests_waiting`` at least 1): each is serving all it can."""
    if reading is None or not reading.status.usable_for_scale_up or not reading.pods:
        return False
    return all(p.waiting is not None and p.waiting >= 1 for p in reading.pods.values())


def half_busy(busy: int, ready: int) -> bool:
    """``busy`` of ``ready`` pods are at least half of them: the test of :func:`overloaded`,
    for a caller that has counted the busy pods (:func:`busy_pods`) already."""
    return 2 * busy >= ready


def capacity_sample(
    policy: TargetPolicy,
    observation: Observation,
    *,
    window_seconds: float,
    overloaded_before: bool = True,
    cost: CapacityCost | None = None,
) -> CapacitySample | None:
    """This cycle's capacity sample, or None (see the module docstring for the rules).

    Args:
        policy: the target's policy.
        observation: this cycle's observation (throughput, TTFT reading, pods, counts).
        window_seconds: the ``rate()`` window of the throughput and TTFT queries, seconds.
        cost: the prices of unit ``work`` (default the policy's profile).
    """
    return _sample(
        policy,
        _trusted(observation, window_seconds),
        window_seconds,
        overloaded_before,
        cost or policy.signals.capacity.cost,
    )


def _sample(
    policy: TargetPolicy,
    trusted: tuple[ThroughputReading, float] | None,
    window_seconds: float,
    overloaded_before: bool,
    cost: CapacityCost,
    saturated: bool = False,
) -> CapacitySample | None:
    """:func:`capacity_sample` of a window :func:`_trusted` has already judged; ``saturated``:
    every pod had a request waiting at every cycle of the window (:func:`saturated_pods`)."""
    if trusted is None:
        return None
    reading, ttft_value = trusted
    target = policy.signals.ttft_p95.target_seconds
    busy = _busy_pods(policy, reading.pods)
    if ttft_value <= target:
        if busy == 0:
            return None
        within = True
    elif ttft_value > target * (1 + policy.tolerance.scale_up):
        if 2 * busy < len(reading.pods):
            return None  # one unlucky pod (a long prompt ahead of the queue), not the load
        if not overloaded_before:
            return None  # a burst shorter than a cycle: its rate hides in the window's mean
        within = False
    else:
        return None  # inside the band: neither side
    demand, per_request = demand_of(policy, reading, cost)
    if not math.isfinite(demand) or demand <= 0:
        return None
    if not within and per_request is not None and not saturated:
        # The SLO broke at the rate offered, not the rate served: add the work left waiting
        # at the end of the window (a burst shorter than the window hides in its mean). A
        # fleet that queued through the whole window served what it can serve at most, more
        # than it serves within the SLO: the rate served is the bound (what waits beyond it
        # is demand, not capacity).
        waiting = math.fsum(p.waiting or 0.0 for p in reading.pods.values())
        demand += waiting * per_request / window_seconds
    return CapacitySample(
        demand / len(reading.pods),
        within,
        near_target=within and ttft_value >= target * _NEAR_TARGET,
    )


def _trusted(
    observation: Observation, window_seconds: float
) -> tuple[ThroughputReading, float] | None:
    """``(throughput reading, TTFT p95 seconds)`` of a window that can be trusted as evidence
    of a replica's capacity, or None: both readings ``ok``, no pod draining, every ready pod
    with its rates and Ready for 1.5 rate windows."""
    reading = observation.throughput
    if reading is None or reading.status is not SignalStatus.OK or not reading.pods:
        return None
    ttft = observation.signals.get(SignalName.TTFT_P95)
    if (
        ttft is None
        or ttft.status is not SignalStatus.OK
        or ttft.value is None
        or not math.isfinite(ttft.value)
    ):
        return None
    if observation.replicas.terminating > 0:
        return None  # pods removed in the window served part of its traffic
    if observation.replicas.sleeping > 0:
        return None  # an engine asleep serves nothing: its idle proves nothing of a replica
    settled = READY_WINDOWS * window_seconds
    ready = [p for p in observation.pods if p.ready and not p.terminating]
    if len(ready) != len(reading.pods) or any(
        p.ready_seconds is None or p.ready_seconds < settled for p in ready
    ):
        return None  # a pod's rate covers only part of the window, or is missing
    return reading, ttft.value


def served_with_room(
    policy: TargetPolicy, observation: Observation, *, window_seconds: float
) -> float | None:
    """The weighted tokens/s per ready replica of a trusted window whose TTFT p95 was under
    half its target (no queueing: the fleet served it with room, busy or not), else None."""
    return _room(policy, _trusted(observation, window_seconds), policy.signals.capacity.cost)


def _room(
    policy: TargetPolicy, trusted: tuple[ThroughputReading, float] | None, cost: CapacityCost
) -> float | None:
    """:func:`served_with_room` of a window :func:`_trusted` has already judged."""
    if trusted is None:
        return None
    reading, ttft_value = trusted
    if ttft_value >= policy.signals.ttft_p95.target_seconds * _NEAR_TARGET:
        return None
    demand, _ = demand_of(policy, reading, cost)
    if not math.isfinite(demand) or demand <= 0:
        return None
    return demand / len(reading.pods)


def sizing_capacity(policy: TargetPolicy, memory: CapacityMemory) -> float | None:
    """The capacity per replica the signal sizes the fleet with, weighted tokens/s (None: no
    estimate): the estimate, or half the highest rate per replica the fleet has served with
    room (``memory.served``) when that is more.

    An estimate can start from a single window near the target whose TTFT came from a burst
    shorter than the window rather than from the load (its mean rate far below what a replica
    serves), and it rises only one bounded step per window afterwards; sized on it alone, a
    steady load the fleet serves easily would ask for many times the replicas it has. A rate
    served with room is a lower bound of the capacity that needs no
    busy fleet; but one window is thin evidence too (a window with few long prompts), and on
    bursty traffic the rate at which bursts stay within the target is below the mean rate of a
    quiet window. So it counts only as far as the estimator trusts a bracket (``_BRACKET``, a
    half): the signal asks for at most ``1 / (0.5 x target_utilization)`` times the replicas
    that serve the forecast at that rate. No age limit is needed: a breach that would lower
    the estimate below that half is at or below the rate served, and drops it; and none is
    wanted, since an estimate can still be far below the capacity after many samples (it
    rises one bounded step per window).
    """
    estimate = memory.estimate
    if estimate is None:
        return None
    c = estimate.tokens_per_second
    if memory.served is not None:
        floor = memory.served * _BRACKET
        if floor > c:
            return _bounded(policy, floor)
    return c


def learn_capacity(
    policy: TargetPolicy,
    memory: CapacityMemory,
    sample: CapacitySample | None,
    now: float,
) -> CapacityMemory:
    """``memory`` after this cycle's sample (unchanged without one).

    Without a seed or an earlier estimate, the estimate starts from the first sample within
    the SLO and near the target, or, once the fleet has shown both a rate it served within
    the SLO and one at which it broke no more than twice as high, from their geometric mean
    (from the lower rate when the two contradict each other). Afterwards a sample is a bound
    (see the module docstring): one within the SLO above the estimate raises it, one beyond
    the SLO below the estimate lowers it, by one bounded step in log space and never past
    the sample; a sample on the estimate's own side says nothing new and leaves it. Always
    inside the policy's bounds.
    """
    estimate = memory.estimate if memory.estimate is not None else seeded_estimate(policy)
    memory = replace(memory, estimate=estimate)
    if sample is None or not math.isfinite(sample.tokens_per_second):
        return memory
    x = sample.tokens_per_second
    if x <= 0:
        return memory
    if estimate is None:
        if sample.within_slo and sample.near_target:
            return replace(
                memory, estimate=CapacityEstimate(_bounded(policy, x), 1, now), lower=None,
                upper=None,
            )  # fmt: skip
        lower, upper = memory.lower, memory.upper
        if sample.within_slo:
            lower = x if lower is None else max(lower, x)
        else:
            upper = x if upper is None else min(upper, x)
        if lower is None or upper is None or lower < upper * _BRACKET:
            return replace(memory, lower=lower, upper=upper)
        start = math.sqrt(lower * upper) if lower < upper else upper
        return replace(
            memory, estimate=CapacityEstimate(_bounded(policy, start), 2, now), lower=None,
            upper=None,
        )  # fmt: skip
    c = estimate.tokens_per_second
    if (sample.within_slo and x <= c) or (not sample.within_slo and x >= c):
        return memory
    n = estimate.samples + 1
    step = max(_STEP_LAST, _STEP_FIRST / math.sqrt(n))
    value = min(x, c * math.exp(step)) if x > c else max(x, c * math.exp(-step))
    return replace(memory, estimate=CapacityEstimate(_bounded(policy, value), n, now))


def _served(
    memory: CapacityMemory, room: float | None, sample: CapacitySample | None
) -> float | None:
    """``memory.served`` after this cycle: raised by a window served with room (``room``,
    :func:`served_with_room`), dropped by a breach at or below it (the mix changed: what was
    served then proves nothing now)."""
    served = memory.served
    if sample is not None and not sample.within_slo:
        if served is not None and sample.tokens_per_second <= served:
            served = None
        return served
    if room is None:
        return served
    return room if served is None else max(served, room)


def _repriced(
    policy: TargetPolicy,
    memory: CapacityMemory,
    reading: ThroughputReading | None,
    cost: CapacityCost,
) -> CapacityMemory:
    """``memory`` with its estimate and rates re-expressed in ``cost`` when the fit has moved
    the prices since they were learned: scaled by the ratio of this window's demand priced
    both ways (what a replica served is the same work, counted in the new prices). Without a
    usable reading the old prices are kept until one comes; unit ``weighted_tokens`` has no
    prices."""
    if policy.signals.capacity.unit is not CapacityUnit.WORK:
        return memory
    old = memory.priced_in
    if old is None:
        return replace(memory, priced_in=cost)
    if old == cost:
        return memory
    if reading is None or not reading.status.usable_for_scale_up or not reading.pods:
        return memory
    new_demand, _ = demand_of(policy, reading, cost)
    old_demand, _ = demand_of(policy, reading, old)
    if (
        not (math.isfinite(new_demand) and math.isfinite(old_demand))
        or min(new_demand, old_demand) <= 0
    ):
        return memory
    ratio = new_demand / old_demand

    def scaled(value: float | None) -> float | None:
        return None if value is None else value * ratio

    estimate = memory.estimate
    if estimate is not None:
        estimate = replace(
            estimate, tokens_per_second=_bounded(policy, estimate.tokens_per_second * ratio)
        )
    return replace(
        memory, estimate=estimate, served=scaled(memory.served), lower=scaled(memory.lower),
        upper=scaled(memory.upper), priced_in=cost,
    )  # fmt: skip


def learn_from_window(
    policy: TargetPolicy,
    observation: Observation,
    memory: CapacityMemory,
    cost: CapacityCost,
    now: float,
    *,
    window_seconds: float,
) -> tuple[CapacityMemory, CapacitySample | None]:
    """``(memory, sample)`` after this cycle's window: the rate served with room, the
    sample (at most one per rate window: consecutive cycles share most of it) learned, and
    whether the fleet was overloaded (see the module docstring). ``cost``: the prices of
    unit ``work`` (:func:`work_cost`)."""
    memory = _repriced(policy, memory, observation.throughput, cost)
    trusted = _trusted(observation, window_seconds)  # judged once for both uses
    since = memory.saturated_since
    saturated_now = saturated_pods(observation.throughput)
    since = (now if since is None or now < since else since) if saturated_now else None
    saturated = since is not None and now - since >= window_seconds
    sample = _sample(policy, trusted, window_seconds, memory.overloaded, cost, saturated)
    memory = replace(memory, served=_served(memory, _room(policy, trusted, cost), sample))
    last = memory.estimate.learned_at if memory.estimate is not None else None
    if sample is not None and last is not None and 0 <= now - last < window_seconds:
        sample = None  # consecutive cycles share most of a window: one sample per window
    memory = replace(
        learn_capacity(policy, memory, sample, now),
        overloaded=overloaded(policy, observation.throughput),
        saturated_since=since,
    )
    return memory, sample
