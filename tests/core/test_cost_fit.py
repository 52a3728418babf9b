"""The online fit of the capacity signal's prices (scaler.core.cost_fit): what a window
teaches, the bounds, the guards against idle, bad and outlying data, its persistence, and, on
the simulated replica's own vLLM counters, that a shift of the request mix or of the
prefix-cache hit rate moves the demand and leaves the prices where they were."""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, replace

import pytest

from scaler.config.signal_specs import CapacityCost
from scaler.core.capacity import CapacityMemory, demand_of, priced_policy, work_cost
from scaler.core.cost_fit import (
    MAX_FACTOR,
    OUTLIER_AFTER_WINDOWS,
    CostFit,
    cost_window,
    learn_cost,
    priced_cost,
)
from scaler.core.observation import (
    Observation,
    PodInfo,
    PodLoad,
    ReplicaCounts,
    ThroughputReading,
)
from scaler.core.signals import SignalStatus
from scaler.core.sizing import evaluate_capacity
from scaler.core.state import TargetState, decode_state, encode_state
from scaler.sim.engine import ReplicaEngine, ReplicaModel, SimRequest
from scaler.sim.exposition import VllmMetrics
from tests.support.policies import case_target

W = 60.0
PROFILE = CapacityCost()


def pod(
    *,
    prompt: float = 6000.0,
    hits: float = 0.0,
    generated: float = 100.0,
    requests: float = 1.0,
    prefill: float | None = None,
    decode: float | None = None,
    kv: float | None = 0.7,
) -> PodLoad:
    """A pod's window; by default its prefill and decode take exactly the profile's time."""
    computed = prompt - hits
    if prefill is None:
        prefill = PROFILE.prefill_seconds_per_token * computed
    if decode is None:
        # the profile's time per output token at a full cache, plus the per-sequence cost of
        # the sequences decoding (the decode rate itself, by Little's law)
        full = PROFILE.decode_seconds_per_context_token * PROFILE.kv_cache_tokens
        decode = full * generated / (1 - PROFILE.decode_seconds_per_token * generated)
    return PodLoad(
        requests, prompt, generated, waiting=0.0, kv_cache_usage=kv,
        cached_prompt_tokens_per_second=hits, prefill_seconds_per_second=prefill,
        decode_seconds_per_second=decode,
    )  # fmt: skip


def reading(*pods: PodLoad) -> ThroughputReading:
    return ThroughputReading(SignalStatus.OK, {f"p{i}": p for i, p in enumerate(pods)})


def learn(fit: CostFit, r: ThroughputReading, windows: int, start: float = 0.0) -> CostFit:
    for i in range(windows):
        fit = learn_cost(PROFILE, fit, r, start + i * W, window_seconds=W)
    return fit


def test_without_evidence_the_prices_are_the_profile() -> None:
    assert priced_cost(PROFILE, CostFit()) is PROFILE
    assert priced_cost(PROFILE, None) is PROFILE
    assert CostFit().prefill_factor == CostFit().decode_factor == 1.0


def test_a_fleet_twice_as_slow_at_prefill_is_learned_as_such_and_the_decode_left_alone() -> None:
    slow = reading(pod(prefill=2 * PROFILE.prefill_seconds_per_token * 6000), pod())
    fit = learn(CostFit(), slow, 60)
    # fleet sums: (2 + 1) / 2 = 1.5 of the profile's prefill time; the prior decays away
    assert fit.prefill_factor == pytest.approx(1.5, rel=0.02)
    assert fit.decode_factor == pytest.approx(1.0, rel=1e-6)
    cost = priced_cost(PROFILE, fit)
    assert cost.prefill_seconds_per_token == pytest.approx(1.5 * 4.7e-5, rel=0.02)
    assert cost.decode_seconds_per_token == pytest.approx(PROFILE.decode_seconds_per_token)


def test_the_factors_are_bounded() -> None:
    # 8 times the profile's prefill (one prefill at a time still), a thousandth of its decode
    normal = pod(prompt=2500.0).decode_seconds_per_second
    assert normal is not None
    wild = reading(
        pod(
            prompt=2500.0,
            prefill=8 * PROFILE.prefill_seconds_per_token * 2500,
            decode=normal / 1000,
        )
    )
    fit = learn(CostFit(), wild, 40)
    assert fit.prefill_factor == MAX_FACTOR
    assert fit.decode_factor == 1 / MAX_FACTOR


def test_one_window_per_rate_window() -> None:
    slow = reading(pod(prefill=2 * PROFILE.prefill_seconds_per_token * 6000))
    once = learn_cost(PROFILE, CostFit(), slow, 0.0, window_seconds=W)
    assert once.windows == 1
    assert learn_cost(PROFILE, once, slow, W / 2, window_seconds=W) is once


@pytest.mark.parametrize(
    "window",
    [
        reading(pod(prompt=30.0, generated=2.0, requests=0.01)),  # nearly idle
        reading(pod(prefill=math.nan, decode=math.nan)),  # NaN
        reading(PodLoad(1.0, 6000.0, 100.0, 0.0, 0.7)),  # the histograms not exported
        reading(pod(prefill=-1.0)),  # a counter reset read as a negative rate
        ThroughputReading(SignalStatus.EMPTY),
        None,
    ],
    ids=["idle", "nan", "absent", "negative", "empty", "no reading"],
)
def test_idle_bad_or_missing_data_teaches_nothing(window: ThroughputReading | None) -> None:
    fit = learn(CostFit(), reading(pod(prefill=2 * PROFILE.prefill_seconds_per_token * 6000)), 5)
    assert learn_cost(PROFILE, fit, window, 1e6, window_seconds=W) is fit


def test_a_phase_histogram_that_stands_still_while_the_pods_compute_teaches_nothing() -> None:
    """A sum of ``vllm:request_prefill_time_seconds`` or ``..._decode_time_seconds`` that did
    not move over a window in which the pods computed 1.7 s of prefill and 31 s of decode
    (by the profile) is a frozen or absent export, not work done in no time: read as evidence
    it took both factors to their lower bound, 1/4, within 40 windows."""
    frozen = reading(pod(prefill=0.0, decode=0.0), pod(prefill=0.0, decode=0.0))
    w = cost_window(PROFILE, frozen, W)
    assert w is not None
    assert (w.prefill_measured, w.prefill_priced, w.decode_measured, w.decode_priced) == (
        None, None, None, None,
    )  # fmt: skip
    fit = learn(CostFit(), frozen, 40)
    assert fit.windows == 0 and fit.prefill_factor == fit.decode_factor == 1.0
    # one part frozen, the other moving: only the moving one teaches
    half = reading(pod(prefill=2 * PROFILE.prefill_seconds_per_token * 6000, decode=0.0))
    fit = learn(CostFit(), half, 60)
    # twice the profile's prefill, the prior's 60 s still in the sums (one pod's 17 s a window)
    assert 1.85 <= fit.prefill_factor < 2.0
    assert fit.decode_factor == 1.0


def test_short_prompts_and_overlapping_prefills_do_not_teach_the_prefill_price() -> None:
    # 400-token prompts share their steps: their prefill times count whole steps
    short = pod(prompt=4000.0, requests=10.0, prefill=3 * PROFILE.prefill_seconds_per_token * 4000)
    w = cost_window(PROFILE, reading(short), W)
    assert w is not None and w.prefill_measured is None and w.decode_measured is not None
    # long prompts, but more than one prefilling at a time on the pod
    crowded = pod(prompt=40_000.0, requests=4.0, prefill=1.5)
    w = cost_window(PROFILE, reading(crowded), W)
    assert w is not None and w.prefill_measured is None


def test_a_lightly_used_kv_cache_does_not_teach_the_decode_price() -> None:
    w = cost_window(PROFILE, reading(pod(kv=0.2)), W)
    assert w is not None and w.decode_measured is None and w.prefill_measured is not None


def test_an_outlier_after_the_first_windows_is_left_out() -> None:
    fit = learn(CostFit(), reading(pod()), OUTLIER_AFTER_WINDOWS)
    normal = pod()
    assert normal.decode_seconds_per_second is not None
    frozen = reading(
        pod(
            prompt=2500.0,
            prefill=8 * PROFILE.prefill_seconds_per_token * 2500,
            decode=10 * normal.decode_seconds_per_second,
        )
    )
    assert learn_cost(PROFILE, fit, frozen, 1e6, window_seconds=W) is fit


def test_the_fit_is_persisted_with_the_decision_state() -> None:
    fit = learn(CostFit(), reading(pod(prefill=2 * PROFILE.prefill_seconds_per_token * 6000)), 7)
    state = replace(TargetState.seeded(2, 0.0), capacity=CapacityMemory(fit=fit, unit="work"))
    back = decode_state(encode_state(state))
    assert back.capacity.fit.windows == 7
    assert back.capacity.fit.prefill_factor == pytest.approx(fit.prefill_factor, rel=1e-5)
    assert back.capacity.fit.learned_at == fit.learned_at
    with pytest.raises(ValueError, match="cost fit"):
        decode_state({**encode_state(state), "cf": [1, 2, "x"]})


# ------------------------------------------------- the simulated replica's own counters


@dataclass
class Counters:
    """The counters of one replica's vLLM metrics the throughput query reads."""

    requests: float
    prompt: float
    hits: float
    generated: float
    prefill: float
    decode: float

    @classmethod
    def of(cls, m: VllmMetrics) -> Counters:
        return cls(
            float(sum(m.request_success.values())), float(m.prompt_tokens),
            float(m.prefix_cache_hits), float(m.generation_tokens), m.prefill_time.sum,
            m.decode_time.sum,
        )  # fmt: skip


def windows_of(
    mixes: list[tuple[int, int, float]], rate: float, seconds: float, seed: int = 3
) -> list[PodLoad]:
    """One replica of the replica model serving Poisson arrivals of each mix in turn
    (``(prompt tokens, output tokens, cached share)``, lengths drawn log-normal around them),
    ``seconds`` each; its rates per window of W as the throughput query reads them."""
    rng = random.Random(seed)
    metrics = VllmMetrics()
    engine = ReplicaEngine(ReplicaModel(), metrics=metrics)
    out: list[PodLoad] = []
    t, j = 0.0, 0
    last = Counters.of(metrics)
    edge = W
    for k, (prompt, output, cached) in enumerate(mixes):
        end = (k + 1) * seconds
        while True:
            t += rng.expovariate(rate)
            while edge <= min(t, end):
                engine.advance_to(edge)
                now = Counters.of(metrics)
                d = [
                    (b - a) / W
                    for a, b in zip(vars(last).values(), vars(now).values(), strict=True)
                ]
                out.append(
                    PodLoad(
                        d[0],
                        d[1],
                        d[3],
                        waiting=float(engine.num_waiting),
                        kv_cache_usage=engine.kv_usage_ratio,
                        cached_prompt_tokens_per_second=d[2],
                        prefill_seconds_per_second=d[4],
                        decode_seconds_per_second=d[5],
                    )
                )
                last, edge = now, edge + W
            if t >= end:
                break
            p = max(16, int(rng.lognormvariate(math.log(prompt), 0.3)))
            o = max(1, int(rng.lognormvariate(math.log(output), 0.5)))
            j += 1
            engine.submit(SimRequest(j, t, p, o, cached_tokens=int(p * cached)), t)
    return out


def test_on_the_replica_model_a_mix_or_cache_shift_moves_the_demand_not_the_prices() -> None:
    """Long prompts, then the same prompts with 80% found in the prefix cache, then long
    answers to short prompts: the demand (seconds of work per second) follows each shift,
    while the fitted prices stay within 25% of where the first mix put them (the replica's
    speed did not change: only what it was asked)."""
    policy = case_target(signals={"ttft_p95": {"target_seconds": 2.0}})
    windows = windows_of([(6000, 150, 0.0), (6000, 150, 0.8), (300, 400, 0.0)], 0.4, 900.0)
    fit, memory = CostFit(), CapacityMemory(unit="work")
    factors, demands = [], []
    for i, w in enumerate(windows):
        fit = learn_cost(PROFILE, fit, reading(w), i * W, window_seconds=W)
        memory = replace(memory, fit=fit)
        factors.append((fit.prefill_factor, fit.decode_factor))
        demands.append(demand_of(policy, reading(w), work_cost(policy, memory))[0])
    per = len(windows) // 3
    settled = [factors[per - 1], factors[2 * per - 1], factors[-1]]
    # the prices: learned from the long prompts, near the profile (it is this replica's), and
    # no shift moves them by more than 25%
    assert fit.windows >= per // 2
    p0, d0 = settled[0]
    assert 0.75 <= p0 <= 1.5 and 0.5 <= d0 <= 1.5, settled
    for p, d in settled[1:]:
        assert abs(p / p0 - 1) <= 0.25 and abs(d / d0 - 1) <= 0.25, settled
    # the demand: the cache hits take most of the prefill away, the short prompts more still
    mean = [sum(demands[k * per + 3 : (k + 1) * per]) / (per - 3) for k in range(3)]
    # (decoding 150 tokens at a 6,000-token context is two thirds of these requests' work)
    assert mean[1] < 0.85 * mean[0], mean
    assert mean[2] < 0.5 * mean[0], mean


def test_a_window_with_a_replica_asleep_teaches_no_price() -> None:
    """vLLM's sleep mode: the engine asleep serves nothing; the capacity signal neither takes
    a capacity sample nor fits a price from such a window (the awake pods' do not change)."""
    policy = case_target(signals={"ttft_p95": {"target_seconds": 2.0}})
    slow = reading(pod(prefill=2 * PROFILE.prefill_seconds_per_token * 6000), pod())
    pods = tuple(PodInfo(n, True, False, 4000.0, ready_seconds=3600.0) for n in ("p0", "p1"))
    base = Observation(ReplicaCounts(2, 2, 2), {}, throughput=slow, pods=pods)
    awake = evaluate_capacity(
        policy, base, CapacityMemory(unit="work"), None, 0.0, window_seconds=W
    )
    assert awake[2].fit.windows == 1 and awake[1].cost_windows == 1
    asleep = replace(base, replicas=ReplicaCounts(2, 2, 2, sleeping=1))
    got = evaluate_capacity(
        policy, asleep, CapacityMemory(unit="work"), None, 0.0, window_seconds=W
    )
    assert got[2].fit.windows == 0 and got[1].cost_windows == 0


def test_a_history_read_with_the_priced_policy_is_priced_as_the_live_signal() -> None:
    """The seasonal history prices its demand with :func:`demand_of` of the policy it is
    given: the loop gives it :func:`priced_policy`, whose profile is the fitted prices, so a
    fleet twice as slow at prefill has the same demand in its history as in the live read."""
    policy = case_target(signals={"ttft_p95": {"target_seconds": 2.0}})
    assert priced_policy(policy, None) is policy
    assert priced_policy(policy, CapacityMemory(unit="work")) is policy  # nothing fitted
    slow = reading(pod(prefill=2 * PROFILE.prefill_seconds_per_token * 6000))
    memory = CapacityMemory(unit="work", fit=learn(CostFit(), slow, 60))
    priced = priced_policy(policy, memory)
    assert priced.key == policy.key
    live = demand_of(policy, slow, work_cost(policy, memory))[0]
    profile = demand_of(policy, slow)[0]
    assert demand_of(priced, slow)[0] == pytest.approx(live)
    # the prefill part priced at the fitted factor (about 2), the decode part as it was
    extra = (memory.fit.prefill_factor - 1) * PROFILE.prefill_seconds_per_token * 6000
    assert memory.fit.prefill_factor > 1.9
    assert live == pytest.approx(profile + extra, rel=1e-6)
    off = policy.model_copy(
        update={
            "signals": policy.signals.model_copy(
                update={"capacity": policy.signals.capacity.model_copy(update={"fit_cost": False})}
            )
        }
    )
    assert priced_policy(off, memory) is off  # the fit off: the profile as written
