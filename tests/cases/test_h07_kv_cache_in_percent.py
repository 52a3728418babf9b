"""h07: a KV-cache usage in percent is not a ratio (the real controller against the
Kubernetes stand-in over HTTP and the fake Prometheus)."""

from __future__ import annotations

from scaler.config.vocabulary import SignalName
from scaler.core.reasons import Reason
from tests.cases.hunt import idle
from tests.support.controller_harness import HarnessFactory, decision_of, make_harness
from tests.support.fakeprom import case_file, kv

__all__ = ["make_harness"]

KV = "kv_cache_usage"


async def test_h07_a_percent_is_out_of_range_and_holds(make_harness: HarnessFactory) -> None:
    """h07: 85.3 and 72.0 where a 0-1 ratio belongs: the signal is unusable, nothing scales."""
    case_file("h07-kv-cache-in-percent.md")
    pods = ["pod-0", "pod-1"]
    h = await make_harness(replicas=2, ready=pods)
    h.fake.set(**{**idle(pods), "kv_cache": kv({"pod-0": "85.3", "pod-1": "72.0"})})
    report = await h.cycle()
    d = decision_of(report)
    assert (d.desired_replicas, h.replicas(), len(h.patches())) == (2, 2, 0)
    assert d.reason is Reason.SCALE_DOWN_BLOCKED_MISSING_SIGNAL
    assert h.signal_status(KV) == "out_of_range" and h.signal_valid(KV) == 0
    assert report.readings is not None
    kv_reading = report.readings.signals[SignalName.KV_CACHE_USAGE]
    assert "pod pod-0: vllm:kv_cache_usage_perc 85.3 is above 1" in kv_reading.detail
    assert "0-1 ratio" in kv_reading.detail


async def test_h07_a_full_cache_at_exactly_one_is_a_ratio(make_harness: HarnessFactory) -> None:
    """h07: 1.0 is a full cache, not out of range: it asks for ceil(2 / 0.8) = 3."""
    case_file("h07-kv-cache-in-percent.md")
    pods = ["pod-0", "pod-1"]
    h = await make_harness(replicas=2, ready=pods)
    h.fake.set(**{**idle(pods), "kv_cache": kv({"pod-0": "1.0", "pod-1": "1"})})
    report = await h.cycle()
    assert report.decision is not None and report.decision.desired_replicas == 3
    assert h.signal_status(KV) == "ok"
