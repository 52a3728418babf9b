"""Shared cases 18, 22, 23 and 24 (../shared/cases) through the real code path: what is asked of
Prometheus and how its series are attributed to targets.

The Kubernetes stand-in over HTTP with the real client holds the target and the other
workloads of its namespace; the fake Prometheus answers the first round's per-pod queries for
every vLLM pod of the namespace, as a namespace selector does, and the second round's TTFT
query from each pod's own histogram, summing exactly the pods (or recorded pod groups) the
query names (:class:`~tests.support.fakeprom.Histograms`): a wrong attribution shows in the
values, not only in the query text.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from scaler.config.policy import Policy, parse_policy
from scaler.controller.report import TargetReport
from scaler.core.reasons import Reason
from scaler.sources.promql import QueryKind, pod_group
from tests.support.controller_harness import (
    KEY,
    NS,
    Harness,
    HarnessFactory,
)
from tests.support.fakeprom import Histograms, case_file, histograms, kind_of, kv, per_pod
from tests.support.policies import case_target_doc

Q, KV, TTFT = "queue_depth", "kv_cache_usage", "ttft_p95"


def idle_histogram() -> dict[str, float]:
    """No first token in the window: every bucket's rate is 0."""
    return {"1.0": 0.0, "5.0": 0.0, "10.0": 0.0, "+Inf": 0.0}


def histogram_p95(p95: float, rate: float) -> dict[str, float]:
    """Bucket rates whose 0.95 quantile is exactly ``p95``, at ``rate`` first tokens/s."""
    return {"0.001": 0.0, repr(p95): 0.95 * rate, "+Inf": rate}


def policy_of(**target: Any) -> Policy:
    return parse_policy({"targets": [case_target_doc(**target)]}, source="case-policy")


def status_of(report: TargetReport, signal: str) -> str:
    assert report.decision is not None
    [e] = [e for e in report.decision.signals if e.name == signal]
    return str(e.status)


def value_of(report: TargetReport, signal: str) -> float | None:
    assert report.decision is not None
    [e] = [e for e in report.decision.signals if e.name == signal]
    return e.value


# --- 24: another workload's pods match the target's pod-name pattern ---------------------


@dataclass(frozen=True)
class Workload:
    """A workload in namespace llm: how to create it and its pods' names."""

    kind: str
    api_version: str
    name: str
    pods: tuple[str, ...]
    plural: str = ""

    @property
    def key(self) -> str:
        return f"{NS}/{self.kind}/{self.name}"

    def create(self, h: Harness) -> None:
        labels = {"app": self.name}  # the harness' Deployment llm/vllm selects app=vllm
        n = len(self.pods)
        group, _, version = self.api_version.rpartition("/")
        if self.kind == "Deployment" and self.name == "vllm":
            pass  # the harness' own Deployment llm/vllm
        elif self.kind in ("Deployment", "StatefulSet"):
            plural = self.kind.lower() + "s"
            h.store.add_workload(group, plural, NS, self.name, replicas=n, labels=labels)
        elif self.kind != "Pod":
            h.store.register_kind(group, version, self.kind, self.plural)
            h.store.add_workload(group, self.plural, NS, self.name, replicas=n, labels=labels)
        for pod in self.pods:
            h.store.add_pod(NS, pod, labels, ready=True, created_at=h.clock.now - 3600)


def _workload_doc(w: Workload) -> dict[str, Any]:
    ref: dict[str, Any] = {
        "apiVersion": w.api_version,
        "kind": w.kind,
        "namespace": NS,
        "name": w.name,
    }
    if w.plural:
        ref["plural"] = w.plural
    return ref


LONG = "llama-3-1-70b-instruct-awq-int4-tensor-parallel-8"  # 49 characters
# The ReplicaSet is <name>-<hash>; the API server cuts a generateName base at 58 characters
# before the random suffix, so the hash is cut short and no <name>-<hash>-<suffix> remains.
LONG_POD = f"{LONG}-7d9f8c6b5-"[:58] + "x2k9p"
VLLM_70B = Workload("StatefulSet", "apps/v1", "vllm-70b", ("vllm-70b-0",))

TARGETS = [
    pytest.param(
        Workload("Deployment", "apps/v1", "vllm", ("vllm-5d8f7c9b4-x2k9p", "vllm-5d8f7c9b4-q4m7z")),
        VLLM_70B,
        id="case input: Deployment vllm beside StatefulSet vllm-70b",
    ),
    pytest.param(
        Workload("StatefulSet", "apps/v1", "vllm", ("vllm-0", "vllm-1")),
        Workload("Pod", "v1", "vllm-7", ("vllm-7",)),
        id="StatefulSet vllm beside a bare pod vllm-7 (a debug copy)",
    ),
    pytest.param(
        Workload(
            "LeaderWorkerSet",
            "leaderworkerset.x-k8s.io/v1",
            "vllm",
            ("vllm-0", "vllm-0-1"),
            plural="leaderworkersets",
        ),
        VLLM_70B,
        id="LeaderWorkerSet vllm (leader and worker) beside StatefulSet vllm-70b",
    ),
    pytest.param(
        Workload(
            "InferenceService",
            "serving.example.com/v1",
            "vllm",
            ("vllm-predictor-7c9d8-x2k9p", "vllm-predictor-7c9d8-b7k2m"),
            plural="inferenceservices",
        ),
        VLLM_70B,
        id="a custom kind with /scale beside StatefulSet vllm-70b",
    ),
    pytest.param(
        Workload("Deployment", "apps/v1", LONG, (LONG_POD,)),
        Workload("StatefulSet", "apps/v1", f"{LONG}-7", (f"{LONG}-7-0",)),
        id="a Deployment whose pod names Kubernetes shortened",
    ),
]


async def _attribution_harness(
    make_harness: HarnessFactory,
    own: Workload,
    foreign: Workload,
    *,
    own_histogram: dict[str, float],
    recorded: bool = False,
    extra: Workload | None = None,
) -> Harness:
    policy = policy_of(workload=_workload_doc(own))
    h = await make_harness(replicas=len(own.pods), policy=policy)
    own.create(h)
    foreign.create(h)
    strangers = [*foreign.pods, *(extra.pods if extra else ())]
    if extra is not None:
        extra.create(h)
    every = [*own.pods, *strangers]
    h.fake.set(
        # the namespace's every vLLM pod, as the default namespace selector returns them
        waiting=per_pod({**dict.fromkeys(own.pods, "0"), **dict.fromkeys(strangers, "12")}),
        running=per_pod(dict.fromkeys(every, "4")),
        kv_cache=kv({**dict.fromkeys(own.pods, "0.0"), **dict.fromkeys(strangers, "0.9")}),
        **histograms(
            Histograms(
                {
                    **dict.fromkeys(own.pods, own_histogram),
                    **dict.fromkeys(strangers, histogram_p95(7.0, 5.0)),
                },
                recorded=recorded,
            )
        ),
    )
    return h


async def _one_cycle(h: Harness, key: str) -> TargetReport:
    reports = await h.controller.run_cycle()
    [report] = [r for r in reports if r.target == key]
    return report


@pytest.mark.parametrize(("own", "foreign"), TARGETS)
async def test_case_24_every_signal_reads_only_the_pods_the_api_lists_for_the_target(
    make_harness: HarnessFactory, own: Workload, foreign: Workload
) -> None:
    """Case 24: every signal is computed from exactly the pods the target's selector lists."""
    case_file("24-foreign-pods-by-name-prefix.md")
    h = await _attribution_harness(make_harness, own, foreign, own_histogram=idle_histogram())
    for cycle in range(2):
        if cycle:
            h.clock.advance(30)
        report = await _one_cycle(h, own.key)
        d = report.decision
        assert d is not None
        assert status_of(report, TTFT) == "idle"  # not the busy neighbour's 7 s
        assert (value_of(report, Q), value_of(report, KV)) == (0.0, 0.0)
        assert status_of(report, Q) == status_of(report, KV) == "ok"
        # idle: asks for 1, the scale-down window holds the replicas it has
        assert (d.current_replicas, d.desired_replicas) == (len(own.pods), len(own.pods))
        assert d.reason in (Reason.STABILIZED, Reason.AT_MIN)
        assert report.readings is not None and report.readings.dropped == ()
        assert h.value("vllm_scaler_stale_series_dropped_total", target=own.key) is None
    # idle: the second round (TTFT buckets) is not even asked
    assert QueryKind.TTFT_BUCKETS not in h.fake.kinds_asked()


@pytest.mark.parametrize(("own", "foreign"), TARGETS)
@pytest.mark.parametrize(
    "recorded",
    [
        pytest.param(False, id="raw buckets"),
        pytest.param(True, id="recording rules"),
    ],
)
async def test_case_24_busy_ttft_is_the_targets_own_raw_or_recorded(
    make_harness: HarnessFactory, own: Workload, foreign: Workload, recorded: bool
) -> None:
    """Case 24: a busy target's TTFT is its own pods' quantile, raw or from the recording rules."""
    case_file("24-foreign-pods-by-name-prefix.md")
    h = await _attribution_harness(
        make_harness, own, foreign, own_histogram=histogram_p95(1.0, 4.0), recorded=recorded
    )
    report = await _one_cycle(h, own.key)
    assert status_of(report, TTFT) == "ok"
    assert value_of(report, TTFT) == pytest.approx(1.0)  # the foreign pods' 7 s left out
    assert report.readings is not None
    # a recorded pod group is read only when it holds the target's pods alone (a bare pod
    # vllm-7 shares the group "vllm" of a StatefulSet vllm's pods)
    shared = {pod_group(p) for p in own.pods} & {pod_group(p) for p in foreign.pods}
    assert report.readings.ttft_query == ("recorded" if recorded and not shared else "raw")
    assert (
        h.value(
            "vllm_scaler_ttft_histogram_info",
            target=own.key,
            representation="classic",
            query=report.readings.ttft_query,
        )
        == 1
    )
    [asked] = [r["query"] for r in h.fake.requests if kind_of(r["query"]) is QueryKind.TTFT_BUCKETS]
    assert not any(p in asked for p in foreign.pods)  # never asked for the neighbour's pods


async def test_case_24_a_workload_sharing_the_pod_group_sends_the_target_to_raw_buckets(
    make_harness: HarnessFactory,
) -> None:
    """Case 24: a recorded pod group that also holds another workload's pod is not read."""
    own = Workload("Deployment", "apps/v1", "vllm", ("vllm-5d8f7c9b4-x2k9p",))
    # a StatefulSet named like the target's ReplicaSet: its pod is in the same pod group
    twin = Workload("StatefulSet", "apps/v1", "vllm-5d8f7c9b4", ("vllm-5d8f7c9b4-0",))
    h = await _attribution_harness(
        make_harness, own, VLLM_70B, own_histogram=histogram_p95(1.0, 4.0), recorded=True,
        extra=twin,
    )  # fmt: skip
    report = await _one_cycle(h, own.key)
    assert value_of(report, TTFT) == pytest.approx(1.0)  # the twin's 7 s is not the target's
    assert report.readings is not None and report.readings.ttft_query == "raw"


async def test_case_24_two_targets_sharing_a_name_prefix_read_their_own_pods(
    make_harness: HarnessFactory,
) -> None:
    """Case 24: targets vllm and vllm-70b, whose names share a prefix, each read only their own."""
    small = Workload("Deployment", "apps/v1", "vllm", ("vllm-5d8f7c9b4-x2k9p",))
    policy = parse_policy(
        {
            "targets": [
                case_target_doc(workload=_workload_doc(small)),
                case_target_doc(workload=_workload_doc(VLLM_70B)),
            ]
        }
    )
    h = await make_harness(replicas=1, policy=policy)
    small.create(h)
    VLLM_70B.create(h)
    h.fake.set(
        waiting=per_pod({"vllm-5d8f7c9b4-x2k9p": "0", "vllm-70b-0": "12"}),
        running=per_pod({"vllm-5d8f7c9b4-x2k9p": "1", "vllm-70b-0": "4"}),
        kv_cache=kv({"vllm-5d8f7c9b4-x2k9p": "0.0", "vllm-70b-0": "0.9"}),
        **histograms(
            Histograms(
                {"vllm-5d8f7c9b4-x2k9p": idle_histogram(), "vllm-70b-0": histogram_p95(7.0, 5.0)}
            )
        ),
    )
    reports = {r.target: r for r in await h.controller.run_cycle()}
    mine, theirs = reports[KEY], reports[VLLM_70B.key]
    assert status_of(mine, TTFT) == "idle" and value_of(mine, Q) == 0.0
    assert status_of(theirs, TTFT) == "ok" and value_of(theirs, TTFT) == pytest.approx(7.0)
    assert value_of(theirs, Q) == 12.0  # its own 12 waiting, none of vllm's
    assert mine.readings is not None and mine.readings.dropped == ()
    assert theirs.readings is not None and theirs.readings.dropped == ()
