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
        self._admit: tuple[int, int] | None = None  # (requests per second, Retry-After)
        self._second: tuple[int, int] = (0, 0)  # (second of the clock, requests admitted)
        #: requests answered 429 by :meth:`limit_requests_per_second`'s priority level
        self.rejected_by_priority_level = 0

    def limit_requests_per_second(self, limit: int | None, *, retry_after: int = 1) -> None:
        """Admit at most ``limit`` requests per second of the store's clock and answer the
        others 429 with ``Retry-After`` (seconds), as a priority level of API priority and
        fairness whose seats and queues are full does; None admits everything again."""
        self._admit = None if limit is None else (limit, retry_after)
        self._second = (0, 0)

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
        """Consume the first pending fault matching this request, as an ApiError (or the
        priority level's 429 when the second's requests are used up)."""
        if self._admit is not None:
            limit, retry_after = self._admit
            second = int(self._now())
            seen = self._second[1] if self._second[0] == second else 0
            if seen >= limit:
                self.rejected_by_priority_level += 1
                err = ApiError.generic(429)
                err.headers["Retry-After"] = str(retry_after)
                err.details = {"retryAfterSeconds": retry_after}
                return err
            self._second = (second, seen + 1)
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
