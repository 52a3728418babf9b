"""The control cycle: read every target, decide, plan the writes, apply them, report.

One cycle: read each target's scale subresource and pods (Kubernetes actuator), read every
signal for all targets in a constant number of queries (Prometheus source), run the pure
decision core per target, apply what overrides it (:mod:`.overrides`: other autoscalers,
pause, pin), see which Events are due (:mod:`.events_due`), plan the target's writes
(:func:`~scaler.controller.plan.plan_writes`), apply the plan in one place
(:mod:`.apply`), and export the outcome (metrics, one log event per decision:
:mod:`.exports`). What the cycle remembers of a target between cycles is one record
(:mod:`.records`); the decision state that survives a failover is on the Lease
(:mod:`.lease_state`).

A failure of one target never stops the others; a failure of the whole source is a set of
invalid signals, which the core turns into holds.

Ownership of ``spec.replicas`` (the controller's part over the core's decision):

- leader election: with a :class:`~scaler.controller.fence.Leadership`, only the leader
  writes (scale, pod annotations, Events, the state); the others run the same cycles
  read-only and export what they would decide. Each write is fenced on leadership checked
  when it is sent (:class:`~scaler.controller.fence.WriteFence`). A new leader loads the
  persisted decision state before its first decision, and the leader writes it back (on
  the Lease) at most once per cycle, only when it changed (:mod:`.lease_state`).
- ``spec.replicas`` 0 (a person or an idler parked the workload): scaling is disabled, as
  for the HPA: nothing is read from Prometheus or written for it, and when replicas go
  above 0 again scaling resumes from there with a fresh stabilization history.
- conflicts, pause and pin: see :mod:`scaler.controller.overrides`.
- drain-aware scale-down (:mod:`scaler.controller.removal`): before lowering replicas of a
  kind that removes pods through a ReplicaSet (Deployment, ReplicaSet, Argo Rollout), the
  idlest ready pods get the lowest ``controller.kubernetes.io/pod-deletion-cost``; the
  scale-down itself is written in a later cycle that reads that ranking back and still
  wants it. StatefulSets and LeaderWorkerSets remove the highest ordinal whatever the cost.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Protocol

import structlog

from scaler.actuators.kubernetes import ApiFailure, KubeApiError, ScaleOwner
from scaler.actuators.resources import ResourceSnapshot
from scaler.actuators.writers import WorkloadMeta
from scaler.config.policy import Policy, ReplicaGroups, TargetPolicy, WorkloadRef
from scaler.controller.apply import Applied, Applier, StatusWriter, Writer
from scaler.controller.events_due import refusals_due, stuck_due
from scaler.controller.exports import DecisionExports
from scaler.controller.fence import Leadership, WriteFence
from scaler.controller.lease_state import LeaseState
from scaler.controller.observe import observe
from scaler.controller.overlap import shared_pods_left_out
from scaler.controller.overrides import (
    Control,
    disabled_decision,
    override,
    read_control,
    selector_required_decision,
)
from scaler.controller.plan import Event, WritePlan, plan_writes
from scaler.controller.read_failure import read_failure_message
from scaler.controller.records import TargetRecord, TargetRecords
from scaler.controller.removal import REMOVAL_EXPIRY_SECONDS, PendingRemoval
from scaler.controller.report import TargetReport
from scaler.controller.seasonal import SeasonalRefresher
from scaler.controller.statuses import ResourceStatuses
from scaler.controller.targets import Target, TargetSet, resolve_targets
from scaler.core.capacity import CapacityMemory, priced_policy
from scaler.core.decide import Decision, decide
from scaler.core.observation import WorkloadSnapshot
from scaler.core.state import TargetState
from scaler.sources.prometheus import SourceResult, TargetReadings
from scaler.telemetry.metrics import ScalerMetrics

__all__ = ["Actuator", "Applied", "Controller", "ResourceSource", "SignalSource"]


class SignalSource(Protocol):
    """Reads every target's signals (see :class:`scaler.sources.prometheus.PrometheusSource`)."""

    async def read(
        self,
        policy_targets: Sequence[TargetPolicy],
        snapshots: Mapping[str, WorkloadSnapshot],
    ) -> SourceResult: ...


class Actuator(Writer, Protocol):
    """Reads and writes scale subresources (see :mod:`scaler.actuators.kubernetes`); the write
    verbs are :class:`~scaler.controller.apply.Writer`'s."""

    @property
    def dry_run(self) -> bool: ...

    async def read(
        self, ref: WorkloadRef, *, groups: ReplicaGroups | None = None
    ) -> WorkloadSnapshot: ...

    @property
    def field_manager(self) -> str: ...

    async def read_workload(self, ref: WorkloadRef) -> WorkloadMeta: ...

    async def list_scale_owners(self, namespace: str) -> list[ScaleOwner]: ...


class ResourceSource(Protocol):
    """The ``VLLMAutoscaler`` resources as last seen (see
    :class:`scaler.actuators.resources.ResourceWatch`)."""

    def snapshot(self) -> ResourceSnapshot: ...


@dataclass(frozen=True, slots=True)
class _ReadFailed:
    """A target's read that failed: which one (a key of
    :data:`~scaler.controller.read_failure.READS`) and why."""

    read: str
    error: KubeApiError


def _failed(read: str, exc: BaseException) -> _ReadFailed:
    """A read's classified failure; anything else (a bug, a cancellation) goes on up."""
    if isinstance(exc, KubeApiError):
        return _ReadFailed(read, exc)
    raise exc


@dataclass(frozen=True, slots=True)
class _TargetRead:
    snapshot: WorkloadSnapshot
    meta: WorkloadMeta


class Controller:
    """Runs control cycles over every target of a policy file and of the resources.

    Args:
        policy: the policy file (its targets, the rate window and replica labels every
            target's queries use).
        source: the signal source.
        actuator: the Kubernetes actuator (``dry_run`` for recommendations).
        metrics: where to export our own metrics.
        clock: epoch seconds; the only "now" the loop and the core see.
        leader: leader election; None: this process always leads (single replica).
        resume_max_gap_seconds: a persisted state saved longer ago than this is resumed
            with the current replicas added at "now" (see :func:`scaler.core.state.resume`).
        event_repeat_seconds: a refusal Event (conflict, pause) that does not change is
            repeated at most this often.
        resources: the ``VLLMAutoscaler`` resources (None: not watched; the policy file's
            targets only; :mod:`scaler.controller.targets` says how both go together).
        status: writes the resources' status (None: no status is written).
        seasonal: the seasonal forecasts, refitted in the background
            (:class:`~scaler.controller.seasonal.SeasonalRefresher`); None: none.
        api_server: the Kubernetes API server's URL, user-info masked, that a failed read
            names (:func:`~scaler.controller.read_failure.read_failure_message`); None: not
            named.
    """

    def __init__(
        self,
        *,
        policy: Policy,
        source: SignalSource,
        actuator: Actuator,
        metrics: ScalerMetrics,
        clock: Callable[[], float] = time.time,
        leader: Leadership | None = None,
        resume_max_gap_seconds: float = 60.0,
        event_repeat_seconds: float = 300.0,
        resources: ResourceSource | None = None,
        status: StatusWriter | None = None,
        seasonal: SeasonalRefresher | None = None,
        api_server: str | None = None,
    ) -> None:
        self.policy = policy
        self.api_server = api_server
        self.source = source
        self.actuator = actuator
        self.metrics = metrics
        self.clock = clock
        self.leader = leader
        self.resume_max_gap_seconds = resume_max_gap_seconds
        self.event_repeat_seconds = event_repeat_seconds
        #: what the loop remembers of each target (:mod:`scaler.controller.records`)
        self.records = TargetRecords()
        self.seasonal = seasonal
        self.log = structlog.get_logger("vllm_scaler")
        self.exports = DecisionExports(metrics, started=clock())
        self.applier = Applier(actuator, metrics, status)
        self.resources = resources
        self.statuses = ResourceStatuses(self.applier, writes=not actuator.dry_run)
        #: the targets of the last cycle
        self.targets = TargetSet(())
        #: the decision state on the Lease (None without leader election)
        self.lease_state = LeaseState(leader, metrics) if leader is not None else None
        #: the other autoscalers of each namespace, as last listed
        self._owners: dict[str, list[ScaleOwner]] = {}
        metrics.dry_run.set(1 if actuator.dry_run else 0)
        if leader is None:
            metrics.leader.set(0 if actuator.dry_run else 1)

    def use_policy(self, policy: Policy, *, removed: Sequence[str] = ()) -> None:
        """Run ``policy`` from the next cycle on (a reloaded file): the targets that stay keep
        their decision state; the ``removed`` ones lose it and their metrics."""
        self.policy = policy
        gone = set(removed)
        for key in self.records.keep_only(k for k in list(self.records) if k not in gone):
            self.exports.forget(key)

    # ------------------------------------------------------------------ reads

    async def _read_target(self, t: TargetPolicy) -> _TargetRead | _ReadFailed:
        # Both reads end before the cycle goes on, the failure of one included: a request
        # left running would answer into a later cycle (its 429 closing the request gate then).
        snap, meta = await asyncio.gather(
            self.actuator.read(t.workload, groups=t.groups),
            self.actuator.read_workload(t.workload),
            return_exceptions=True,
        )
        if isinstance(snap, BaseException):
            return _failed("scale", snap)
        if isinstance(meta, BaseException):
            return _failed("workload", meta)
        return _TargetRead(snap, meta)

    async def _read_owners(self, namespace: str) -> None:
        """Refresh the other autoscalers of a namespace; on failure keep the last answer."""
        try:
            self._owners[namespace] = await self.actuator.list_scale_owners(namespace)
        except KubeApiError as err:
            self.log.warning(
                "scale_owner_list_failed",
                namespace=namespace,
                outcome=str(err.outcome),
                error=err.message,
                message="cannot list HorizontalPodAutoscalers/ScaledObjects; conflicts are "
                "judged on the last successful listing",
            )

    def state(self, key: str) -> TargetState | None:
        """The active policy's decision state of target ``key`` after the last cycle."""
        record = self.records.get(key)
        return record.state if record is not None else None

    def _capacity(self, key: str) -> CapacityMemory | None:
        """The capacity signal's memory of target ``key`` after the last cycle (its fitted
        prices among it), None before its first."""
        state = self.state(key)
        return state.capacity if state is not None else None

    def shadow_state(self, key: str) -> TargetState | None:
        """The shadow policy's decision state of target ``key`` after the last cycle."""
        record = self.records.get(key)
        return record.shadow_state if record is not None else None

    async def persist(self, fence: WriteFence) -> None:
        """As the leader, write the targets' decision state to the Lease when it changed
        (every record's while the resources are not all known yet: a target not listed yet
        keeps the state a previous leader left it)."""
        if self.lease_state is not None:
            targets = self.targets
            keys = [t.key for t in targets.targets] if targets.complete else list(self.records)
            await self.lease_state.save(self.records, keys, self.clock(), fence)

    def _resolve(self) -> TargetSet:
        """This cycle's targets: the policy file's and the resources' (the ones gone are
        forgotten once the resources are all known)."""
        if self.resources is None:
            found = resolve_targets(self.policy.targets)
        else:
            snap = self.resources.snapshot()
            found = resolve_targets(self.policy.targets, snap.items, complete=snap.synced)
        if found.complete:
            for key in self.records.keep_only(t.key for t in found.targets):
                self.exports.forget(key)
                self.log.info(
                    "target_gone",
                    target=key,
                    message="its VLLMAutoscaler is deleted: scaling stops, the replicas stay",
                )
        self.exports.targets(found)
        return found

    def _state_for(
        self, record: TargetRecord, current: int, now: float, *, shadow: bool = False
    ) -> TargetState | None:
        saved_at = self.lease_state.saved_at if self.lease_state is not None else 0.0
        return record.state_for(
            current, now, saved_at=saved_at, max_gap=self.resume_max_gap_seconds, shadow=shadow
        )

    # ------------------------------------------------------------------ the cycle

    async def run_cycle(self) -> list[TargetReport]:
        """Run one control cycle over every target; never raises for I/O failures."""
        started = time.monotonic()
        if self.leader is not None:
            self.leader.observe()
        if self.lease_state is not None:
            self.lease_state.load_if_new_term(self.records, self.clock())
        fence = WriteFence(self.leader)
        self.targets = found = self._resolve()
        targets = [t.policy for t in found.targets]
        namespaces = sorted({t.workload.namespace for t in targets})
        reads, _ = await asyncio.gather(
            asyncio.gather(*(self._read_target(t) for t in targets)),
            asyncio.gather(*(self._read_owners(ns) for ns in namespaces)),
        )
        snapshots: dict[str, WorkloadSnapshot] = {}
        metas: dict[str, WorkloadMeta] = {}
        reports: list[TargetReport] = []
        now = self.clock()
        for t, r in zip(targets, reads, strict=True):
            if isinstance(r, _ReadFailed):
                err = r.error
                self.metrics.target_errors.labels(t.key, err.outcome).inc()
                message = read_failure_message(t.key, r.read, err, self.api_server)
                self.log.error(
                    "target_read_failed",
                    target=t.key,
                    outcome=str(err.outcome),
                    error=err.message,
                    message=message,
                )
                target = found.by_key[t.key]
                reports.append(
                    TargetReport(
                        t.key, None, None, "read_failed", err.message, resource=_key(target)
                    )
                )
                missing = err.outcome is ApiFailure.NOT_FOUND
                await self.statuses.unread(
                    target, self.records[t.key], missing, message, now, fence
                )
            else:
                snapshots[t.key] = r.snapshot
                metas[t.key] = r.meta
        readable = [t for t in targets if t.key in snapshots]
        # a pod whose owner cannot be told that two targets list counts for neither (case 28)
        snapshots = shared_pods_left_out(snapshots)
        # spec.replicas 0: scaling disabled; no selector: the pods cannot be told; neither
        # target's (absent or unattributable) series are asked for
        active = [
            t for t in readable if snapshots[t.key].spec_replicas > 0 and snapshots[t.key].selector
        ]
        if self.seasonal is not None:
            # a refit when due, in the background; the history priced as the live signal
            # prices the demand now (the fitted prices, not the profile's)
            self.seasonal.poke([priced_policy(t, self._capacity(t.key)) for t in active])
        result = (
            await self.source.read(
                [t.reading_target() for t in active], {t.key: snapshots[t.key] for t in active}
            )
            if active
            else None
        )
        now = self.clock()
        if result is not None:
            self.exports.queries(result, now)
        else:
            self.exports.not_due((), now)
        for t in readable:
            owners = self._owners.get(t.workload.namespace, [])
            snap = snapshots[t.key]
            target = found.by_key[t.key]
            record = self.records[t.key]
            meta = metas[t.key]
            control = replace(
                read_control(
                    t.workload,
                    owners,
                    meta.annotations,
                    writer=meta.replicas_writer,
                    own_manager=self.actuator.field_manager,
                ),
                shared=snap.shared,
            )
            if snap.spec_replicas <= 0:
                report = await self._disabled_target(target, record, snap, now, fence)
            elif not snap.selector:
                report = await self._selectorless_target(target, record, snap, now, fence)
            else:
                self._selector_found(t, record)
                assert result is not None
                readings = result.targets[t.key]
                report = await self._cycle_target(
                    target, record, snap, readings, now, control, fence
                )
            reports.append(report)
        for refused in found.refused:
            await self.statuses.refused(refused, now, fence)
            reports.append(
                TargetReport(
                    f"{refused.resource.kind} {refused.resource.key()}",
                    None,
                    None,
                    "refused",
                    refused.message,
                    resource=refused.resource.key(),
                )
            )
        await self.persist(fence)
        if self.leader is not None:
            self.leader.observe()  # a renew deadline passed during the cycle shows now
        self.metrics.cycle_duration.observe(time.monotonic() - started)
        self.metrics.cycles.inc()
        self.metrics.last_cycle.set(self.clock())
        order = {t.key: i for i, t in enumerate(targets)}  # refused resources last, as listed
        return sorted(reports, key=lambda r: order.get(r.target, len(order)))

    async def _cycle_target(
        self,
        target: Target,
        record: TargetRecord,
        snap: WorkloadSnapshot,
        readings: TargetReadings,
        now: float,
        control: Control,
        fence: WriteFence,
    ) -> TargetReport:
        """Decide one target, export the decision, plan its writes and apply them."""
        t = target.policy
        if record.disabled:
            record.disabled = False
            self.log.info(
                "scaling_resumed",
                target=t.key,
                replicas=snap.spec_replicas,
                message="spec.replicas is above 0 again; scaling resumes from there with a "
                "fresh stabilization history",
            )
        removing = self._removing(t, record, snap, now)
        state = self._state_for(record, snap.spec_replicas, now)
        window = self.policy.rate_window_seconds
        observation = observe(t, snap, readings, state, removing=removing)
        if self.seasonal is not None:
            observation = replace(observation, seasonal=self.seasonal.forecast(t.key))
        core = decide(t, observation, state, now, ttft_window_seconds=window)
        decision = override(core, control)
        self.exports.decision(t, decision, core, control, readings)
        self.exports.ownership(t, snap)
        shadow = self._shadow(t, record, snap, readings, now, removing)
        writes = not self.actuator.dry_run and fence.allows()
        events: list[Event] = []
        if writes:
            repeat = self.event_repeat_seconds
            events = [
                *refusals_due(record, t, control, core, now, repeat_seconds=repeat),
                *stuck_due(record, t, snap, decision, now, repeat_seconds=repeat),
            ]
        plan = plan_writes(
            t,
            snap,
            readings,
            decision,
            record,
            now,
            writes=writes,
            dry_run=self.actuator.dry_run,
            events=events,
            subject=target.resource,
        )
        applied = await self.apply(plan, fence)
        record.state = applied.state
        if applied.removal is not None:
            record.removal = applied.removal
        self.exports.log_decision(t, decision, applied.action, shadow)
        await self.statuses.decided(target, record, decision, applied, shadow, now, fence)
        return TargetReport(
            t.key,
            decision,
            readings,
            applied.action,
            applied.error,
            shadow,
            resource=_key(target),
        )

    async def apply(self, plan: WritePlan, fence: WriteFence) -> Applied:
        """Write what ``plan`` says (:meth:`scaler.controller.apply.Applier.apply`)."""
        return await self.applier.apply(plan, fence)

    def _shadow(
        self,
        t: TargetPolicy,
        record: TargetRecord,
        snap: WorkloadSnapshot,
        readings: TargetReadings,
        now: float,
        removing: int,
    ) -> Decision | None:
        """The target's shadow policy on the same readings, with its own state; never
        written (a shadow has no writes of its own: it recommends from the replicas there
        are, as a dry run would).

        Its stabilization history is its own; its step limits count the workload's real
        changes in the period, which are the active policy's writes: without them the shadow
        would take each step of the active one as its own starting point and step again (a
        shadow asking for 8 beside an active policy held at 5 by the same step limit).
        """
        shadow = t.shadow_target()
        if shadow is None:
            record.shadow_state = None
            return None
        state = self._state_for(record, snap.spec_replicas, now, shadow=True)
        active = record.state
        if state is not None and active is not None:
            state = replace(
                state,
                scale_events=active.scale_events,
                last_written_replicas=active.last_written_replicas,
            )
        d = decide(
            shadow,
            observe(shadow, snap, readings, state, removing=removing),
            state,
            now,
            ttft_window_seconds=self.policy.rate_window_seconds,
        )
        record.shadow_state = d.state
        self.metrics.record_shadow(t.key, d)
        return d

    # ------------------------------------------------------------------ targets not decided

    async def _disabled_target(
        self,
        target: Target,
        record: TargetRecord,
        snap: WorkloadSnapshot,
        now: float,
        fence: WriteFence,
    ) -> TargetReport:
        """``spec.replicas`` is 0: report scaling as disabled, write nothing but one Event.

        The target's decision state is dropped, so that scaling resumes from the replicas
        someone sets, with a fresh stabilization history (as the HPA does).
        """
        t = target.policy
        decision = disabled_decision(snap.counts(t.model_load_timeout_seconds))
        for pod in record.forget_decisions():
            self.metrics.removal_survivors.remove(t.key, pod)
        self.exports.record(t, decision, disabled=True)
        self.metrics.remove_signals(t.key, t.signals.enabled())
        events: tuple[Event, ...] = ()
        if not record.disabled:
            record.disabled = True
            self.log.info("scaling_disabled", target=t.key, message=decision.message)
            events = (Event("ScalingDisabled", decision.message),)
        plan = WritePlan(
            target=t,
            snapshot=snap,
            decision=decision,
            state=decision.state,
            now=now,
            events=events if not self.actuator.dry_run else (),
            subject=target.resource,
        )
        applied = await self.apply(plan, fence)
        self.exports.log_decision(t, decision, applied.action)
        await self.statuses.decided(target, record, decision, applied, None, now, fence)
        return TargetReport(t.key, decision, None, applied.action, resource=_key(target))

    async def _selectorless_target(
        self,
        target: Target,
        record: TargetRecord,
        snap: WorkloadSnapshot,
        now: float,
        fence: WriteFence,
    ) -> TargetReport:
        """The scale subresource answers no ``status.selector`` (case 27): the target's pods
        cannot be told, so nothing is read or written; said once (a warning and a Warning
        Event) until a selector appears, and exported without pod counts (never 0 ready)."""
        t = target.policy
        decision = selector_required_decision(
            snap.counts(t.model_load_timeout_seconds), t.workload.kind
        )
        self.exports.record(t, decision, disabled=False, pods_known=False)
        self.metrics.remove_signals(t.key, t.signals.enabled())
        events: tuple[Event, ...] = ()
        if not record.selectorless:
            record.selectorless = True
            self.log.warning(
                "scale_selector_missing",
                target=t.key,
                scale=f"{t.workload.api_version} {t.workload.resource}/{t.workload.name}/scale",
                message=decision.message,
            )
            events = (Event("SelectorRequired", decision.message, "Warning"),)
        plan = WritePlan(
            target=t,
            snapshot=snap,
            decision=decision,
            state=record.state or decision.state,
            now=now,
            events=events if not self.actuator.dry_run else (),
            subject=target.resource,
        )
        applied = await self.apply(plan, fence)
        self.exports.log_decision(t, decision, applied.action)
        await self.statuses.decided(target, record, decision, applied, None, now, fence)
        return TargetReport(t.key, decision, None, applied.action, resource=_key(target))

    def _selector_found(self, t: TargetPolicy, record: TargetRecord) -> None:
        if record.selectorless:
            record.selectorless = False
            self.log.info(
                "scale_selector_found",
                target=t.key,
                message="the scale subresource answers a pod selector again: scaling resumes",
            )

    # ------------------------------------------------------------------ scale-downs in progress

    def _removing(
        self, t: TargetPolicy, record: TargetRecord, snap: WorkloadSnapshot, now: float
    ) -> int:
        """Live pods that our own earlier scale-down still removes (forgotten once none is)."""
        pending = record.removal
        if pending is None:
            return 0
        left = pending.removing(snap, now)
        if left == 0:
            record.removal = None
            if now - pending.at <= REMOVAL_EXPIRY_SECONDS:
                self._check_removal_order(t, record, pending, snap)
        return left

    def _check_removal_order(
        self,
        t: TargetPolicy,
        record: TargetRecord,
        pending: PendingRemoval,
        snap: WorkloadSnapshot,
    ) -> None:
        """A scale-down the workload controller has carried out: warn, naming the pods,
        when it removed others than those ranked to go (their requests were cut instead
        of the idlest pods'); the survivors' gauge shows the last such scale-down's pods."""
        for pod in record.survivors:
            self.metrics.removal_survivors.remove(t.key, pod)
        record.survivors = ()
        ignored = pending.order_ignored(snap)
        if ignored is None:
            return
        record.survivors = ignored.survived
        for pod in ignored.survived:
            self.metrics.removal_survivors.labels(t.key, pod).set(1)
        self.metrics.removal_order_ignored.labels(t.key).inc()
        self.log.warning(
            "scale_down_order_ignored",
            target=t.key,
            survived=list(ignored.survived),
            removed=list(ignored.removed),
            message=f"the workload controller of {t.workload.kind} {t.workload.name} removed "
            f"{', '.join(ignored.removed)} instead of {', '.join(ignored.survived)}, ranked to "
            "go by controller.kubernetes.io/pod-deletion-cost: it ignores the annotation (the "
            "PodDeletionCost feature gate is off, or the controller does not implement it), so "
            "scale-downs cut the requests of busier pods",
        )


def _key(target: Target) -> str:
    """The ``namespace/name`` of the resource that defines ``target`` ('' for the file's)."""
    return target.resource.key() if target.resource is not None else ""
