"""The API server's clock, as its answers' ``Date`` header tells it.

Pod ages, Ready and scheduling times and container restarts are the API server's and the
kubelets' timestamps; subtracting them from this machine's clock mixes two clocks. A
controller on a laptop (``recommend``) or on a node whose clock has drifted then reads a
fresh pod as ten minutes old (stuck at once) or a stuck one as young (never reported), and a
fleet as ready for less than a rate window for as long as the clock is behind. Kubernetes'
own controllers run beside the API server; for a client, the maintainers' advice is the
server's ``Date`` header (kubernetes/kubernetes#29229). ``Date`` has one-second resolution,
so offsets within :data:`TOLERANCE_SECONDS` are read as none.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from email.utils import parsedate_to_datetime
from typing import Any

import structlog

__all__ = ["TOLERANCE_SECONDS", "WARN_SECONDS", "ServerClock"]

log = structlog.get_logger(__name__)

#: Offsets this small are the header's truncation to the second and the round trip: none.
TOLERANCE_SECONDS = 2.0
#: Offsets this large are logged as a warning (once, and again when they change regime).
WARN_SECONDS = 5.0


class ServerClock:
    """Tracks the offset of the API server's clock from the local one.

    Attributes:
        offset_seconds: the server's clock minus the local clock at the last answer with a
            usable ``Date`` header, seconds (0 within :data:`TOLERANCE_SECONDS`, or before any).
    """

    def __init__(self) -> None:
        self.offset_seconds = 0.0
        self._warned = False

    def now(self, headers: Mapping[str, Any] | None, local_now: float) -> float:
        """The server's time when it answered with ``headers``, received at ``local_now``
        (epoch seconds); the local time when the header is missing or malformed."""
        raw = headers.get("Date") if headers is not None else None
        if not raw:
            return local_now + self.offset_seconds
        try:
            # the server's clock is within [Date, Date + 1 s) when it wrote the header
            server = parsedate_to_datetime(str(raw)).timestamp() + 0.5
        except (TypeError, ValueError, IndexError, OverflowError):
            return local_now + self.offset_seconds
        offset = server - local_now
        if not math.isfinite(offset) or abs(offset) <= TOLERANCE_SECONDS:
            offset = 0.0
        self._note(offset)
        self.offset_seconds = offset
        return local_now + offset

    def _note(self, offset: float) -> None:
        skewed = abs(offset) >= WARN_SECONDS
        if skewed and not self._warned:
            side = "ahead of" if offset > 0 else "behind"
            log.warning(
                "api_server_clock_skew",
                offset_seconds=round(offset, 1),
                message=f"the API server's clock is {abs(offset):.0f} s {side} this machine's; "
                "pod ages, Ready and restart times are measured on the server's clock (from "
                "its Date header); fix the time synchronisation (NTP) of the machine that is "
                "off",
            )
        elif not skewed and self._warned:
            log.info("api_server_clock_skew_ended", offset_seconds=round(offset, 1))
        self._warned = skewed
