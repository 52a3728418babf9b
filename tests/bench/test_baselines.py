"""Each baseline reproduces its documented formula (HPA, KEDA through HPA, KPA)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from scaler.bench.controllers import KedaHpaController, KvHpaController
from scaler.bench.hpa import (
    HpaBehavior,
    HpaPodState,
    HpaRules,
    HpaScaler,
    external_average_value_replicas,
    pods_metric_replicas,
)
from scaler.bench.kpa import Kpa, KpaConfig
from scaler.bench.simulate import BenchStore, TickContext
from scaler.bench.tsdb import PodSample, Tsdb
from scaler.sim.fleet import Fleet, FleetConfig

R, P, T = HpaPodState.RUNNING, HpaPodState.PENDING, HpaPodState.TERMINATING


@pytest.mark.parametrize(
    ("total", "status", "expected"),
    [
        pytest.param(23.0, 2, 5, id="ratio-2.3-ceil"),
        pytest.param(10.4, 2, 2, id="inside-tolerance-keeps-status-replicas"),
        pytest.param(0.0, 4, 0, id="nothing-waiting-zero-before-min-clamp"),
        pytest.param(4.0, 2, 1, id="ratio-0.4-ceil"),
    ],
)
def test_keda_average_value(total: float, status: int, expected: int) -> None:
    assert external_average_value_replicas(total, 5.0, status) == expected


@pytest.mark.parametrize(
    ("pods", "metrics", "target", "current", "expected"),
    [
        # plain: ratio 0.9/0.8 = 1.125 -> ceil(1.125 x 3)
        pytest.param(
            {"a": R, "b": R, "c": R}, {"a": 0.9, "b": 0.9, "c": 0.9}, 0.8, 3, 4, id="plain"
        ),
        # inside the band (1.0625): keep
        pytest.param(
            {"a": R, "b": R, "c": R},
            {"a": 0.85, "b": 0.85, "c": 0.85},
            0.8,
            3,
            3,
            id="inside-tolerance",
        ),
        # scale-up with a ready pod missing a metric: filled with 0, ratio 0.83 flips: keep
        pytest.param(
            {"a": R, "b": R, "c": R},
            {"a": 1.0, "b": 1.0},
            0.8,
            3,
            3,
            id="missing-metric-flips-scale-up",
        ),
        # scale-up with a pending pod counted as 0: (2/3)/0.5 = 1.33 -> ceil(1.33 x 3)
        pytest.param(
            {"a": R, "b": R, "p": P},
            {"a": 1.0, "b": 1.0},
            0.5,
            3,
            4,
            id="pending-pod-zero-on-scale-up",
        ),
        # scale-down with a missing pod filled at the target: (1.2/3)/0.8 = 0.5 -> 2
        pytest.param(
            {"a": R, "b": R, "c": R},
            {"a": 0.2, "b": 0.2},
            0.8,
            3,
            2,
            id="missing-metric-at-target-on-scale-down",
        ),
        # terminating pods are ignored with their metrics
        pytest.param({"a": R, "t": T}, {"a": 0.4, "t": 1.0}, 0.8, 2, 1, id="terminating-ignored"),
        # a pending pod is ignored on a scale-down: (0.2 + 0.2) / 2 / 0.8 = 0.25 -> ceil(0.5)
        pytest.param(
            {"a": R, "b": R, "p": P}, {"a": 0.2, "b": 0.2}, 0.8, 3, 1, id="pending-ignored-down"
        ),
        # exactly on target (ratio 1): a missing pod is filled in neither direction, keep 3
        # (filled with 0 it would read 1.6 / 3 / 0.8 = 0.67 and scale down to 2)
        pytest.param(
            {"a": R, "b": R, "c": R}, {"a": 0.8, "b": 0.8}, 0.8, 3, 3, id="on-target-missing-kept"
        ),
    ],
)
def test_hpa_pods_metric(
    pods: dict[str, str], metrics: dict[str, float], target: float, current: int, expected: int
) -> None:
    assert pods_metric_replicas(pods, metrics, target, current) == expected


def test_hpa_pods_metric_without_any_metric_holds() -> None:
    assert pods_metric_replicas({"p": P}, {}, 0.8, 1) is None


class _Kv(Tsdb):
    """A Prometheus whose instant query returns ``kv`` usage for the Ready pods only (a pod
    loading its model serves no ``/metrics`` yet)."""

    def __init__(self, fleet: Fleet, kv: float) -> None:
        super().__init__(15)
        self.fleet = fleet
        self.kv = kv

    def instant(self, t: float) -> dict[str, PodSample]:
        return {
            p.name: PodSample(t, 0.0, 0.0, self.kv, (), 0.0, 0.0, 0.0, 0.0)
            for p in self.fleet.pods.values()
            if p.ready
        }


def test_kv_hpa_counts_a_loading_pod_as_missing_not_pending() -> None:
    store = BenchStore()
    fleet = Fleet(store, FleetConfig(initial_replicas=3), now=0.0)
    store.external_scale("llm", "vllm", 5)
    fleet.step(1.0)  # two pods created, loading their model for 120 s
    assert fleet.count() == (3, 2, 0)
    tsdb = _Kv(fleet, 0.2)
    kv = KvHpaController()
    assert kv.decide(TickContext(15.0, fleet, tsdb)) == 5  # the 300 s window holds 5
    # At 330 s the first sync's recommendations have left the window. A loading vLLM pod is
    # Running (not Pending) and has no metric: groupPods makes it a missing pod, filled at
    # the 0.8 target on a scale-down: (3 x 0.2 + 2 x 0.8) / 5 / 0.8 = 0.55 -> ceil(0.55 x 5)
    # = 3. Taken as pending it would be ignored: 0.2 / 0.8 = 0.25 -> ceil(0.25 x 3) = 1.
    assert kv.decide(TickContext(330.0, fleet, tsdb)) == 3


def test_hpa_default_behavior() -> None:
    hpa = HpaScaler(min_replicas=1, max_replicas=100)
    # +4 pods or +100% per 15 s, the larger: 3 -> max(7, 6) = 7.
    assert hpa.normalize(20, 3, 0.0) == 7
    # The next period starts fresh: 7 -> max(11, 14) = 14.
    assert hpa.normalize(20, 7, 15.0) == 14
    # Scale-down waits for the 300 s window's highest recommendation (20) to leave.
    assert hpa.normalize(1, 14, 30.0) == 14
    assert hpa.normalize(1, 14, 300.0) == 14
    # At 316 s only the 30 s and 300 s recommendations (1) remain: -100% allowed, min 1.
    assert hpa.normalize(1, 14, 316.0) == 1


#: One pod per 60 s each way and no stabilization (the production-stack operator samples use
#: one pod per 60 s each way), so that writes in both directions land inside one period.
_ONE_POD_PER_MINUTE = HpaBehavior(
    scale_up=HpaRules(0.0, 1, 0.0, period_seconds=60.0),
    scale_down=HpaRules(0.0, 1, 0.0, period_seconds=60.0),
)


def test_hpa_scale_up_limit_counts_the_scale_downs_of_its_period() -> None:
    # calculateScaleUpLimitWithScalingRules (horizontal.go): periodStartReplicas = current -
    # replicas added in the period + replicas deleted in it.
    hpa = HpaScaler(min_replicas=1, max_replicas=32, behavior=_ONE_POD_PER_MINUTE)
    assert hpa.normalize(1, 4, 0.0) == 3  # 4 -> 3: one pod off
    # 15 s later, 10 wanted: the period started at 4 (3 + 1 deleted), so 4 + 1 = 5 is
    # allowed; counting only the scale-ups it would have started at 3 and allowed 4.
    assert hpa.normalize(10, 3, 15.0) == 5
    # At 30 s the period holds +2 and -1: it started at 5 - 2 + 1 = 4, so 5 is the limit.
    assert hpa.normalize(10, 5, 30.0) == 5
    # At 61 s the scale-down at 0 s has left the period: 5 - 2 = 3 -> 4 < 5, no change.
    assert hpa.normalize(10, 5, 61.0) == 5
    # At 76 s the period is empty again: 5 + 1.
    assert hpa.normalize(10, 5, 76.0) == 6


def test_hpa_scale_down_limit_counts_the_scale_ups_of_its_period() -> None:
    # calculateScaleDownLimitWithBehaviors (horizontal.go): the same periodStartReplicas.
    hpa = HpaScaler(min_replicas=1, max_replicas=32, behavior=_ONE_POD_PER_MINUTE)
    assert hpa.normalize(10, 4, 0.0) == 5  # 4 -> 5: one pod on
    # 15 s later, 1 wanted: the period started at 4 (5 - 1 added), so 4 - 1 = 3 is allowed;
    # counting only the scale-downs it would have started at 5 and allowed 4.
    assert hpa.normalize(1, 5, 15.0) == 3


def test_hpa_default_policy_period_is_one_sync() -> None:
    # The default policies' period (15 s) is the sync period, and an event exactly one period
    # old is outside it (getReplicasChangePerPeriod keeps events after now - period): with
    # the default behavior no write ever limits the next sync's.
    no_down_window = replace(HpaBehavior(), scale_down=HpaRules(0.0, 0, 100.0))
    hpa = HpaScaler(min_replicas=1, max_replicas=32, behavior=no_down_window)
    assert hpa.normalize(2, 10, 0.0) == 2
    assert hpa.normalize(30, 2, 15.0) == 6  # max(2 + 4, 2 x 2)


def test_hpa_max_replicas_clamps() -> None:
    hpa = HpaScaler(min_replicas=1, max_replicas=5)
    assert hpa.normalize(50, 4, 0.0) == 5


def _kpa_fed(levels: list[tuple[int, float]]) -> tuple[Kpa, float]:
    kpa = Kpa(KpaConfig(target_concurrency=10.0))
    t = 0.0
    for seconds, level in levels:
        for _ in range(seconds):
            t += 1.0
            kpa.record(t, level)
    return kpa, t


def test_kpa_stable() -> None:
    kpa, now = _kpa_fed([(180, 30.0)])
    # stable 30 -> ceil(30 / 10) = 3; panic 30 -> 3 / 3 ready < 2: no panic
    assert kpa.decide(now, ready=3) == 3
    assert not kpa.panicking


def test_kpa_panic_and_no_scale_down_in_panic() -> None:
    kpa, now = _kpa_fed([(120, 30.0), (60, 90.0)])
    # stable (120 x 30 + 60 x 90) / 180 = 50 -> 5; panic 90 -> 9, 9 / 3 >= 2: panic, take 9
    assert kpa.decide(now, ready=3) == 9
    assert kpa.panicking
    kpa2, now2 = _kpa_fed([(120, 30.0), (60, 90.0)])
    kpa2.decide(now2, ready=3)
    for i in range(60):
        kpa2.record(now2 + 1 + i, 0.0)
    # load gone, but still inside the stable window since the last panic signal: hold 9
    assert kpa2.decide(now2 + 60, ready=9) == 9
    for i in range(180):
        kpa2.record(now2 + 61 + i, 0.0)
    # panic over; stable 0 asks for 0, but at most ready / 2 per decision: floor(9 / 2)
    assert kpa2.decide(now2 + 240, ready=9) == 4
    assert not kpa2.panicking


class _Waiting(Tsdb):
    """A Prometheus whose sum(vllm:num_requests_waiting) is whatever the test sets."""

    def __init__(self) -> None:
        super().__init__(15)
        self.value = 0.0

    def sum_waiting(self, t: float) -> float | None:
        return self.value


@pytest.mark.parametrize(
    ("cached", "expected"),
    [
        pytest.param(False, [1, 5], id="fresh-query-on-every-sync"),
        pytest.param(True, [1, 1], id="cached-30s-poll"),
    ],
)
def test_keda_queries_prometheus_on_every_hpa_sync_unless_cached(
    cached: bool, expected: list[int]
) -> None:
    fleet = Fleet(BenchStore(), FleetConfig(), now=0.0)
    tsdb = _Waiting()
    keda = KedaHpaController(cached_metrics=cached)
    desired = []
    for t, waiting in ((0.0, 0.0), (15.0, 40.0)):
        tsdb.value = waiting
        ctx = TickContext(t, fleet, tsdb)
        keda.observe(ctx)
        desired.append(keda.decide(ctx))
    # 40 waiting at the 15 s sync asks for ceil(40 / 5) = 8; the HPA's scale-up policies allow
    # max(1 + 4, 2 x 1) = 5 in one period. With cached metrics the HPA still reads the poll
    # KEDA made at 0 s (nothing waiting) until the next one at 30 s.
    assert desired == expected
