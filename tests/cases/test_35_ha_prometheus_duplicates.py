"""Case 35 and its kind on a real Prometheus: every series twice, differing only in a replica
label (an HA pair behind one query endpoint without deduplication).

Debian's Prometheus scrapes fake vLLM pods whose exposition holds each series twice, once per
replica label value, as a federation endpoint or a query front end without deduplication
answers: ``prometheus_replica`` (Prometheus Operator) on one pod, ``replica`` (Thanos' usual
name) on another, a label of the user's own (``ha_replica``) on a third. The controller reads
them with its exact PromQL: ``recommend --once`` (the real ``serve``) against the Kubernetes
stand-in for the case, the source itself for the configured label.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from io import StringIO
from pathlib import Path

import httpx
import pytest

from scaler.config.policy import DEFAULT_REPLICA_LABELS, TargetPolicy, WorkloadRef
from scaler.config.settings import Settings
from scaler.config.vocabulary import SignalName
from scaler.controller.app import RunOptions, report_series_copies, serve
from scaler.core.observation import PodInfo, WorkloadSnapshot
from scaler.core.signals import SignalStatus
from scaler.sources.prometheus import PrometheusSource
from tests.support.controller_harness import HarnessFactory, captured_logs
from tests.support.fakeprom import case_file
from tests.support.policies import case_policy
from tests.support.scraped_pods import scraped_pods

pytestmark = pytest.mark.e2e

CASE = "35-ha-prometheus-duplicates.md"
WINDOW = 5.0  # five scrapes of 1 s
COPIES = ("prometheus-0", "prometheus-1")


def _exposition(label: str, waiting: Mapping[str, int]) -> Callable[[], bytes]:
    """A pod's ``/metrics``: per engine its waiting, running, KV cache and counters, each series
    once per replica (``label`` = each of :data:`COPIES`); the second copy's counters a little
    behind, as a second Prometheus scraping at its own phase reads them."""
    scrapes = [0]

    def body() -> bytes:
        scrapes[0] += 1
        n = scrapes[0]
        lines = []
        for copy, lag in zip(COPIES, (0, 1), strict=True):
            for engine, queue in waiting.items():
                at = f'engine="{engine}",{label}="{copy}"'
                done = max(0, n - lag) * 2
                lines += [
                    f"vllm:num_requests_waiting{{{at}}} {queue}",
                    f"vllm:num_requests_running{{{at}}} 2",
                    f"vllm:kv_cache_usage_perc{{{at}}} 0.3",
                    f"vllm:prompt_tokens_total{{{at}}} {done * 500}",
                    f"vllm:generation_tokens_total{{{at}}} {done * 100}",
                    f"vllm:request_success_total{{{at}}} {done}",
                    f"vllm:time_to_first_token_seconds_count{{{at}}} {done}",
                    f"vllm:time_to_first_token_seconds_sum{{{at}}} {done * 0.5}",
                ]
                for le, share in (("0.5", 0.5), ("1.0", 1.0), ("+Inf", 1.0)):
                    bucket = f'vllm:time_to_first_token_seconds_bucket{{{at},le="{le}"}}'
                    lines.append(f"{bucket} {done * share:g}")
        return ("\n".join(lines) + "\n").encode()

    return body


PODS = {
    # the case's target: 15 waiting in all, over two pods; vllm-b runs two engines (data
    # parallel): series that differ in ``engine`` are different series, summed
    "vllm-5d8f7c9b4-x2k9p": _exposition("prometheus_replica", {"0": 7}),
    "vllm-5d8f7c9b4-q4m7z": _exposition("replica", {"0": 5, "1": 3}),
    # another workload's pod whose copies differ in a label of the user's own
    "other-0": _exposition("ha_replica", {"0": 4}),
}


async def test_case_35_every_series_twice_reads_once_and_the_target_holds(
    make_harness: HarnessFactory, tmp_path: Path
) -> None:
    """Case 35: behind an HA pair the queue reads 15, not 30, and the target holds 2; the
    collapse is reported once at start; a label of one's own is one setting away."""
    case_file(CASE)
    names = list(PODS)[:2]
    policy = case_policy(max_replicas=4).model_copy(update={"rate_window_seconds": WINDOW})
    async with scraped_pods(tmp_path, PODS, rate_window_seconds=WINDOW) as url:
        h = await make_harness(replicas=2, ready=names, policy=policy)
        settings = Settings(
            prometheus_url=url, kubeconfig=h.kubeconfig, in_cluster=False, metrics_port=0
        )
        out = StringIO()
        options = RunOptions(dry_run=True, once=True, output="json")
        with captured_logs() as logs:
            code = await serve(settings, policy, options, out=out, clock=h.clock)
        assert code == 0
        [doc] = json.loads(out.getvalue())
        queue = next(s for s in doc["signals"] if s["name"] == "queue_depth")
        assert (queue["status"], queue["value"]) == ("ok", 7.5)  # 15 over 2 replicas, not 30
        assert (doc["current_replicas"], doc["desired_replicas"]) == (2, 2)
        assert doc["reason"] in ("within_tolerance", "demand_covered")
        assert h.writes() == []
        said = [e for e in logs if e["event"] == "series_copies_collapsed"]
        assert len(said) == 1  # once, at start
        assert said[0]["labels"] == {"prometheus_replica": list(COPIES), "replica": list(COPIES)}
        assert said[0]["log_level"] == "warning" and said[0]["copies"] == 2

        # a label the defaults do not know counts twice until the policy names it
        other = TargetPolicy(
            workload=WorkloadRef(
                api_version="apps/v1", kind="StatefulSet", namespace="llm", name="other"
            )
        )
        snap = WorkloadSnapshot(
            "llm", 1, 1, "app=other", "1", (PodInfo("other-0", True, False, 3600.0),)
        )
        async with httpx.AsyncClient() as http:
            # the start's question and the exported count of copies
            source = PrometheusSource(
                http, base_url=url, timeout_seconds=10, rate_window_seconds=WINDOW
            )
            await report_series_copies(h.controller, source, policy)
            assert h.value("vllm_scaler_series_copies") == 2
            for labels, expected in ((DEFAULT_REPLICA_LABELS, 8.0), (("ha_replica",), 4.0)):
                src = PrometheusSource(
                    http,
                    base_url=url,
                    timeout_seconds=10,
                    rate_window_seconds=WINDOW,
                    replica_labels=labels,
                )
                got = (await src.read([other], {other.key: snap})).readings(other.key)
                reading = got[SignalName.QUEUE_DEPTH]
                assert (reading.status, reading.value) == (SignalStatus.OK, expected)


def _sleep_exposition(asleep: bool) -> Callable[[], bytes]:
    """A pod's ``/metrics`` with each series once per :data:`COPIES` (``prometheus_replica``):
    3 waiting, its counters moving, and vLLM's sleep-state gauge (``awake`` 0 while asleep)."""
    scrapes = [0]

    def body() -> bytes:
        scrapes[0] += 1
        lines = []
        for copy in COPIES:
            at = f'engine="0",prometheus_replica="{copy}"'
            lines += [
                f"vllm:num_requests_waiting{{{at}}} 3",
                f"vllm:num_requests_running{{{at}}} 0",
                f"vllm:kv_cache_usage_perc{{{at}}} 0.1",
                f"vllm:generation_tokens_total{{{at}}} {scrapes[0] * 100}",
                f'vllm:engine_sleep_state{{{at},sleep_state="awake"}} {0 if asleep else 1}',
            ]
        return ("\n".join(lines) + "\n").encode()

    return body


async def test_case_35_sample_ages_and_sleep_states_read_once_over_the_copies(
    tmp_path: Path,
) -> None:
    """Case 35 beside the running query's own parts (each pod's newest sample age and its
    sleep state): with every series twice, the queue reads 6, not 12; the pod asleep in both
    copies is asleep once and the awake one is awake; both pods' samples are current (no
    pod left out as lagging)."""
    case_file(CASE)
    bodies = {"vllm-a": _sleep_exposition(asleep=True), "vllm-b": _sleep_exposition(False)}
    tgt = TargetPolicy(
        workload=WorkloadRef(api_version="apps/v1", kind="Deployment", namespace="llm", name="vllm")
    )
    pods = tuple(PodInfo(p, True, False, 3600.0) for p in bodies)
    snap = WorkloadSnapshot("llm", 2, 2, "app=vllm", "1", pods)
    async with (
        scraped_pods(tmp_path, bodies, rate_window_seconds=WINDOW) as url,
        httpx.AsyncClient() as http,
    ):
        source = PrometheusSource(
            http, base_url=url, timeout_seconds=10, rate_window_seconds=WINDOW
        )
        result = await source.read([tgt], {tgt.key: snap})
    readings = result.targets[tgt.key]
    queue = readings.signals[SignalName.QUEUE_DEPTH]
    assert (queue.status, queue.value, queue.pods_missing) == (SignalStatus.OK, 6.0, 0), queue
    assert readings.sleeping == frozenset({"vllm-a"})
