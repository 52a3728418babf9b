"""The autoscalers compared by the benchmark, as :class:`~scaler.bench.simulate.Controller` s.

1. :class:`VllmScalerController`: vllm-scaler itself: the production
   :class:`~scaler.sources.prometheus.PrometheusSource` reading the emulated Prometheus, the
   pod snapshot the Kubernetes actuator would build, and the pure decision core
   (:func:`scaler.core.decide.decide`, :func:`scaler.core.state.record_write`).
2. :class:`KedaHpaController`: what the vLLM-on-Kubernetes guides set up: a KEDA
   ``ScaledObject`` with a Prometheus trigger on ``sum(vllm:num_requests_waiting)``, threshold
   5 as ``AverageValue`` (desired = ceil(sum / 5)), driving an HPA with the default behavior.
   The HPA syncs every 15 s and asks KEDA's metrics server, which queries Prometheus afresh
   (KEDA's default ``useCachedMetrics: false``; ``pollingInterval``, 30 s, only governs
   activation from and to zero); with ``cached_metrics`` the HPA gets the value of KEDA's last
   30 s poll instead. An empty answer counts as 0 (KEDA's ``ignoreNullValues`` default).
3. :class:`KvHpaController`: an HPA on the ``Pods`` metric ``vllm:kv_cache_usage_perc`` with an
   average target of 0.8 (through a Prometheus metrics adapter), default behavior, 15 s sync;
   a pod loading its model is Running without a metric, a *missing* pod for the HPA.
4. :class:`KpaController`: Knative / AIBrix KPA on in-flight requests per replica
   (:mod:`scaler.bench.kpa`), deciding every 15 s on per-second samples.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import replace

import httpx

from scaler.bench.hpa import (
    HpaBehavior,
    HpaPodState,
    HpaScaler,
    external_average_value_replicas,
    pods_metric_replicas,
)
from scaler.bench.kpa import Kpa, KpaConfig
from scaler.bench.prometheus_api import prometheus_transport
from scaler.bench.simulate import TickContext
from scaler.bench.truth import TrueCapacity
from scaler.config.policy import TargetPolicy, WorkloadRef
from scaler.config.signal_specs import CapacityCost, CapacityUnit
from scaler.controller.observe import observe
from scaler.core.capacity import work_cost
from scaler.core.decide import Direction, decide
from scaler.core.observation import PodInfo, WorkloadSnapshot
from scaler.core.seasonal import SeasonalForecast
from scaler.core.state import TargetState, record_write
from scaler.sim.fleet import Fleet
from scaler.sources.prometheus import PrometheusSource

__all__ = [
    "FixedController",
    "KedaHpaController",
    "KpaController",
    "KvHpaController",
    "VllmScalerController",
    "bench_workload",
    "learned_capacity",
    "snapshot",
    "truth_in_learned_units",
]


def learned_capacity(state: TargetState | None) -> float | None:
    """One replica's capacity as vllm-scaler has learned it, in its own unit (by default
    seconds of replica work per second, priced by the policy's ``capacity.cost``; with unit
    ``weighted_tokens`` prompt tokens plus ``generation_token_weight`` times generated tokens
    per second); None before it has an estimate. The bench reads it here only, beside
    :func:`truth_in_learned_units`."""
    if state is None or state.capacity.estimate is None:
        return None
    return state.capacity.estimate.tokens_per_second


def truth_in_learned_units(
    policy: TargetPolicy,
) -> Callable[[TrueCapacity, CapacityCost | None], float]:
    """The replica model's true capacity in the unit of :func:`learned_capacity` for
    ``policy``: with unit ``work`` the seconds of work per second its rate brings, priced as
    the signal priced the fleet's demand then (the second argument: the policy's cost as the
    online fit had scaled it, :func:`~scaler.core.capacity.work_cost`; None: the policy's
    cost), prompt tokens computed (the cache hits left out), generated tokens at the mix's
    mean context; with unit ``weighted_tokens`` all prompt tokens plus
    ``generation_token_weight`` times the generated ones, per second."""
    cap = policy.signals.capacity
    if cap.unit is CapacityUnit.WORK:

        def work(truth: TrueCapacity, prices: CapacityCost | None) -> float:
            cost = prices or cap.cost
            rps = truth.requests_per_second
            context = (
                (truth.prompt_tokens_per_second + truth.generation_tokens_per_second / 2) / rps
                if rps > 0
                else 0.0
            )
            return cost.work_seconds(
                truth.computed_prompt_tokens_per_second,
                truth.generation_tokens_per_second,
                context,
            )

        return work
    weight = cap.token_weight
    return lambda truth, _prices: truth.weighted(weight)


def bench_workload(namespace: str = "llm", name: str = "vllm") -> WorkloadRef:
    """The simulated Deployment every controller scales."""
    return WorkloadRef.model_validate(
        {"apiVersion": "apps/v1", "kind": "Deployment", "namespace": namespace, "name": name}
    )


def snapshot(fleet: Fleet, now: float) -> WorkloadSnapshot:
    """The :class:`WorkloadSnapshot` the Kubernetes actuator would read from the fleet."""
    pods = tuple(
        PodInfo(
            name=p.name,
            ready=p.ready_at is not None and p.terminating_since is None,
            terminating=p.terminating_since is not None,
            age_seconds=max(0.0, now - p.created_at),
            phase="Running" if p.ready_at is not None else "Pending",
            # since the Ready condition's lastTransitionTime, while ready
            ready_seconds=(
                max(0.0, now - p.ready_at)
                if p.ready_at is not None and p.terminating_since is None
                else None
            ),
        )
        for p in sorted(fleet.pods.values(), key=lambda p: p.name)
    )
    return WorkloadSnapshot(
        namespace=fleet.config.namespace,
        spec_replicas=fleet.spec_replicas,
        status_replicas=len(fleet.live_pods),
        selector=",".join(f"{k}={v}" for k, v in sorted(fleet.config.labels.items())),
        resource_version="1",
        pods=pods,
    )


class VllmScalerController:
    """vllm-scaler's source and decision core in the loop (see the module docstring).

    Args:
        policy: the target's policy; its workload is replaced by the simulated Deployment.
        rate_window_seconds: the ``rate()`` window of the TTFT queries (the policy file's
            ``rate_window_seconds``).
        interval_seconds: the control interval (``CONTROL_INTERVAL_SECONDS``).
        name: the label in reports.
        seasonal: the seasonal forecast at a simulated time, as the controller's refresher
            would hold it then (None: no seasonal forecast).
    """

    def __init__(
        self,
        policy: TargetPolicy,
        *,
        rate_window_seconds: float = 60.0,
        interval_seconds: int = 15,
        name: str = "vllm-scaler",
        seasonal: Callable[[float], SeasonalForecast | None] | None = None,
    ) -> None:
        self.name = name
        self.seasonal = seasonal
        self.seasonal_asks: list[tuple[float, float | None]] = []
        self.interval_seconds = interval_seconds
        self.policy = policy.model_copy(
            update={"workload": bench_workload(), "prometheus_matchers": None}
        )
        self.rate_window_seconds = rate_window_seconds
        self.state: TargetState | None = None
        self._loop = asyncio.new_event_loop()
        self._client: httpx.AsyncClient | None = None
        self._source: PrometheusSource | None = None
        self._now = 0.0
        self.learned: list[tuple[float, float | None]] = []
        # the prices of unit work at each cycle (the online fit's), for the truth's units
        self.prices: list[tuple[float, CapacityCost]] = []

    def _bind(self, ctx: TickContext) -> PrometheusSource:
        transport = prometheus_transport(
            ctx.tsdb,
            self.policy,
            namespace=ctx.fleet.config.namespace,
            rate_window_seconds=self.rate_window_seconds,
            clock=lambda: self._now,
        )
        self._client = httpx.AsyncClient(transport=transport)
        return PrometheusSource(
            self._client,
            base_url="http://prometheus.bench",
            timeout_seconds=10.0,
            rate_window_seconds=self.rate_window_seconds,
            clock=lambda: self._now,
        )

    def observe(self, ctx: TickContext) -> None:
        """Nothing between cycles: the controller only reads at its interval."""

    def decide(self, ctx: TickContext) -> int:
        """One control cycle: read, decide, and (as the actuator would) record the write."""
        if self._source is None:
            self._source = self._bind(ctx)
        self._now = ctx.now
        snap = snapshot(ctx.fleet, ctx.now)
        key = self.policy.key
        result = self._loop.run_until_complete(
            self._source.read([self.policy.reading_target()], {key: snap})
        )
        obs = observe(self.policy, snap, result.targets[key], self.state)
        if self.seasonal is not None:
            obs = replace(obs, seasonal=self.seasonal(ctx.now))
        d = decide(
            self.policy, obs, self.state, ctx.now, ttft_window_seconds=self.rate_window_seconds
        )
        state = d.state
        if d.direction is not Direction.NONE:
            state = record_write(
                state, from_replicas=d.current_replicas, to_replicas=d.desired_replicas, now=ctx.now
            )
        self.state = state
        self.learned.append((ctx.now, learned_capacity(state)))
        self.prices.append((ctx.now, work_cost(self.policy, state.capacity)))
        if self.seasonal is not None:
            asked = d.seasonal.demand if d.seasonal is not None else None
            self.seasonal_asks.append((ctx.now, asked))
        return d.desired_replicas

    def close(self) -> None:
        """Close the HTTP client and the event loop."""
        if self._client is not None:
            self._loop.run_until_complete(self._client.aclose())
        self._loop.close()


class KedaHpaController:
    """KEDA Prometheus trigger (AverageValue) driving an HPA (see the module docstring).

    Args:
        threshold: the trigger's ``threshold`` (waiting requests per replica).
        polling_interval_seconds: KEDA's ``pollingInterval``.
        sync_seconds: the HPA's sync period.
        min_replicas, max_replicas: ``minReplicaCount`` / ``maxReplicaCount``.
        cached_metrics: ``useCachedMetrics: true`` (the HPA reads KEDA's last poll).
        name: the label in reports.
    """

    def __init__(
        self,
        *,
        threshold: float = 5.0,
        polling_interval_seconds: int = 30,
        sync_seconds: int = 15,
        min_replicas: int = 1,
        max_replicas: int = 32,
        cached_metrics: bool = False,
        name: str = "keda-queue",
    ) -> None:
        self.name = name
        self.interval_seconds = sync_seconds
        self.threshold = threshold
        self.polling_interval_seconds = polling_interval_seconds
        self.cached_metrics = cached_metrics
        self.value = 0.0
        self.hpa = HpaScaler(min_replicas, max_replicas, HpaBehavior())

    def observe(self, ctx: TickContext) -> None:
        """With cached metrics, KEDA polls Prometheus every ``pollingInterval``."""
        if self.cached_metrics and round(ctx.now) % self.polling_interval_seconds == 0:
            self.value = ctx.tsdb.sum_waiting(ctx.now) or 0.0

    def decide(self, ctx: TickContext) -> int:
        """HPA sync: the metric (fresh, or KEDA's cached poll; no series reads as 0), External
        AverageValue replicas, then stabilization and rate limits."""
        if not self.cached_metrics:
            self.value = ctx.tsdb.sum_waiting(ctx.now) or 0.0
        current = ctx.fleet.spec_replicas
        status = len(ctx.fleet.live_pods)
        desired = external_average_value_replicas(self.value, self.threshold, status)
        return self.hpa.normalize(desired, current, ctx.now)

    def close(self) -> None:
        """Nothing to release."""


class FixedController:
    """A fleet that never scales: ``replicas`` from start to end (static provisioning).

    Args:
        replicas: the constant ``spec.replicas``.
    """

    reads_prometheus = False

    def __init__(self, replicas: int, *, name: str = "fixed") -> None:
        self.name = name
        self.interval_seconds = 60
        self.replicas = replicas

    def observe(self, ctx: TickContext) -> None:
        """Nothing to observe."""

    def decide(self, ctx: TickContext) -> int:
        """Always ``replicas``."""
        return self.replicas

    def close(self) -> None:
        """Nothing to release."""


class KvHpaController:
    """HPA on average KV-cache usage per pod (``Pods`` metric, AverageValue 0.8).

    The metric comes through a Prometheus metrics adapter (the custom metrics API), so the HPA
    computes it with ``calcPlainMetricReplicas`` and groups the pods with ``groupPods``
    (``replica_calculator.go``) for a metric that is not the ``cpu`` resource: the Ready
    condition, the cpu initialization period and the readiness delay play no part. A pod
    loading its model is phase Running (its container started) and not Ready, and has no
    series (the emulated Prometheus scrapes Ready pods; vLLM serves ``/metrics`` only once its
    engine is up): a *missing* pod, counted at the target on a scale-down and as 0 on a
    scale-up. Pending pods (none in the simulated fleet) would be ignored on a scale-down.

    Args:
        target: the average KV-cache usage per pod, 0-1.
        sync_seconds: the HPA's sync period.
        min_replicas, max_replicas: the HPA's range.
        name: the label in reports.
    """

    def __init__(
        self,
        *,
        target: float = 0.8,
        sync_seconds: int = 15,
        min_replicas: int = 1,
        max_replicas: int = 32,
        name: str = "hpa-kv",
    ) -> None:
        self.name = name
        self.interval_seconds = sync_seconds
        self.target = target
        self.hpa = HpaScaler(min_replicas, max_replicas, HpaBehavior())

    def observe(self, ctx: TickContext) -> None:
        """Nothing between syncs."""

    def decide(self, ctx: TickContext) -> int:
        """HPA sync on the last scraped KV usage of each pod."""
        current = ctx.fleet.spec_replicas
        states = {
            p.name: HpaPodState.TERMINATING
            if p.terminating_since is not None
            else HpaPodState.RUNNING  # loading its model or serving: phase Running
            for p in ctx.fleet.pods.values()
        }
        metrics = {pod: s.kv_usage for pod, s in ctx.tsdb.instant(ctx.now).items()}
        desired = pods_metric_replicas(states, metrics, self.target, current)
        if desired is None:  # no metrics at all: the HPA holds (ScalingActive=False)
            desired = current
        return self.hpa.normalize(desired, current, ctx.now)

    def close(self) -> None:
        """Nothing to release."""


class KpaController:
    """Knative / AIBrix KPA on in-flight requests per replica.

    It samples the fleet's total in-flight requests every second straight from the replicas
    (Knative's queue-proxy and AIBrix both read pods directly, not Prometheus), including
    requests held while no replica is ready (Knative's activator buffers and reports them).
    """

    reads_prometheus = False

    def __init__(self, config: KpaConfig, *, interval_seconds: int = 15, name: str = "kpa") -> None:
        self.name = name
        self.interval_seconds = interval_seconds
        self.kpa = Kpa(config)

    def observe(self, ctx: TickContext) -> None:
        """Record the per-second concurrency sample."""
        fleet = ctx.fleet
        total = len(fleet.backlog) + sum(p.engine.in_flight for p in fleet.pods.values() if p.ready)
        self.kpa.record(ctx.now, float(total))

    def decide(self, ctx: TickContext) -> int:
        """The KPA's desired replicas given the ready pods."""
        ready = sum(1 for p in ctx.fleet.pods.values() if p.ready)
        return self.kpa.decide(ctx.now, ready)

    def close(self) -> None:
        """Nothing to release."""
