"""Readings that stopped moving: frozen gauges and hung engines, per pod, across polls (pure).

vLLM sets its queue, running and KV-cache gauges (``vllm:num_requests_waiting``,
``vllm:num_requests_running``, ``vllm:kv_cache_usage_perc``) from the scheduler's statistics
of each engine step. An engine that stops stepping (every request aborted, a hung collective,
a wedged scheduler) keeps exporting its last values: Prometheus scrapes them on time, so they
look fresh, and a queue of 15 that no longer exists would keep asking for replicas. Such a
pod's values are recognised by two facts together, never by one alone:

- **no sign of engine steps**: the rates of ``vllm:prompt_tokens_total`` and
  ``vllm:generation_tokens_total`` over ``W`` (the throughput query) are both exactly 0, and
  the pod's KV-cache usage and running requests are the same as on the previous poll. A
  busy engine produces tokens on every step, so a busy pod never qualifies, whatever its
  gauges do (a KV cache steady at 0.9 while tokens flow is load, not a frozen gauge). The
  token counters alone are not enough: vLLM counts a request's prompt tokens once its first
  token is out, so a chunked prefill of a very long prompt (200,000 tokens) shows no token
  for longer than the rate window while every step allocates KV blocks; a KV cache that
  grows or shrinks, or a running batch that changes, is an engine that steps;
- **load claimed**: waiting, running or KV cache above 0. An idle pod reports 0 waiting,
  0 running and an empty KV cache for hours with zero tokens: that is consistent, not
  frozen.

On :data:`STALL_POLLS` consecutive polls that both hold for a pod:

- **frozen** (:attr:`StallKind.FROZEN`): its waiting, running and KV-cache values are equal
  as floats on every one of them (bit-identical: the exact values Prometheus wrote);
- **hung** (:attr:`StallKind.HUNG`): otherwise (only the queue moved), when requests wait on
  every one of them and the queue on the last is at least the queue on the first: requests
  arrive or stay, and the engine serves none of them.

Any other poll (tokens flow, a rate or value unknown or invalid, no load claimed) clears the
pod's history, so one good poll ends a stall, and missing data never makes one. Frozen and
hung pods count as zero load in the readings (:mod:`.readings`: their queue is not demand
that more replicas could serve, and a hung queue that keeps growing would otherwise grow the
fleet without bound) and block scale-down, because what they really hold is unknown.

Where the memory lives: a :class:`PodHistory` per pod (at most :data:`STALL_POLLS` value
triples, only for pods currently quiet while claiming load) is carried from one poll to the
next by whoever polls: :class:`~scaler.sources.prometheus.PrometheusSource` keeps the
histories of its last read and hands them to the next (the backtest threads them through
its replay the same way). It is the source's state, not the decision state: it judges
whether a reading can be trusted, as ``nan`` or ``partial`` do, and the decision core only
sees the resulting status. It is not persisted with the decision state on the Lease: it is
per pod (thousands in a large fleet, against the annotation's few hundred bytes per target),
the follower replica runs the same reads every cycle so its histories are as warm as the
leader's at a takeover, and after a restart of both the detector needs
:data:`STALL_POLLS` polls again, during which a frozen pod counts as it did before (bounded
by the step limits and the maximum).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

from scaler.sources.prometheus.throughput import PodRates

__all__ = [
    "STALL_POLLS",
    "PodGauges",
    "PodHistory",
    "PodStall",
    "StallKind",
    "track_stalls",
]

#: Consecutive polls with no token while load is claimed before a pod is frozen or hung.
#: With the rate window W, a pod is judged after no token for at least W plus two intervals
#: (3 polls: values unchanged across two intervals, not one poll that read the same scrape).
STALL_POLLS = 3


class StallKind(StrEnum):
    """How a pod's readings stopped meaning anything (see the module docstring)."""

    FROZEN = "frozen"
    HUNG = "hung"


@dataclass(frozen=True, slots=True)
class PodGauges:
    """One pod's gauges in one poll, as the per-pod queries read them (summed over engines;
    KV cache the max over engines, a 0-1 ratio).

    ``waiting`` or ``kv_cache`` is None when the target does not read that signal.
    """

    waiting: float | None
    running: float
    kv_cache: float | None

    @property
    def claims_load(self) -> bool:
        """Some request waiting or running, or some KV cache in use."""
        return (self.waiting or 0.0) > 0 or self.running > 0 or (self.kv_cache or 0.0) > 0

    def describe(self) -> str:
        """``waiting 15, running 106, KV cache 0.904``."""
        parts = []
        if self.waiting is not None:
            parts.append(f"waiting {self.waiting:g}")
        parts.append(f"running {self.running:g}")
        if self.kv_cache is not None:
            parts.append(f"KV cache {self.kv_cache:g}")
        return ", ".join(parts)


@dataclass(frozen=True, slots=True)
class PodHistory:
    """One pod's run of consecutive quiet polls that claimed load.

    Attributes:
        recent: the gauges of the last :data:`STALL_POLLS` of them, oldest first.
        polls: how many there have been in a row.
    """

    recent: tuple[PodGauges, ...] = ()
    polls: int = 0


@dataclass(frozen=True, slots=True)
class PodStall:
    """A pod whose readings are frozen or hung this poll.

    Attributes:
        pod: the pod name.
        kind: frozen or hung.
        polls: consecutive polls with no token while load was claimed.
        gauges: its gauges in this poll.
        first: its gauges on the first of the last :data:`STALL_POLLS` polls.
    """

    pod: str
    kind: StallKind
    polls: int
    gauges: PodGauges
    first: PodGauges

    def describe(self) -> str:
        """One clause for messages and logs."""
        if self.kind is StallKind.FROZEN:
            return (
                f"pod {self.pod} frozen: {self.gauges.describe()} unchanged for {self.polls} "
                "polls with no token produced"
            )
        return (
            f"pod {self.pod} hung: queue {self.first.waiting or 0:g} -> "
            f"{self.gauges.waiting or 0:g} over {STALL_POLLS} polls with no token produced"
        )


def _valid(value: float | None) -> bool:
    return value is None or (math.isfinite(value) and value >= 0)


def _advance(
    history: PodHistory | None, gauges: PodGauges | None, rates: PodRates | None
) -> PodHistory | None:
    """The pod's history after this poll, or None when this poll ends (or is no) run."""
    if gauges is None or rates is None:
        return None  # unknown: no evidence either way
    if not (_valid(gauges.waiting) and _valid(gauges.running) and _valid(gauges.kv_cache)):
        return None
    if rates.tokens_per_second != 0.0 or not gauges.claims_load:
        return None
    previous = history or PodHistory()
    if previous.recent and _steps_between(previous.recent[-1], gauges):
        return None  # the engine steps: a long prefill, not a stall
    recent = (*previous.recent, gauges)[-STALL_POLLS:]
    return PodHistory(recent, previous.polls + 1)


def _steps_between(before: PodGauges, now: PodGauges) -> bool:
    """Whether the engine stepped between two polls with no token counted: its KV-cache usage
    or its running requests moved (vLLM sets both from the scheduler at each step)."""
    return before.kv_cache != now.kv_cache or before.running != now.running


def _judge(pod: str, history: PodHistory) -> PodStall | None:
    recent = history.recent
    if len(recent) < STALL_POLLS:
        return None
    last, first = recent[-1], recent[0]
    if all(g == last for g in recent):
        return PodStall(pod, StallKind.FROZEN, history.polls, last, first)
    waits = [g.waiting for g in recent]
    if all(w is not None and w > 0 for w in waits) and (last.waiting or 0) >= (first.waiting or 0):
        return PodStall(pod, StallKind.HUNG, history.polls, last, first)
    return None


def track_stalls(
    previous: Mapping[str, PodHistory],
    gauges: Mapping[str, PodGauges],
    rates: Mapping[str, PodRates],
) -> tuple[dict[str, PodHistory], dict[str, PodStall]]:
    """Advance one target's pod histories by one poll and judge each pod.

    Args:
        previous: pod -> its history after the previous poll (pods absent: none).
        gauges: ready pod -> its gauges this poll (pods whose values are unknown or faulty
            absent).
        rates: ready pod -> its throughput this poll (pods without usable rates absent).

    Returns:
        ``(histories, stalls)``: the histories to hand to the next poll (only pods with a
        run in progress), and the ready pods that are frozen or hung now.
    """
    histories: dict[str, PodHistory] = {}
    stalls: dict[str, PodStall] = {}
    for pod, g in gauges.items():
        h = _advance(previous.get(pod), g, rates.get(pod))
        if h is None:
            continue
        histories[pod] = h
        stall = _judge(pod, h)
        if stall is not None:
            stalls[pod] = stall
    return histories, stalls
