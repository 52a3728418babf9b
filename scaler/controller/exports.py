"""What a control cycle exports about its decisions: our own metrics and the decision log.

:class:`DecisionExports` holds what export needs from cycle to cycle (the label sets last set,
so that a label that is gone is removed; the pods already reported as frozen or hung, so that a
warning is logged once per stall) and nothing the decisions depend on: it writes nothing to the
cluster and changes no decision. :class:`~scaler.controller.loop.Controller` calls it once per
cycle for the queries and once per target for the decision.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterable

import structlog

from scaler.config.policy import TargetPolicy
from scaler.config.vocabulary import SignalName
from scaler.controller.overrides import Control, shared_pods_text
from scaler.controller.report import shown_value
from scaler.controller.targets import TargetSet
from scaler.core.decide import Decision, Direction
from scaler.core.observation import WorkloadSnapshot
from scaler.core.reasons import Reason
from scaler.core.signals import SignalStatus
from scaler.sources.prometheus import SourceResult, StallKind, TargetReadings
from scaler.sources.promql import QueryKind
from scaler.telemetry.metrics import ScalerMetrics

#: Reasons under which the reported level of the decision log is a warning.
_WARNING_REASONS = frozenset(
    {
        Reason.NO_VALID_SIGNALS,
        Reason.SCALE_DOWN_BLOCKED_MISSING_SIGNAL,
        Reason.OUTSIDE_WRITER,
        Reason.CONFLICT,
    }
)


class DecisionExports:
    """Exports each cycle's queries and each target's decision as metrics and log events.

    Args:
        metrics: our own metrics (:class:`~scaler.telemetry.metrics.ScalerMetrics`).
    """

    def __init__(self, metrics: ScalerMetrics, started: float) -> None:
        self.metrics = metrics
        # Every query's series exists from the start (Unix seconds): with Prometheus
        # unreachable from the first cycle on, its age grows and the alert fires.
        for kind in QueryKind:
            metrics.last_query_success.labels(str(kind)).set(started)
        self.log = structlog.get_logger("vllm_scaler")
        self._conflict_labels: dict[str, set[str]] = {}
        self._stalled: dict[str, dict[str, StallKind]] = {}
        self._ttft_labels: dict[str, tuple[str, str]] = {}
        self._histogram_labels: dict[tuple[str, SignalName], tuple[str, str, str]] = {}
        self._mixed: dict[tuple[str, SignalName], str] = {}
        # target key -> the outside write last counted: (replicas we wrote, replicas found)
        self._outside_seen: dict[str, tuple[int | None, int]] = {}
        # targets whose decision of this cycle found a new outside write (logged once)
        self._outside_new: set[str] = set()
        self._outside_by: dict[str, str] = {}  # target -> the field manager of a new one
        # query -> the backend's partial-answer warnings last logged (logged once per change)
        self._partial: dict[QueryKind, tuple[str, ...]] = {}
        # target -> the other workloads' pods, and the shared ones, last said
        self._foreign: dict[str, tuple[tuple[str, str], ...]] = {}
        self._shared: dict[str, tuple[tuple[str, tuple[str, ...]], ...]] = {}
        # the label sets of vllm_scaler_target_info and vllm_scaler_resource_refused, and
        # each refused resource's message last said
        self._target_info: set[tuple[str, str, str]] = set()
        self._refused: dict[tuple[str, str], str] = {}

    def targets(self, targets: TargetSet) -> None:
        """Where each target's policy comes from, and the resources not scaled (a warning
        once per resource and change); a label set that is gone is removed (only once the
        resources are all known: a target not listed yet is not gone)."""
        m = self.metrics
        info = {
            (t.key, "resource", t.resource.key()) if t.resource else (t.key, "policy_file", "")
            for t in targets.targets
        }
        if targets.complete:
            for gone in self._target_info - info:
                m.target_info.remove(*gone)
            self._target_info = info
        else:
            self._target_info |= info
        for labels in info:
            m.target_info.labels(*labels).set(1)
        refused = {(r.resource.key(), r.reason): r.message for r in targets.refused}
        for resource, was in self._refused.keys() - refused.keys():
            m.resource_refused.remove(resource, was)
            self.log.info("resource_accepted", resource=resource, was=was)
        for (resource, reason), message in refused.items():
            m.resource_refused.labels(resource, reason).set(1)
            if self._refused.get((resource, reason)) != message:
                self.log.warning(
                    "resource_refused", resource=resource, reason=reason, message=message
                )
        self._refused = refused

    def forget(self, target: str) -> None:
        """A target that is gone (its resource was deleted): its series and what was said."""
        self.metrics.forget_target(target)
        for said in (
            self._conflict_labels,
            self._stalled,
            self._ttft_labels,
            self._outside_seen,
            self._foreign,
            self._shared,
            self._outside_by,
        ):
            said.pop(target, None)
        self._outside_new.discard(target)

    def not_due(self, sent: Iterable[QueryKind], now: float) -> None:
        """Mark the queries not sent this cycle as not due (``now``, Unix seconds).

        A query is sent only when some target needs it (``ttft_buckets`` only while a target
        has requests, ``throughput`` only for the capacity signal, none without an active
        target): one not sent has not failed, so its timestamp must not age and fire
        VllmScalerPrometheusQueriesFailing for an idle fleet.
        """
        for kind in set(QueryKind) - set(sent):
            self.metrics.last_query_success.labels(str(kind)).set(now)

    def queries(self, result: SourceResult, now: float) -> None:
        m = self.metrics
        m.queries.inc(result.queries_sent)
        self.not_due(result.queries, now)
        # debug: what each query cost and found, and what each target read; asked once, so
        # that at other levels no event's fields are built (one per target each cycle)
        debug = self.log.is_enabled_for(logging.DEBUG)
        for kind, outcome in result.queries.items():
            if debug:
                self.log.debug(
                    "query",
                    query=str(kind),
                    status=str(outcome.status),
                    series=outcome.series,
                    duration_seconds=round(outcome.duration_seconds, 4),
                    http_status=outcome.http_status,
                )
            if outcome.ok:
                m.last_query_success.labels(str(kind)).set(now)
                self._partial_answer(kind, outcome.partial)
            else:
                m.query_failures.labels(str(kind), str(outcome.status)).inc()
                self.log.warning(
                    "query_failed",
                    query=str(kind),
                    reason=str(outcome.status),
                    detail=outcome.detail,
                )
        if debug:
            for key, readings in result.targets.items():
                self.log.debug(
                    "target_readings",
                    target=key,
                    signals={
                        str(name): r.value if r.status is SignalStatus.OK else str(r.status)
                        for name, r in readings.signals.items()
                    },
                    pods_unscraped=len(readings.pods_unscraped),
                )
        for kind, lost in result.unattributed.items():
            m.unattributed_series.labels(str(kind)).inc(lost.count)
            self.log.warning(
                "series_unattributed",
                query=str(kind),
                count=lost.count,
                first=lost.first,
                message="series that name no selector group or target were left out; the "
                "targets they may belong to read them as missing",
            )

    def _partial_answer(self, kind: QueryKind, warnings: tuple[str, ...]) -> None:
        """Count an answer the backend flagged as possibly incomplete; log its warnings once
        per change, and once when the answers are complete again."""
        if warnings:
            self.metrics.partial_answers.labels(str(kind)).inc()
        before = self._partial.get(kind, ())
        if warnings == before:
            return
        if warnings:
            self._partial[kind] = warnings
            self.log.warning(
                "query_partial_answer",
                query=str(kind),
                warnings=list(warnings),
                message=f"the backend answered the {kind} query with warnings that its data may "
                "be incomplete (a store, ingester or storage node did not answer): the signals "
                "read from it count for a scale-up only; no scale-down until answers are complete",
            )
        else:
            del self._partial[kind]
            self.log.info(
                "query_answer_complete",
                query=str(kind),
                message=f"the {kind} answers are complete again (no partial-answer warnings)",
            )

    def record(
        self, t: TargetPolicy, decision: Decision, *, disabled: bool, pods_known: bool = True
    ) -> None:
        """Export a decision; ``pods_known`` False: the target's pods cannot be told (its
        scale subresource has no selector), so no pod count is exported, not even 0."""
        self.metrics.record_decision(
            t.key,
            decision,
            min_replicas=t.min_replicas,
            max_replicas=t.max_replicas,
            tolerance_up=t.tolerance.scale_up,
            tolerance_down=t.tolerance.scale_down,
            pods_known=pods_known,
        )
        self.metrics.scaling_disabled.labels(t.key).set(1 if disabled else 0)
        self.metrics.selector_missing.labels(t.key).set(0 if pods_known else 1)
        if self._new_outside_write(t.key, decision):
            self.metrics.outside_writes.labels(t.key).inc()
            self._outside_new.add(t.key)

    def _new_outside_write(self, key: str, d: Decision) -> bool:
        """True once per distinct outside change of ``spec.replicas``: the decision finds a
        value other than the one we last wrote, and not the same (written, found) pair as the
        cycle before. The decision sees the outside write on every cycle until we re-apply
        (it holds for it); counting or warning each cycle would count one ``kubectl scale``
        a dozen times."""
        if not d.outside_write:
            self._outside_seen.pop(key, None)
            return False
        seen = (d.state.last_written_replicas, d.current_replicas)
        if self._outside_seen.get(key) == seen:
            return False
        self._outside_seen[key] = seen
        return True

    def decision(
        self,
        t: TargetPolicy,
        decision: Decision,
        core: Decision,
        control: Control,
        readings: TargetReadings,
    ) -> None:
        """Metrics and logs of one target's decision (nothing is written to the cluster)."""
        m = self.metrics
        self.record(t, decision, disabled=False)
        self._export_control(t, control)
        writer = control.replicas_writer
        if writer is not None and decision.outside_write:
            self._outside_by[t.key] = writer.manager
        for name in readings.signals:
            if name.per_pod:
                m.pods_missing_metrics.labels(t.key, name).set(
                    len(readings.pods_missing.get(name, frozenset()))
                )
        if readings.dropped:
            m.stale_series_dropped.labels(t.key).inc(len(readings.dropped))
        self._export_stalls(t, readings)
        if readings.kv_metric:
            m.kv_metric.labels(t.key, readings.kv_metric).set(1)
        self._export_histograms(t, decision, readings)
        for e in decision.signals:
            if e.status is SignalStatus.WARMING_UP:  # a fresh fleet: no fault, no warning
                self.log.info("signal_warming_up", target=t.key, signal=str(e.name))
            elif e.status is SignalStatus.LEARNING:  # no capacity estimate yet: no fault
                continue
            elif not e.status.usable_for_scale_down:
                m.query_errors.labels(str(e.name), str(e.status)).inc()
                self.log.warning(
                    "signal_invalid",
                    target=t.key,
                    signal=str(e.name),
                    status=str(e.status),
                    detail=e.detail,
                )
        if control.conflicts:
            self.log.error(
                "scale_conflict",
                target=t.key,
                owners=[f"{o.kind} {o.namespace}/{o.name}" for o in control.conflicts],
                recommended=core.desired_replicas,
                message="another autoscaler targets this workload; recommend only",
            )
        if decision.reason in (Reason.CONFLICT, Reason.PAUSED) and core.direction is not (
            Direction.NONE
        ):
            m.refused_writes.labels(t.key, decision.reason).inc()

    def _export_histograms(
        self, t: TargetPolicy, decision: Decision, readings: TargetReadings
    ) -> None:
        """How TTFT was read, and a warning while a quantile is only a lower bound."""
        m = self.metrics
        labels = (
            (
                "native" if "native" in readings.ttft_metric else "classic",
                readings.ttft_query or "none",  # none: idle, no bucket asked for
            )
            if readings.ttft_metric
            else None
        )
        old = self._ttft_labels.get(t.key)
        if old is not None and old != labels:
            m.ttft_histogram.remove(t.key, *old)
        if labels is not None:
            m.ttft_histogram.labels(t.key, *labels).set(1)
            self._ttft_labels[t.key] = labels
        self._export_layouts(t, readings)
        for e in decision.signals:
            if not e.name.latency:
                continue
            saturated = e.status is SignalStatus.SATURATED
            m.top_bucket_too_low.labels(t.key, str(e.name)).set(1 if saturated else 0)
            if not saturated:
                continue
            reading = readings.signals.get(e.name)
            if reading is not None and reading.mixed_layouts:
                advice = (
                    f"{reading.mixed_layouts}: the pods with the lower top bucket cannot tell; "
                    "finish the rollout or give every pod the same buckets"
                )
            else:
                advice = (
                    "raise the histogram's top bucket (current vLLM TTFT buckets reach 2560 s, "
                    "ITL buckets 80 s; early releases stopped at 10 s and 2.5 s)"
                )
            self.log.warning(
                "histogram_top_bucket_too_low",
                target=t.key,
                signal=str(e.name),
                top_bucket_seconds=e.value,
                detail=e.detail,
                message=f"{e.name} is at least {e.value:g} s, beyond the top finite bucket "
                f"of its histogram, true size unknown: {advice}",
            )

    def _export_layouts(self, t: TargetPolicy, readings: TargetReadings) -> None:
        """Each latency signal's histogram as read (``vllm_scaler_histogram_info``) and its
        mixed bucket layouts: 1 and a warning when a target's pods start to differ."""
        m = self.metrics
        for name, reading in readings.signals.items():
            if not name.latency:
                continue
            key = (t.key, name)
            metric = readings.histogram_metrics.get(name)
            labels = None
            if metric is not None:
                representation = "native" if "native" in metric else "classic"
                labels = (metric, representation, readings.histogram_queries.get(name, "none"))
            old = self._histogram_labels.get(key)
            if old is not None and old != labels:
                m.histogram_info.remove(t.key, str(name), *old)
                del self._histogram_labels[key]
            if labels is not None:
                m.histogram_info.labels(t.key, str(name), *labels).set(1)
                self._histogram_labels[key] = labels
            mixed = reading.mixed_layouts
            m.mixed_layouts.labels(t.key, str(name)).set(1 if mixed else 0)
            if mixed and self._mixed.get(key) != mixed:
                self.log.warning(
                    "histogram_mixed_layouts",
                    target=t.key,
                    signal=str(name),
                    detail=reading.detail,
                    message=f"{name}: the target's pods have histograms with different bucket "
                    f"bounds ({mixed}); the quantile is read on the bounds every pod has "
                    "(coarser, never summed per le across layouts) until they agree again",
                )
            if mixed:
                self._mixed[key] = mixed
            else:
                self._mixed.pop(key, None)

    def _export_stalls(self, t: TargetPolicy, readings: TargetReadings) -> None:
        """Frozen and hung pods: counted every cycle, a warning when a pod becomes one."""
        m = self.metrics
        kinds = {pod: s.kind for pod, s in readings.stalled.items()}
        m.frozen_pods.labels(t.key).set(sum(k is StallKind.FROZEN for k in kinds.values()))
        m.hung_pods.labels(t.key).set(sum(k is StallKind.HUNG for k in kinds.values()))
        before = self._stalled.get(t.key, {})
        reads_per_pod = any(n.per_pod for n in t.signals.enabled())
        for pod, s in sorted(readings.stalled.items()):
            if before.get(pod) is s.kind:
                continue
            if not reads_per_pod:
                consequence = "it ranks first for removal on a scale-down"
            elif s.kind is StallKind.FROZEN:
                consequence = (
                    "its queue and KV-cache values are left out of scale-up; scale-down waits "
                    "until they move"
                )
            else:
                consequence = (
                    "its queue is not load more replicas could serve and is left out; "
                    "scale-down waits; restart the pod if it stays hung"
                )
            self.log.warning(
                f"pod_{s.kind}",
                target=t.key,
                pod=pod,
                polls=s.polls,
                waiting=s.gauges.waiting,
                running=s.gauges.running,
                kv_cache=s.gauges.kv_cache,
                message=f"{s.describe()}: {consequence}",
            )
        for pod in sorted(before.keys() - kinds.keys()):
            self.log.info(
                "pod_stall_ended",
                target=t.key,
                pod=pod,
                was=str(before[pod]),
                message=f"pod {pod} is no longer {before[pod]}: its values count again",
            )
        if kinds:
            self._stalled[t.key] = kinds
        else:
            self._stalled.pop(t.key, None)

    def ownership(self, t: TargetPolicy, snap: WorkloadSnapshot) -> None:
        """The pods the target's selector picks that are not its own: another workload's
        (left out: counted, said once per change), and those it shares with another target
        without an owner to tell (counted for neither: a warning once per change)."""
        m = self.metrics
        m.foreign_pods.labels(t.key).set(len(snap.foreign))
        m.shared_pods.labels(t.key).set(len(snap.shared))
        foreign = tuple(sorted(snap.foreign))
        if foreign != self._foreign.get(t.key, ()):
            if foreign:
                owners = sorted({owner for _, owner in foreign})
                self.log.info(
                    "selector_picks_other_workloads_pods",
                    target=t.key,
                    pods=[pod for pod, _ in foreign][:20],
                    owners=owners,
                    message=f"the target's selector {snap.selector} also picks "
                    f"{len(foreign)} pod(s) of {', '.join(owners)}; their ownerReferences lead "
                    "there, so they are left out of this target's signals and counts",
                )
            self._foreign[t.key] = foreign
        shared = tuple(snap.shared)
        if shared != self._shared.get(t.key, ()):
            if shared:
                self.log.warning(
                    "ambiguous_selector",
                    target=t.key,
                    pods=[pod for pod, _ in shared][:20],
                    other_targets=sorted({o for _, others in shared for o in others}),
                    why=sorted({why for pod, why in snap.unowned if pod in dict(shared)})[:5],
                    message=f"{shared_pods_text(shared)}: they count for neither target, "
                    "and this target does not scale down meanwhile (the HPA's "
                    "AmbiguousSelector); give each workload's pods a label of its own",
                )
            self._shared[t.key] = shared

    def _export_control(self, t: TargetPolicy, c: Control) -> None:
        m = self.metrics
        labels = {o.label for o in c.conflicts}
        for gone in self._conflict_labels.get(t.key, set()) - labels:
            m.conflict.labels(t.key, gone).set(0)
        for owner in labels:
            m.conflict.labels(t.key, owner).set(1)
        self._conflict_labels[t.key] = labels
        m.paused.labels(t.key).set(1 if c.paused or c.invalid_pin is not None else 0)
        if c.pin is not None and not c.paused and not c.conflicts:
            m.pinned_replicas.labels(t.key).set(c.pin)
        else:
            with contextlib.suppress(KeyError):
                m.pinned_replicas.remove(t.key)

    def log_decision(
        self, t: TargetPolicy, d: Decision, action: str, shadow: Decision | None = None
    ) -> None:
        shown = {str(e.name): shown_value(e) for e in d.signals}
        signals = {n: v if isinstance(v, str) else round(v, 4) for n, v in shown.items()}
        # each measured value's target, in the same unit (the capacity signal's value is the
        # forecast demand per replica, its target the usable capacity per replica)
        targets = {
            str(e.name): round(e.target, 4)
            for e in d.signals
            if not isinstance(shown[str(e.name)], str)
        }
        if t.key in self._outside_new:
            self._outside_new.discard(t.key)
            by = self._outside_by.pop(t.key, None)
            self.log.warning(
                "outside_write",
                target=t.key,
                written=d.state.last_written_replicas,
                found=d.current_replicas,
                **({"field_manager": by} if by is not None else {}),
                message="spec.replicas was changed by another writer since our last write"
                + (f" (field manager {by!r})" if by is not None else ""),
            )
        warming = all(
            e.status is SignalStatus.WARMING_UP for e in d.signals if e.status.blocks_scale_down
        )
        # A scale-down held only until a fresh fleet's rates exist is no cause for a warning.
        quiet = d.reason is Reason.SCALE_DOWN_BLOCKED_MISSING_SIGNAL and warming
        log = self.log.warning if d.reason in _WARNING_REASONS and not quiet else self.log.info
        log(
            "decision",
            target=t.key,
            current=d.current_replicas,
            desired=d.desired_replicas,
            reason=str(d.reason),
            action=action,
            ready=d.replicas.ready,
            starting=d.replicas.starting,
            terminating=d.replicas.terminating,
            **({"unschedulable": d.replicas.unschedulable} if d.replicas.unschedulable else {}),
            **({"finished": d.replicas.finished} if d.replicas.finished else {}),
            **({"sleeping": d.replicas.sleeping} if d.replicas.sleeping else {}),
            signals=signals,
            signal_targets=targets,
            message=d.message,
            **(
                {
                    "shadow_desired": shadow.desired_replicas,
                    "shadow_reason": str(shadow.reason),
                    "shadow_message": shadow.message,
                }
                if shadow is not None
                else {}
            ),
        )
