"""The control loop: read every target, decide, plan the writes, apply them, report.

One cycle: read each target's scale subresource and pods (Kubernetes actuator), read every
signal for all targets in a constant number of queries (Prometheus source), run the pure
decision core per target, apply what overrides it (:mod:`.overrides`: other autoscalers,
pause, pin), plan the target's writes (:class:`~scaler.controller.plan.WritePlan`), apply the
plan in one place (:meth:`Controller.apply`), and export the outcome (metrics, one log event
per decision: :mod:`.exports`).

A failure of one target never stops the others; a failure of the whole source is a set of
invalid signals, which the core turns into holds.

Ownership of ``spec.replicas`` (the controller's part over the core's decision):

- leader election: with a :class:`~scaler.controller.fence.Leadership`, only the leader
  writes (scale, pod annotations, Events, the state); the others run the same cycles
  read-only and export what they would decide. Each write is fenced on leadership checked
  when it is sent (:class:`~scaler.controller.fence.WriteFence`). A new leader loads the
  persisted decision state before its first decision, and the leader writes it back (on
  the Lease) at most once per cycle, only when it changed.
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
import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Protocol

import structlog

from scaler.actuators.kubernetes import (
    DELETION_COST_KINDS,
    ApiFailure,
    CostPatches,
    KubeApiError,
    ScaleOutcome,
    ScaleOwner,
    ScaleResult,
    WriteGuard,
)
from scaler.actuators.writers import WorkloadMeta
from scaler.config.policy import Policy, ReplicaGroups, TargetPolicy, WorkloadRef
from scaler.controller.exports import DecisionExports
from scaler.controller.fence import Leadership, WriteFence
from scaler.controller.observe import observe
from scaler.controller.overlap import shared_pods_left_out
from scaler.controller.overrides import (
    REFUSALS,
    Control,
    disabled_decision,
    override,
    read_control,
    refusal_events,
    selector_required_decision,
)
from scaler.controller.plan import Event, WritePlan, stuck_event, stuck_pods
from scaler.controller.removal import (
    REMOVAL_EXPIRY_SECONDS,
    PendingRemoval,
    pending_removal,
    ranked,
    ranked_in_order,
)
from scaler.controller.report import TargetReport
from scaler.core.decide import Decision, Direction, decide
from scaler.core.drain import RemovalPlan, plan_removal
from scaler.core.observation import WorkloadSnapshot
from scaler.core.reasons import Reason
from scaler.core.state import (
    STATE_FORMAT_VERSION,
    TargetState,
    decode_state,
    encode_state,
    record_write,
    resume,
)
from scaler.sources.prometheus import SourceResult, TargetReadings
from scaler.telemetry.metrics import ScalerMetrics

#: Lease annotation holding the persisted decision state (JSON).
STATE_ANNOTATION = "vllm-scaler.io/state"


#: Upper bound of the persisted state (Kubernetes allows 256 KiB of annotations in total).
MAX_STATE_BYTES = 64 * 1024
#: Pod annotation failures that a retry will not fix: scale down without the ranking.
_PERMANENT = frozenset(
    {ApiFailure.UNAUTHORIZED, ApiFailure.FORBIDDEN, ApiFailure.INVALID, ApiFailure.NOT_FOUND}
)
#: Holds during which the ranking of a scale-down the signals ask for is written ahead.
_RANK_AHEAD = frozenset({Reason.STABILIZED, Reason.STEP_LIMITED})


class SignalSource(Protocol):
    """Reads every target's signals (see :class:`scaler.sources.prometheus.PrometheusSource`)."""

    async def read(
        self,
        policy_targets: Sequence[TargetPolicy],
        snapshots: Mapping[str, WorkloadSnapshot],
    ) -> SourceResult: ...


class Actuator(Protocol):
    """Reads and writes scale subresources (see :mod:`scaler.actuators.kubernetes`)."""

    @property
    def dry_run(self) -> bool: ...

    async def read(
        self, ref: WorkloadRef, *, groups: ReplicaGroups | None = None
    ) -> WorkloadSnapshot: ...

    async def scale(
        self, ref: WorkloadRef, replicas: int, *, current: WorkloadSnapshot, guard: WriteGuard
    ) -> ScaleResult: ...

    async def emit_event(
        self, ref: WorkloadRef, *, reason: str, message: str, type: str = "Normal"
    ) -> bool: ...

    @property
    def field_manager(self) -> str: ...

    async def read_workload(self, ref: WorkloadRef) -> WorkloadMeta: ...

    async def list_scale_owners(self, namespace: str) -> list[ScaleOwner]: ...

    async def set_deletion_costs(
        self,
        namespace: str,
        costs: Mapping[str, int],
        *,
        current: Mapping[str, str | None],
        guard: WriteGuard,
    ) -> CostPatches: ...


def _failed(exc: BaseException) -> KubeApiError:
    """A read's classified failure; anything else (a bug, a cancellation) goes on up."""
    if isinstance(exc, KubeApiError):
        return exc
    raise exc


@dataclass(frozen=True, slots=True)
class _TargetRead:
    snapshot: WorkloadSnapshot
    meta: WorkloadMeta


@dataclass(frozen=True, slots=True)
class Applied:
    """What applying a :class:`~scaler.controller.plan.WritePlan` ended in.

    Attributes:
        action: ``scaled``, ``unchanged``, ``dry_run`` or the failed write's outcome;
            ``none`` when nothing was to be written; ``not_leader`` when this replica does
            not lead (or stopped leading before the write was sent); ``pods_ranked`` when
            the pod-deletion-cost ranking was written and the scale-down waits for a later
            cycle.
        error: why the write failed ('' otherwise).
        state: the plan's state, with the write added when it succeeded.
    """

    action: str
    error: str
    state: TargetState


class Controller:
    """Runs control cycles over every target of a policy.

    Args:
        policy: the targets.
        source: the signal source.
        actuator: the Kubernetes actuator (``dry_run`` for recommendations).
        metrics: where to export our own metrics.
        clock: epoch seconds; the only "now" the loop and the core see.
        leader: leader election; None: this process always leads (single replica).
        resume_max_gap_seconds: a persisted state saved longer ago than this is resumed
            with the current replicas added at "now" (see :func:`scaler.core.state.resume`).
        event_repeat_seconds: a refusal Event (conflict, pause) that does not change is
            repeated at most this often.
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
    ) -> None:
        self.policy = policy
        self.source = source
        self.actuator = actuator
        self.metrics = metrics
        self.clock = clock
        self.leader = leader
        self.resume_max_gap_seconds = resume_max_gap_seconds
        self.event_repeat_seconds = event_repeat_seconds
        self.states: dict[str, TargetState] = {}
        self.shadow_states: dict[str, TargetState] = {}
        self.log = structlog.get_logger("vllm_scaler")
        self.exports = DecisionExports(metrics, started=clock())
        self._loaded_term: int | None = None
        self._resume: dict[str, TargetState] = {}
        self._resume_shadows: dict[str, TargetState] = {}
        self._resume_saved_at = 0.0
        self._persisted: str | None = None
        self._owners: dict[str, list[ScaleOwner]] = {}
        self._events: dict[tuple[str, str], tuple[object, float]] = {}
        self._stuck_event_at: dict[str, float] = {}
        self._cost_unsupported_logged: set[str] = set()
        self._removals: dict[str, PendingRemoval] = {}
        self._survivors: dict[str, tuple[str, ...]] = {}
        self._disabled: set[str] = set()
        self._selectorless: set[str] = set()
        metrics.dry_run.set(1 if actuator.dry_run else 0)
        if leader is None:
            metrics.leader.set(0 if actuator.dry_run else 1)

    def use_policy(self, policy: Policy, *, removed: Sequence[str] = ()) -> None:
        """Run ``policy`` from the next cycle on (a reloaded file): the targets that stay keep
        their decision state; the ``removed`` ones lose it and their metrics."""
        self.policy = policy
        for key in removed:
            for memory in (self.states, self.shadow_states, self._removals, self._stuck_event_at):
                memory.pop(key, None)
            self._disabled.discard(key)
            self._events = {k: v for k, v in self._events.items() if k[0] != key}
            self.metrics.remove_target(key)

    async def _read_target(self, t: TargetPolicy) -> _TargetRead | KubeApiError:
        # Both reads end before the cycle goes on, the failure of one included: a request
        # left running would answer into a later cycle (its 429 closing the request gate then).
        snap, meta = await asyncio.gather(
            self.actuator.read(t.workload, groups=t.groups),
            self.actuator.read_workload(t.workload),
            return_exceptions=True,
        )
        if isinstance(snap, BaseException):
            return _failed(snap)
        if isinstance(meta, BaseException):
            return _failed(meta)
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

    def _load_persisted(self, now: float) -> None:
        """A new term: take over the state the previous leader persisted (if any)."""
        assert self.leader is not None
        self._loaded_term = self.leader.term
        self._persisted = None
        raw = self.leader.annotation(STATE_ANNOTATION)
        if not raw:
            self.log.info("state_not_found", message="no persisted state; starting fresh")
            return
        try:
            doc = json.loads(raw)
            if not isinstance(doc, dict) or doc.get("v") != STATE_FORMAT_VERSION:
                raise ValueError(
                    f"unknown state format {doc.get('v') if isinstance(doc, dict) else doc!r}"
                )
            targets = doc.get("targets") or {}
            if not isinstance(targets, dict):
                raise ValueError("targets is not an object")
            states = {str(k): decode_state(v) for k, v in targets.items()}
            shadows = doc.get("shadows") or {}  # absent before shadow policies existed
            if not isinstance(shadows, dict):
                raise ValueError("shadows is not an object")
            shadow_states = {str(k): decode_state(v) for k, v in shadows.items()}
            saved_at = float(doc.get("saved_at") or 0.0)
        except (ValueError, TypeError) as err:
            self.log.error("state_unreadable", error=str(err), message="starting fresh")
            return
        self._resume = states
        self._resume_shadows = shadow_states
        self._resume_saved_at = saved_at
        self.log.info(
            "state_loaded",
            targets=sorted(states),
            saved_at=saved_at,
            age_seconds=round(now - saved_at, 3),
        )

    def _state_for(self, t: TargetPolicy, current: int, now: float) -> TargetState | None:
        return self._resumed(self._resume, self.states, t, current, now)

    def _state_for_shadow(self, t: TargetPolicy, current: int, now: float) -> TargetState | None:
        return self._resumed(self._resume_shadows, self.shadow_states, t, current, now)

    def _resumed(
        self,
        persisted_states: dict[str, TargetState],
        states: dict[str, TargetState],
        t: TargetPolicy,
        current: int,
        now: float,
    ) -> TargetState | None:
        persisted = persisted_states.pop(t.key, None)
        if persisted is not None:
            return resume(
                persisted,
                saved_at=self._resume_saved_at,
                current_replicas=current,
                now=now,
                max_gap=self.resume_max_gap_seconds,
            )
        return states.get(t.key)

    async def _persist(self, now: float, fence: WriteFence) -> None:
        """As the leader, write the decision state to the Lease when it changed."""
        if self.leader is None or not fence.allows():
            return
        targets = {
            t.key: encode_state(self.states[t.key])
            for t in self.policy.targets
            if t.key in self.states
        }
        shadows = {
            t.key: encode_state(self.shadow_states[t.key])
            for t in self.policy.targets
            if t.key in self.shadow_states
        }
        saved: dict[str, object] = {"targets": targets}
        if shadows:
            saved["shadows"] = shadows
        body = json.dumps(saved, sort_keys=True, separators=(",", ":"), allow_nan=False)
        if body == self._persisted:
            return
        text = json.dumps(
            {"v": STATE_FORMAT_VERSION, "saved_at": now, **saved},
            sort_keys=True,
            separators=(",", ":"),
            allow_nan=False,
        )
        if len(text.encode()) > MAX_STATE_BYTES:
            self.metrics.state_writes.labels("too_large").inc()
            self.log.error("state_too_large", bytes=len(text.encode()), limit=MAX_STATE_BYTES)
            return
        if await self.leader.write_annotations({STATE_ANNOTATION: text}):
            self._persisted = body
            self.metrics.state_writes.labels("written").inc()
        else:
            self.metrics.state_writes.labels("failed").inc()

    async def run_cycle(self) -> list[TargetReport]:
        """Run one control cycle over every target; never raises for I/O failures."""
        started = time.monotonic()
        if self.leader is not None:
            self.leader.observe()
            if self.leader.is_leader() and self.leader.term != self._loaded_term:
                self._load_persisted(self.clock())
        fence = WriteFence(self.leader)
        targets = self.policy.targets
        namespaces = sorted({t.workload.namespace for t in targets})
        reads, _ = await asyncio.gather(
            asyncio.gather(*(self._read_target(t) for t in targets)),
            asyncio.gather(*(self._read_owners(ns) for ns in namespaces)),
        )
        snapshots: dict[str, WorkloadSnapshot] = {}
        metas: dict[str, WorkloadMeta] = {}
        reports: list[TargetReport] = []
        for t, r in zip(targets, reads, strict=True):
            if isinstance(r, KubeApiError):
                self.metrics.target_errors.labels(t.key, r.outcome).inc()
                self.log.error(
                    "target_read_failed", target=t.key, outcome=str(r.outcome), error=r.message
                )
                reports.append(TargetReport(t.key, None, None, "read_failed", r.message))
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
                reports.append(await self._disabled_target(t, snap, now, fence))
                continue
            if not snap.selector:
                reports.append(await self._selectorless_target(t, snap, now, fence))
                continue
            self._selector_found(t)
            assert result is not None
            reports.append(
                await self._cycle_target(
                    t, snapshots[t.key], result.targets[t.key], now, control, fence
                )
            )
        await self._persist(self.clock(), fence)
        if self.leader is not None:
            self.leader.observe()  # a renew deadline passed during the cycle shows now
        self.metrics.cycle_duration.observe(time.monotonic() - started)
        self.metrics.cycles.inc()
        self.metrics.last_cycle.set(self.clock())
        order = {t.key: i for i, t in enumerate(targets)}
        return sorted(reports, key=lambda r: order[r.target])

    async def _cycle_target(
        self,
        t: TargetPolicy,
        snap: WorkloadSnapshot,
        readings: TargetReadings,
        now: float,
        control: Control,
        fence: WriteFence,
    ) -> TargetReport:
        """Decide one target, export the decision, plan its writes and apply them."""
        if t.key in self._disabled:
            self._disabled.discard(t.key)
            self.log.info(
                "scaling_resumed",
                target=t.key,
                replicas=snap.spec_replicas,
                message="spec.replicas is above 0 again; scaling resumes from there with a "
                "fresh stabilization history",
            )
        removing = self._removing(t, snap, now)
        state = self._state_for(t, snap.spec_replicas, now)
        window = self.policy.rate_window_seconds
        core = decide(
            t, observe(t, snap, readings, state, removing=removing), state, now,
            ttft_window_seconds=window,
        )  # fmt: skip
        decision = override(core, control)
        self.exports.decision(t, decision, core, control, readings)
        self.exports.ownership(t, snap)
        shadow = self._shadow(t, snap, readings, now, removing)
        plan = self._plan(t, snap, readings, core, decision, control, now, fence)
        applied = await self.apply(plan, fence)
        self.states[t.key] = applied.state
        self.exports.log_decision(t, decision, applied.action, shadow)
        return TargetReport(t.key, decision, readings, applied.action, applied.error, shadow)

    def _shadow(
        self,
        t: TargetPolicy,
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
            self.shadow_states.pop(t.key, None)
            return None
        state = self._state_for_shadow(t, snap.spec_replicas, now)
        active = self.states.get(t.key)
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
        self.shadow_states[t.key] = d.state
        self.metrics.record_shadow(t.key, d)
        return d

    def _removing(self, t: TargetPolicy, snap: WorkloadSnapshot, now: float) -> int:
        """Live pods that our own earlier scale-down still removes (forgotten once none is)."""
        pending = self._removals.get(t.key)
        if pending is None:
            return 0
        left = pending.removing(snap, now)
        if left == 0:
            del self._removals[t.key]
            if now - pending.at <= REMOVAL_EXPIRY_SECONDS:
                self._check_removal_order(t, pending, snap)
        return left

    def _check_removal_order(
        self, t: TargetPolicy, pending: PendingRemoval, snap: WorkloadSnapshot
    ) -> None:
        """A scale-down the workload controller has carried out: warn, naming the pods,
        when it removed others than those ranked to go (their requests were cut instead
        of the idlest pods'); the survivors' gauge shows the last such scale-down's pods."""
        for pod in self._survivors.pop(t.key, ()):
            self.metrics.removal_survivors.remove(t.key, pod)
        ignored = pending.order_ignored(snap)
        if ignored is None:
            return
        self._survivors[t.key] = ignored.survived
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

    async def _disabled_target(
        self, t: TargetPolicy, snap: WorkloadSnapshot, now: float, fence: WriteFence
    ) -> TargetReport:
        """``spec.replicas`` is 0: report scaling as disabled, write nothing but one Event.

        The target's decision state is dropped, so that scaling resumes from the replicas
        someone sets, with a fresh stabilization history (as the HPA does).
        """
        decision = disabled_decision(snap.counts(t.model_load_timeout_seconds))
        self.states.pop(t.key, None)
        self.shadow_states.pop(t.key, None)
        self._resume.pop(t.key, None)
        self._resume_shadows.pop(t.key, None)
        self._removals.pop(t.key, None)
        for pod in self._survivors.pop(t.key, ()):
            self.metrics.removal_survivors.remove(t.key, pod)
        self.exports.record(t, decision, disabled=True)
        self.metrics.remove_signals(t.key, t.signals.enabled())
        events: tuple[Event, ...] = ()
        if t.key not in self._disabled:
            self._disabled.add(t.key)
            self.log.info("scaling_disabled", target=t.key, message=decision.message)
            events = (Event("ScalingDisabled", decision.message),)
        plan = WritePlan(
            target=t,
            snapshot=snap,
            decision=decision,
            state=decision.state,
            now=now,
            events=events if not self.actuator.dry_run else (),
        )
        applied = await self.apply(plan, fence)
        self.exports.log_decision(t, decision, applied.action)
        return TargetReport(t.key, decision, None, applied.action)

    async def _selectorless_target(
        self, t: TargetPolicy, snap: WorkloadSnapshot, now: float, fence: WriteFence
    ) -> TargetReport:
        """The scale subresource answers no ``status.selector`` (case 27): the target's pods
        cannot be told, so nothing is read or written; said once (a warning and a Warning
        Event) until a selector appears, and exported without pod counts (never 0 ready)."""
        decision = selector_required_decision(
            snap.counts(t.model_load_timeout_seconds), t.workload.kind
        )
        self.exports.record(t, decision, disabled=False, pods_known=False)
        self.metrics.remove_signals(t.key, t.signals.enabled())
        events: tuple[Event, ...] = ()
        if t.key not in self._selectorless:
            self._selectorless.add(t.key)
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
            state=self.states.get(t.key) or decision.state,
            now=now,
            events=events if not self.actuator.dry_run else (),
        )
        applied = await self.apply(plan, fence)
        self.exports.log_decision(t, decision, applied.action)
        return TargetReport(t.key, decision, None, applied.action)

    def _selector_found(self, t: TargetPolicy) -> None:
        if t.key in self._selectorless:
            self._selectorless.discard(t.key)
            self.log.info(
                "scale_selector_found",
                target=t.key,
                message="the scale subresource answers a pod selector again: scaling resumes",
            )

    # ------------------------------------------------------------------ writes

    def _plan(
        self,
        t: TargetPolicy,
        snap: WorkloadSnapshot,
        readings: TargetReadings,
        core: Decision,
        decision: Decision,
        control: Control,
        now: float,
        fence: WriteFence,
    ) -> WritePlan:
        """What to write for one target: Events, pod annotations, the scale, the state."""
        writes = not self.actuator.dry_run and fence.allows()
        events: tuple[Event, ...] = ()
        if writes:
            events = (
                *self._refusal_events(t, control, core, now),
                *self._stuck_event(t, snap, decision, now),
            )
        changes = decision.direction is not Direction.NONE
        not_leader = changes and not self.actuator.dry_run and not writes
        d = decision
        removal = ahead = None
        if writes and d.direction is Direction.DOWN:
            removal = self._removal(t, snap, readings, d.current_replicas - d.desired_replicas)
        elif writes and d.reason in _RANK_AHEAD and d.recommended_replicas < d.current_replicas:
            coming = d.current_replicas - max(d.recommended_replicas, t.min_replicas)
            if coming > 0:
                ahead = self._removal(t, snap, readings, coming)
        return WritePlan(
            target=t,
            snapshot=snap,
            decision=decision,
            state=decision.state,
            now=now,
            events=events,
            removal=removal,
            ahead=ahead,
            scale=changes and not not_leader,
            not_leader=not_leader,
        )

    def _refusal_events(
        self, t: TargetPolicy, control: Control, core: Decision, now: float
    ) -> list[Event]:
        """The refusal Events due: each kind at most every ``event_repeat_seconds`` while
        unchanged, and again at once when it changes."""
        wanted = refusal_events(t.workload, control, core)
        due: list[Event] = []
        for kind in REFUSALS:
            if kind not in wanted:
                self._events.pop((t.key, kind), None)
                continue
            signature, event = wanted[kind]
            last = self._events.get((t.key, kind))
            if (
                last is not None
                and last[0] == signature
                and now - last[1] < self.event_repeat_seconds
            ):
                continue
            self._events[(t.key, kind)] = (signature, now)
            due.append(event)
        return due

    def _stuck_event(
        self, t: TargetPolicy, snap: WorkloadSnapshot, d: Decision, now: float
    ) -> list[Event]:
        """A Warning Event while replicas are stuck (not Ready past the model load timeout).

        At most one per target and ``event_repeat_seconds`` (a stuck pod stays stuck for
        hours when the cluster has no free GPU); ``vllm_scaler_stuck_replicas`` carries the
        count every cycle.
        """
        event = stuck_event(t, snap, d)
        if event is None:
            return []
        last = self._stuck_event_at.get(t.key)
        if last is not None and 0 <= now - last < self.event_repeat_seconds:
            return []
        self.log.warning(
            "replicas_stuck",
            target=t.key,
            stuck=d.replicas.stuck,
            pods=stuck_pods(snap, t.model_load_timeout_seconds)[:20],
            message=event.message,
        )
        self._stuck_event_at[t.key] = now
        return [event]

    def _removal(
        self, t: TargetPolicy, snap: WorkloadSnapshot, readings: TargetReadings, remove: int
    ) -> RemovalPlan | None:
        """The ``remove`` idlest pods, to rank lowest by pod-deletion-cost before a scale-down."""
        ref = t.workload
        if ref.kind not in DELETION_COST_KINDS:
            if t.key not in self._cost_unsupported_logged:
                self._cost_unsupported_logged.add(t.key)
                self.log.info(
                    "pod_deletion_cost_unsupported",
                    target=t.key,
                    kind=ref.kind,
                    message=f"a {ref.kind} removes the highest ordinal on scale-down and "
                    "ignores pod-deletion-cost; draining relies on the pods' grace period",
                )
            return None
        return plan_removal(snap.pods, readings.pod_load, remove)

    async def apply(self, plan: WritePlan, fence: WriteFence) -> Applied:
        """Write what ``plan`` says, in order: Events, pod annotations, the scale.

        The one place the control loop writes to the cluster. Each write is sent only if
        ``fence`` allows it at that moment; once it does not, nothing more is written and a
        change of replicas is reported as ``not_leader``. Before a scale-down of a kind that
        honours pod-deletion-cost, the scale is written only when the pods as read this
        cycle already carry the plan's ranking; otherwise the ranking is written and the
        scale-down waits for a later cycle (``pods_ranked``). Each failure is counted and
        logged once here (the actuator returns it) and reported as a ``FailedRescale`` Event.
        """
        t, d = plan.target, plan.decision
        ref = t.workload
        for e in plan.events:
            if not fence.allows():
                return self._fenced(plan, "event")
            await self.actuator.emit_event(ref, reason=e.reason, message=e.message, type=e.type)
        if plan.not_leader:
            self.metrics.refused_writes.labels(t.key, "not_leader").inc()
            return Applied("not_leader", "", plan.state)
        if not plan.scale:
            ahead = plan.ahead
            if ahead is not None and not ranked_in_order(plan.snapshot.pods, ahead.chosen):
                patches = await self._write_ranking(plan, ahead, fence, when="ahead")
                if patches.fenced:
                    return self._fenced(plan, "pod_annotation")
            return Applied("none", "", plan.state)
        removal = plan.removal
        if removal is not None and not ranked(plan.snapshot.pods, removal.chosen):
            patches = await self._write_ranking(plan, removal, fence, when="next_cycle")
            if patches.fenced:
                return self._fenced(plan, "pod_annotation")
            if patches.patched or set(patches.failed.values()) - _PERMANENT:
                return Applied("pods_ranked", "", plan.state)
            self.log.warning(
                "scale_down_unranked",
                target=t.key,
                failed={pod: str(f) for pod, f in patches.failed.items()},
                message="no pod-deletion-cost annotation could be written; scaling down "
                "without choosing the idlest pods (check the RBAC for pods patch)",
            )
        result = await self.actuator.scale(
            ref, d.desired_replicas, current=plan.snapshot, guard=fence.allows
        )
        if result.outcome is ScaleOutcome.NOT_LEADER:
            return self._fenced(plan, "scale")
        if result.outcome is ScaleOutcome.SCALED:
            state = record_write(
                plan.state,
                from_replicas=d.current_replicas,
                to_replicas=d.desired_replicas,
                now=plan.now,
            )
            if d.direction is Direction.DOWN:
                self._removals[t.key] = pending_removal(
                    plan.snapshot,
                    plan.removal,
                    d.current_replicas - d.desired_replicas,
                    plan.now,
                )
            self.metrics.scale_actions.labels(t.key, d.direction).inc()
            await self._emit(
                plan,
                fence,
                Event(
                    "SuccessfulRescale",
                    f"New size: {d.desired_replicas}; reason: {d.reason}: {d.message}",
                ),
            )
            return Applied(str(result.outcome), "", state)
        if result.ok:
            return Applied(str(result.outcome), "", plan.state)
        self.metrics.scale_failures.labels(t.key, result.outcome).inc()
        self.log.error(
            "scale_failed",
            target=t.key,
            outcome=str(result.outcome),
            http_status=result.http_status,
            requests=result.requests,
            error=result.message,
        )
        await self._emit(plan, fence, Event("FailedRescale", result.message, "Warning"))
        return Applied(str(result.outcome), result.message, plan.state)

    async def _emit(self, plan: WritePlan, fence: WriteFence, event: Event) -> None:
        """Send the Event about a write that was made, unless leadership ended meanwhile."""
        if not fence.allows():
            self._log_fenced(plan.target, "event")
            return
        ref = plan.target.workload
        await self.actuator.emit_event(
            ref, reason=event.reason, message=event.message, type=event.type
        )

    async def _write_ranking(
        self, plan: WritePlan, removal: RemovalPlan, fence: WriteFence, *, when: str
    ) -> CostPatches:
        """Write ``removal``'s pod-deletion costs (each pod patch fenced).

        ``when`` says when the scale-down comes: ``next_cycle`` (it waits for a later
        cycle that reads this ranking back and still wants it) or ``ahead`` (a window or
        step limit holds it; the ranking is ready before it is allowed).
        """
        t = plan.target
        current = {p.name: p.deletion_cost for p in plan.snapshot.pods}
        patches = await self.actuator.set_deletion_costs(
            t.workload.namespace, removal.costs, current=current, guard=fence.allows
        )
        if patches.patched:
            self.metrics.pods_annotated.labels(t.key).inc(len(patches.patched))
        self.log.info(
            "scale_down_pods_chosen",
            target=t.key,
            remove=list(removal.chosen),
            in_flight=list(removal.load),
            annotated=list(patches.patched),
            failed={pod: str(f) for pod, f in patches.failed.items()},
            scale_down=when,
        )
        return patches

    def _log_fenced(self, t: TargetPolicy, write: str) -> None:
        self.log.warning(
            "write_fenced",
            target=t.key,
            write=write,
            message="this replica no longer leads (its last Lease renewal is older than the "
            "renew deadline); nothing more is written this cycle",
        )

    def _fenced(self, plan: WritePlan, write: str) -> Applied:
        """This replica stopped leading before a write of ``plan`` was sent."""
        t, d = plan.target, plan.decision
        self._log_fenced(t, write)
        if d.direction is Direction.NONE:
            return Applied("none", "", plan.state)
        self.metrics.refused_writes.labels(t.key, "not_leader").inc()
        return Applied("not_leader", "", plan.state)
