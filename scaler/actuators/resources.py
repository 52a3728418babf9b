"""The ``VLLMAutoscaler`` resources through kubernetes-asyncio: watched, and their status written.

:class:`ResourceWatch` keeps the latest copy of every resource of the namespaces watched
(all, or a list) the way client-go's reflector does: a LIST, then a WATCH from the list's
resourceVersion with bookmarks, continued from the last resourceVersion seen whenever the
server ends the stream (its timeout), and a new LIST when the server says that version is
too old (410 Gone, an ``ERROR`` event) or after a failure (with a back-off). The control loop
reads :meth:`ResourceWatch.snapshot` at the start of each cycle: a create, a change or a
delete is seen by the next cycle, without a restart, and the loop stays one loop (the watch
only fills the cache).

A cluster without the CRD answers 404: the watch says so (``served`` False), keeps the
policy file's targets going, and looks again every :attr:`ResourceWatch.absent_retry_seconds`,
so that a CRD installed later is picked up.

:class:`ResourceStatusWriter` writes a resource's status through the status subresource (a
merge patch; fenced by a guard asked right before it is sent).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import structlog
from kubernetes_asyncio import client
from kubernetes_asyncio.client import ApiClient

from scaler.actuators.errors import ApiFailure, KubeApiError, classify_error
from scaler.config.resource import GROUP, PLURAL, VERSION, ResourceRef

__all__ = ["ResourceSnapshot", "ResourceStatusWriter", "ResourceWatch"]

log = structlog.get_logger(__name__)

MERGE_PATCH = "application/merge-patch+json"

Doc = dict[str, Any]


class _Expired(Exception):
    """The watch's resourceVersion is too old (410 Gone): list again."""


@dataclass(frozen=True, slots=True)
class ResourceSnapshot:
    """The resources as the watch knows them at one moment.

    Attributes:
        synced: every namespace watched has been listed at least once (until then the
            resources are not known: none of them is taken as deleted).
        served: the API serves the kind (False: the CRD is not installed; None: not known
            yet).
        items: the resources, each as the API answered it (spec, status, metadata).
        problem: why the last list or watch failed ('' when it did not).
    """

    synced: bool
    served: bool | None
    items: tuple[Doc, ...] = ()
    problem: str = ""


class ResourceWatch:
    """Lists and watches the ``VLLMAutoscaler`` resources of ``namespaces`` (all when empty).

    Args:
        api_client: a kubernetes-asyncio ApiClient; the caller owns and closes it.
        namespaces: the namespaces to watch (RBAC may grant no more); empty: all of them.
        clock: epoch seconds (for Retry-After dates in errors).
        watch_timeout_seconds: how long the server keeps one watch open before it ends it
            (the reflector's default is 5 to 10 minutes); the watch continues from there.
        request_timeout: timeout of a LIST, seconds.
        absent_retry_seconds: how often to look again for a CRD that is not installed.
        max_backoff_seconds: the longest wait after a failure (doubling from 1 s).
    """

    def __init__(
        self,
        api_client: ApiClient,
        *,
        namespaces: Sequence[str] = (),
        clock: Callable[[], float],
        watch_timeout_seconds: int = 300,
        request_timeout: float = 10.0,
        absent_retry_seconds: float = 60.0,
        max_backoff_seconds: float = 30.0,
    ) -> None:
        self._custom = client.CustomObjectsApi(api_client)
        self._scopes: tuple[str, ...] = tuple(sorted(set(namespaces))) or ("",)
        self._clock = clock
        self.watch_timeout_seconds = watch_timeout_seconds
        self._timeout = request_timeout
        self.absent_retry_seconds = absent_retry_seconds
        self._max_backoff = max_backoff_seconds
        self._items: dict[str, dict[tuple[str, str], Doc]] = {s: {} for s in self._scopes}
        self._listed: set[str] = set()
        self._served: bool | None = None
        self._problem = ""
        self._synced = asyncio.Event()
        #: LIST requests sent (each relist counts): what a watch saves against polling
        self.lists = 0

    @property
    def namespaces(self) -> tuple[str, ...]:
        """The namespaces watched (empty: all)."""
        return tuple(s for s in self._scopes if s)

    def snapshot(self) -> ResourceSnapshot:
        """The resources as known now (a consistent copy; nothing is sent)."""
        items = tuple(
            obj
            for scope in self._scopes
            for _, obj in sorted(self._items[scope].items(), key=lambda kv: kv[0])
        )
        return ResourceSnapshot(
            synced=len(self._listed) == len(self._scopes),
            served=self._served,
            items=items,
            problem=self._problem,
        )

    async def wait_synced(self, timeout: float) -> bool:
        """Wait until every namespace watched was listed once (at most ``timeout`` seconds);
        whether it was."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._synced.wait(), timeout=timeout)
        return self._synced.is_set()

    def _seen(self, scope: str) -> None:
        self._listed.add(scope)
        if len(self._listed) == len(self._scopes):
            self._synced.set()

    async def list_once(self) -> ResourceSnapshot:
        """One LIST of every namespace watched, without watching (``recommend --once``).

        Never raises for API failures: the snapshot carries them (``problem``).
        """
        for scope in self._scopes:
            with contextlib.suppress(KubeApiError):
                await self._list(scope)
        return self.snapshot()

    async def run(self, stop: asyncio.Event) -> None:
        """Keep the cache up to date until ``stop`` is set (one reflector per namespace)."""
        await asyncio.gather(*(self._reflect(scope, stop) for scope in self._scopes))

    # ------------------------------------------------------------------ the reflector

    async def _reflect(self, scope: str, stop: asyncio.Event) -> None:
        backoff = 1.0
        while not stop.is_set():
            try:
                version = await self._list(scope)
                backoff = 1.0
                while not stop.is_set():
                    version = await self._watch(scope, version, stop)
            except _Expired:
                log.info(
                    "resource_watch_expired",
                    namespace=scope or None,
                    message="the watch's resourceVersion is too old (410 Gone); listing again",
                )
                continue
            except KubeApiError as err:
                if err.outcome is ApiFailure.NOT_FOUND:
                    await _wait(stop, self.absent_retry_seconds)
                    continue
                log.warning(
                    "resource_watch_failed",
                    namespace=scope or None,
                    outcome=str(err.outcome),
                    error=err.message,
                    retry_seconds=backoff,
                    message="cannot list or watch VLLMAutoscalers; the resources as last "
                    "seen are kept",
                )
                await _wait(stop, err.retry_after_seconds or backoff)
                backoff = min(2 * backoff, self._max_backoff)
            except Exception:  # a bug must not end the watch silently
                log.exception("resource_watch_error", namespace=scope or None)
                await _wait(stop, backoff)
                backoff = min(2 * backoff, self._max_backoff)

    def _classify(self, exc: BaseException) -> KubeApiError:
        err = classify_error(exc, now=self._clock())
        if err is None:
            raise exc
        return err

    async def _list(self, scope: str) -> str:
        """LIST the resources of ``scope`` into the cache; the list's resourceVersion.

        Raises:
            KubeApiError: the failure, classified (``not_found``: the CRD is not installed).
        """
        self.lists += 1
        try:
            if scope:
                answer = await self._custom.list_namespaced_custom_object(
                    GROUP, VERSION, scope, PLURAL, _request_timeout=self._timeout
                )
            else:
                answer = await self._custom.list_cluster_custom_object(
                    GROUP, VERSION, PLURAL, _request_timeout=self._timeout
                )
        except Exception as exc:
            err = self._classify(exc)
            self._problem = f"{err.outcome}: {err.message}"
            if err.outcome is ApiFailure.NOT_FOUND:
                if self._served is not False:
                    log.warning(
                        "resource_kind_not_served",
                        message=f"the API serves no {PLURAL}.{GROUP}/{VERSION} (the CRD is "
                        "not installed): only the policy file's targets are scaled; looking "
                        f"again every {self.absent_retry_seconds:g} s",
                    )
                self._served = False
                self._items[scope] = {}
                self._seen(scope)  # known: there are none
            raise err from exc
        items = {_key(obj): obj for obj in answer.get("items") or [] if isinstance(obj, dict)}
        for obj in items.values():  # a list's items carry no kind
            obj.setdefault("kind", "VLLMAutoscaler")
            obj.setdefault("apiVersion", f"{GROUP}/{VERSION}")
        if self._served is False:
            log.info("resource_kind_served", message=f"the API serves {PLURAL}.{GROUP} now")
        self._served = True
        self._problem = ""
        self._items[scope] = items
        self._seen(scope)
        return str((answer.get("metadata") or {}).get("resourceVersion") or "")

    async def _watch(self, scope: str, version: str, stop: asyncio.Event) -> str:
        """One WATCH from ``version`` until the server ends it; the last version seen.

        Raises:
            _Expired: the version is too old (list again).
            KubeApiError: the watch failed, classified.
        """
        options: dict[str, Any] = {
            "watch": True,
            "allow_watch_bookmarks": True,
            "resource_version": version,
            "timeout_seconds": self.watch_timeout_seconds,
            "_preload_content": False,
            "_request_timeout": self.watch_timeout_seconds + 30,
        }
        custom: Any = self._custom
        try:
            if scope:
                response = await custom.list_namespaced_custom_object(
                    GROUP, VERSION, scope, PLURAL, **options
                )
            else:
                response = await custom.list_cluster_custom_object(
                    GROUP, VERSION, PLURAL, **options
                )
        except Exception as exc:
            raise self._classify(exc) from exc
        try:
            # lines split here: aiohttp's readline refuses a line over 64 KiB (an object)
            buffer = b""
            async for chunk in response.content.iter_any():
                buffer += chunk
                while b"\n" in buffer:
                    line, buffer = buffer.split(b"\n", 1)
                    if line.strip():
                        version = self._event(scope, json.loads(line), version)
                if stop.is_set():
                    break
        except (_Expired, KubeApiError):
            raise
        except Exception as exc:
            raise self._classify(exc) from exc
        finally:
            response.release()
        return version

    def _event(self, scope: str, event: Mapping[str, Any], version: str) -> str:
        """Apply one watch event to the cache; the resourceVersion to continue from."""
        kind = event.get("type")
        obj = event.get("object") or {}
        if kind == "ERROR":
            code = obj.get("code")
            if code == 410:
                raise _Expired()
            raise KubeApiError(
                ApiFailure.SERVER_ERROR
                if not isinstance(code, int) or code >= 500
                else ApiFailure.INVALID,
                str(obj.get("message") or obj),
                http_status=code if isinstance(code, int) else None,
            )
        meta = obj.get("metadata") or {}
        version = str(meta.get("resourceVersion") or version)
        if kind == "BOOKMARK":
            return version
        if kind in ("ADDED", "MODIFIED"):
            self._items[scope][_key(obj)] = obj
        elif kind == "DELETED":
            self._items[scope].pop(_key(obj), None)
        return version


def _key(obj: Mapping[str, Any]) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    return str(meta.get("namespace") or ""), str(meta.get("name") or "")


async def _wait(stop: asyncio.Event, seconds: float) -> None:
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), timeout=seconds)


class ResourceStatusWriter:
    """Writes a ``VLLMAutoscaler``'s status (RBAC: ``patch`` on ``vllmautoscalers/status``).

    Args:
        api_client: a kubernetes-asyncio ApiClient; the caller owns and closes it.
        clock: epoch seconds (for Retry-After dates in errors).
        field_manager: the writes' ``fieldManager``.
        request_timeout: timeout of one request, seconds.
    """

    def __init__(
        self,
        api_client: ApiClient,
        *,
        clock: Callable[[], float],
        field_manager: str = "vllm-scaler",
        request_timeout: float = 10.0,
    ) -> None:
        self._custom = client.CustomObjectsApi(api_client)
        self._clock = clock
        self._field_manager = field_manager
        self._timeout = request_timeout

    async def write_status(
        self,
        ref: ResourceRef,
        status: Mapping[str, Any],
        *,
        removed: Sequence[str] = (),
        guard: Callable[[], bool],
    ) -> bool | None:
        """Merge-patch ``status`` onto the resource's status subresource; the fields of
        ``removed`` (there before, not now) are cleared.

        Returns:
            True when written; False when the write failed (logged, never raised); None
            when ``guard`` refused it (nothing was sent).
        """
        if not guard():
            return None
        custom: Any = self._custom  # the stubs omit the (supported) _content_type keyword
        try:
            await custom.patch_namespaced_custom_object_status(
                GROUP,
                VERSION,
                ref.namespace,
                PLURAL,
                ref.name,
                {"status": {**dict.fromkeys(removed), **status}},
                field_manager=self._field_manager,
                _content_type=MERGE_PATCH,
                _request_timeout=self._timeout,
            )
        except Exception as exc:
            err = classify_error(exc, now=self._clock())
            if err is None:
                raise
            log.warning(
                "resource_status_failed",
                resource=ref.key(),
                outcome=str(err.outcome),
                http_status=err.http_status,
                message=err.message,
            )
            return False
        return True
