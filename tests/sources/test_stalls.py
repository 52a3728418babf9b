"""The stall detector (scaler.sources.prometheus.stalls): which runs of polls freeze a pod or
call it hung, which never do, and the source's memory of them between reads."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scaler.core.signals import SignalStatus
from scaler.sources.prometheus import (
    STALL_POLLS,
    PodGauges,
    PodHistory,
    PodRates,
    PodStall,
    PrometheusSource,
    StallKind,
    track_stalls,
)
from tests.support.fakeprom import FakePrometheus, kv, per_pod, rates, snapshot, target

KEY = "llm/Deployment/vllm"
NO_TOKENS = PodRates(0.0, 0.0, 0.0)
SERVING = PodRates(1.0, 800.0, 200.0)
SourceFactory = Callable[..., PrometheusSource]


def g(waiting: float, running: float = 0.0, kv_cache: float = 0.0) -> PodGauges:
    return PodGauges(waiting=waiting, running=running, kv_cache=kv_cache)


def run(polls: Sequence[tuple[PodGauges | None, PodRates | None]]) -> list[PodStall | None]:
    """Feed one pod's polls in order; its verdict after each."""
    history: dict[str, PodHistory] = {}
    out: list[PodStall | None] = []
    for gauges, r in polls:
        history, stalls = track_stalls(
            history,
            {} if gauges is None else {"p": gauges},
            {} if r is None else {"p": r},
        )
        out.append(stalls.get("p"))
    return out


def kinds(verdicts: list[PodStall | None]) -> list[str | None]:
    return [None if v is None else str(v.kind) for v in verdicts]


@pytest.mark.parametrize(
    ("polls", "expected"),
    [
        pytest.param([(g(15, 106, 0.904), NO_TOKENS)] * 4, [None, None, "frozen", "frozen"],
                     id="case 17: identical, no token: frozen from the third poll"),
        pytest.param([(g(0, 0, 0.99), NO_TOKENS)] * 3, [None, None, "frozen"],
                     id="KV cache stuck near full: frozen"),
        pytest.param([(g(5 * i, 2), NO_TOKENS) for i in range(1, 5)],
                     [None, None, "hung", "hung"], id="queue growing, no token: hung"),
        # the running batch moves only when the engine steps (a long prefill counts no token)
        pytest.param([(g(7, r), NO_TOKENS) for r in (3, 2, 3)], [None, None, None],
                     id="queue flat while running moves, no token: steps, neither"),
        pytest.param([(g(7 + i, 3), NO_TOKENS) for i in range(3)], [None, None, "hung"],
                     id="queue growing while running and KV are still, no token: hung"),
        pytest.param([(g(15 - 5 * i, 1), NO_TOKENS) for i in range(3)], [None, None, None],
                     id="queue draining without tokens (cancelled): neither"),
        pytest.param([(g(5, 20, 0.9), SERVING)] * 5, [None] * 5,
                     id="busy pod with steady gauges: tokens flow"),
        pytest.param([(g(0, 0, 0.0), NO_TOKENS)] * 5, [None] * 5,
                     id="idle pod reporting zeros: claims no load"),
        pytest.param([(g(15, 106, 0.9), NO_TOKENS)] * 2 + [(g(15, 106, 0.9), SERVING)]
                     + [(g(15, 106, 0.9), NO_TOKENS)] * 3,
                     [None, None, None, None, None, "frozen"],
                     id="one poll with tokens starts the count over"),
        pytest.param([(g(15, 106, 0.9), NO_TOKENS)] * 2 + [(g(15, 106, 0.9), None)]
                     + [(g(15, 106, 0.9), NO_TOKENS)] * 2,
                     [None, None, None, None, None], id="rates unknown: no evidence, over"),
        pytest.param([(g(15, 106, 0.9), NO_TOKENS)] * 2 + [(None, NO_TOKENS)]
                     + [(g(15, 106, 0.9), NO_TOKENS)] * 2,
                     [None, None, None, None, None], id="values unknown: over"),
        pytest.param([(g(float("nan"), 1), NO_TOKENS)] * 4, [None] * 4,
                     id="a NaN value is never evidence"),
    ],
)  # fmt: skip
def test_which_runs_of_polls_are_stalls(
    polls: list[tuple[PodGauges | None, PodRates | None]], expected: list[str | None]
) -> None:
    assert kinds(run(polls)) == expected


def test_a_stall_counts_its_polls_and_describes_itself() -> None:
    verdicts = run([(g(15, 106, 0.904), NO_TOKENS)] * 21)
    last = verdicts[-1]
    assert last is not None and (last.kind, last.polls) == (StallKind.FROZEN, 21)
    assert last.describe() == (
        "pod p frozen: waiting 15, running 106, KV cache 0.904 unchanged for 21 polls with "
        "no token produced"
    )
    hung = run([(g(5 * i, 2), NO_TOKENS) for i in range(1, 6)])[-1]
    assert hung is not None
    assert hung.describe() == "pod p hung: queue 15 -> 25 over 3 polls with no token produced"


def test_memory_is_bounded_and_kept_only_for_pods_in_a_run() -> None:
    history, _ = track_stalls({}, {"a": g(1), "b": g(0)}, {"a": NO_TOKENS, "b": NO_TOKENS})
    assert set(history) == {"a"}  # b claims no load: nothing to remember
    for _ in range(50):
        history, _ = track_stalls(history, {"a": g(1)}, {"a": NO_TOKENS})
    assert len(history["a"].recent) == STALL_POLLS and history["a"].polls == 51
    history, _ = track_stalls(history, {}, {})  # the pod is gone
    assert history == {}


gauges = st.builds(
    PodGauges,
    waiting=st.sampled_from([0.0, 1.0, 15.0]),
    running=st.sampled_from([0.0, 3.0, 106.0]),
    kv_cache=st.sampled_from([0.0, 0.5, 0.99]),
)


@settings(max_examples=300, deadline=None)
@given(
    polls=st.lists(
        st.tuples(gauges, st.floats(min_value=1e-3, max_value=1e5)), min_size=1, max_size=12
    )
)
def test_a_pod_producing_tokens_on_every_poll_is_never_stalled(
    polls: list[tuple[PodGauges, float]],
) -> None:
    """Whatever its gauges do, a pod that produced a token in every window is never judged."""
    assert run([(gg, PodRates(0.0, 0.0, tokens)) for gg, tokens in polls]) == [None] * len(polls)


@settings(max_examples=200, deadline=None)
@given(n=st.integers(min_value=1, max_value=30))
def test_an_idle_pod_is_never_stalled(n: int) -> None:
    assert run([(g(0.0, 0.0, 0.0), NO_TOKENS)] * n) == [None] * n


def _frozen_answers(fake: FakePrometheus) -> None:
    fake.set(
        waiting=per_pod({"pod-0": "15", "pod-1": "0"}),
        running=per_pod({"pod-0": "106", "pod-1": "0"}),
        kv_cache=kv({"pod-0": "0.904", "pod-1": "0.0"}),
        throughput=rates({"pod-0": "0", "pod-1": "0"}),
    )


async def test_the_source_remembers_its_last_read_and_a_new_source_starts_fresh(
    fake_prom: FakePrometheus, make_source: SourceFactory
) -> None:
    _frozen_answers(fake_prom)
    snaps = {KEY: snapshot(["pod-0", "pod-1"])}
    source = make_source()
    for _ in range(STALL_POLLS):
        result = await source.read([target()], snaps)
    tr = result.targets[KEY]
    assert set(tr.stalled) == {"pod-0"}
    q = tr.signals[next(iter(tr.signals))]
    assert (q.status, q.value, q.pods_with_data) == (SignalStatus.FROZEN, 0.0, 1)
    assert tr.pod_load["pod-0"] == 0.0  # a scale-down would take it first

    fresh = await make_source().read([target()], snaps)  # a restarted controller
    assert fresh.targets[KEY].stalled == {}

    await source.read([target()], {})  # a cycle that could not read the target's pods
    again = await source.read([target()], snaps)
    assert again.targets[KEY].stalled == {}  # judged on consecutive polls only
