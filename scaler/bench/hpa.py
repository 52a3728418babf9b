"""The Kubernetes HPA (autoscaling/v2), re-implemented for the baselines.

Sources: ``pkg/controller/podautoscaler/replica_calculator.go`` (``GetExternalPerPodMetric
Replicas``, ``calcPlainMetricReplicas``, ``groupPods``) and ``horizontal.go``
(``stabilizeRecommendationWithBehaviors``, ``convertDesiredReplicasWithBehaviorRate``,
``calculateScaleUpLimitWithScalingRules``, ``calculateScaleDownLimitWithBehaviors``), and the
HPA documentation for the ``behavior`` defaults. Pure: times are seconds passed in.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = [
    "HpaBehavior",
    "HpaPodState",
    "HpaRules",
    "HpaScaler",
    "external_average_value_replicas",
    "pods_metric_replicas",
]

#: HPA's default tolerance (``--horizontal-pod-autoscaler-tolerance``).
DEFAULT_TOLERANCE = 0.1


def external_average_value_replicas(
    total: float, target_average: float, status_replicas: int, tolerance: float = DEFAULT_TOLERANCE
) -> int:
    """External metric with an ``AverageValue`` target (what KEDA's triggers create).

    ``ratio = total / (target x status.replicas)``; inside ``|1 - ratio| <= tolerance`` the
    current count is kept, else ``ceil(total / target)``.
    """
    if status_replicas <= 0:
        return math.ceil(total / target_average)
    ratio = total / (target_average * status_replicas)
    if abs(1.0 - ratio) <= tolerance:
        return status_replicas
    return math.ceil(total / target_average)


class HpaPodState:
    """A pod's phase as ``groupPods`` (``replica_calculator.go``) reads it for a metric other
    than the ``cpu`` resource (constants, strings for readable tests).

    For such a metric the Ready condition is never consulted (the cpu initialization period
    and the readiness delay apply to ``cpu`` only): a Running pod with a metric counts as
    ready, a Running pod without one is a *missing* pod, whether it is Ready or not.
    """

    RUNNING = "running"  # phase Running, no deletionTimestamp (Ready or not)
    PENDING = "pending"  # phase Pending: an "unready" pod for the HPA
    TERMINATING = "terminating"  # deletionTimestamp set (or phase Failed): ignored


def pods_metric_replicas(
    pods: Mapping[str, str],
    metrics: Mapping[str, float],
    target_average: float,
    current_replicas: int,
    tolerance: float = DEFAULT_TOLERANCE,
) -> int | None:
    """A ``Pods`` metric with an ``AverageValue`` target (``calcPlainMetricReplicas``).

    Args:
        pods: pod name -> :class:`HpaPodState` value.
        metrics: pod name -> metric value, for the pods the metrics API returns.
        target_average: the target average value per pod.
        current_replicas: ``spec.replicas``.
        tolerance: the tolerance band.

    Returns:
        The replica count, or None when no pod has a metric (the HPA reports an error and
        keeps the current count).

    As ``groupPods`` and ``calcPlainMetricReplicas`` do: terminating pods are dropped with
    their metrics; pending pods are dropped too, and count as 0 only on a scale-up (usage
    ratio above 1); running pods without a metric (a model still loading, Ready or not)
    count at the target on a scale-down (ratio below 1) and as 0 on a scale-up, and are left
    out at a ratio of exactly 1. If filling in flips the direction or lands in the band, or
    the count moves against the direction, the current count is kept.
    """
    ready_count = 0
    unready: list[str] = []
    missing: list[str] = []
    values: dict[str, float] = {}
    for name, state in pods.items():
        if state == HpaPodState.TERMINATING:
            continue
        if state == HpaPodState.PENDING:
            unready.append(name)
            continue
        if name not in metrics:
            missing.append(name)
            continue
        values[name] = metrics[name]
        ready_count += 1
    if not values:
        return None
    ratio = sum(values.values()) / len(values) / target_average
    up_with_unready = bool(unready) and ratio > 1.0
    if not up_with_unready and not missing:
        if abs(1.0 - ratio) <= tolerance:
            return current_replicas
        return math.ceil(ratio * ready_count)
    for name in missing:
        if ratio < 1.0:
            values[name] = target_average
        elif ratio > 1.0:
            values[name] = 0.0
    if up_with_unready:
        for name in unready:
            values[name] = 0.0
    new_ratio = sum(values.values()) / len(values) / target_average
    if abs(1.0 - new_ratio) <= tolerance or (ratio < 1.0 < new_ratio) or (ratio > 1.0 > new_ratio):
        return current_replicas
    replicas = math.ceil(new_ratio * len(values))
    if (new_ratio < 1.0 and replicas > current_replicas) or (
        new_ratio > 1.0 and replicas < current_replicas
    ):
        return current_replicas
    return replicas


@dataclass(frozen=True, slots=True)
class HpaRules:
    """One direction of ``behavior``: the stabilization window and the ``Max`` of policies.

    Attributes:
        stabilization_window_seconds: window, seconds.
        pods_per_period: the ``Pods`` policy value (0: none).
        percent_per_period: the ``Percent`` policy value (0: none).
        period_seconds: both policies' ``periodSeconds``.
    """

    stabilization_window_seconds: float
    pods_per_period: int
    percent_per_period: float
    period_seconds: float = 15.0


@dataclass(frozen=True, slots=True)
class HpaBehavior:
    """HPA ``behavior`` (defaults: the documented ones for autoscaling/v2).

    Scale-up: no stabilization, the larger of +100% or +4 pods per 15 s. Scale-down: 300 s
    stabilization, -100% per 15 s.
    """

    scale_up: HpaRules = HpaRules(0.0, 4, 100.0)
    scale_down: HpaRules = HpaRules(300.0, 0, 100.0)


@dataclass(slots=True)
class HpaScaler:
    """Stabilization and rate limits of one HPA across its syncs (``horizontal.go``).

    Attributes:
        min_replicas, max_replicas: the HPA's range.
        behavior: its behavior.
        recommendations: (time in seconds, desired replicas) of past syncs.
        events: (time in seconds, signed change of ``spec.replicas``) of past writes: the
            HPA's ``scaleUpEvents`` (positive) and ``scaleDownEvents`` (negative) in one list.
    """

    min_replicas: int
    max_replicas: int
    behavior: HpaBehavior = HpaBehavior()
    recommendations: list[tuple[float, int]] = field(default_factory=list)
    events: list[tuple[float, int]] = field(default_factory=list)

    def normalize(self, desired: int, current: int, now: float) -> int:
        """The replicas the HPA writes for a metric-based ``desired`` at ``now`` (seconds).

        Stabilization (``stabilizeRecommendationWithBehaviors``): up to the min of
        recommendations in the up window, down to the max in the down window (seeded with
        ``current`` on the first call). Then the per-period limits with ``selectPolicy: Max``
        (``convertDesiredReplicasWithBehaviorRate``), then min/max replicas.
        """
        b = self.behavior
        if not self.recommendations:
            self.recommendations.append((now, current))
        up_cut = now - b.scale_up.stabilization_window_seconds
        down_cut = now - b.scale_down.stabilization_window_seconds
        up_rec = desired
        down_rec = desired
        for t, r in self.recommendations:
            if t > up_cut:
                up_rec = min(up_rec, r)
            if t > down_cut:
                down_rec = max(down_rec, r)
        keep = max(
            b.scale_up.stabilization_window_seconds, b.scale_down.stabilization_window_seconds
        )
        self.recommendations = [(t, r) for t, r in self.recommendations if t > now - keep]
        self.recommendations.append((now, desired))
        stabilized = current
        if stabilized < up_rec:
            stabilized = up_rec
        if stabilized > down_rec:
            stabilized = down_rec

        out = stabilized
        if out > current:
            limit = max(self._up_limit(current, now), current)
            out = min(out, limit, self.max_replicas)
        elif out < current:
            limit = min(self._down_limit(current, now), current)
            out = max(out, limit, self.min_replicas)
        out = max(self.min_replicas, min(self.max_replicas, out))
        if out != current:
            self.events.append((now, out - current))
        return out

    def period_start_replicas(self, current: int, now: float, period_seconds: float) -> int:
        """The replicas at the start of the policy period ending at ``now`` (seconds).

        ``current`` minus the replicas added plus the replicas removed by the writes inside
        the period (``now - period_seconds`` excluded), both directions counted whichever way
        the limit is for: ``periodStartReplicas`` in ``calculateScaleUpLimitWithScalingRules``
        and ``calculateScaleDownLimitWithBehaviors`` (``horizontal.go``), which read both
        ``scaleUpEvents`` and ``scaleDownEvents``.
        """
        added = 0
        removed = 0
        for t, delta in self.events:
            if t > now - period_seconds:
                if delta > 0:
                    added += delta
                else:
                    removed -= delta
        return current - added + removed

    def _up_limit(self, current: int, now: float) -> int:
        # calculateScaleUpLimitWithScalingRules: Pods adds its value to the period's start,
        # Percent rounds up; selectPolicy Max takes the larger.
        r = self.behavior.scale_up
        start = self.period_start_replicas(current, now, r.period_seconds)
        proposals = []
        if r.pods_per_period:
            proposals.append(start + r.pods_per_period)
        if r.percent_per_period:
            proposals.append(math.ceil(start * (1 + r.percent_per_period / 100)))
        return max(proposals) if proposals else current

    def _down_limit(self, current: int, now: float) -> int:
        # calculateScaleDownLimitWithBehaviors: Pods takes its value off the period's start,
        # Percent truncates; selectPolicy Max takes the smaller (the larger change).
        r = self.behavior.scale_down
        start = self.period_start_replicas(current, now, r.period_seconds)
        proposals = []
        if r.pods_per_period:
            proposals.append(start - r.pods_per_period)
        if r.percent_per_period:
            proposals.append(int(start * (1 - r.percent_per_period / 100)))
        return min(proposals) if proposals else current
