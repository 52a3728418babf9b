"""Kubernetes API failures, classified in one place.

:func:`classify_error` maps every exception of a kubernetes-asyncio call to an
:class:`ApiFailure` (HTTP status or transport error); :class:`KubeApiError` carries it. Both the
actuator and the Lease client use them.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import os
import re
import socket
from collections.abc import Mapping
from enum import StrEnum
from typing import Any, Final

import aiohttp
from kubernetes_asyncio.client.exceptions import ApiException

__all__ = ["ApiFailure", "KubeApiError", "classify_error", "connect_failure_reason"]


class ApiFailure(StrEnum):
    """Why a Kubernetes API call failed.

    - ``stale`` (value ``conflict``, HTTP 409): another write came first (the object's
      resourceVersion changed, or it was created meanwhile); re-read and try again. The value
      is the ``outcome`` label of ``vllm_scaler_scale_failures_total`` and stays as it is.
    - ``not_found`` (404), ``unauthorized`` (401: the credentials were not accepted, e.g. an
      expired token or a kubeconfig of another cluster), ``forbidden`` (403: authenticated,
      but RBAC does not allow the verb), ``throttled`` (429), ``server_error`` (5xx),
      ``invalid`` (other 4xx), ``transport`` (connection failure or timeout).
    """

    STALE = "conflict"
    NOT_FOUND = "not_found"
    UNAUTHORIZED = "unauthorized"
    FORBIDDEN = "forbidden"
    THROTTLED = "throttled"
    SERVER_ERROR = "server_error"
    INVALID = "invalid"
    TRANSPORT = "transport"


class KubeApiError(Exception):
    """A classified Kubernetes API failure (raised by :meth:`KubernetesActuator.read`).

    Attributes:
        outcome: the failure class (never scaled/unchanged/dry_run).
        message: the server's Status message or the transport error.
        http_status: HTTP status, None for transport errors.
        retry_after_seconds: Retry-After in seconds, when given.
    """

    def __init__(
        self,
        outcome: ApiFailure,
        message: str,
        *,
        http_status: int | None = None,
        retry_after_seconds: float | None = None,
    ) -> None:
        super().__init__(f"{outcome.value}: {message}")
        self.outcome = outcome
        self.message = message
        self.http_status = http_status
        self.retry_after_seconds = retry_after_seconds


def _status_message(body: Any) -> tuple[str | None, Mapping[str, Any]]:
    """(Status.message, Status.details) of an error body, if it is a Status."""
    if isinstance(body, bytes | bytearray):
        try:
            body = json.loads(body)
        except ValueError:
            return None, {}
    elif isinstance(body, str):
        try:
            body = json.loads(body)
        except ValueError:
            return body or None, {}
    if isinstance(body, dict):
        details = body.get("details")
        return body.get("message"), details if isinstance(details, dict) else {}
    return None, {}


def _retry_after(
    headers: Mapping[str, str] | None, details: Mapping[str, Any], now: float
) -> float | None:
    raw = headers.get("Retry-After") if headers is not None else None
    if raw:
        try:
            return max(0.0, float(raw))
        except ValueError:
            try:  # the HTTP-date form
                when = email.utils.parsedate_to_datetime(raw)
            except (TypeError, ValueError):
                when = None
            if when is not None:
                return max(0.0, when.timestamp() - now)
    seconds = details.get("retryAfterSeconds")
    return float(seconds) if isinstance(seconds, int | float) else None


_ERRNO: Final = re.compile(r"\[Errno (\d+)\]")


def connect_failure_reason(exc: aiohttp.ClientConnectorError) -> str:
    """Why a connection could not be made, in the system's words (``connection refused``,
    ``the host name api.example does not resolve (Name or service not known)``), never
    asyncio's ``Connect call failed ('10.0.0.1', 6443)``: the errno's text, or each distinct
    errno's of a host with several addresses (``connection refused; network is
    unreachable``)."""
    error = exc.os_error
    if isinstance(error, socket.gaierror):
        return f"the host name {exc.host} does not resolve ({error.strerror})"
    if error.errno is not None:
        return os.strerror(error.errno).lower()
    text = str(error)
    # several addresses tried (IPv6 and IPv4): "Multiple exceptions: [Errno 111] ..., ..."
    codes = list(dict.fromkeys(int(code) for code in _ERRNO.findall(text)))
    if codes:
        return "; ".join(os.strerror(code).lower() for code in codes)
    return text or type(error).__name__


def classify_error(exc: BaseException, *, now: float = 0.0) -> KubeApiError | None:
    """Map an exception from a kubernetes-asyncio call to a :class:`KubeApiError`.

    The single place where HTTP statuses and transport errors become outcomes:
    401/403 -> forbidden, 404 -> not_found, 409 -> stale, 429 -> throttled,
    5xx -> server_error, other 4xx (400, 415, 422...) -> invalid, connection errors and
    timeouts -> transport.

    Args:
        exc: the exception raised by the client.
        now: epoch seconds, to turn an HTTP-date Retry-After into seconds.

    Returns:
        None when ``exc`` is not an API or transport failure (a programming error the
        caller should re-raise).
    """
    if isinstance(exc, ApiException):
        status = int(exc.status or 0)
        if status == 0:  # the client refused to build the request: our bug
            return None
        message, details = _status_message(getattr(exc, "body", None))
        text = message or f"HTTP {status} {exc.reason or ''}".strip()
        retry = _retry_after(getattr(exc, "headers", None), details, now)
        if status == 401:
            outcome = ApiFailure.UNAUTHORIZED
        elif status == 403:
            outcome = ApiFailure.FORBIDDEN
        elif status == 404:
            outcome = ApiFailure.NOT_FOUND
        elif status == 409:
            outcome = ApiFailure.STALE
        elif status == 429:
            outcome = ApiFailure.THROTTLED
        elif status >= 500:
            outcome = ApiFailure.SERVER_ERROR
        else:
            outcome = ApiFailure.INVALID
        return KubeApiError(outcome, text, http_status=status, retry_after_seconds=retry)
    if isinstance(exc, aiohttp.ClientConnectorError) and not isinstance(
        exc, aiohttp.ClientSSLError
    ):
        # aiohttp's own text adds "ssl:default" even for a plain-http address, and asyncio's
        # ("Connect call failed ('10.0.0.1', 6443)") repeats the address: the host, the port
        # and the system's reason are what a person can act on.
        text = f"cannot connect to {exc.host}:{exc.port}: {connect_failure_reason(exc)}"
        return KubeApiError(ApiFailure.TRANSPORT, text)
    if isinstance(exc, aiohttp.ClientError | TimeoutError | asyncio.TimeoutError | OSError):
        text = str(exc) or type(exc).__name__
        return KubeApiError(ApiFailure.TRANSPORT, f"{type(exc).__name__}: {text}")
    return None
