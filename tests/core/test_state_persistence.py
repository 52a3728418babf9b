"""The persisted decision state: compaction changes no decision, encoding round-trips, and
a resumed state continues (recent save) or is re-seeded (stale save)."""

from __future__ import annotations

import json
import random

import pytest

from scaler.config.policy import TargetPolicy
from scaler.core.capacity import CapacityEstimate, CapacityMemory
from scaler.core.forecast import DemandForecast
from scaler.core.load_time import LoadTimes
from scaler.core.observation import Observation, ReplicaCounts
from scaler.core.signals import SignalName, SignalReading, SignalStatus
from scaler.core.state import (
    Recommendation,
    ScaleEvent,
    TargetState,
    compact,
    decode_state,
    encode_state,
    resume,
)
from tests.core.builders import decide
from tests.support.fakeprom import target


def _obs(current: int, waiting: float) -> Observation:
    return Observation(
        ReplicaCounts(current=current, status=current, ready=current),
        {
            SignalName.QUEUE_DEPTH: SignalReading(
                SignalName.QUEUE_DEPTH, SignalStatus.OK, value=waiting, pods_with_data=current
            )
        },
    )


POLICY: TargetPolicy = target(
    signals={"kv_cache_usage": {"enabled": False}, "ttft_p95": {"enabled": False}},
    max_replicas=20,
)


def test_compaction_changes_no_decision() -> None:
    rng = random.Random(7)
    full: TargetState | None = None
    packed: TargetState | None = None
    current = 4
    for i in range(200):
        now = 1000.0 + 15 * i
        obs = _obs(current, rng.choice([0, 5, 10, 40, 80, 120]))
        a = decide(POLICY, obs, full, now)
        b = decide(POLICY, obs, packed, now)
        assert (a.desired_replicas, a.reason) == (b.desired_replicas, b.reason), i
        full, packed = a.state, compact(b.state)
        assert len({r.replicas for r in packed.recommendations}) == len(packed.recommendations)
        current = a.desired_replicas


def test_encode_decode_round_trip() -> None:
    s = TargetState(
        recommendations=(Recommendation(10.0, 4), Recommendation(20.0, 2)),
        scale_events=(ScaleEvent(15.0, 4, 3),),
        last_written_replicas=3,
        last_rewrite_at=None,
        last_starting_at=12.5,
    )
    text = json.dumps(encode_state(s))
    assert decode_state(json.loads(text)) == s
    # a state saved before last_starting_at existed decodes with None
    old = {k: v for k, v in encode_state(s).items() if k != "st"}
    assert decode_state(old).last_starting_at is None
    with pytest.raises(ValueError):
        decode_state({"r": [["x"]]})
    with pytest.raises(ValueError):
        decode_state([1])


def test_the_capacity_memory_round_trips_and_old_states_still_load() -> None:
    """The learned capacity, the demand forecast and the model load times travel with the
    state, so a new leader does not relearn; a state saved before they existed loads with
    nothing learned; a corrupt value is refused, not guessed."""
    s = TargetState(
        recommendations=(Recommendation(10.0, 4),),
        capacity=CapacityMemory(
            CapacityEstimate(12_345.5, 17, 900.0),
            DemandForecast(80_000.0, -2.5, 4e6, 915.0, 60),
            served=9_876.5,
        ),
        load_times=LoadTimes(recent=(118.0, 121.5, 130.0), watching=frozenset({"vllm-x-1"})),
    )
    encoded = encode_state(s)
    assert encoded["cs"] == 9_876.5
    assert decode_state(json.loads(json.dumps(encoded))) == s
    old = {k: v for k, v in encoded.items() if k not in ("c", "d", "l", "lw", "cs")}
    assert decode_state(old) == TargetState(recommendations=s.recommendations)
    assert set(encode_state(decode_state(old))) == {"r", "e", "w", "rw", "st"}
    for key, value in (
        ("c", [-1.0, 3, None]),
        ("c", [1.0]),
        ("d", [1, 2, 3]),
        ("l", [1e400]),
        ("cs", 0),
        ("df", [float("nan"), 70_000.0]),  # a NaN fall start would shorten the window at once
    ):
        with pytest.raises(ValueError):
            decode_state({**encoded, key: value})


def test_resume_continues_a_recent_save_and_reseeds_a_stale_one() -> None:
    s = TargetState(recommendations=(Recommendation(100.0, 4), Recommendation(110.0, 1)))
    assert resume(s, saved_at=110.0, current_replicas=4, now=130.0, max_gap=45.0) == s
    stale = resume(s, saved_at=110.0, current_replicas=4, now=1000.0, max_gap=45.0)
    assert stale.recommendations[-1] == Recommendation(1000.0, 4)
    # the stale history is pruned away, but the seed keeps a restart from scaling down at once
    d = decide(POLICY, _obs(4, 0), stale, 1000.0)
    assert d.desired_replicas == 4 and d.reason == "stabilized"
