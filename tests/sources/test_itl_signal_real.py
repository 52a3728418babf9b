"""Inter-token latency through the real path: vLLM pods' histograms scraped by a real
Prometheus (Debian's), read by the real source and decided by the real loop (Kubernetes API
stand-in): a breach scales up, an idle histogram is no fault, the pre-0.11 name
``vllm:time_per_output_token_seconds`` is read where a pod exports only that (the current name
wins where it exports both), mixed bucket layouts are read on the bounds they share (case 30's
kind), and the recording rules of ``deploy/rules/vllm-scaler-itl.rules.yaml`` are read where
a namespace's pods share one layout."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from scaler.config.policy import Policy
from scaler.config.vocabulary import SignalName
from scaler.controller.report import TargetReport, report_json
from scaler.core.reasons import Reason
from scaler.core.signals import SignalStatus
from scaler.sources.promql import (
    histogram_query,
    histogram_recording_rules,
    recorded_mixed_bounds_metric,
    recording_rules,
)
from tests.support.histogram_pods import (
    ITL,
    ITL_V0,
    ITL_V1,
    TPOT,
    TTFT,
    TTFT_V1,
    HistogramPod,
    Latency,
    instant,
    namespaced_policy,
    open_loop,
    scraped,
    write_rules,
)

pytestmark = pytest.mark.e2e

ITL_P95 = SignalName.ITL_P95
WINDOW = 10.0
PER_REQUEST = 127.0  # 128 output tokens: 127 gaps between them
ITL_RULES = Path(__file__).resolve().parents[2] / "deploy" / "rules" / "vllm-scaler-itl.rules.yaml"


def _pod(ns: str, i: int, *itl: Latency, ttft: float | None = 0.3, rs: str = "5d8f7c9b4") -> Any:
    ttft_h = Latency(TTFT, TTFT_V1, ttft)
    return HistogramPod(f"vllm-{rs}-{ns[:3]}{i}x", ns, [ttft_h, *itl], waiting=0.0, kv=0.1)


def _itl(seconds: float | None, name: str = ITL, bounds: tuple[float, ...] = ITL_V1) -> Latency:
    return Latency(name, bounds, seconds, PER_REQUEST)


def _policy(targets: dict[str, float]) -> Policy:
    """Per namespace its ITL target; queue, KV cache and TTFT with room to spare."""
    return namespaced_policy(
        {
            ns: {
                "queue_depth": {"target_per_replica": 10},
                "kv_cache_usage": {"target_ratio": 0.8},
                "ttft_p95": {"target_seconds": 2.0},
                "itl_p95": {"enabled": True, "target_seconds": target},
            }
            for ns, target in targets.items()
        },
        rate_window_seconds=WINDOW,
    )


def _itl_of(report: TargetReport) -> Any:
    assert report.decision is not None
    [e] = [e for e in report.decision.signals if e.name is ITL_P95]
    return e


def _p95_in(low: float, high: float) -> float:
    """What Prometheus' interpolation answers when every observation lies in (low, high]."""
    return low + (high - low) * 0.95


PODS = [
    # every streamed token 0.2 s apart against a 0.1 s target
    *(_pod("breach", i, _itl(0.2)) for i in range(2)),
    # a histogram without a single observation in the window: no traffic
    *(_pod("idle", i, _itl(None), ttft=None) for i in range(2)),
    # vLLM before 0.11: only the old name
    *(_pod("old", i, _itl(0.05, TPOT)) for i in range(2)),
    # vLLM 0.11: both names; the current one (0.05 s here) is read, the old (0.3 s) not
    *(_pod("both", i, _itl(0.05), _itl(0.3, TPOT)) for i in range(2)),
    # mid-upgrade from 0.10 to 0.13: one pod each
    _pod("names", 0, _itl(0.05)),
    _pod("names", 1, _itl(0.05, TPOT)),
    # case 30's kind: two pods whose buckets stop at 2.5 s, two that reach 80 s; 3 s each
    *(_pod("layouts", i, _itl(3.0, bounds=ITL_V0), rs="5d8f7c9b4") for i in range(2)),
    *(_pod("layouts", i, _itl(3.0), rs="6c7b8d9f5") for i in range(2, 4)),
]
TARGETS = {"breach": 0.1, "idle": 0.1, "old": 0.1, "both": 0.1, "names": 0.1, "layouts": 5.0}


async def test_itl_through_a_real_prometheus_breach_idle_old_name_and_mixed_layouts(
    tmp_path: Path,
) -> None:
    async with (
        scraped(tmp_path, PODS, rate_window_seconds=WINDOW) as url,
        open_loop(tmp_path, url, _policy(TARGETS), PODS) as loop,
    ):
        reports = await loop.cycle()

    def target(ns: str) -> TargetReport:
        return reports[f"{ns}/Deployment/vllm"]

    # a breach drives a scale-up: ceil(1.975 x 2) = 4, the largest step a latency signal takes
    breach = target("breach")
    d = breach.decision
    assert d is not None
    itl = _itl_of(breach)
    assert (itl.status, itl.value) == (SignalStatus.OK, pytest.approx(_p95_in(0.15, 0.2)))
    assert (d.current_replicas, d.desired_replicas, d.reason) == (2, 4, Reason.SCALE_UP)
    assert d.driving_signal is ITL_P95
    assert d.message == "scale up 2 -> 4 (itl_p95 0.198 vs target 0.1, ratio 1.98)"
    assert loop.store.get_spec_replicas("breach", "vllm") == 4
    labels = {"target": "breach/Deployment/vllm", "signal": "itl_p95"}
    assert loop.value("vllm_scaler_signal_value", **labels) == pytest.approx(itl.value)
    info = {"metric": f"{ITL}_bucket", "representation": "classic", "query": "raw"}
    assert loop.value("vllm_scaler_histogram_info", **labels, **info) == 1
    assert report_json(breach)["itl_metric"] == f"{ITL}_bucket"

    # an idle histogram is no fault: valid, no query error, scale-down not blocked by it
    idle = target("idle")
    assert (_itl_of(idle).status, _itl_of(idle).valid) == (SignalStatus.IDLE, True)
    assert idle.decision is not None and idle.decision.reason is Reason.STABILIZED
    assert loop.value("vllm_scaler_query_errors_total", signal="itl_p95", reason="idle") is None
    assert loop.value("vllm_scaler_signal_valid", target="idle/Deployment/vllm", signal="itl_p95")

    # the old name, alone; both names (the current one read); one pod of each
    for ns, metric in (
        ("old", f"{TPOT}_bucket"),
        ("both", f"{ITL}_bucket"),
        ("names", f"{ITL}_bucket,{TPOT}_bucket"),
    ):
        r = target(ns)
        assert (_itl_of(r).status, _itl_of(r).value) == (
            SignalStatus.OK,
            pytest.approx(_p95_in(0.025, 0.05)),
        ), ns
        assert r.readings is not None and r.readings.histogram_metrics[ITL_P95] == metric, ns

    # mixed layouts: a lower bound of 2.5 s, below the 5 s target: hold, never 80 s
    layouts = target("layouts")
    itl = _itl_of(layouts)
    assert (itl.status, itl.value) == (SignalStatus.SATURATED, 2.5)
    assert "mixed bucket layouts: 6 of the 20 bounds (5-80 s) are on only 2 of the 4" in itl.detail
    assert layouts.decision is not None and layouts.decision.desired_replicas == 4
    mixed = {"target": "layouts/Deployment/vllm", "signal": "itl_p95"}
    assert loop.value("vllm_scaler_histogram_mixed_layouts", **mixed) == 1


async def test_itl_from_its_recording_rules_where_a_namespace_has_one_layout(
    tmp_path: Path,
) -> None:
    """The shipped ITL rules file (rewritten for a 10 s window, evaluated every second): the
    namespace with both names on every pod reads the recording (the current name's buckets);
    the one mid-rollout across a bucket change records 6 uneven bounds and reads raw."""
    pods = [p for p in PODS if p.namespace in ("both", "layouts")]
    itl = histogram_query(ITL_P95)
    shipped = [r["record"] for g in _groups(ITL_RULES) for r in g["rules"]]
    assert shipped == [r["record"] for r in histogram_recording_rules(itl, 60)]
    rules = write_rules(
        tmp_path / "rules" / "recording.yaml",
        [*recording_rules(WINDOW), *histogram_recording_rules(itl, WINDOW)],
    )
    mixed = recorded_mixed_bounds_metric(itl, WINDOW)
    async with scraped(
        tmp_path, pods, rate_window_seconds=WINDOW, rules=[rules], recorded=f"count({mixed}) == 2"
    ) as url:
        uneven = {r["metric"]["namespace"]: float(r["value"][1]) for r in await instant(url, mixed)}
        async with open_loop(tmp_path, url, _policy({"both": 0.1, "layouts": 5.0}), pods) as loop:
            reports = await loop.cycle()
    assert uneven == {"both": 0.0, "layouts": 6.0}
    both, layouts = reports["both/Deployment/vllm"], reports["layouts/Deployment/vllm"]
    assert both.readings is not None and both.readings.histogram_queries[ITL_P95] == "recorded"
    assert _itl_of(both).value == pytest.approx(_p95_in(0.025, 0.05))
    assert layouts.readings is not None and layouts.readings.histogram_queries[ITL_P95] == "raw"
    assert (_itl_of(layouts).status, _itl_of(layouts).value) == (SignalStatus.SATURATED, 2.5)


def _groups(path: Path) -> list[dict[str, Any]]:
    import yaml

    groups: list[dict[str, Any]] = yaml.safe_load(path.read_text(encoding="utf-8"))["groups"]
    return groups
