"""One gate for the controller's requests to the API server: bounded and backing off.

The API server protects itself with API priority and fairness: a flow that sends more than
its priority level admits gets HTTP 429 with ``Retry-After`` (usually 1 s). A controller
that reads every target at once and keeps sending after a 429 makes its own flow's queue
longer and loses the reads of most targets every cycle (KEDA hit this with a few hundred
ScaledObjects, kedacore/keda#7613). client-go waits the ``Retry-After`` and retries; this
gate does the same for every call of the actuator:

- at most :data:`MAX_IN_FLIGHT` requests in flight (a cycle over 1,000 targets is not 3,000
  concurrent requests);
- after a 429, nothing is sent until its ``Retry-After`` has passed (1 s without one); a
  read that got the 429 is sent again after the wait (at most :data:`MAX_ATTEMPTS` times in
  all, as client-go retries a bounded number of times);
- a wait longer than ``max_wait_seconds`` is not waited inside a cycle: the calls fail at
  once as ``throttled`` without being sent (the targets hold, the next cycle reads them).

The Lease's requests do not pass here: renewing leadership never waits behind target reads.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

import structlog
from kubernetes_asyncio.client.exceptions import ApiException

from scaler.actuators.errors import ApiFailure, KubeApiError, classify_error

__all__ = ["DEFAULT_RETRY_AFTER_SECONDS", "MAX_ATTEMPTS", "MAX_IN_FLIGHT", "ApiGate"]

log = structlog.get_logger(__name__)

T = TypeVar("T")

#: Requests to the API server in flight at once.
MAX_IN_FLIGHT = 16
#: Sends of one read at most, the first included, while each 429's wait is short.
MAX_ATTEMPTS = 5
#: The wait after a 429 without a Retry-After, seconds (API priority and fairness' usual).
DEFAULT_RETRY_AFTER_SECONDS = 1.0


class ApiGate:
    """Bounds and paces the actuator's requests (see the module docstring).

    Args:
        clock: epoch seconds.
        sleep: waits that many seconds (``asyncio.sleep``; tests pass one that moves a fake
            clock).
        max_in_flight: requests in flight at once.
        max_wait_seconds: the longest ``Retry-After`` waited for inside a call; a longer
            one fails the calls of that time as throttled, unsent.

    Attributes:
        closed_until: the clock's time before which nothing is sent (a past time: open).
        throttled: 429 answers received.
        not_sent: calls failed unsent because the gate was closed for longer than
            ``max_wait_seconds``.
    """

    def __init__(
        self,
        clock: Callable[[], float],
        *,
        sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
        max_in_flight: int = MAX_IN_FLIGHT,
        max_wait_seconds: float = 5.0,
    ) -> None:
        if max_in_flight < 1:
            raise ValueError(f"max_in_flight must be at least 1, got {max_in_flight!r}")
        self._clock = clock
        self._sleep = sleep
        self._slots = asyncio.Semaphore(max_in_flight)
        self._waiting = asyncio.Lock()
        self.max_wait_seconds = max_wait_seconds
        self.closed_until = 0.0
        self.throttled = 0
        self.not_sent = 0

    async def call(self, send: Callable[[], Awaitable[T]], *, retry: bool, held: bool = True) -> T:
        """``await send()`` once the gate is open; after a 429, close the gate for its
        ``Retry-After`` and, when ``retry`` (reads), send again after it (at most
        :data:`MAX_ATTEMPTS` sends). A call that is not ``held`` (an Event reporting a
        failure) is sent while the gate is closed; its 429 still closes it.

        Raises:
            KubeApiError: ``throttled``, unsent, while the gate stays closed longer than
                ``max_wait_seconds``.
            Exception: whatever ``send`` raises (the last 429 included).
        """
        async with self._slots:
            for attempt in range(1, MAX_ATTEMPTS + 1):
                if held:
                    await self._open()
                try:
                    return await send()
                except ApiException as exc:
                    if exc.status != 429:
                        raise
                    wait = self._close(exc)
                    if not retry or attempt == MAX_ATTEMPTS or wait > self.max_wait_seconds:
                        raise
        raise AssertionError("unreachable")  # pragma: no cover

    def _close(self, exc: ApiException) -> float:
        """Close the gate for the answer's Retry-After; returns it, seconds."""
        now = self._clock()
        err = classify_error(exc, now=now)
        wait = DEFAULT_RETRY_AFTER_SECONDS
        if err is not None and err.retry_after_seconds is not None:
            wait = err.retry_after_seconds
        self.throttled += 1
        if now + wait > self.closed_until:
            if self.closed_until <= now:  # newly closed: say so once
                log.warning(
                    "api_throttled",
                    retry_after_seconds=wait,
                    message="the API server is throttling this controller (HTTP 429, API "
                    f"priority and fairness): nothing is sent for {wait:g} s"
                    + (
                        ", then the throttled reads are sent again"
                        if wait <= self.max_wait_seconds
                        else "; the targets not read hold until the next cycle (raise the "
                        "controller's priority level, or read fewer targets per replica)"
                    ),
                )
            self.closed_until = now + wait
        return wait

    async def _open(self) -> None:
        async with self._waiting:  # one waiter at a time: the others find the gate open
            left = self.closed_until - self._clock()
            if left <= 0:
                return
            if left > self.max_wait_seconds:
                self.not_sent += 1
                raise KubeApiError(
                    ApiFailure.THROTTLED,
                    "not sent: the API server is throttling this controller (HTTP 429, API "
                    f"priority and fairness) and asked it to wait {left:.0f} s more",
                    http_status=429,
                    retry_after_seconds=left,
                )
            await self._sleep(left)
