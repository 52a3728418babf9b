"""A namespace group's series reach each target as a plain scan of the whole group gives them.

The source looks a target's own pods up by name (the fast path for 1,000 targets); this checks
it against the obvious scan of the whole group on random fleets with not-ready and terminating
pods, gone pods (listed earlier: the target's memory), series without a namespace label, pods
of other namespaces, strangers whose names fit a target's pod-name pattern, and names that are
prefixes of one another.
"""

from __future__ import annotations

from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from scaler.config.policy import TargetPolicy
from scaler.config.vocabulary import SignalName
from scaler.core.observation import PodInfo, WorkloadSnapshot
from scaler.core.signals import SignalStatus
from scaler.sources.prometheus import (
    Answer,
    DropReason,
    QueryOutcome,
    read_targets,
    split_answers,
)
from scaler.sources.promql import QueryKind, build_query_plan
from tests.support.fakeprom import target

NAMES = ("a", "ab", "b")  # "a" is a prefix of "ab": the pod patterns must still tell them apart
NS = "llm"

_pod_state = st.sampled_from(["ready", "not_ready", "terminating", "gone"])
_fleet = st.fixed_dictionaries({name: st.lists(_pod_state, max_size=4) for name in NAMES}).map(
    lambda d: {k: tuple(v) for k, v in d.items()}
)
_extra = st.lists(
    st.sampled_from(
        [
            ("", "a-h0-p0"),  # no namespace label: matched on the target's namespace
            ("", "a-h9-old"),  # fits a's pod-name pattern, never listed: nobody's
            ("other", "a-h0-p0"),  # the same pod name in another namespace
            (NS, "zzz-1-2"),  # nobody's pod
            (NS, "ab-h7-old"),
            (NS, "a-70b-0"),  # another workload's pod that fits a's Deployment pattern
        ]
    ),
    max_size=3,
    unique=True,
)


def _snapshots(
    fleet: dict[str, tuple[str, ...]],
) -> tuple[
    list[TargetPolicy],
    dict[str, WorkloadSnapshot],
    list[tuple[str, str]],
    dict[str, frozenset[str]],
]:
    targets, snaps, series, former = [], {}, [], {}
    for name, states in fleet.items():
        t = target(name)
        targets.append(t)
        pods, gone = [], set()
        for i, state in enumerate(states):
            pod = f"{name}-h{i % 2}-p{i}"
            series.append((NS, pod))
            if state == "gone":
                gone.add(pod)
            else:
                pods.append(PodInfo(pod, state != "not_ready", state == "terminating", 60.0))
        snaps[t.key] = WorkloadSnapshot(NS, len(pods), len(pods), f"app={name}", "1", tuple(pods))
        former[t.key] = frozenset(gone)
    return targets, snaps, series, former


def _reference(
    snap: WorkloadSnapshot,
    group: dict[tuple[str, str], float],
    gone: frozenset[str],
) -> tuple[float, Counter[tuple[str, DropReason]], int]:
    """The plain scan: every series of the group, in order; only the target's pods count."""
    pods = {p.name: p for p in snap.pods}
    ready = snap.ready_pod_names
    total, dropped, found = 0.0, Counter[tuple[str, DropReason]](), 0
    values: dict[str, float] = {}
    for (series_ns, pod), value in sorted(group.items()):
        ns = series_ns or NS
        if ns != NS or not (pod in pods or pod in gone):
            continue  # not the target's pod, whatever its name looks like
        found += 1
        if pod in ready:
            values[pod] = value
        elif pod in pods:
            info = pods[pod]
            dropped[
                (pod, DropReason.TERMINATING if info.terminating else DropReason.NOT_READY)
            ] += 1
        else:
            dropped[(pod, DropReason.GONE)] += 1
    total = sum(values.values())
    return total, dropped, found


@settings(max_examples=300, deadline=None)
@given(fleet=_fleet, extra=_extra)
def test_fast_path_equals_the_plain_scan(
    fleet: dict[str, tuple[str, ...]], extra: list[tuple[str, str]]
) -> None:
    targets, snaps, series, former = _snapshots(fleet)
    plan = build_query_plan(targets, rate_window_seconds=60)
    assert set(plan.selector_group.values()) == {"s0"}
    group = {key: float(i + 1) for i, key in enumerate(series + extra)}
    vector = [
        ({"namespace": ns, "pod": pod, "scaler_selector": "s0"} if ns else
         {"pod": pod, "scaler_selector": "s0"}, value)
        for (ns, pod), value in group.items()
    ]  # fmt: skip
    answers = {
        kind: Answer(QueryOutcome(kind, SignalStatus.OK, series=len(vector)), list(vector))
        for kind in (QueryKind.WAITING, QueryKind.RUNNING)
    }
    readings = read_targets(
        targets, snaps, plan, split_answers(answers), rate_window_seconds=60, former=former
    )
    for t in targets:
        total, dropped, found = _reference(snaps[t.key], group, former[t.key])
        r = readings[t.key]
        got = Counter((d.pod, d.reason) for d in r.dropped if d.query is QueryKind.WAITING)
        assert got == dropped, t.key
        assert r.series_found[QueryKind.WAITING] == found, t.key
        queue = r.signals[SignalName.QUEUE_DEPTH]
        if snaps[t.key].ready_pod_names and total:
            assert queue.value == total, t.key
