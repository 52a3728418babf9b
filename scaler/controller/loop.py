"""The control loop: read every target, decide, act, report.

One cycle: read each target's scale subresource and pods (Kubernetes actuator), read every
signal for all targets in a constant number of queries (Prometheus source), run the pure
decision core per target, write ``spec.replicas`` where the decision changes it, and export
the outcome (metrics, one log event per decision, Kubernetes Events on rescale).

A failure of one target never stops the others; a failure of the whole source is a set of
invalid signals, which the core turns into holds.

Ownership of ``spec.replicas`` (the controller's part over the core's decision):

- leader election: with a :class:`Leadership`, only the leader writes (scale, pod
  annotations, Events); the others run the same cycles read-only and export what they would
  decide. A new leader loads the persisted decision state before its first decision, and the
  leader writes it back (on the Lease) at most once per cycle, only when it changed.
- conflict: an autoscaling/v2 HorizontalPodAutoscaler or KEDA ScaledObject targeting the
  same workload makes the target recommend-only (``vllm_scaler_conflict``, a Warning Event,
  an error log naming the other owner).
- annotations on the workload: ``vllm-scaler.io/paused: "true"`` holds it entirely,
  ``vllm-scaler.io/pinned-replicas: "N"`` writes N whatever the signals say.
- drain-aware scale-down: before lowering replicas of a kind that removes pods through a
  ReplicaSet (Deployment, ReplicaSet, Argo Rollout), the idlest ready pods get the lowest
  ``controller.kubernetes.io/pod-deletion-cost`` so that they are the ones removed.
  StatefulSets and LeaderWorkerSets remove the highest ordinal whatever the cost.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

import structlog

from scaler.actuators.kubernetes import (
    DELETION_COST_KINDS,
    KubeApiError,
    ScaleOwner,
    ScaleResult,
)
from scaler.config.policy import Policy, TargetPolicy, WorkloadRef
from scaler.config.vocabulary import SignalName
from scaler.core.decide import Decision, Direction, decide
from scaler.core.drain import plan_removal
from scaler.core.observation import Observation, WorkloadSnapshot
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

#: Workload annotation that pauses vllm-scaler on it (value ``"true"``).
PAUSED_ANNOTATION = "vllm-scaler.io/paused"
#: Workload annotation that pins its replicas (a non-negative integer).
PINNED_ANNOTATION = "vllm-scaler.io/pinned-replicas"
#: Lease annotation holding the persisted decision state (JSON).
STATE_ANNOTATION = "vllm-scaler.io/state"
#: Upper bound of the persisted state (Kubernetes allows 256 KiB of annotations in total).
MAX_STATE_BYTES = 64 * 1024


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

    async def read(self, ref: WorkloadRef) -> WorkloadSnapshot: ...

    async def scale(
        self, ref: WorkloadRef, replicas: int, *, current: WorkloadSnapshot
    ) -> ScaleResult: ...

    async def emit_event(
        self, ref: WorkloadRef, *, reason: str, message: str, type: str = "Normal"
    ) -> bool: ...

    async def read_annotations(self, ref: WorkloadRef) -> dict[str, str]: ...

    async def list_scale_owners(self, namespace: str) -> list[ScaleOwner]: ...

    async def set_deletion_costs(
        self, namespace: str, costs: Mapping[str, int], *, current: Mapping[str, str | None]
    ) -> list[str]: ...


class Leadership(Protocol):
    """Who may write (see :class:`scaler.controller.leader.LeaderElector`)."""

    @property
    def term(self) -> int: ...

    def is_leader(self, now: float | None = None) -> bool: ...

    def observe(self) -> bool: ...

    def annotation(self, key: str) -> str | None: ...

    async def write_annotations(self, annotations: Mapping[str, str]) -> bool: ...


@dataclass(frozen=True, slots=True)
class _TargetRead:
    snapshot: WorkloadSnapshot
    annotations: dict[str, str]


@dataclass(frozen=True, slots=True)
class _Control:
    """What, besides the signals, governs a target this cycle."""

    conflicts: tuple[ScaleOwner, ...] = ()
    paused: bool = False
    pin: int | None = None
    invalid_pin: str | None = None  # the annotation's value when it is not a valid count


@dataclass(frozen=True, slots=True)
class TargetReport:
    """The outcome of one cycle for one target.

    Attributes:
        target: the target key ``namespace/Kind/name``.
        decision: the decision, or None when the target could not be read.
        readings: what the source read (None when the target could not be read).
        action: ``scaled``, ``unchanged``, ``dry_run`` or the failed write's outcome; ``none``
            when nothing was asked; ``read_failed`` when the target could not be read.
        error: why the target could not be read or written.
    """

    target: str
    decision: Decision | None
    readings: TargetReadings | None
    action: str
    error: str = ""

    def as_json(self) -> dict[str, Any]:
        """The ``recommend --output json`` object of this target."""
        d = self.decision
        out: dict[str, Any] = {"target": self.target, "action": self.action}
        if d is None:
            out.update(
                current_replicas=None,
                desired_replicas=None,
                reason="target_read_failed",
                message=self.error,
                signals=[],
            )
            return out
        out.update(
            current_replicas=d.current_replicas,
            desired_replicas=d.desired_replicas,
            recommended_replicas=d.recommended_replicas,
            reason=str(d.reason),
            message=d.message,
            driving_signal=str(d.driving_signal) if d.driving_signal else None,
            limits=list(d.limits),
            replicas={
                "ready": d.replicas.ready,
                "starting": d.replicas.starting,
                "stuck": d.replicas.stuck,
                "terminating": d.replicas.terminating,
            },
            signals=[
                {
                    "name": str(e.name),
                    "value": e.value,
                    "target": e.target,
                    "ratio": e.ratio,
                    "valid": e.valid,
                    "status": str(e.status),
                    "desired_replicas": e.desired_replicas,
                    "detail": e.detail,
                }
                for e in d.signals
            ],
        )
        if self.readings is not None:
            out["kv_cache_metric"] = self.readings.kv_metric
        return out


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
        self.log = structlog.get_logger("vllm_scaler")
        self._loaded_term: int | None = None
        self._resume: dict[str, TargetState] = {}
        self._resume_saved_at = 0.0
        self._persisted: str | None = None
        self._owners: dict[str, list[ScaleOwner]] = {}
        self._conflict_labels: dict[str, set[str]] = {}
        self._events: dict[tuple[str, str], tuple[object, float]] = {}
        self._stuck_event_at: dict[str, float] = {}
        self._cost_unsupported_logged: set[str] = set()
        metrics.dry_run.set(1 if actuator.dry_run else 0)
        if leader is None:
            metrics.leader.set(0 if actuator.dry_run else 1)

    def _leading(self, now: float) -> bool:
        """Whether this process may write now (leader, or no leader election)."""
        return self.leader is None or self.leader.is_leader(now)

    async def _read_target(self, t: TargetPolicy) -> _TargetRead | KubeApiError:
        try:
            snap, annotations = await asyncio.gather(
                self.actuator.read(t.workload), self.actuator.read_annotations(t.workload)
            )
        except KubeApiError as err:
            return err
        return _TargetRead(snap, annotations)

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
            saved_at = float(doc.get("saved_at") or 0.0)
        except (ValueError, TypeError) as err:
            self.log.error("state_unreadable", error=str(err), message="starting fresh")
            return
        self._resume = states
        self._resume_saved_at = saved_at
        self.log.info(
            "state_loaded",
            targets=sorted(states),
            saved_at=saved_at,
            age_seconds=round(now - saved_at, 3),
        )

    def _state_for(self, t: TargetPolicy, current: int, now: float) -> TargetState | None:
        persisted = self._resume.pop(t.key, None)
        if persisted is not None:
            return resume(
                persisted,
                saved_at=self._resume_saved_at,
                current_replicas=current,
                now=now,
                max_gap=self.resume_max_gap_seconds,
            )
        return self.states.get(t.key)

    async def _persist(self, now: float) -> None:
        """As the leader, write the decision state to the Lease when it changed."""
        if self.leader is None or not self.leader.is_leader(now):
            return
        targets = {
            t.key: encode_state(self.states[t.key])
            for t in self.policy.targets
            if t.key in self.states
        }
        body = json.dumps(targets, sort_keys=True, separators=(",", ":"), allow_nan=False)
        if body == self._persisted:
            return
        text = json.dumps(
            {"v": STATE_FORMAT_VERSION, "saved_at": now, "targets": targets},
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
        targets = self.policy.targets
        namespaces = sorted({t.workload.namespace for t in targets})
        reads, _ = await asyncio.gather(
            asyncio.gather(*(self._read_target(t) for t in targets)),
            asyncio.gather(*(self._read_owners(ns) for ns in namespaces)),
        )
        snapshots: dict[str, WorkloadSnapshot] = {}
        annotations: dict[str, dict[str, str]] = {}
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
                annotations[t.key] = r.annotations
        readable = [t for t in targets if t.key in snapshots]
        result = await self.source.read(readable, snapshots) if readable else None
        now = self.clock()
        if result is not None:
            self._export_queries(result, now)
        for t in readable:
            assert result is not None
            control = self._control(t, annotations[t.key])
            reports.append(
                await self._decide_and_act(t, snapshots[t.key], result.targets[t.key], now, control)
            )
        await self._persist(self.clock())
        self.metrics.cycle_duration.observe(time.monotonic() - started)
        self.metrics.cycles.inc()
        self.metrics.last_cycle.set(self.clock())
        order = {t.key: i for i, t in enumerate(targets)}
        return sorted(reports, key=lambda r: order[r.target])

    def _export_queries(self, result: SourceResult, now: float) -> None:
        m = self.metrics
        m.queries.inc(result.queries_sent)
        for kind, outcome in result.queries.items():
            if outcome.ok:
                m.last_query_success.labels(str(kind)).set(now)
            else:
                m.query_failures.labels(str(kind), str(outcome.status)).inc()
                self.log.warning(
                    "query_failed",
                    query=str(kind),
                    reason=str(outcome.status),
                    detail=outcome.detail,
                )

    def _control(self, t: TargetPolicy, annotations: Mapping[str, str]) -> _Control:
        """Conflicts with other autoscalers and the pause/pin annotations of one target."""
        owners = self._owners.get(t.workload.namespace, [])
        conflicts = tuple(o for o in owners if o.targets(t.workload))
        paused = annotations.get(PAUSED_ANNOTATION, "").strip().lower() == "true"
        raw = annotations.get(PINNED_ANNOTATION)
        pin: int | None = None
        invalid: str | None = None
        if raw is not None:
            text = raw.strip()
            if text.isdigit() and int(text) <= 1_000_000:
                pin = int(text)
            else:
                invalid = raw
        return _Control(conflicts, paused, pin, invalid)

    def _export_control(self, t: TargetPolicy, c: _Control) -> None:
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

    @staticmethod
    def _override(d: Decision, c: _Control) -> Decision:
        """The core's decision with conflicts, pause and pin applied (message keeps the core's)."""
        core = f"signals: {d.reason}: {d.message}" if d.message else f"signals: {d.reason}"
        if c.conflicts:
            names = ", ".join(o.label for o in c.conflicts)
            return replace(
                d,
                desired_replicas=d.current_replicas,
                reason=Reason.CONFLICT,
                outside_write=False,
                message=f"{names} also scales this workload; recommending "
                f"{d.desired_replicas} without writing ({core})",
            )
        if c.paused or c.invalid_pin is not None:
            why = (
                f"{PAUSED_ANNOTATION}=true"
                if c.paused
                else f"{PINNED_ANNOTATION}={c.invalid_pin!r} is not a replica count"
            )
            return replace(
                d,
                desired_replicas=d.current_replicas,
                reason=Reason.PAUSED,
                outside_write=False,
                message=f"paused ({why}); would scale to {d.desired_replicas} ({core})",
            )
        if c.pin is not None:
            return replace(
                d,
                desired_replicas=c.pin,
                reason=Reason.PINNED,
                outside_write=False,
                message=f"pinned by {PINNED_ANNOTATION}={c.pin} (otherwise "
                f"{d.desired_replicas}; {core})",
            )
        return d

    async def _event_once(
        self,
        t: TargetPolicy,
        kind: str,
        signature: object,
        now: float,
        *,
        reason: str,
        message: str,
        type: str,
    ) -> None:
        """Emit a refusal Event unless the same one was emitted less than the repeat ago."""
        last = self._events.get((t.key, kind))
        if last is not None and last[0] == signature and now - last[1] < self.event_repeat_seconds:
            return
        await self.actuator.emit_event(t.workload, reason=reason, message=message, type=type)
        self._events[(t.key, kind)] = (signature, now)

    async def _refusal_events(
        self, t: TargetPolicy, c: _Control, core: Decision, now: float
    ) -> None:
        if c.conflicts:
            names = ", ".join(f"{o.kind} {o.namespace}/{o.name}" for o in c.conflicts)
            await self._event_once(
                t,
                "conflict",
                tuple(sorted(o.label for o in c.conflicts)),
                now,
                reason="ConflictingAutoscaler",
                type="Warning",
                message=f"{names} also targets this {t.workload.kind}; vllm-scaler will not "
                f"write spec.replicas while it exists (recommends {core.desired_replicas}, "
                f"current {core.current_replicas})",
            )
        else:
            self._events.pop((t.key, "conflict"), None)
        if c.invalid_pin is not None and not c.conflicts:
            await self._event_once(
                t,
                "invalid_pin",
                c.invalid_pin,
                now,
                reason="InvalidPinnedReplicas",
                type="Warning",
                message=f"annotation {PINNED_ANNOTATION}={c.invalid_pin!r} is not a replica "
                "count (a non-negative integer); holding the current replicas",
            )
        else:
            self._events.pop((t.key, "invalid_pin"), None)
        if c.paused and not c.conflicts:
            await self._event_once(
                t,
                "paused",
                True,
                now,
                reason="ScalingPaused",
                type="Normal",
                message=f"paused by annotation {PAUSED_ANNOTATION}=true; replicas stay "
                f"{core.current_replicas} (signals ask for {core.desired_replicas}: "
                f"{core.reason})",
            )
        else:
            self._events.pop((t.key, "paused"), None)

    async def _stuck_event(
        self, t: TargetPolicy, snap: WorkloadSnapshot, d: Decision, now: float
    ) -> None:
        """A Warning Event while replicas are stuck (not Ready past the model load timeout).

        At most one per target and ``event_repeat_seconds`` (a stuck pod stays stuck for
        hours when the cluster has no free GPU); ``vllm_scaler_stuck_replicas`` carries the
        count every cycle.
        """
        if d.replicas.stuck <= 0:
            return
        last = self._stuck_event_at.get(t.key)
        if last is not None and 0 <= now - last < self.event_repeat_seconds:
            return
        timeout = t.model_load_timeout_seconds
        stuck = sorted(
            f"{p.name} ({p.phase})"
            for p in snap.pods
            if not p.terminating and not p.ready and p.age_seconds >= timeout
        )
        shown = ", ".join(stuck[:5]) + (f" and {len(stuck) - 5} more" if len(stuck) > 5 else "")
        message = (
            f"{d.replicas.stuck} replica(s) not Ready after model_load_timeout_seconds "
            f"{timeout:g}: {shown or 'not created yet'}; they serve nothing, and as "
            "spec.replicas already counts them no replicas are added to replace them "
            "(Pending for lack of GPUs? see the pods' events)"
        )
        self.log.warning(
            "replicas_stuck", target=t.key, stuck=d.replicas.stuck, pods=stuck[:20], message=message
        )
        self._stuck_event_at[t.key] = now
        await self.actuator.emit_event(
            t.workload, reason="ReplicasStuck", message=message, type="Warning"
        )

    async def _prepare_scale_down(
        self, t: TargetPolicy, snap: WorkloadSnapshot, readings: TargetReadings, d: Decision
    ) -> None:
        """Mark the idlest pods with the lowest pod-deletion-cost before a scale-down."""
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
            return
        plan = plan_removal(snap.pods, readings.pod_load, d.current_replicas - d.desired_replicas)
        current = {p.name: p.deletion_cost for p in snap.pods}
        patched = await self.actuator.set_deletion_costs(ref.namespace, plan.costs, current=current)
        if patched:
            self.metrics.pods_annotated.labels(t.key).inc(len(patched))
        self.log.info(
            "scale_down_pods_chosen",
            target=t.key,
            remove=list(plan.chosen),
            in_flight=list(plan.load),
            annotated=patched,
        )

    async def _decide_and_act(
        self,
        t: TargetPolicy,
        snap: WorkloadSnapshot,
        readings: TargetReadings,
        now: float,
        control: _Control | None = None,
    ) -> TargetReport:
        control = control or _Control()
        obs = Observation(snap.counts(t.model_load_timeout_seconds), readings.signals)
        core = decide(
            t,
            obs,
            self._state_for(t, snap.spec_replicas, now),
            now,
            ttft_window_seconds=self.policy.rate_window_seconds,
        )
        decision = self._override(core, control)
        state = decision.state
        if decision.reason in (Reason.CONFLICT, Reason.PAUSED):
            # Another owner (or a person) sets the replicas now: forget our last write, so
            # that their value is not taken for an outside write once we own them again.
            state = replace(state, last_written_replicas=None)
        m = self.metrics
        m.record_decision(
            t.key,
            decision,
            min_replicas=t.min_replicas,
            max_replicas=t.max_replicas,
            tolerance_up=t.tolerance.scale_up,
            tolerance_down=t.tolerance.scale_down,
        )
        self._export_control(t, control)
        for name in (SignalName.QUEUE_DEPTH, SignalName.KV_CACHE_USAGE):
            if name in readings.signals:
                m.pods_missing_metrics.labels(t.key, name).set(
                    len(readings.pods_missing.get(name, frozenset()))
                )
        if readings.dropped:
            m.stale_series_dropped.labels(t.key).inc(len(readings.dropped))
        if readings.kv_metric:
            m.kv_metric.labels(t.key, readings.kv_metric).set(1)
        for e in decision.signals:
            if not e.status.usable_for_scale_down:
                m.query_errors.labels(str(e.name), str(e.status)).inc()
                self.log.warning(
                    "signal_invalid",
                    target=t.key,
                    signal=str(e.name),
                    status=str(e.status),
                    detail=e.detail,
                )

        writes = not self.actuator.dry_run and self._leading(now)
        if control.conflicts:
            self.log.error(
                "scale_conflict",
                target=t.key,
                owners=[f"{o.kind} {o.namespace}/{o.name}" for o in control.conflicts],
                recommended=core.desired_replicas,
                message="another autoscaler targets this workload; recommend only",
            )
        if writes:
            await self._refusal_events(t, control, core, now)
            await self._stuck_event(t, snap, decision, now)
        if decision.reason in (Reason.CONFLICT, Reason.PAUSED) and core.direction is not (
            Direction.NONE
        ):
            m.refused_writes.labels(t.key, decision.reason).inc()

        action = "none"
        error = ""
        if decision.direction is not Direction.NONE and not self.actuator.dry_run and not writes:
            action = "not_leader"
            m.refused_writes.labels(t.key, "not_leader").inc()
        elif decision.direction is not Direction.NONE:
            if decision.direction is Direction.DOWN and writes:
                await self._prepare_scale_down(t, snap, readings, decision)
            result = await self.actuator.scale(t.workload, decision.desired_replicas, current=snap)
            action = str(result.outcome)
            if result.outcome.value == "scaled":
                state = record_write(
                    state,
                    from_replicas=decision.current_replicas,
                    to_replicas=decision.desired_replicas,
                    now=now,
                )
                m.scale_actions.labels(t.key, decision.direction).inc()
                await self.actuator.emit_event(
                    t.workload,
                    reason="SuccessfulRescale",
                    message=(
                        f"New size: {decision.desired_replicas}; reason: {decision.reason}: "
                        f"{decision.message}"
                    ),
                )
            elif not result.ok:
                error = result.message
                m.scale_failures.labels(t.key, result.outcome).inc()
                self.log.error("scale_failed", target=t.key, outcome=action, error=result.message)
                await self.actuator.emit_event(
                    t.workload, reason="FailedRescale", message=result.message, type="Warning"
                )
        self.states[t.key] = state
        self._log_decision(t, decision, readings, action)
        return TargetReport(t.key, decision, readings, action, error)

    def _log_decision(
        self, t: TargetPolicy, d: Decision, readings: TargetReadings, action: str
    ) -> None:
        signals = {
            str(e.name): (round(e.value, 4) if e.value is not None else str(e.status))
            for e in d.signals
        }
        level = "info"
        if d.reason.value in (
            "no_valid_signals",
            "scale_down_blocked_missing_signal",
            "outside_writer",
            "conflict",
        ):
            level = "warning"
        if d.outside_write:
            self.log.warning(
                "outside_write",
                target=t.key,
                written=d.state.last_written_replicas,
                found=d.current_replicas,
                message="spec.replicas was changed by another writer since our last write",
            )
        getattr(self.log, level)(
            "decision",
            target=t.key,
            current=d.current_replicas,
            desired=d.desired_replicas,
            reason=str(d.reason),
            action=action,
            ready=d.replicas.ready,
            pending=d.replicas.starting,
            terminating=d.replicas.terminating,
            signals=signals,
            message=d.message,
        )

    async def run(self, *, interval_seconds: float, stop: asyncio.Event) -> None:
        """Run cycles every ``interval_seconds`` until ``stop`` is set.

        A cycle that raises unexpectedly is logged and the loop goes on (no crash loop);
        the next cycle starts one interval after the previous one started.
        """
        while not stop.is_set():
            started = time.monotonic()
            try:
                await self.run_cycle()
            except Exception:  # the loop must survive a bug in one cycle
                self.log.exception("cycle_failed")
            delay = max(0.0, interval_seconds - (time.monotonic() - started))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=delay)
