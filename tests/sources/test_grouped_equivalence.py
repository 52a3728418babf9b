"""A namespace group's series reach each target as a plain scan of the whole group gives them.

The source looks a target's own pods up by name and scans only the group's stray series (the
fast path for 1,000 targets); this checks it against the obvious scan on random fleets with
not-ready and terminating pods, gone pods, series without a namespace label, pods of other
namespaces and names that are prefixes of one another.
"""

from __future__ import annotations

import re
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
            ("", "a-h9-old"),
            ("other", "a-h0-p0"),  # the same pod name in another namespace
            (NS, "zzz-1-2"),  # nobody's pod
            (NS, "ab-h7-old"),
        ]
    ),
    max_size=3,
    unique=True,
)


def _snapshots(
    fleet: dict[str, tuple[str, ...]],
) -> tuple[list[TargetPolicy], dict[str, WorkloadSnapshot], list[tuple[str, str]]]:
    targets, snaps, series = [], {}, []
    for name, states in fleet.items():
        t = target(name)
        targets.append(t)
        pods = []
        for i, state in enumerate(states):
            pod = f"{name}-h{i % 2}-p{i}"
            series.append((NS, pod))
            if state != "gone":
                pods.append(PodInfo(pod, state != "not_ready", state == "terminating", 60.0))
        snaps[t.key] = WorkloadSnapshot(NS, len(pods), len(pods), f"app={name}", "1", tuple(pods))
    return targets, snaps, series


def _reference(
    t: TargetPolicy,
    snap: WorkloadSnapshot,
    group: dict[tuple[str, str], float],
    known: set[tuple[str, str]],
) -> tuple[float, Counter[tuple[str, DropReason]], int]:
    """The plain scan: every series of the group, in order."""
    own = re.compile(t.pod_name_regex())
    pods = {p.name: p for p in snap.pods}
    ready = snap.ready_pod_names
    total, dropped, found = 0.0, Counter[tuple[str, DropReason]](), 0
    values: dict[str, float] = {}
    for (series_ns, pod), value in sorted(group.items()):
        ns = series_ns or NS
        if ns == NS and (pod in pods or ((ns, pod) not in known and own.fullmatch(pod))):
            found += 1
        if ns == NS and pod in ready:
            values[pod] = value
        elif ns == NS and pod in pods:
            info = pods[pod]
            dropped[
                (pod, DropReason.TERMINATING if info.terminating else DropReason.NOT_READY)
            ] += 1
        elif (ns, pod) not in known and ns == NS and own.fullmatch(pod):
            dropped[(pod, DropReason.UNKNOWN_POD)] += 1
    total = sum(values.values())
    return total, dropped, found


@settings(max_examples=300, deadline=None)
@given(fleet=_fleet, extra=_extra)
def test_fast_path_equals_the_plain_scan(
    fleet: dict[str, tuple[str, ...]], extra: list[tuple[str, str]]
) -> None:
    targets, snaps, series = _snapshots(fleet)
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
    readings = read_targets(targets, snaps, plan, split_answers(answers), rate_window_seconds=60)
    known = {(NS, p.name) for s in snaps.values() for p in s.pods}
    for t in targets:
        total, dropped, found = _reference(t, snaps[t.key], group, known)
        r = readings[t.key]
        got = Counter((d.pod, d.reason) for d in r.dropped if d.query is QueryKind.WAITING)
        assert got == dropped, t.key
        assert r.series_found[QueryKind.WAITING] == found, t.key
        queue = r.signals[SignalName.QUEUE_DEPTH]
        if snaps[t.key].ready_pod_names and total:
            assert queue.value == total, t.key
