"""The Kubernetes actuator: reads a target's ``scale`` subresource and pods, writes replicas.

Talks to the API server through kubernetes-asyncio (the client: :mod:`.api_client`). Every
API failure is classified in one place (:mod:`.errors`); :meth:`KubernetesActuator.scale`
returns the failure in a :class:`ScaleResult` instead of raising, and
:meth:`KubernetesActuator.read` raises :class:`~scaler.actuators.errors.KubeApiError`
carrying it.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from enum import StrEnum
from functools import partial
from typing import Any

import structlog
from kubernetes_asyncio import client
from kubernetes_asyncio.client import ApiClient

from scaler.actuators.api_client import KubeConfigError, MissingContextError, build_api_client
from scaler.actuators.errors import ApiFailure, KubeApiError, classify_error
from scaler.actuators.ownership import (
    Owner,
    OwnerCache,
    OwnerRef,
    Verdict,
    controller_ref,
    trace_owner,
)
from scaler.actuators.pods import POD_DELETION_COST, pod_info, without_requirements
from scaler.actuators.server_clock import ServerClock
from scaler.actuators.throttle import ApiGate
from scaler.actuators.writers import WorkloadMeta, replicas_writer
from scaler.config.policy import ReplicaGroups, WorkloadRef
from scaler.config.resource import ResourceRef
from scaler.config.secrets import shortened
from scaler.config.wording import counted
from scaler.core.observation import WorkloadSnapshot

# The client and the failures are re-exported: callers build, read and scale through here.
__all__ = [
    "DELETION_COST_KINDS",
    "POD_DELETION_COST",
    "ApiFailure",
    "CostPatches",
    "KubeApiError",
    "KubeConfigError",
    "KubernetesActuator",
    "MissingContextError",
    "ScaleOutcome",
    "ScaleOwner",
    "ScaleResult",
    "build_api_client",
    "classify_error",
    "without_requirements",
]

log = structlog.get_logger(__name__)

MERGE_PATCH = "application/merge-patch+json"
#: Kinds whose scale-down honours pod-deletion-cost (they remove pods through ReplicaSets).
#: StatefulSets (and LeaderWorkerSets, built on them) always remove the highest ordinal.
DELETION_COST_KINDS = frozenset({"Deployment", "ReplicaSet", "Rollout"})

#: Asked right before each write request is sent: False stops the call without sending
#: (the controller's leadership fence).
WriteGuard = Callable[[], bool]


def _always() -> bool:
    return True


class ScaleOutcome(StrEnum):
    """What a scale call that did not fail ended in (a failure is an
    :class:`~scaler.actuators.errors.ApiFailure`)."""

    SCALED = "scaled"
    UNCHANGED = "unchanged"
    DRY_RUN = "dry_run"
    #: the write guard refused the PATCH (this process no longer leads): nothing was sent
    NOT_LEADER = "not_leader"


@dataclass(frozen=True, slots=True)
class ScaleResult:
    """The result of :meth:`KubernetesActuator.scale`.

    Attributes:
        outcome: what happened: a :class:`ScaleOutcome`, or the failure.
        message: one human-readable sentence (includes the server's Status message).
        replicas_before: spec.replicas before the write (from ``current``, or from the
            re-read after a conflict).
        replicas_requested: the replicas asked for.
        replicas_after: spec.replicas the server answered with; None when nothing was written.
        resource_version: resourceVersion after the write (or the last one seen).
        http_status: HTTP status of the last failed request; None otherwise.
        retry_after_seconds: the server's Retry-After (429/503), in seconds, if any.
        requests: number of API requests sent (0 for unchanged and dry_run).
    """

    outcome: ScaleOutcome | ApiFailure
    message: str
    replicas_before: int
    replicas_requested: int
    replicas_after: int | None = None
    resource_version: str | None = None
    http_status: int | None = None
    retry_after_seconds: float | None = None
    requests: int = 0

    @property
    def ok(self) -> bool:
        """True for scaled, unchanged, dry_run and not_leader (nothing failed)."""
        return isinstance(self.outcome, ScaleOutcome)


@dataclass(frozen=True, slots=True)
class CostPatches:
    """The result of :meth:`KubernetesActuator.set_deletion_costs`.

    Attributes:
        patched: the pods whose annotation was written.
        failed: pod -> the failure of its patch (logged once by the actuator).
        fenced: the write guard refused a patch; the pods after it were not sent.
    """

    patched: tuple[str, ...] = ()
    failed: Mapping[str, ApiFailure] = field(default_factory=dict)
    fenced: bool = False


@dataclass(frozen=True, slots=True)
class ScaleOwner:
    """Another autoscaler that writes a workload's replicas (HPA or KEDA ScaledObject).

    Attributes:
        kind: ``HorizontalPodAutoscaler`` or ``ScaledObject``.
        namespace, name: the autoscaler object.
        target_api_version: ``scaleTargetRef.apiVersion`` ('' when the HPA leaves it out;
            KEDA's default ``apps/v1`` is filled in).
        target_kind: ``scaleTargetRef.kind`` (KEDA's default ``Deployment`` filled in).
        target_name: ``scaleTargetRef.name``.
    """

    kind: str
    namespace: str
    name: str
    target_api_version: str
    target_kind: str
    target_name: str

    @property
    def label(self) -> str:
        """``Kind/name`` (the ``owner`` label of ``vllm_scaler_conflict``)."""
        return f"{self.kind}/{self.name}"

    def targets(self, ref: WorkloadRef) -> bool:
        """Whether this autoscaler scales ``ref`` (same namespace, kind, name and API group)."""
        if (self.namespace, self.target_kind, self.target_name) != (
            ref.namespace,
            ref.kind,
            ref.name,
        ):
            return False
        if not self.target_api_version:
            return True
        return self.target_api_version.rpartition("/")[0] == ref.group


def _scale_owner(kind: str, obj: Any, *, keda: bool) -> ScaleOwner | None:
    meta = obj.get("metadata") or {}
    ref = (obj.get("spec") or {}).get("scaleTargetRef") or {}
    if not isinstance(ref, dict) or not ref.get("name"):
        return None
    default_kind, default_version = ("Deployment", "apps/v1") if keda else ("", "")
    return ScaleOwner(
        kind=kind,
        namespace=str(meta.get("namespace") or ""),
        name=str(meta.get("name") or ""),
        target_api_version=str(ref.get("apiVersion") or default_version),
        target_kind=str(ref.get("kind") or default_kind),
        target_name=str(ref["name"]),
    )


def _rfc3339(epoch_seconds: float) -> str:
    return datetime.fromtimestamp(epoch_seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True, slots=True)
class _Scale:
    spec_replicas: int
    status_replicas: int
    selector: str
    resource_version: str
    uid: str | None


def _parse_scale(obj: Any) -> _Scale:
    """An ``autoscaling/v1 Scale`` dict; absent replicas are 0 (``omitempty``)."""
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    return _Scale(
        spec_replicas=int(spec.get("replicas") or 0),
        status_replicas=int(status.get("replicas") or 0),
        selector=str(status.get("selector") or ""),
        resource_version=str(meta.get("resourceVersion") or ""),
        uid=meta.get("uid"),
    )


class KubernetesActuator:
    """Reads and scales workloads through their ``scale`` subresource.

    Args:
        api_client: a kubernetes-asyncio ApiClient (see :func:`build_api_client`); the
            caller owns and closes it.
        clock: epoch seconds; the local "now" (event timestamps). Pod ages are measured on
            the API server's clock, this one moved by the offset its answers' ``Date``
            header shows (:class:`~scaler.actuators.server_clock.ServerClock`).
        field_manager: ``fieldManager`` of writes and the events' ``source.component``.
        dry_run: read-only mode: :meth:`scale` returns ``dry_run`` and :meth:`emit_event`
            does nothing, without sending any request.
        request_timeout: total timeout of one API request, in seconds.
        sleep: waits that many seconds, for a ``Retry-After`` of the API server
            (:class:`~scaler.actuators.throttle.ApiGate`, which every request passes).
    """

    def __init__(
        self,
        api_client: ApiClient,
        *,
        clock: Callable[[], float],
        field_manager: str = "vllm-scaler",
        dry_run: bool = False,
        request_timeout: float = 10.0,
        sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
    ) -> None:
        self._api = api_client
        self._clock = clock
        self._field_manager = field_manager
        self._dry_run = dry_run
        self._timeout = request_timeout
        self._custom = client.CustomObjectsApi(api_client)
        self._core = client.CoreV1Api(api_client)
        self._uids: dict[str, str] = {}  # ref key -> workload uid, for involvedObject
        self._owner_cache = OwnerCache(clock)
        self._instance = socket.gethostname()[:128]
        self.server_clock = ServerClock()
        self.gate = ApiGate(clock, sleep=sleep)

    @property
    def dry_run(self) -> bool:
        """True in read-only mode."""
        return self._dry_run

    @staticmethod
    def _path(ref: WorkloadRef) -> tuple[str, str, str, str, str]:
        if not ref.group:
            # CustomObjectsApi builds /apis/{group}/...; core kinds live under /api/v1.
            raise ValueError(
                f"{ref.key()}: core-group kinds (apiVersion {ref.api_version!r}) are not supported"
            )
        return ref.group, ref.version, ref.namespace, ref.resource, ref.name

    async def _get_scale(self, ref: WorkloadRef) -> _Scale:
        path = self._path(ref)
        obj = await self.gate.call(
            lambda: self._custom.get_namespaced_custom_object_scale(
                *path, _request_timeout=self._timeout
            ),
            retry=True,
        )
        scale = _parse_scale(obj)
        if scale.uid:
            self._uids[ref.key()] = scale.uid
        return scale

    def _classify(self, exc: BaseException) -> KubeApiError:
        if isinstance(exc, KubeApiError):  # already classified (a call the gate held back)
            return exc
        err = classify_error(exc, now=self._clock())
        if err is None:
            raise exc
        return err

    async def read(
        self, ref: WorkloadRef, *, groups: ReplicaGroups | None = None
    ) -> WorkloadSnapshot:
        """GET the scale subresource, then list the pods its ``status.selector`` picks, and
        keep those the workload owns (:mod:`.ownership`).

        Pod ages are the server's now (the pod list's ``Date`` header) minus
        ``creationTimestamp``, in seconds (never negative). An empty selector (a custom kind
        without ``labelSelectorPath``, an operator that has not written it yet) yields no
        pods rather than every pod of the namespace: the snapshot's ``selector`` is '' and
        the controller does not scale the target (as the HPA: ScalingActive=False,
        SelectorRequired).

        With ``groups`` (a replica is a group of pods: a LeaderWorkerSet's), the pods are
        listed without the selector's leader requirements, so every pod of the groups is,
        each with its group; the group size is read from the workload object when the
        groups name its field.

        A listed pod whose controllers lead to another workload is left out (in the
        snapshot's ``foreign``); one whose owner cannot be told is kept (its selector's
        verdict) and named in ``unowned`` for the controller to see shared ones.

        Raises:
            KubeApiError: any API or transport failure, classified.
            ValueError: ``ref`` names a core-group kind.
        """
        try:
            scale = await self._get_scale(ref)
            snapshot = WorkloadSnapshot(
                namespace=ref.namespace,
                spec_replicas=scale.spec_replicas,
                status_replicas=scale.status_replicas,
                selector=scale.selector,
                resource_version=scale.resource_version,
            )
            if not scale.selector:
                log.warning("scale_without_selector", target=ref.key())
                return snapshot
            selector = scale.selector
            if groups is not None and groups.leader_labels:
                selector = without_requirements(selector, groups.leader_labels) or selector
            listing, _, headers = await self.gate.call(
                lambda: self._core.list_namespaced_pod_with_http_info(
                    ref.namespace, label_selector=selector, _request_timeout=self._timeout
                ),
                retry=True,
            )
            now = self.server_clock.now(headers, self._clock())
            owners = await self._owners(ref, scale.uid or "", listing.items)
            pods, foreign, unowned = [], [], []
            for p in listing.items:
                verdict = owners[p.metadata.name]
                if verdict.owner is Owner.FOREIGN:
                    foreign.append((p.metadata.name, verdict.detail))
                    continue
                if verdict.owner is Owner.UNKNOWN:
                    unowned.append((p.metadata.name, verdict.detail))
                pods.append(pod_info(p, now, groups))
            size = None
            if groups is not None and groups.size_field:
                size = await self._group_size(ref, groups.size_field)
        except ValueError:
            raise
        except Exception as exc:
            raise self._classify(exc) from exc
        return replace(
            snapshot,
            pods=tuple(pods),
            group_size=size,
            foreign=tuple(foreign),
            unowned=tuple(unowned),
        )

    @property
    def field_manager(self) -> str:
        """The ``fieldManager`` of this actuator's writes."""
        return self._field_manager

    async def _owners(self, ref: WorkloadRef, uid: str, pods: list[Any]) -> dict[str, Verdict]:
        """Each listed pod's owner (:func:`~scaler.actuators.ownership.trace_owner`)."""
        target = OwnerRef(ref.api_version, ref.kind, ref.name, uid)
        by_name = {p.metadata.name: p for p in pods}

        async def read(plural: str, name: str) -> Mapping[str, Any]:
            obj = await self.gate.call(
                partial(
                    self._custom.get_namespaced_custom_object,
                    "apps",
                    "v1",
                    ref.namespace,
                    plural,
                    name,
                    _request_timeout=self._timeout,
                ),
                retry=True,
            )
            meta: Mapping[str, Any] = obj.get("metadata") or {}
            return meta

        return {
            p.metadata.name: await trace_owner(
                controller_ref(p.metadata.owner_references),
                namespace=ref.namespace,
                target=target,
                pods=by_name,
                read=read,
                cache=self._owner_cache,
            )
            for p in pods
        }

    async def _group_size(self, ref: WorkloadRef, field_path: str) -> int | None:
        """The pods per group at ``field_path`` of the workload object (None: not an int)."""
        path = self._path(ref)
        obj: Any = await self.gate.call(
            lambda: self._custom.get_namespaced_custom_object(
                *path, _request_timeout=self._timeout
            ),
            retry=True,
        )
        for part in field_path.split("."):
            obj = obj.get(part) if isinstance(obj, dict) else None
        return obj if isinstance(obj, int) and not isinstance(obj, bool) and obj > 0 else None

    async def read_annotations(self, ref: WorkloadRef) -> dict[str, str]:
        """The workload's ``metadata.annotations`` (:meth:`read_workload`)."""
        return (await self.read_workload(ref)).annotations

    async def read_workload(self, ref: WorkloadRef) -> WorkloadMeta:
        """GET the workload object itself: its ``metadata.annotations`` and the field
        manager that owns its ``spec.replicas`` (from ``managedFields``).

        The pause and pin annotations live there (RBAC: ``get`` on the workload).

        Raises:
            KubeApiError: any API or transport failure, classified.
            ValueError: ``ref`` names a core-group kind.
        """
        path = self._path(ref)
        try:
            obj = await self.gate.call(
                lambda: self._custom.get_namespaced_custom_object(
                    *path, _request_timeout=self._timeout
                ),
                retry=True,
            )
        except Exception as exc:
            raise self._classify(exc) from exc
        meta = obj.get("metadata") or {}
        annotations = meta.get("annotations") or {}
        return WorkloadMeta({str(k): str(v) for k, v in annotations.items()}, replicas_writer(meta))

    async def list_scale_owners(self, namespace: str) -> list[ScaleOwner]:
        """List the autoscaling/v2 HorizontalPodAutoscalers and KEDA ScaledObjects of a
        namespace (RBAC: ``list`` on both).

        A cluster without KEDA answers 404 for ScaledObjects: that is "none", not an error.

        Raises:
            KubeApiError: any other API or transport failure, classified.
        """
        owners: list[ScaleOwner] = []
        lists = (
            ("autoscaling", "v2", "horizontalpodautoscalers", "HorizontalPodAutoscaler", False),
            ("keda.sh", "v1alpha1", "scaledobjects", "ScaledObject", True),
        )
        for group, version, plural, kind, keda in lists:
            try:
                listing = await self.gate.call(
                    partial(
                        self._custom.list_namespaced_custom_object,
                        group,
                        version,
                        namespace,
                        plural,
                        _request_timeout=self._timeout,
                    ),
                    retry=True,
                )
            except Exception as exc:
                err = self._classify(exc)
                if keda and err.outcome is ApiFailure.NOT_FOUND:
                    continue  # the ScaledObject CRD is not installed
                raise err from exc
            for item in listing.get("items") or []:
                item.setdefault("metadata", {}).setdefault("namespace", namespace)
                owner = _scale_owner(kind, item, keda=keda)
                if owner is not None:
                    owners.append(owner)
        return owners

    async def set_deletion_costs(
        self,
        namespace: str,
        costs: Mapping[str, int],
        *,
        current: Mapping[str, str | None],
        guard: WriteGuard = _always,
    ) -> CostPatches:
        """Annotate pods with ``controller.kubernetes.io/pod-deletion-cost`` (merge patches).

        Pods whose ``current`` annotation already holds the cost are skipped. Nothing is sent
        in dry run. ``guard`` is asked before each patch; when it refuses, no further patch
        is sent. Never raises for API failures (each is logged).
        """
        if self._dry_run:
            return CostPatches()
        patched: list[str] = []
        failed: dict[str, ApiFailure] = {}
        core: Any = self._core  # the stubs omit the (supported) _content_type keyword
        for pod, cost in sorted(costs.items()):
            if current.get(pod) == str(cost):
                continue
            if not guard():
                return CostPatches(tuple(patched), failed, fenced=True)
            body = {"metadata": {"annotations": {POD_DELETION_COST: str(cost)}}}
            try:
                await self.gate.call(
                    partial(
                        core.patch_namespaced_pod,
                        pod,
                        namespace,
                        body,
                        field_manager=self._field_manager,
                        _content_type=MERGE_PATCH,
                        _request_timeout=self._timeout,
                    ),
                    retry=False,
                )
            except Exception as exc:
                err = self._classify(exc)
                log.warning(
                    "pod_deletion_cost_failed",
                    namespace=namespace,
                    pod=pod,
                    outcome=err.outcome.value,
                    http_status=err.http_status,
                    message=err.message,
                )
                failed[pod] = err.outcome
                continue
            patched.append(pod)
        return CostPatches(tuple(patched), failed)

    async def _patch(self, ref: WorkloadRef, replicas: int, resource_version: str) -> _Scale:
        body = {"metadata": {"resourceVersion": resource_version}, "spec": {"replicas": replicas}}
        # kubernetes-asyncio would pick application/json-patch+json for a dict body, so force
        # the content type; its stubs omit the (supported) _content_type keyword, hence Any.
        custom: Any = self._custom
        path = self._path(ref)
        obj = await self.gate.call(
            lambda: custom.patch_namespaced_custom_object_scale(
                *path,
                body,
                field_manager=self._field_manager,
                _content_type=MERGE_PATCH,
                _request_timeout=self._timeout,
            ),
            retry=False,
        )
        return _parse_scale(obj)

    async def scale(
        self,
        ref: WorkloadRef,
        replicas: int,
        *,
        current: WorkloadSnapshot,
        guard: WriteGuard = _always,
    ) -> ScaleResult:
        """Set ``spec.replicas`` of the target's scale subresource to ``replicas``.

        Sends nothing when ``replicas == current.spec_replicas`` (``unchanged``) or in dry
        run (``dry_run``). Otherwise a merge patch carrying ``current.resource_version`` as
        precondition; on 409 it re-reads the scale once and, unless the fresh spec already
        equals ``replicas`` (``unchanged``), patches once more with the fresh
        resourceVersion - so another writer's change is overridden at most one re-read later.
        ``guard`` is asked right before each PATCH; when it refuses, nothing more is sent
        (``not_leader``).

        Never raises for API/transport failures: they come back as the outcome.

        Raises:
            ValueError: ``replicas`` < 0 or a core-group kind (programming errors).
        """
        if replicas < 0:
            raise ValueError(f"replicas must be >= 0, got {replicas}")
        before = current.spec_replicas
        if replicas == before:
            return ScaleResult(
                ScaleOutcome.UNCHANGED,
                f"{ref.key()} already has {counted(replicas, 'replica')}",
                before,
                replicas,
                replicas_after=before,
                resource_version=current.resource_version,
            )
        if self._dry_run:
            return ScaleResult(
                ScaleOutcome.DRY_RUN,
                f"dry run: would scale {ref.key()} from {before} to {replicas}",
                before,
                replicas,
                resource_version=current.resource_version,
            )
        self._path(ref)  # raise ValueError before any request
        rv = current.resource_version
        sent = 0
        for attempt in (1, 2):
            if not guard():
                return ScaleResult(
                    ScaleOutcome.NOT_LEADER,
                    f"not scaling {ref.key()} from {before} to {replicas}: this replica no "
                    "longer leads",
                    before,
                    replicas,
                    resource_version=rv,
                    requests=sent,
                )
            try:
                sent += 1
                new = await self._patch(ref, replicas, rv)
            except Exception as exc:
                err = self._classify(exc)
                if err.outcome is not ApiFailure.STALE or attempt == 2:
                    return self._failed(ref, err, before, replicas, rv, sent)
                log.info(
                    "scale_conflict_reread",
                    target=ref.key(),
                    resource_version=rv,
                    message=f"the scale write got 409 Conflict: {ref.key()} changed after it "
                    f"was read at resourceVersion {rv} (any write to it does that, its "
                    "controller's status updates as pods start or become ready included: "
                    "expected now and then); re-reading its scale subresource and retrying once",
                )
                try:
                    sent += 1
                    fresh = await self._get_scale(ref)
                except Exception as exc2:
                    return self._failed(ref, self._classify(exc2), before, replicas, rv, sent)
                before, rv = fresh.spec_replicas, fresh.resource_version
                if before == replicas:
                    return ScaleResult(
                        ScaleOutcome.UNCHANGED,
                        f"{ref.key()} was changed by another writer to "
                        f"{counted(replicas, 'replica')}",
                        before,
                        replicas,
                        replicas_after=before,
                        resource_version=rv,
                        requests=sent,
                    )
                continue
            log.info(
                "scaled",
                target=ref.key(),
                replicas_before=before,
                replicas=new.spec_replicas,
                resource_version=new.resource_version,
            )
            return ScaleResult(
                ScaleOutcome.SCALED,
                f"scaled {ref.key()} from {before} to {counted(new.spec_replicas, 'replica')}",
                before,
                replicas,
                replicas_after=new.spec_replicas,
                resource_version=new.resource_version,
                requests=sent,
            )
        raise AssertionError("unreachable")  # the loop always returns

    def _failed(
        self,
        ref: WorkloadRef,
        err: KubeApiError,
        before: int,
        replicas: int,
        rv: str,
        sent: int,
    ) -> ScaleResult:
        what = {
            ApiFailure.STALE: "still conflicting after a re-read and retry",
            ApiFailure.NOT_FOUND: "the workload or its scale subresource does not exist",
            ApiFailure.UNAUTHORIZED: "the API server did not accept the credentials (an "
            "expired or revoked token, or a kubeconfig of another cluster)",
            ApiFailure.FORBIDDEN: "not allowed (check the service account's RBAC for */scale)",
            ApiFailure.THROTTLED: "throttled by the API server",
            ApiFailure.SERVER_ERROR: "API server error",
            ApiFailure.INVALID: "the API server rejected the request",
            ApiFailure.TRANSPORT: "cannot reach the API server",
        }.get(err.outcome, err.outcome.value)
        if err.retry_after_seconds is not None:
            what += f" (retry after {err.retry_after_seconds:g}s)"
        # Not logged here: the result carries the failure, and the controller logs it once.
        message = f"cannot scale {ref.key()} from {before} to {replicas}: {what}: {err.message}"
        return ScaleResult(
            err.outcome,
            message,
            before,
            replicas,
            resource_version=rv,
            http_status=err.http_status,
            retry_after_seconds=err.retry_after_seconds,
            requests=sent,
        )

    async def emit_event(
        self,
        ref: WorkloadRef | ResourceRef,
        *,
        reason: str,
        message: str,
        type: str = "Normal",
    ) -> bool:
        """Create a core/v1 Event about the target, or about the ``VLLMAutoscaler`` that
        defines it (best effort).

        ``involvedObject`` carries the object's apiVersion/kind/name/namespace and its uid
        (a resource's own; a workload's once a :meth:`read` has seen it). The name is
        server-generated (``generateName``).
        Every registered secret in ``message`` is masked (:mod:`scaler.config.secrets`), then
        it is put on one line and cut to 1024 characters
        (:func:`~scaler.config.secrets.shortened`).

        Returns:
            True when the event was created; False in dry run or when the API call failed
            (the failure is logged, never raised).

        Raises:
            ValueError: ``type`` is not Normal or Warning (programming error).
        """
        if type not in ("Normal", "Warning"):
            raise ValueError(f"event type must be Normal or Warning, got {type!r}")
        if self._dry_run:
            return False
        now = _rfc3339(self._clock())
        involved: dict[str, str] = {
            "apiVersion": ref.api_version,
            "kind": ref.kind,
            "name": ref.name,
            "namespace": ref.namespace,
        }
        uid = ref.uid if isinstance(ref, ResourceRef) else self._uids.get(ref.key())
        if uid:
            involved["uid"] = uid
        body: Any = {  # a plain dict; the client serializes it as-is
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"generateName": f"{ref.name}.", "namespace": ref.namespace},
            "involvedObject": involved,
            "reason": reason,
            "message": shortened(message, 1024),  # an API answer quoted may echo a token
            "type": type,
            "source": {"component": self._field_manager},
            "reportingComponent": self._field_manager,
            "reportingInstance": self._instance,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }
        try:
            await self.gate.call(
                lambda: self._core.create_namespaced_event(
                    ref.namespace,
                    body,
                    field_manager=self._field_manager,
                    _request_timeout=self._timeout,
                ),
                retry=False,
                held=False,  # the Event may be the report of a throttled write
            )
        except Exception as exc:
            err = self._classify(exc)
            log.warning(
                "event_failed",
                target=ref.key(),
                reason=reason,
                outcome=err.outcome.value,
                http_status=err.http_status,
                message=err.message,
            )
            return False
        return True
