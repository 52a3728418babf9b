"""How requests reach the replicas: what sits in front of the pods of a vLLM Deployment.

- ``random``: a Kubernetes Service in kube-proxy's iptables mode (the default of most
  clusters, and what the usual vLLM-on-Kubernetes setups put in front of the pods). Every new
  connection goes to a Ready endpoint chosen uniformly at random (iptables ``statistic`` rules
  with probability 1/n, 1/(n-1), ...); each request is taken as its own connection.
- ``round-robin``: the vLLM production-stack router's default: the Ready endpoints in a fixed
  order, one request each in turn.
- ``least-request``: an inference gateway (the Gateway API inference extension's endpoint
  picker, llm-d) that scrapes every replica's ``vllm:num_requests_waiting`` and
  ``vllm:num_requests_running`` every ``scrape_interval_seconds`` (the endpoint picker's
  ``--refresh-metrics-interval`` default is 50 ms) and sends each request to the replica with
  the smallest queue depth, then the fewest running requests, in its last scrape; exact ties
  are broken at random. Between two scrapes it does not see the requests it just sent, so a
  burst inside one interval lands on the same replica, as it does with a real gateway.

Routers only choose among the candidates the caller passes (Ready pods that accept requests),
and are deterministic for a given seed.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from enum import StrEnum
from typing import Protocol

from scaler.sim.engine import ReplicaEngine

__all__ = [
    "GATEWAY_SCRAPE_SECONDS",
    "ROUTING_HELP",
    "LeastRequestRouter",
    "RandomRouter",
    "RoundRobinRouter",
    "Router",
    "Routing",
    "make_router",
    "routing_option_error",
]

#: The endpoint picker's default metrics refresh interval, seconds.
GATEWAY_SCRAPE_SECONDS = 0.05


class Routing(StrEnum):
    """The routing modes (see the module docstring)."""

    RANDOM = "random"
    ROUND_ROBIN = "round-robin"
    LEAST_REQUEST = "least-request"


#: Help of the ``--routing`` option of ``sim`` and ``bench``.
ROUTING_HELP = (
    "How requests reach the pods: 'random' (a Kubernetes Service, kube-proxy iptables), "
    "'round-robin' (the production-stack router) or 'least-request' (an inference gateway "
    "routing on scraped queue depth)."
)


def routing_option_error(value: str) -> str | None:
    """The error line for a ``--routing`` value that names no mode, else None."""
    modes = [m.value for m in Routing]
    if value in modes:
        return None
    return f"--routing: expected one of {', '.join(modes)}, got {value!r}"


class Router(Protocol):
    """Chooses the replica for one request."""

    def observe(self, candidates: Sequence[ReplicaEngine], now: float) -> None:
        """Called before the replicas are advanced to ``now`` (seconds): a router that reads
        the replicas' state at fixed times takes its reading here."""
        ...

    def pick(self, candidates: Sequence[ReplicaEngine], now: float) -> int:
        """The index in ``candidates`` (non-empty) of the replica that gets a request arriving
        at ``now`` (seconds)."""
        ...


class RandomRouter:
    """A Service in kube-proxy's iptables mode: uniformly random among the candidates."""

    def __init__(self, seed: int | str = 0) -> None:
        self._rng = random.Random(seed)

    def observe(self, candidates: Sequence[ReplicaEngine], now: float) -> None:
        """Nothing to read."""

    def pick(self, candidates: Sequence[ReplicaEngine], now: float) -> int:
        """A uniformly random index."""
        return self._rng.randrange(len(candidates))


class RoundRobinRouter:
    """The candidates in turn (the production-stack router's round-robin)."""

    def __init__(self) -> None:
        self._next = 0

    def observe(self, candidates: Sequence[ReplicaEngine], now: float) -> None:
        """Nothing to read."""

    def pick(self, candidates: Sequence[ReplicaEngine], now: float) -> int:
        """The next index in turn (the count continues when the candidates change)."""
        i = self._next % len(candidates)
        self._next += 1
        return i


class LeastRequestRouter:
    """A gateway that routes on queue depth as of its last scrape (see the module docstring).

    Args:
        seed: seeds the tie-breaking.
        scrape_interval_seconds: how often the gateway reads the replicas' metrics; the
            scrapes fall on multiples of it.

    Raises:
        ValueError: a scrape interval that is not a finite number > 0.
    """

    def __init__(
        self, seed: int | str = 0, scrape_interval_seconds: float = GATEWAY_SCRAPE_SECONDS
    ) -> None:
        if not (math.isfinite(scrape_interval_seconds) and scrape_interval_seconds > 0):
            raise ValueError(
                f"scrape_interval_seconds: expected a number > 0, got {scrape_interval_seconds!r}"
            )
        self._rng = random.Random(seed)
        self.interval = scrape_interval_seconds
        self._scrape = -1  # index of the last scrape (its time is index x interval)
        self._seen: dict[str, tuple[int, int]] = {}

    def observe(self, candidates: Sequence[ReplicaEngine], now: float) -> None:
        """Scrape, if a scrape time passed since the last one: the replicas are advanced to
        that time (no request reaches them between it and ``now``) and read."""
        scrape = math.floor(now / self.interval)
        if scrape > self._scrape:
            at = scrape * self.interval
            for engine in candidates:
                engine.advance_to(at)
            self._seen = {e.name: (e.num_waiting, e.num_running) for e in candidates}
            self._scrape = scrape

    def pick(self, candidates: Sequence[ReplicaEngine], now: float) -> int:
        """The candidate with the smallest (waiting, running) in the last scrape at or before
        ``now``; a replica the gateway has not scraped yet counts as idle. A replica already
        past the scrape time (the caller advanced it) is read as it is then."""
        self.observe(candidates, now)
        keys = [self._seen.get(e.name, (0, 0)) for e in candidates]
        best = min(keys)
        ties = [i for i, k in enumerate(keys) if k == best]
        return ties[0] if len(ties) == 1 else ties[self._rng.randrange(len(ties))]


def make_router(
    routing: Routing | str,
    *,
    seed: int = 0,
    scrape_interval_seconds: float = GATEWAY_SCRAPE_SECONDS,
) -> Router:
    """The router for a mode name.

    Raises:
        ValueError: an unknown mode, naming the accepted ones.
    """
    try:
        mode = Routing(routing)
    except ValueError:
        accepted = ", ".join(repr(m.value) for m in Routing)
        raise ValueError(f"routing: expected one of {accepted}, got {routing!r}") from None
    if mode is Routing.RANDOM:
        return RandomRouter(f"routing:{seed}")
    if mode is Routing.ROUND_ROBIN:
        return RoundRobinRouter()
    return LeastRequestRouter(f"routing:{seed}", scrape_interval_seconds)
