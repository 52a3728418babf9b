"""Case 30 (tests/cases/30-mixed-bucket-layouts.md): pods of one target with different bucket
layouts are never summed per ``le``; the quantile is read on the bounds every histogram has."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from scaler.config.policy import Policy
from scaler.config.vocabulary import SignalName
from scaler.controller.report import TargetReport
from scaler.core.reasons import Reason
from scaler.core.signals import SignalStatus
from scaler.sources.promql import (
    histogram_query,
    recorded_mixed_bounds_metric,
    recording_rules,
)
from scaler.sources.quantile import bucket_quantile, common_buckets
from tests.support.controller_harness import HarnessFactory, captured_logs, decision_of
from tests.support.controller_harness import make_harness as make_harness  # the fixture
from tests.support.fakeprom import Histograms, case_file, histograms, kv, per_pod
from tests.support.histogram_pods import (
    TTFT,
    TTFT_V0,
    TTFT_V1,
    HistogramPod,
    Latency,
    instant,
    namespaced_policy,
    open_loop,
    scraped,
    write_rules,
)

TTFT_P95 = SignalName.TTFT_P95
WINDOW = 10.0  # the rate window: ten 1 s scrapes
# the old layout's 16 finite bounds and +Inf are on all 4; 20-2560 s on the 2 new pods only
MIXED = "mixed bucket layouts: 6 of the 23 bounds (20-2560 s) are on only 2 of the 4 histograms"


def _policy(*namespaces: str) -> Policy:
    """The case's policy for Deployment ``vllm`` in each namespace: TTFT target 15 s, queue
    and KV cache targets the pods sit exactly on (10 waiting, 0.7 of the cache each)."""
    blocks = {
        "queue_depth": {"target_per_replica": 10},
        "kv_cache_usage": {"target_ratio": 0.7},
        "ttft_p95": {"target_seconds": 15.0},
    }
    return namespaced_policy(dict.fromkeys(namespaces, blocks), rate_window_seconds=WINDOW)


def _pod(name: str, bounds: tuple[float, ...], namespace: str = "llm") -> HistogramPod:
    """A pod of the case: 10 waiting, KV cache 0.7, one request a second, 12 s to first token."""
    return HistogramPod(
        name, namespace, [Latency(TTFT, bounds, 12.0)], waiting=10.0, running=4.0, kv=0.7
    )


def _rollout(namespace: str = "llm") -> list[HistogramPod]:
    """Mid-upgrade: two pods of the old ReplicaSet (buckets up to 10 s), two of the new one
    (up to 2560 s)."""
    return [
        _pod("vllm-5d8f7c9b4-x2k9p", TTFT_V0, namespace),
        _pod("vllm-5d8f7c9b4-q4m7z", TTFT_V0, namespace),
        _pod("vllm-6c7b8d9f5-h8n2w", TTFT_V1, namespace),
        _pod("vllm-6c7b8d9f5-p9t4k", TTFT_V1, namespace),
    ]


def _ttft(report: TargetReport) -> Any:
    assert report.decision is not None
    [e] = [e for e in report.decision.signals if e.name is TTFT_P95]
    return e


@pytest.mark.e2e
async def test_case_30_a_rollout_across_a_bucket_change_holds_4_through_a_real_prometheus(
    tmp_path: Path,
) -> None:
    case_file("30-mixed-bucket-layouts.md")
    pods = _rollout()
    async with scraped(tmp_path, pods, rate_window_seconds=WINDOW) as url:
        # the input reproduces the kind: summed per le, the p95 lies beyond the top finite
        # bound of the sum, 2560 s (what the source read before, and asked 8 replicas for)
        naive = await instant(
            url,
            "histogram_quantile(0.95, sum by (le) "
            f'(rate({TTFT}_bucket{{namespace="llm"}}[{WINDOW:g}s])))',
        )
        assert float(naive[0]["value"][1]) == 2560.0
        async with open_loop(tmp_path, url, _policy("llm"), pods) as loop:
            with captured_logs() as logs:
                report = (await loop.cycle())["llm/Deployment/vllm"]
    d = decision_of(report)
    assert (d.current_replicas, d.desired_replicas) == (4, 4)
    assert loop.store.get_spec_replicas("llm", "vllm") == 4  # nothing written
    ttft = _ttft(report)
    # a lower bound at the top bound every pod has, below the 15 s target: it asks for
    # nothing and blocks a scale-down; never saturated at 2560 s
    assert (ttft.status, ttft.value) == (SignalStatus.SATURATED, 10.0)
    assert ttft.desired_replicas is None
    assert MIXED in ttft.detail and "2560" not in ttft.detail.split(MIXED)[0]
    assert d.reason is Reason.WITHIN_TOLERANCE and "ttft_p95 saturated" in d.message
    labels = {"target": "llm/Deployment/vllm", "signal": "ttft_p95"}
    assert loop.value("vllm_scaler_histogram_mixed_layouts", **labels) == 1
    [warning] = [e for e in logs if e["event"] == "histogram_mixed_layouts"]
    assert warning["log_level"] == "warning" and MIXED in warning["message"]
    [bound] = [e for e in logs if e["event"] == "histogram_top_bucket_too_low"]
    assert "finish the rollout" in bound["message"]
    assert report.readings is not None and report.readings.ttft_query == "raw"


@pytest.mark.e2e
async def test_case_30_with_the_recording_rules_a_mixed_namespace_reads_raw_and_one_layout_reads_recorded(  # noqa: E501
    tmp_path: Path,
) -> None:
    """The shipped rules (for a 10 s window, evaluated every second): the rolled-out
    namespace ``llm`` records 6 bounds not on every histogram and its target reads its raw
    buckets; ``llm-b``, all on the new layout, records 0 and its target reads the recording
    (the same quantile as Prometheus' own over the raw series)."""
    case_file("30-mixed-bucket-layouts.md")
    pods = [*_rollout(), *(_pod(f"vllm-6c7b8d9f5-b{i}aaa", TTFT_V1, "llm-b") for i in range(2))]
    rules = write_rules(tmp_path / "rules" / "recording.yaml", recording_rules(WINDOW))
    mixed = recorded_mixed_bounds_metric(histogram_query(TTFT_P95), WINDOW)
    async with scraped(
        tmp_path, pods, rate_window_seconds=WINDOW, rules=[rules], recorded=f"count({mixed}) == 2"
    ) as url:
        recorded = {
            r["metric"]["namespace"]: float(r["value"][1]) for r in await instant(url, mixed)
        }
        own = await instant(
            url,
            "histogram_quantile(0.95, sum by (le) "
            f'(rate({TTFT}_bucket{{namespace="llm-b"}}[{WINDOW:g}s])))',
        )
        async with open_loop(tmp_path, url, _policy("llm", "llm-b"), pods) as loop:
            reports = await loop.cycle()
    assert recorded == {"llm": 6.0, "llm-b": 0.0}
    rolled, uniform = reports["llm/Deployment/vllm"], reports["llm-b/Deployment/vllm"]
    assert rolled.readings is not None and rolled.readings.ttft_query == "raw"
    assert (_ttft(rolled).status, _ttft(rolled).value) == (SignalStatus.SATURATED, 10.0)
    assert rolled.decision is not None and rolled.decision.desired_replicas == 4
    assert uniform.readings is not None and uniform.readings.ttft_query == "recorded"
    assert _ttft(uniform).status is SignalStatus.OK
    assert _ttft(uniform).value == pytest.approx(float(own[0]["value"][1]), rel=1e-6)
    assert uniform.readings.signals[TTFT_P95].mixed_layouts == ""


# --- the kind beyond the example (the source's real path against a fake Prometheus) -------


def _answers(buckets: dict[str, dict[str, float]]) -> dict[str, Any]:
    names = list(buckets)
    return {
        "waiting": per_pod(dict.fromkeys(names, "10")),
        "running": per_pod(dict.fromkeys(names, "4")),
        "kv_cache": kv(dict.fromkeys(names, "0.7")),
        **histograms(Histograms(buckets)),
    }


async def test_layouts_that_differ_in_the_middle_are_read_on_the_common_bounds(
    make_harness: HarnessFactory,
) -> None:
    """Custom buckets on one pod (no 0.5 s bound, an extra 3 s one): every first token at
    0.8-1 s; on the bounds both share the p95 lies inside (0.75, 1]: an ordinary value, the
    mixed layouts said, no lower bound."""
    case_file("30-mixed-bucket-layouts.md")
    a = {"0.25": 0.0, "0.5": 0.0, "0.75": 0.0, "1.0": 2.0, "2.5": 2.0, "+Inf": 2.0}
    b = {"0.25": 0.0, "0.75": 0.0, "1.0": 2.0, "2.5": 2.0, "3.0": 2.0, "+Inf": 2.0}
    policy = _policy("llm")
    h = await make_harness(replicas=2, ready=["pod-0", "pod-1"], policy=policy)
    h.fake.set(**_answers({"pod-0": a, "pod-1": b}))
    report = await h.cycle()
    ttft = _ttft(report)
    assert ttft.status is SignalStatus.OK
    assert ttft.value == pytest.approx(0.75 + 0.25 * 0.95)
    assert "mixed bucket layouts: 2 of the 7 bounds (0.5-3 s) are on only 1 of the 2" in ttft.detail
    assert h.target_value("vllm_scaler_histogram_mixed_layouts", signal="ttft_p95") == 1


async def test_layouts_with_no_common_finite_bound_read_nan_naming_them(
    make_harness: HarnessFactory,
) -> None:
    case_file("30-mixed-bucket-layouts.md")
    a = {"1.0": 1.0, "+Inf": 1.0}
    b = {"2.0": 1.0, "+Inf": 1.0}
    h = await make_harness(replicas=2, ready=["pod-0", "pod-1"], policy=_policy("llm"))
    h.fake.set(**_answers({"pod-0": a, "pod-1": b}))
    report = await h.cycle()
    ttft = _ttft(report)
    assert ttft.status is SignalStatus.NAN
    assert "they share no finite bound" in ttft.detail
    d = report.decision
    assert d is not None and d.desired_replicas == 2  # invalid: no scale-down on it


def test_engines_are_counted_as_series_and_one_layout_is_not_mixed() -> None:
    """Two engines a pod: each bound is on 2 x 3 series, as +Inf is: one layout."""
    case_file("30-mixed-bucket-layouts.md")
    buckets = {1.0: 3.0, 2.5: 6.0, math.inf: 6.0}
    counts = {1.0: 6.0, 2.5: 6.0, math.inf: 6.0}
    common, layouts = common_buckets(buckets, counts)
    assert common == buckets and layouts is not None and not layouts.mixed
    assert layouts.describe() == ""


def test_an_answer_without_counts_is_read_as_before() -> None:
    """A backend answer without the counts cannot tell the layouts apart: read as it is."""
    case_file("30-mixed-bucket-layouts.md")
    buckets = {10.0: 0.0, 2560.0: 2.0, math.inf: 4.0}
    common, layouts = common_buckets(buckets, None)
    assert (common, layouts) == (buckets, None)
    assert bucket_quantile(0.95, common.items()).lower_bound
