"""Leader election on a coordination.k8s.io/v1 Lease, with client-go's semantics.

Several controller replicas run; only the holder of the Lease writes to the cluster. The
others run the same cycles read-only and take over when the Lease expires.

Time (client-go's ``leaderelection.go``): another process's timestamps are never compared
with the local clock, because node clocks drift. Each replica remembers the Lease record
(its ``spec``) as it last saw it and the *local* time at which it saw it change; the Lease
has expired for this replica when that record has not changed for its
``leaseDurationSeconds`` of local time. ``renewTime`` and ``acquireTime`` are written for
people and tools, and read by nobody here. A replica that starts (or restarts) therefore
waits a whole lease duration before it takes over a Lease that someone holds.

- Acquire: the Lease does not exist (create it), has no holder (released), or has not
  changed for ``leaseDurationSeconds`` of local time since this replica last saw it change.
  Taking it over increments ``leaseTransitions`` and sets ``acquireTime``.
- Renew: the holder rewrites ``renewTime`` every retry period (so its record keeps changing
  for the others). Every write is a PUT with the resourceVersion read just before
  (optimistic lock); a 409 means someone else wrote in between: the Lease is read again and
  the attempt re-evaluated once.
- Step down: a leader whose last successful renewal *started* ``renew_deadline`` ago (local
  clock) no longer leads: :meth:`LeaderElector.is_leader` answers False from that instant,
  whatever is in flight. Another replica can take over only a lease duration after it saw
  the last renewal land, which is later than that attempt started, so with
  ``renew_deadline < lease_duration`` two leaders never overlap even with skewed clocks.
- Release (graceful stop): the holder clears ``holderIdentity`` so another replica acquires
  at its next retry instead of waiting for expiry.

Durations are measured on the injected ``monotonic`` clock (``time.monotonic`` in
production, so a wall-clock step cannot stretch a leadership); the ``clock`` (epoch
seconds) only stamps ``renewTime``/``acquireTime``. The controller fences each write on
:meth:`LeaderElector.is_leader` at the moment it sends it (see
:meth:`scaler.controller.apply.Applier.apply`).

The Lease also carries the decision state a new leader resumes (an annotation written only
by the holder, see :meth:`LeaderElector.write_annotations`): a write that is not the
holder's fails on the resourceVersion or the holder check, so a deposed leader can never
overwrite its successor's state.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import math
import os
import secrets
import socket
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

import structlog

from scaler.actuators.errors import ApiFailure, KubeApiError
from scaler.actuators.writers import parse_time
from scaler.telemetry.metrics import ScalerMetrics

__all__ = [
    "LeaderElectionConfig",
    "LeaderElector",
    "LeaseApi",
    "default_identity",
    "parse_time",
]

log = structlog.get_logger("vllm_scaler")


class LeaseApi(Protocol):
    """Lease reads and writes (see :class:`scaler.actuators.lease.LeaseClient`)."""

    async def get(self, namespace: str, name: str) -> dict[str, Any] | None: ...

    async def create(self, namespace: str, body: dict[str, Any]) -> dict[str, Any]: ...

    async def replace(self, namespace: str, name: str, body: dict[str, Any]) -> dict[str, Any]: ...


@dataclass(frozen=True, slots=True)
class LeaderElectionConfig:
    """Where the Lease is and how long a leadership lasts (seconds).

    Attributes:
        namespace, name: the Lease.
        identity: this replica's ``holderIdentity`` (unique per process).
        lease_duration_seconds: a holder that has not renewed for this long may be replaced.
        renew_deadline_seconds: a leader that could not renew for this long steps down
            (< ``lease_duration_seconds``).
        retry_period_seconds: how often to try to acquire or renew (< renew deadline).
    """

    namespace: str
    name: str
    identity: str
    lease_duration_seconds: float = 15.0
    renew_deadline_seconds: float = 10.0
    retry_period_seconds: float = 2.0

    def __post_init__(self) -> None:
        if not 0 < self.retry_period_seconds < self.renew_deadline_seconds:
            raise ValueError("retry period must be positive and shorter than the renew deadline")
        if not self.renew_deadline_seconds < self.lease_duration_seconds:
            raise ValueError("renew deadline must be shorter than the lease duration")


def default_identity() -> str:
    """``<pod name or hostname>_<random suffix>``: unique even across restarts of one pod."""
    base = os.environ.get("POD_NAME") or socket.gethostname() or "vllm-scaler"
    return f"{base[:100]}_{secrets.token_hex(4)}"


def micro_time(epoch_seconds: float) -> str:
    """A metav1.MicroTime string (``2006-01-02T15:04:05.000000Z``)."""
    return datetime.fromtimestamp(epoch_seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElector:
    """Acquires, renews and releases the Lease; tells the controller whether it leads.

    Args:
        config: the Lease and the timings.
        leases: the Lease API.
        clock: epoch seconds, written into ``renewTime``/``acquireTime`` only.
        monotonic: seconds on a local clock that never steps; every duration (lease
            expiry, renew deadline) is measured on it. Default: ``clock`` (tests).
        metrics: where ``vllm_scaler_leader`` is exported (optional).
    """

    def __init__(
        self,
        config: LeaderElectionConfig,
        leases: LeaseApi,
        *,
        clock: Callable[[], float],
        monotonic: Callable[[], float] | None = None,
        metrics: ScalerMetrics | None = None,
    ) -> None:
        self.config = config
        self._leases = leases
        self._clock = clock
        self._mono = monotonic or clock
        self._metrics = metrics
        self._lock = asyncio.Lock()
        self._holding = False
        #: local time at which the last successful acquire/renew attempt started
        self._renewed_at = -math.inf
        #: the Lease spec as last seen or written, and the local time it last changed
        self._observed: dict[str, Any] | None = None
        self._observed_at = -math.inf
        self._was_leader = False
        self._observed_holder: str | None = None
        #: Incremented at every acquisition (the controller reloads the state on a new term).
        self.term = 0
        #: The Lease as last read or written.
        self.lease: dict[str, Any] | None = None
        if metrics is not None:
            metrics.leader.set(0)

    @property
    def identity(self) -> str:
        """This replica's holderIdentity."""
        return self.config.identity

    def is_leader(self) -> bool:
        """True while this replica holds the Lease and its last successful renewal started
        less than the renew deadline ago, on the local clock read now."""
        return self._leading_at(self._mono())

    def _leading_at(self, now: float) -> bool:
        return self._holding and now - self._renewed_at < self.config.renew_deadline_seconds

    def annotation(self, key: str) -> str | None:
        """An annotation of the Lease as last seen."""
        if self.lease is None:
            return None
        value = ((self.lease.get("metadata") or {}).get("annotations") or {}).get(key)
        return value if isinstance(value, str) else None

    # ------------------------------------------------------------------ transitions

    def _observe(self, now: float) -> None:
        leading = self._leading_at(now)
        if leading != self._was_leader:
            if leading:
                log.info(
                    "leader_acquired",
                    identity=self.identity,
                    lease=f"{self.config.namespace}/{self.config.name}",
                    term=self.term,
                )
            else:
                log.warning(
                    "leader_lost",
                    identity=self.identity,
                    lease=f"{self.config.namespace}/{self.config.name}",
                    holder=self._observed_holder,
                )
            self._was_leader = leading
        if self._metrics is not None:
            self._metrics.leader.set(1 if leading else 0)

    def observe(self) -> bool:
        """Update the leader metric and log a transition (a missed renew deadline) now."""
        now = self._mono()
        self._observe(now)
        return self._leading_at(now)

    # ------------------------------------------------------------------ the Lease

    def _spec(self, lease: Mapping[str, Any]) -> dict[str, Any]:
        spec = lease.get("spec")
        return dict(spec) if isinstance(spec, dict) else {}

    def _see(self, spec: dict[str, Any]) -> None:
        """Remember the record as read or written; a change restarts its expiry (local time)."""
        if spec != self._observed:
            self._observed = spec
            self._observed_at = self._mono()

    def _held_by_other(self, spec: Mapping[str, Any], now: float) -> bool:
        """Another holder whose record changed less than its lease duration ago (local time)."""
        holder = spec.get("holderIdentity") or ""
        if not holder or holder == self.identity:
            return False
        duration = spec.get("leaseDurationSeconds")
        if not isinstance(duration, int | float) or isinstance(duration, bool):
            return False  # a malformed record can be taken over, as client-go does
        return self._observed_at + float(duration) > now

    def _new_spec(self, spec: Mapping[str, Any], wall: float) -> dict[str, Any]:
        mine = spec.get("holderIdentity") == self.identity
        transitions = spec.get("leaseTransitions")
        transitions = transitions if isinstance(transitions, int) else 0
        return {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": max(1, math.ceil(self.config.lease_duration_seconds)),
            "acquireTime": spec.get("acquireTime") if mine else micro_time(wall),
            "renewTime": micro_time(wall),
            "leaseTransitions": transitions if mine else transitions + 1,
        }

    def _won(self, lease: dict[str, Any], started: float) -> None:
        if not self._leading_at(started):
            self.term += 1
        self.lease = lease
        self._see(self._spec(lease))
        self._holding = True
        self._renewed_at = started
        self._observed_holder = self.identity

    def _lost(self, holder: str | None) -> None:
        self._holding = False
        self._observed_holder = holder

    async def try_acquire_or_renew(self) -> bool:
        """One attempt to acquire or renew the Lease (client-go's tryAcquireOrRenew).

        Never raises for API failures: they are logged and the attempt counts as failed
        (a leader then steps down once its renew deadline passes).

        Returns:
            Whether this replica leads after the attempt.
        """
        async with self._lock:
            now = self._mono()
            try:
                await self._acquire_or_renew(now, self._new_spec, annotations={})
            except KubeApiError as err:
                log.warning(
                    "lease_update_failed",
                    identity=self.identity,
                    outcome=err.outcome.value,
                    http_status=err.http_status,
                    message=err.message,
                )
            now = self._mono()
            self._observe(now)
            return self._leading_at(now)

    async def _acquire_or_renew(
        self,
        now: float,
        new_spec: Callable[[Mapping[str, Any], float], dict[str, Any]],
        *,
        annotations: Mapping[str, str],
        only_if_leader: bool = False,
    ) -> bool:
        """Read the Lease and write ``new_spec(spec, wall clock)`` unless another holder's
        record is still valid; ``now`` is the local (monotonic) time the attempt started."""
        cfg = self.config
        wall = self._clock()
        for attempt in (1, 2):
            lease = await self._leases.get(cfg.namespace, cfg.name)
            if lease is None:
                if only_if_leader:
                    self._lost(None)
                    return False
                body: dict[str, Any] = {
                    "apiVersion": "coordination.k8s.io/v1",
                    "kind": "Lease",
                    "metadata": {"name": cfg.name, "namespace": cfg.namespace},
                    "spec": {**new_spec({}, wall), "leaseTransitions": 0},
                }
                if annotations:
                    body["metadata"]["annotations"] = dict(annotations)
                try:
                    created = await self._leases.create(cfg.namespace, body)
                except KubeApiError as err:
                    if err.outcome is ApiFailure.STALE and attempt == 1:
                        continue  # created by another replica meanwhile: read it
                    raise
                self._won(created, now)
                return True
            self.lease = lease
            spec = self._spec(lease)
            self._see(spec)
            if self._held_by_other(spec, now) or (
                only_if_leader and spec.get("holderIdentity") != self.identity
            ):
                self._lost(spec.get("holderIdentity") or None)
                return False
            updated = copy.deepcopy(lease)
            updated["spec"] = {**spec, **new_spec(spec, wall)}
            if annotations:
                meta = updated.setdefault("metadata", {})
                meta["annotations"] = {**(meta.get("annotations") or {}), **annotations}
            try:
                result = await self._leases.replace(cfg.namespace, cfg.name, updated)
            except KubeApiError as err:
                if err.outcome is ApiFailure.STALE and attempt == 1:
                    log.info("lease_conflict_reread", identity=self.identity)
                    continue
                raise
            self._won(result, now)
            return True
        return False

    async def write_annotations(self, annotations: Mapping[str, str]) -> bool:
        """As the leader, write annotations on the Lease (renewing it in the same PUT).

        Returns:
            True when written; False when this replica does not lead (nothing is sent) or
            the write failed (logged).
        """
        async with self._lock:
            now = self._mono()
            if not self._leading_at(now):
                return False
            try:
                ok = await self._acquire_or_renew(
                    now, self._new_spec, annotations=annotations, only_if_leader=True
                )
            except KubeApiError as err:
                log.warning(
                    "lease_annotation_write_failed",
                    identity=self.identity,
                    outcome=err.outcome.value,
                    message=err.message,
                )
                ok = False
            self._observe(self._mono())
            return ok

    async def release(self) -> bool:
        """Give the Lease up at once (graceful stop): clear the holder, keep the annotations.

        Returns:
            True when a held Lease was released.
        """
        async with self._lock:
            now = self._mono()
            if not self._holding:
                return False

            def released(spec: Mapping[str, Any], wall: float) -> dict[str, Any]:
                return {
                    "holderIdentity": "",
                    "leaseDurationSeconds": 1,
                    "acquireTime": micro_time(wall),
                    "renewTime": micro_time(wall),
                    "leaseTransitions": spec.get("leaseTransitions") or 0,
                }

            try:
                ok = await self._acquire_or_renew(
                    now, released, annotations={}, only_if_leader=True
                )
            except KubeApiError as err:
                log.warning(
                    "lease_release_failed",
                    identity=self.identity,
                    outcome=err.outcome.value,
                    message=err.message,
                )
                ok = False
            self._holding = False
            self._renewed_at = -math.inf
            if ok:
                log.info(
                    "leader_released",
                    identity=self.identity,
                    lease=f"{self.config.namespace}/{self.config.name}",
                )
            self._was_leader = False
            if self._metrics is not None:
                self._metrics.leader.set(0)
            return ok

    async def run(self, stop: asyncio.Event) -> None:
        """Try to acquire or renew every retry period until ``stop`` is set (no release)."""
        while not stop.is_set():
            try:
                await self.try_acquire_or_renew()
            except Exception:  # a bug must not end leader election silently
                log.exception("leader_election_failed", identity=self.identity)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=self.config.retry_period_seconds)
