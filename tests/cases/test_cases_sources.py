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

import json
from dataclasses import dataclass
from io import StringIO
from typing import Any

import pytest

from scaler.config.policy import Policy, parse_policy
from scaler.config.settings import Settings
from scaler.controller.app import RunOptions, StartupError, serve
from scaler.controller.report import TargetReport, report_json
from scaler.core.reasons import Reason
from scaler.sources.prometheus import check_rate_window
from scaler.sources.promql import QueryKind, pod_group
from tests.support.controller_harness import (
    KEY,
    NS,
    T0,
    Harness,
    HarnessFactory,
    captured_logs,
    decision_of,
)
from tests.support.fakeprom import (
    Histograms,
    R,
    case_file,
    fleet,
    histograms,
    kind_of,
    kv,
    per_pod,
    pods,
)
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
        d = decision_of(report)
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


# --- 18: TTFT p95 pinned to the top finite histogram bucket ------------------------------


THREE = pods(3)


def _case_18_harness_answers(
    buckets: dict[str, float], *, waiting: str = "10", kv_each: str = "0.8", native: bool = False
) -> dict[str, Any]:
    """Queue and KV exactly on their targets (10 per replica, 0.8) unless told; the case's
    per-le TTFT bucket rates on pod-0 (the other pods had no first token in the window)."""
    quiet = {le: 0.0 for le in buckets}
    return {
        "waiting": per_pod(dict.fromkeys(THREE, waiting)),
        "running": per_pod(dict.fromkeys(THREE, "4")),
        "kv_cache": kv(dict.fromkeys(THREE, kv_each)),
        **histograms(Histograms({"pod-0": buckets, "pod-1": quiet, "pod-2": quiet}, native=native)),
    }


CASE_18 = {"5.0": 2.0, "7.5": 2.0, "10.0": 3.0, "+Inf": 40.0}


def _case_18_policy(slo: float, **target: Any) -> Policy:
    """The cases' targets (10 waiting per replica, KV 0.8) with a TTFT SLO of ``slo`` s."""
    signals = {
        "queue_depth": {"target_per_replica": 10},
        "kv_cache_usage": {"target_ratio": 0.8},
        "ttft_p95": {"target_seconds": slo},
    }
    return policy_of(signals=signals, **target)


@pytest.mark.parametrize(
    ("buckets", "slo", "native"),
    [
        pytest.param(CASE_18, 8.0, False, id="case input: early V1 buckets end at 10 s, SLO 8 s"),
        pytest.param(
            {"0.5": 0.0, "1.0": 1.0, "2.0": 2.0, "+Inf": 20.0}, 1.5, False,
            id="custom buckets ending at 2 s, SLO 1.5 s",
        ),
        pytest.param({"10.0": 1.0, "+Inf": 40.0}, 8.0, False, id="a single finite bucket"),
        pytest.param(CASE_18, 8.0, True, id="native histogram with custom buckets (NHCB)"),
    ],
)  # fmt: skip
async def test_case_18_a_quantile_clamped_to_the_top_bucket_takes_the_largest_step(
    make_harness: HarnessFactory, buckets: dict[str, float], slo: float, native: bool
) -> None:
    """Case 18: a quantile clamped to the top finite bucket is a lower bound: the largest step."""
    case_file("18-ttft-at-top-bucket.md")
    top = max(float(le) for le in buckets if le != "+Inf")
    policy = _case_18_policy(slo)
    h = await make_harness(replicas=3, ready=THREE, policy=policy)
    h.fake.set(**_case_18_harness_answers(buckets, native=native))
    with captured_logs() as logs:
        report = await h.cycle()
    d = decision_of(report)
    assert status_of(report, TTFT) == "saturated"
    assert value_of(report, TTFT) == top  # what histogram_quantile answers: a lower bound
    # the largest step a latency signal may take (2 x 3 ready), not 3 x top / SLO
    assert (d.current_replicas, d.desired_replicas, d.reason) == (3, 6, Reason.SCALE_UP)
    assert str(d.driving_signal) == TTFT
    assert f"ttft_p95 >= {top:.3g}" in d.message
    assert h.replicas() == 6 and len(h.patches()) == 1
    assert h.target_value("vllm_scaler_histogram_top_bucket_too_low", signal=TTFT) == 1
    assert h.signal_status(TTFT) == "saturated" and h.signal_valid(TTFT) == 1
    [warning] = [e for e in logs if e["event"] == "histogram_top_bucket_too_low"]
    assert warning["log_level"] == "warning" and warning["top_bucket_seconds"] == top
    assert "raise the histogram's top bucket" in warning["message"]


async def test_case_18_a_rank_exactly_at_the_top_bucket_is_a_value_not_a_bound(
    make_harness: HarnessFactory,
) -> None:
    """Case 18: a rank that the top finite bucket holds is interpolated, not a lower bound."""
    case_file("18-ttft-at-top-bucket.md")
    policy = _case_18_policy(8.0)
    h = await make_harness(replicas=3, ready=THREE, policy=policy)
    # 38 of 40 first tokens within 10 s: the 0.95 rank (38) is the top finite bucket's count
    h.fake.set(**_case_18_harness_answers({"5.0": 2.0, "7.5": 2.0, "10.0": 38.0, "+Inf": 40.0}))
    report = await h.cycle()
    d = decision_of(report)
    assert status_of(report, TTFT) == "ok" and value_of(report, TTFT) == 10.0
    assert (d.desired_replicas, d.reason) == (4, Reason.SCALE_UP)  # ceil(3 x 10 / 8)
    assert h.target_value("vllm_scaler_histogram_top_bucket_too_low", signal=TTFT) == 0


async def test_case_18_a_bound_below_its_target_holds_and_blocks_scale_down(
    make_harness: HarnessFactory,
) -> None:
    """Case 18: a lower bound below its target tells nothing: it never allows a scale-down."""
    case_file("18-ttft-at-top-bucket.md")
    policy = _case_18_policy(  # an SLO above the histogram's top bucket
        20.0, scale_down={"stabilization_window_seconds": 0, "max_replicas_per_period": 1}
    )
    h = await make_harness(replicas=3, ready=THREE, policy=policy)
    h.fake.set(**_case_18_harness_answers(CASE_18, waiting="0", kv_each="0.1"))
    report = await h.cycle()
    d = decision_of(report)
    assert status_of(report, TTFT) == "saturated"
    assert (d.desired_replicas, d.reason) == (3, Reason.SCALE_DOWN_BLOCKED_MISSING_SIGNAL)
    assert "ttft_p95 saturated (at least 10 s" in d.message
    assert h.patches() == []


# --- 22: native histograms: the _bucket series are gone ----------------------------------


FOUR = pods(4)


def _idle_native(names: list[str]) -> dict[str, Any]:
    native = histograms(Histograms(dict.fromkeys(names, idle_histogram()), native=True))
    return fleet(names, waiting="0", running="0", kv_cache="0.0", ttft=native)


async def test_case_22_an_idle_fleet_on_native_histograms_scales_down_after_the_window(
    make_harness: HarnessFactory,
) -> None:
    """Case 22: TTFT read from native histograms; an idle fleet goes to min after the window."""
    case_file("22-native-histograms.md")
    live = list(FOUR)
    h = await make_harness(replicas=4, ready=live, answers=_idle_native(live))
    timeline: list[tuple[float, int, Reason]] = []
    for i in range(25):  # 25 cycles of 30 s
        report = await (h.next_cycle() if i else h.cycle())
        d = decision_of(report)
        assert status_of(report, TTFT) == "idle"
        assert report.readings is not None
        assert report.readings.ttft_metric == "vllm:time_to_first_token_seconds (native histogram)"
        timeline.append((h.clock.now - T0, h.replicas(), d.reason))
        if d.desired_replicas < len(live):  # the Deployment controller removes the pod
            h.store.delete_pod(NS, live.pop())
            h.fake.set(**_idle_native(live))
    assert all(r == 4 and why is Reason.STABILIZED for t, r, why in timeline if t < 300)
    assert timeline[10] == (300, 3, Reason.STEP_LIMITED)
    assert timeline[14] == (420, 1, Reason.AT_MIN)
    assert h.replicas() == 1 and len(h.patches()) == 3
    assert h.query_errors(TTFT, "absent") == 0
    info = {"representation": "native", "query": "none"}  # idle: no bucket asked for
    assert h.target_value("vllm_scaler_ttft_histogram_info", **info) == 1
    assert report_json(report)["ttft_metric"] == report.readings.ttft_metric


async def test_case_22_a_busy_target_on_native_histograms_reads_its_quantile(
    make_harness: HarnessFactory,
) -> None:
    """Case 22: with traffic the native histogram's quantile is read, for the target's pods."""
    case_file("22-native-histograms.md")
    h = await make_harness(replicas=4, ready=FOUR)
    native = histograms(Histograms(dict.fromkeys(FOUR, histogram_p95(1.0, 2.0)), native=True))
    h.fake.set(**fleet(FOUR, waiting="10", running="4", kv_cache="0.8", ttft=native))
    report = await h.cycle()
    assert status_of(report, TTFT) == "ok" and value_of(report, TTFT) == pytest.approx(1.0)
    info = {"representation": "native", "query": "raw"}
    assert h.target_value("vllm_scaler_ttft_histogram_info", **info) == 1


async def test_case_22_neither_representation_is_absent_naming_both(
    make_harness: HarnessFactory,
) -> None:
    """Case 22: with neither TTFT histogram representation the signal is absent, naming both."""
    case_file("22-native-histograms.md")
    h = await make_harness(replicas=4, ready=FOUR)
    h.fake.set(**fleet(FOUR, waiting="0", running="0", kv_cache="0.0", ttft={"ttft_rate": R()}))
    with captured_logs() as logs:
        report = await h.cycle()
    d = decision_of(report)
    assert status_of(report, TTFT) == "absent"
    assert d.reason is Reason.SCALE_DOWN_BLOCKED_MISSING_SIGNAL
    [error] = [e for e in logs if e["log_level"] == "error"]
    assert "vllm:time_to_first_token_seconds_bucket" in error["detail"]
    assert "vllm:time_to_first_token_seconds (native histogram)" in error["detail"]


# --- 23: a rate window no longer than the scrape interval --------------------------------


def _case_23_policy() -> Policy:
    return parse_policy(
        {"rate_window_seconds": 4, "targets": [case_target_doc()]}, source="case-policy"
    )


async def _recommend_once(h: Harness, out: StringIO, *, check_queries: bool) -> int:
    """``recommend --once --output json`` through :func:`serve`, on the harness' stand-ins."""
    settings = Settings(
        prometheus_url=h.prom.url, kubeconfig=h.kubeconfig, in_cluster=False, metrics_port=0
    )
    options = RunOptions(dry_run=True, once=True, output="json", check_queries=check_queries)
    return await serve(settings, h.policy, options, out=out, clock=h.clock)


async def _case_23_harness(make_harness: HarnessFactory) -> Harness:
    """The case's two busy pods, scraped every 4 s, and a 4 s rate window."""
    two = pods(2)
    h = await make_harness(replicas=2, ready=two, policy=_case_23_policy())
    _case_23_answers(h, two)
    return h


def _case_23_answers(h: Harness, names: list[str]) -> None:
    """Two busy pods (TTFT about 7 s), every 4 s a scrape: rate() over 4 s finds one sample."""
    h.fake.scrape_times = {p: [T0 - 180 + 4 * i for i in range(46)] for p in names}
    # the queue below target (the signals ask for less); rate(...[4s]) has fewer than two
    # samples: no TTFT series
    h.fake.set(**fleet(names, waiting="3", running="4", kv_cache="0.3", ttft={"ttft_rate": R()}))


async def test_case_23_start_names_the_window_the_interval_and_the_fix(
    make_harness: HarnessFactory,
) -> None:
    """Case 23: at start the scrape interval is found; a short window is reported with the fix."""
    case_file("23-rate-window-vs-scrape-interval.md")
    h = await _case_23_harness(make_harness)
    out = StringIO()
    with captured_logs() as logs:
        code = await _recommend_once(h, out, check_queries=False)
    assert code == 0
    [warning] = [e for e in logs if e["event"] == "rate_window_too_short"]
    assert (warning["rate_window_seconds"], warning["scrape_interval_seconds"]) == (4.0, 4.0)
    assert warning["minimum_seconds"] == 16.0
    assert "set rate_window_seconds to at least 16" in warning["message"]
    [obj] = json.loads(out.getvalue())
    [ttft] = [s for s in obj["signals"] if s["name"] == TTFT]
    assert ttft["status"] == "empty" and "4s rate window" in ttft["detail"]
    assert "scraped every 4s" in ttft["detail"]


async def test_case_23_recommend_fails_at_start_naming_the_window_not_a_missing_metric(
    make_harness: HarnessFactory,
) -> None:
    """Case 23: recommend's start-up check names the short window, not an absent metric."""
    case_file("23-rate-window-vs-scrape-interval.md")
    h = await _case_23_harness(make_harness)
    with pytest.raises(StartupError) as err:
        await _recommend_once(h, StringIO(), check_queries=True)
    text = str(err.value)
    assert text.startswith(
        f"{KEY}: signal ttft_p95 has no series (empty): no TTFT rate over the 4s rate window: "
    )
    assert "shorter than 4 scrape intervals" in text and "at least 16" in text
    assert "absent" not in text


async def test_case_23_at_run_time_ttft_names_the_window_and_scale_down_waits(
    make_harness: HarnessFactory,
) -> None:
    """Case 23: at run time TTFT is not called absent but names the window; no scale-down."""
    case_file("23-rate-window-vs-scrape-interval.md")
    h = await _case_23_harness(make_harness)
    snap = await h.actuator.read(h.policy.targets[0].workload)
    [problem] = await check_rate_window(h.source, h.policy.targets, {KEY: snap})
    assert (problem.rate_window_seconds, problem.scrape_interval_seconds) == (4.0, 4.0)
    with captured_logs() as logs:
        for i in range(5):
            report = await (h.next_cycle() if i else h.cycle())
            d = decision_of(report)
            assert status_of(report, TTFT) == "empty"
            assert d.reason is Reason.SCALE_DOWN_BLOCKED_MISSING_SIGNAL
            assert "the 4s rate window" in d.message and "at least 16" in d.message
    assert h.replicas() == 2 and h.patches() == []
    assert h.query_errors(TTFT, "empty") == 5 and h.query_errors(TTFT, "absent") == 0
    assert not [e for e in logs if e["log_level"] == "error"]  # no "absent" error
