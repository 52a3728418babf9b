"""Helpers for decision-core tests: readings, observations and ``decide`` with the default
TTFT window (the policy comes from :mod:`tests.support.policies`)."""

from __future__ import annotations

from scaler.config.policy import Policy, TargetPolicy
from scaler.config.vocabulary import SignalName
from scaler.core import decide as core
from scaler.core.observation import Observation, ReplicaCounts
from scaler.core.signals import SignalReading, SignalStatus
from scaler.core.state import TargetState

Q = SignalName.QUEUE_DEPTH
KV = SignalName.KV_CACHE_USAGE
TTFT = SignalName.TTFT_P95


#: The policy file's default ``rate_window_seconds``: the TTFT window of these tests.
RATE_WINDOW_SECONDS: float = Policy.model_fields["rate_window_seconds"].default


def decide(
    policy: TargetPolicy,
    observation: Observation,
    state: TargetState | None,
    now: float,
    *,
    ttft_window_seconds: float = RATE_WINDOW_SECONDS,
) -> core.Decision:
    """:func:`scaler.core.decide.decide`, by default with the policy file's default TTFT window."""
    return core.decide(policy, observation, state, now, ttft_window_seconds=ttft_window_seconds)


def ok(name: SignalName, value: float, *, pods: int = 0, missing: int = 0) -> SignalReading:
    status = SignalStatus.PARTIAL if missing else SignalStatus.OK
    return SignalReading(name, status, value, pods_with_data=pods, pods_missing=missing)


def bad(name: SignalName, status: SignalStatus) -> SignalReading:
    return SignalReading(name, status, None, detail=f"test {status}")


def idle_ttft() -> SignalReading:
    return SignalReading(TTFT, SignalStatus.IDLE, 0.0)


def obs(
    current: int,
    *readings: SignalReading,
    ready: int | None = None,
    starting: int = 0,
    stuck: int = 0,
    terminating: int = 0,
) -> Observation:
    counts = ReplicaCounts(
        current=current,
        status=current,
        ready=current - starting - stuck if ready is None else ready,
        starting=starting,
        stuck=stuck,
        terminating=terminating,
    )
    return Observation(counts, {r.name: r for r in readings})
