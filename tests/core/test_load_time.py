"""The model load time learned from a target's own pods (scaler.core.load_time), and the
startup guard it sets."""

from __future__ import annotations

import pytest

from scaler.core.load_time import (
    RECENT_STARTS,
    LoadTimes,
    observe_starts,
    startup_timeout_seconds,
)
from scaler.core.observation import PodInfo

TIMEOUT = 600.0


def _pod(name: str, *, ready: bool, age: float, since: float | None = None) -> PodInfo:
    return PodInfo(name, ready=ready, terminating=False, age_seconds=age, ready_seconds=since)


def test_a_watched_start_is_measured_from_creation_to_ready() -> None:
    """Seen starting, then seen ready: the time from creation to the Ready transition."""
    load = observe_starts(LoadTimes(), [_pod("a", ready=False, age=30.0)], max_seconds=TIMEOUT)
    assert load.watching == {"a"} and load.recent == ()
    load = observe_starts(load, [_pod("a", ready=True, age=170.0, since=35.0)], max_seconds=TIMEOUT)
    assert load.recent == (135.0,) and load.watching == frozenset()
    assert load.median_seconds == 135.0


def test_pods_ready_before_they_were_seen_teach_nothing() -> None:
    """A pod first seen ready (started before the controller, or restarted) is not a start."""
    load = observe_starts(
        LoadTimes(), [_pod("old", ready=True, age=86_400.0, since=80.0)], max_seconds=TIMEOUT
    )
    assert load == LoadTimes()


def test_an_unknown_ready_time_counts_the_age_and_slow_starts_are_clipped() -> None:
    """Without the condition's time the age at the first ready sighting is used (at most one
    interval long); a start slower than the model load timeout is recorded as the timeout."""
    load = LoadTimes(watching=frozenset({"a", "b"}))
    load = observe_starts(
        load,
        [_pod("a", ready=True, age=140.0), _pod("b", ready=True, age=2_000.0, since=100.0)],
        max_seconds=TIMEOUT,
    )
    assert sorted(load.recent) == [140.0, TIMEOUT]


def test_the_median_of_the_recent_starts_and_forgotten_pods() -> None:
    """The median of the last RECENT_STARTS starts; gone and terminating pods stop being
    watched."""
    load = LoadTimes(recent=(100.0,) * RECENT_STARTS, watching=frozenset({"gone", "t"}))
    draining = PodInfo("t", ready=False, terminating=True, age_seconds=50.0)
    for i in range(4):  # four slow starts: the median moves only when they are the majority
        load = observe_starts(load, [_pod(f"s{i}", ready=False, age=5.0)], max_seconds=TIMEOUT)
        load = observe_starts(
            load, [_pod(f"s{i}", ready=True, age=400.0, since=0.0), draining], max_seconds=TIMEOUT
        )
    assert len(load.recent) == RECENT_STARTS
    assert load.median_seconds == 400.0
    assert load.watching == frozenset()


@pytest.mark.parametrize(
    ("learned", "expected"),
    [
        pytest.param(None, TIMEOUT, id="nothing-learned-the-policy-timeout"),
        pytest.param(120.0, 360.0, id="three-times-the-load"),
        pytest.param(30.0, 150.0, id="at-least-two-minutes-more"),
        pytest.param(300.0, TIMEOUT, id="never-past-the-timeout"),
    ],
)
def test_startup_guard(learned: float | None, expected: float) -> None:
    """A pod not ready for 3x the learned load time (at least 2 minutes more than it, at most
    the policy's timeout) counts as stuck, not starting."""
    assert startup_timeout_seconds(TIMEOUT, learned) == expected
