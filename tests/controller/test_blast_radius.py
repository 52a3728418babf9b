"""A fault in one target's data touches that target only, through the real code path.

Three Deployments in one namespace share every per-pod query (one selector group), the TTFT
request-rate query of the first round and the TTFT bucket query of the second. One series of
the middle target is broken (duplicated, with a value that is not a number, with a label map
that is not one); that target gets its own status for that signal, and the two others read
the same answers and decide as usual. No query fails as a whole.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from scaler.config.policy import parse_policy
from scaler.core.reasons import Reason
from scaler.core.signals import SignalStatus
from tests.support.controller_harness import NS, T0, Harness, HarnessFactory, captured_logs
from tests.support.fakeprom import (
    TS,
    Histograms,
    R,
    histograms,
    kv,
    per_pod,
    rates,
    sample,
    ttft_answers,
)
from tests.support.policies import case_target_doc

NAMES = ("vllm", "beta", "gamma")
KEYS = {n: f"llm/Deployment/{n}" for n in NAMES}
PODS = {n: [f"{n}-7d9f8-p{i}" for i in range(2)] for n in NAMES}
ALL = [p for n in NAMES for p in PODS[n]]
BROKEN = "beta"


def _policy() -> Any:
    docs = [
        case_target_doc(
            workload={"apiVersion": "apps/v1", "kind": "Deployment", "namespace": NS, "name": n}
        )
        for n in NAMES
    ]
    return parse_policy({"targets": docs}, source="blast-radius")


Edit = Callable[[list[dict[str, Any]]], None]
#: every pod's TTFT histogram: 1 first token/s, 95 % of them within 1 s (p95 exactly 1.0 s)
BUCKETS = {"1.0": 0.95, "+Inf": 1.0}


def healthy() -> dict[str, Any]:
    """30 waiting on each of 6 pods (60 per target: each asks for 6), tokens flowing."""
    return {
        "waiting": per_pod(dict.fromkeys(ALL, "30")),
        "running": per_pod(dict.fromkeys(ALL, "4")),
        "kv_cache": kv(dict.fromkeys(ALL, "0.5")),
        "throughput": rates(dict.fromkeys(ALL, ("2", "900", "300"))),
        **histograms(Histograms({p: dict(BUCKETS) for p in ALL})),
    }


def _with(kind: str, *extra: dict[str, Any]) -> Callable[[dict[str, Any]], None]:
    def apply(answers: dict[str, Any]) -> None:
        answers[kind]["data"]["result"].extend(extra)

    return apply


def _ttft(round_: str, edit: Edit) -> Callable[[dict[str, Any]], None]:
    """Both TTFT rounds from the pods' histograms, ``round_``'s answer edited."""

    def apply(answers: dict[str, Any]) -> None:
        def on(name: str, result: list[dict[str, Any]]) -> None:
            if name == round_:
                edit(result)

        answers.update(histograms(Histograms({p: dict(BUCKETS) for p in ALL}, edit=on)))

    return apply


def _broken_bucket_value(result: list[dict[str, Any]]) -> None:
    """The first of beta's bucket series gets a value that is not [time, value]."""
    i = next(i for i, s in enumerate(result) if s["metric"].get("scaler_target") == KEYS[BROKEN])
    result[i] = {"metric": result[i]["metric"], "value": [TS]}


BROKEN_POD = PODS[BROKEN][0]


def _waiting_of_broken_pod(value: str | None) -> Callable[[dict[str, Any]], None]:
    """beta's first pod's queue series with ``value``, or without one (None)."""

    def apply(answers: dict[str, Any]) -> None:
        result = answers["waiting"]["data"]["result"]
        keep = [s for s in result if s["metric"].get("pod") != BROKEN_POD]
        if value is not None:
            keep.append(sample(BROKEN_POD, value))
        answers["waiting"]["data"]["result"] = keep

    return apply


# fault -> (how one series of beta is broken, beta's signal, its status, beta's replicas, reason)
# Without its queue, beta scales on the capacity signal (on by default with TTFT): its busy
# pods at TTFT 1 s (half the target) are a first estimate of a replica's capacity, and the
# demand at utilization 0.85 asks for ceil(2 / 0.85) = 3.
FAULTS: dict[str, tuple[Callable[[dict[str, Any]], None], str, str, int, Reason]] = {
    "duplicate queue series": (
        _with("waiting", sample(BROKEN_POD, "31")),
        "queue_depth", "duplicate_series", 3, Reason.SCALE_UP,
    ),
    "queue label map that is not one": (
        _with("waiting", {"metric": {"pod": BROKEN_POD, "namespace": NS, "zone": 3},
                          "value": [TS, "30"]}),
        "queue_depth", "bad_response", 3, Reason.SCALE_UP,
    ),
    "KV value that is not a number": (
        _with("kv_cache", sample(PODS[BROKEN][1], "lots", __name__="vllm:kv_cache_usage_perc")),
        "kv_cache_usage", "bad_response", 6, Reason.SCALE_UP,
    ),
    "duplicate TTFT request rate of a pod": (
        _ttft("ttft_rate", lambda result: result.append(
            sample(BROKEN_POD, "1", namespace=NS, scaler_selector="s0",
                   scaler_histogram="classic"))),
        "ttft_p95", "duplicate_series", 6, Reason.SCALE_UP,
    ),
    "duplicate TTFT bucket": (
        _ttft("ttft_buckets", lambda result: result.append(
            {"metric": {"scaler_target": KEYS[BROKEN], "le": "1.0"}, "value": [TS, "9"]})),
        "ttft_p95", "duplicate_series", 6, Reason.SCALE_UP,
    ),
    "TTFT bucket value that is not [time, value]": (
        _ttft("ttft_buckets", _broken_bucket_value),
        "ttft_p95", "bad_response", 6, Reason.SCALE_UP,
    ),
    # one pod's NaN queue once failed every target's cycle (the capacity signal's demand)
    "NaN queue of a pod": (
        _waiting_of_broken_pod("NaN"), "queue_depth", "nan", 3, Reason.SCALE_UP,
    ),
    "negative queue of a pod": (
        _waiting_of_broken_pod("-1"), "queue_depth", "negative", 3, Reason.SCALE_UP,
    ),
    # the other pod's 30 waiting still ask for 3 (a missing pod counts as no load up)
    "a pod without a queue series": (
        _waiting_of_broken_pod(None), "queue_depth", "partial", 3, Reason.SCALE_UP,
    ),
}  # fmt: skip


def status_of(h: Harness, name: str, signal: str) -> str:
    found = [
        s.labels["status"]
        for metric in h.metrics.registry.collect()
        if metric.name == "vllm_scaler_signal_status"
        for s in metric.samples
        if s.labels["target"] == KEYS[name] and s.labels["signal"] == signal and s.value == 1
    ]
    assert len(found) == 1, found
    return found[0]


@pytest.mark.parametrize("fault", [pytest.param(f, id=f) for f in FAULTS])
async def test_one_broken_series_touches_only_its_own_target(
    make_harness: HarnessFactory, fault: str
) -> None:
    """A fault in one target's series gives that target its own status; the others scale."""
    breaks, signal, status, replicas, reason = FAULTS[fault]
    h = await make_harness(policy=_policy(), replicas=2)
    for n in NAMES:
        if n != "vllm":  # the harness made llm/vllm
            h.store.add_deployment(NS, n, 2, {"app": n})
        for p in PODS[n]:
            h.store.add_pod(NS, p, {"app": n}, ready=True, created_at=T0 - 3600)
    answers = healthy()
    breaks(answers)
    h.fake.set(**answers)

    reports = {r.target: r for r in await h.controller.run_cycle()}

    for n in NAMES:
        d = reports[KEYS[n]].decision
        assert d is not None
        got = (h.store.get_spec_replicas(NS, n), d.reason)
        if n == BROKEN:
            assert got == (replicas, reason), (n, d.message)
            assert status_of(h, n, signal) == status
            valid = 1 if SignalStatus(status).usable_for_scale_up else 0  # partial: scale-up
            assert h.value("vllm_scaler_signal_valid", target=KEYS[n], signal=signal) == valid
            others = {"queue_depth", "kv_cache_usage", "ttft_p95"} - {signal}
            assert {status_of(h, n, s) for s in others} == {"ok"}
            evaluation = next(e for e in d.signals if e.name == signal)
            assert evaluation.detail  # names the pod or target and what is wrong
        else:  # 60 waiting on 2 replicas: ceil(60 / 10) = 6, limited to 2 + 4
            assert got == (6, Reason.SCALE_UP), (n, d.message)
            for s in ("queue_depth", "kv_cache_usage", "ttft_p95"):
                assert status_of(h, n, s) == "ok"
    for kind in ("waiting", "kv_cache", "ttft_rate", "ttft_buckets", "running", "throughput"):
        assert h.value("vllm_scaler_last_successful_query_timestamp_seconds", signal=kind) == T0
    failures = [
        s
        for m in h.metrics.registry.collect()
        if m.name == "vllm_scaler_query_failures"
        for s in m.samples
    ]
    assert failures == []  # no query failed as a whole
    if reason is Reason.DEMAND_COVERED:  # the hold names what it could not use
        d = reports[KEYS[BROKEN]].decision
        assert d is not None and f"left out: {signal} {status} (pod {BROKEN_POD}" in d.message


async def test_a_series_that_names_no_target_is_counted_and_logged(
    make_harness: HarnessFactory,
) -> None:
    """A series that names no selector group is nobody's: left out, counted and logged."""
    h = await make_harness(replicas=2, ready=["pod-0", "pod-1"])
    stray = sample("pod-0", "500", scaler_target="elsewhere")  # the fake tags bare series only
    h.fake.set(
        waiting=R(*per_pod({"pod-0": "15", "pod-1": "5"})["data"]["result"], stray),
        running=per_pod({"pod-0": "1", "pod-1": "1"}),
        kv_cache=kv({"pod-0": "0.5", "pod-1": "0.5"}),
        **ttft_answers("1.0", "2"),
    )
    with captured_logs() as logs:
        r = await h.cycle()
    assert r.decision is not None and r.decision.signals[0].value == 10.0  # 20 over 2
    assert h.count("vllm_scaler_unattributed_series_total", query="waiting") == 1
    warned = [e for e in logs if e["event"] == "series_unattributed"]
    assert len(warned) == 1 and warned[0]["count"] == 1 and "elsewhere" in warned[0]["first"]


def _no_selector(h: Harness) -> None:
    """beta's scale subresource answers no selector (case 27)."""
    h.store.set_scale_selector(NS, BROKEN, "")


def _another_workloads_pods(h: Harness) -> None:
    """beta's selector also picks the pods of another workload, ``beta-canary`` (case 28):
    every pod is owned through its ReplicaSet; the canary's pods wait 90 each."""
    from scaler.sim.kubeapi import owner_reference

    for n in NAMES:
        rs = h.store.add_workload(
            "apps", "replicasets", NS, f"{n}-7d9f8", replicas=2, labels={"app": n},
            owner=owner_reference(h.store.get_workload(NS, n)),
        )  # fmt: skip
        for p in PODS[n]:
            h.store.delete_pod(NS, p)
            h.store.add_pod(NS, p, {"app": n}, ready=True, created_at=T0 - 3600,
                            owner=owner_reference(rs))  # fmt: skip
    canary = h.store.add_deployment(NS, "beta-canary", 1, {"app": BROKEN, "track": "canary"})
    rs = h.store.add_workload(
        "apps", "replicasets", NS, "beta-canary-5c6d7", replicas=1,
        labels={"app": BROKEN, "track": "canary"}, owner=owner_reference(canary),
    )  # fmt: skip
    h.store.add_pod(NS, "beta-canary-5c6d7-q1", {"app": BROKEN, "track": "canary"},
                    ready=True, created_at=T0 - 3600, owner=owner_reference(rs))  # fmt: skip


#: fault -> (how beta's Kubernetes side is broken, its reason, its queue per replica or None)
KUBE_FAULTS: dict[str, tuple[Callable[[Harness], None], Reason, float | None]] = {
    "beta's scale subresource has no selector": (_no_selector, Reason.SELECTOR_REQUIRED, None),
    "beta's selector picks another workload's pods": (
        _another_workloads_pods,
        Reason.SCALE_UP,
        30.0,
    ),
}


@pytest.mark.parametrize("fault", [pytest.param(f, id=f) for f in KUBE_FAULTS])
async def test_one_targets_kubernetes_fault_touches_only_it(
    make_harness: HarnessFactory, fault: str
) -> None:
    """A fault on one target's Kubernetes side (its scale subresource, the pods its selector
    lists) is that target's: the two others read the same answers and scale as usual."""
    breaks, reason, queue = KUBE_FAULTS[fault]
    h = await make_harness(policy=_policy(), replicas=2)
    for n in NAMES:
        if n != "vllm":
            h.store.add_deployment(NS, n, 2, {"app": n})
        for p in PODS[n]:
            h.store.add_pod(NS, p, {"app": n}, ready=True, created_at=T0 - 3600)
    breaks(h)
    answers = healthy()
    answers["waiting"]["data"]["result"].append(sample("beta-canary-5c6d7-q1", "90", namespace=NS))
    h.fake.set(**answers)
    reports = {r.target: r for r in await h.controller.run_cycle()}
    for n in NAMES:
        d = reports[KEYS[n]].decision
        assert d is not None
        if n == BROKEN:
            assert d.reason is reason, d.message
            if queue is not None:
                assert next(e.value for e in d.signals if e.name == "queue_depth") == queue
        else:
            assert (h.store.get_spec_replicas(NS, n), d.reason) == (6, Reason.SCALE_UP)
            assert next(e.value for e in d.signals if e.name == "queue_depth") == 30.0
