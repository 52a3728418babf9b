"""Fault injection: answer chosen requests with an API error, as a failing server would."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from scaler.sim.kubeapi.base import StoreBase
from scaler.sim.kubeapi.errors import ApiError


@dataclass(slots=True)
class _Fault:
    method: str
    pattern: re.Pattern[str]
    status: int
    remaining: int
    retry_after: int | None
    reason: str | None


class FaultInjection(StoreBase):
    """Pending faults, consumed by the server after authentication and before routing."""

    def __init__(self, now: Callable[[], float]) -> None:
        super().__init__(now)
        self._faults: list[_Fault] = []

    def inject_fault(
        self,
        method: str,
        path_regex: str,
        status: int,
        *,
        times: int = 1,
        retry_after: int | None = None,
        body_reason: str | None = None,
    ) -> None:
        """Answer the next ``times`` requests matching ``method`` (``"*"`` for any) and
        ``path_regex`` (``re.search`` on the URL path) with ``status`` and a Status body.

        ``retry_after`` (seconds) sets the ``Retry-After`` header and
        ``details.retryAfterSeconds``; ``body_reason`` overrides ``Status.reason``.
        Faults apply after authentication and before routing.
        """
        if times < 1:
            raise ValueError("times must be >= 1")
        self._faults.append(
            _Fault(method.upper(), re.compile(path_regex), status, times, retry_after, body_reason)
        )

    def clear_faults(self) -> None:
        """Drop every pending fault."""
        self._faults.clear()

    def take_fault(self, method: str, path: str) -> ApiError | None:
        """Consume the first pending fault matching this request, as an ApiError."""
        for f in self._faults:
            if f.method in ("*", method.upper()) and f.pattern.search(path):
                f.remaining -= 1
                if f.remaining == 0:
                    self._faults.remove(f)
                err = ApiError.generic(f.status, f.reason)
                if f.retry_after is not None:
                    err.headers["Retry-After"] = str(f.retry_after)
                    err.details = {"retryAfterSeconds": f.retry_after}
                return err
        return None
