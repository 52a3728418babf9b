"""coordination.k8s.io/v1 Leases through kubernetes-asyncio: get, create, replace.

The leader elector (:mod:`scaler.controller.leader`) decides; this module only talks to the
API. Bodies are plain dicts (the generated ``V1Lease`` model would serialize MicroTime
fields as ``isoformat()``, which drops the microseconds a real API server requires).
Failures are classified by :func:`scaler.actuators.errors.classify_error`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kubernetes_asyncio import client
from kubernetes_asyncio.client import ApiClient

from scaler.actuators.errors import ApiFailure, KubeApiError, classify_error

__all__ = ["LEASE_GROUP", "LEASE_PLURAL", "LEASE_VERSION", "LeaseClient"]

LEASE_GROUP = "coordination.k8s.io"
LEASE_VERSION = "v1"
LEASE_PLURAL = "leases"


class LeaseClient:
    """Reads and writes Lease objects (RBAC: get, create, update on leases).

    Args:
        api_client: a kubernetes-asyncio ApiClient; the caller owns and closes it.
        clock: epoch seconds (for Retry-After dates in errors).
        request_timeout: total timeout of one request, in seconds.
    """

    def __init__(
        self,
        api_client: ApiClient,
        *,
        clock: Callable[[], float],
        field_manager: str = "vllm-scaler",
        request_timeout: float = 5.0,
    ) -> None:
        self._custom = client.CustomObjectsApi(api_client)
        self._clock = clock
        self._field_manager = field_manager
        self._timeout = request_timeout

    def _classify(self, exc: BaseException) -> KubeApiError:
        err = classify_error(exc, now=self._clock())
        if err is None:
            raise exc
        return err

    async def get(self, namespace: str, name: str) -> dict[str, Any] | None:
        """The Lease, or None when it does not exist.

        Raises:
            KubeApiError: any other failure.
        """
        try:
            obj: dict[str, Any] = await self._custom.get_namespaced_custom_object(
                LEASE_GROUP,
                LEASE_VERSION,
                namespace,
                LEASE_PLURAL,
                name,
                _request_timeout=self._timeout,
            )
        except Exception as exc:
            err = self._classify(exc)
            if err.outcome is ApiFailure.NOT_FOUND:
                return None
            raise err from exc
        return obj

    async def create(self, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        """POST a new Lease (409 ``AlreadyExists`` raises a conflict).

        Raises:
            KubeApiError: the failure, classified.
        """
        try:
            obj: dict[str, Any] = await self._custom.create_namespaced_custom_object(
                LEASE_GROUP,
                LEASE_VERSION,
                namespace,
                LEASE_PLURAL,
                body,
                field_manager=self._field_manager,
                _request_timeout=self._timeout,
            )
        except Exception as exc:
            raise self._classify(exc) from exc
        return obj

    async def replace(self, namespace: str, name: str, body: dict[str, Any]) -> dict[str, Any]:
        """PUT the Lease; ``body.metadata.resourceVersion`` is the optimistic-lock precondition.

        Raises:
            KubeApiError: the failure, classified (``stale`` for a stale resourceVersion, 409).
        """
        try:
            obj: dict[str, Any] = await self._custom.replace_namespaced_custom_object(
                LEASE_GROUP,
                LEASE_VERSION,
                namespace,
                LEASE_PLURAL,
                name,
                body,
                field_manager=self._field_manager,
                _request_timeout=self._timeout,
            )
        except Exception as exc:
            raise self._classify(exc) from exc
        return obj
