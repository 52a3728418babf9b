"""The telemetry endpoint over real HTTP: /metrics, /healthz and /readyz."""

from __future__ import annotations

import socket

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from scaler.core.decide import decide
from scaler.core.observation import Observation, ReplicaCounts
from scaler.core.signals import SignalName, SignalReading, SignalStatus
from scaler.telemetry.health import Heartbeat
from scaler.telemetry.metrics import ScalerMetrics
from scaler.telemetry.server import TelemetryBindError, TelemetryServer
from tests.support.clock import FakeClock
from tests.support.policies import case_target


async def test_metrics_health_and_readiness() -> None:
    metrics = ScalerMetrics()
    heartbeat = Heartbeat(15, clock=FakeClock(0.0))
    server = TelemetryServer(
        metrics, host="127.0.0.1", port=0, live=heartbeat.live, ready=heartbeat.ready
    )
    await server.start()
    try:
        policy = case_target()
        obs = Observation(
            ReplicaCounts(current=3, status=3, ready=2, starting=1),
            {
                SignalName.QUEUE_DEPTH: SignalReading(
                    SignalName.QUEUE_DEPTH, SignalStatus.OK, 60.0
                ),
                SignalName.KV_CACHE_USAGE: SignalReading(
                    SignalName.KV_CACHE_USAGE, SignalStatus.EMPTY
                ),
            },
        )
        d = decide(policy, obs, None, 0.0, ttft_window_seconds=60.0)
        metrics.record_decision(
            policy.key, d, min_replicas=1, max_replicas=10, tolerance_up=0.1, tolerance_down=0.1
        )
        base = f"http://127.0.0.1:{server.port}"
        async with httpx.AsyncClient() as client:
            assert (await client.get(f"{base}/healthz")).status_code == 200
            assert (await client.get(f"{base}/readyz")).status_code == 503
            heartbeat.beat()
            assert (await client.get(f"{base}/readyz")).status_code == 200
            resp = await client.get(f"{base}/metrics")
        assert resp.status_code == 200
        assert resp.headers["content-type"].startswith("text/plain; version=0.0.4")
        samples = {
            (s.name, tuple(sorted(s.labels.items()))): s.value
            for fam in text_string_to_metric_families(resp.text)
            for s in fam.samples
        }
        key = "llm/Deployment/vllm"
        assert samples[("vllm_scaler_desired_replicas", (("target", key),))] == 6
        assert samples[("vllm_scaler_pending_replicas", (("target", key),))] == 1
        assert (
            samples[("vllm_scaler_signal_valid", (("signal", "kv_cache_usage"), ("target", key)))]
            == 0
        )
        assert (
            samples[("vllm_scaler_signal_value", (("signal", "queue_depth"), ("target", key)))]
            == 20.0
        )
        assert (
            samples[("vllm_scaler_decisions_total", (("reason", "scale_up"), ("target", key)))] == 1
        )
        # the standard process series, to watch memory and CPU over weeks
        assert samples[("process_resident_memory_bytes", ())] > 10 * 2**20
        assert ("process_cpu_seconds_total", ()) in samples
        assert any(name == "python_gc_collections_total" for name, _ in samples)
    finally:
        await server.stop()


async def test_port_in_use_names_the_setting_value_and_reason() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        server = TelemetryServer(ScalerMetrics(), host="127.0.0.1", port=port)
        with pytest.raises(TelemetryBindError) as err:
            await server.start()
    assert str(err.value) == (
        f"VLLM_SCALER_METRICS_PORT (--metrics-port): value {port}: cannot listen on "
        f"127.0.0.1:{port} (Address already in use); choose a free port, or 0 to turn the "
        "endpoint off"
    )
    await server.stop()  # idempotent after a failed start


async def test_unusable_address_names_the_setting_value_and_reason() -> None:
    server = TelemetryServer(ScalerMetrics(), host="999.1.1.1", port=0)
    with pytest.raises(TelemetryBindError) as err:
        await server.start()
    text = str(err.value)
    assert text.startswith(
        "VLLM_SCALER_METRICS_ADDRESS (--metrics-address): value '999.1.1.1': cannot listen on it ("
    )
    assert text.endswith("); expected a local IP address or host name, e.g. 0.0.0.0")


@pytest.mark.parametrize(
    ("interval", "stale_after"),
    [
        pytest.param(30.0, 90.0, id="three intervals of 30 s"),
        pytest.param(15.0, 60.0, id="at least a minute at 15 s"),
        pytest.param(600.0, 1800.0, id="three intervals of 10 min"),
    ],
)
async def test_liveness_fails_when_no_cycle_completes_for_several_intervals(
    interval: float, stale_after: float
) -> None:
    """/healthz fails once no control cycle completed for three intervals (at least 60 s),
    and passes again at the next completed cycle; /readyz is not affected."""
    clock = FakeClock(1000.0)
    heartbeat = Heartbeat(interval, clock=clock)
    assert heartbeat.stale_after_seconds == stale_after
    server = TelemetryServer(
        ScalerMetrics(), host="127.0.0.1", port=0, live=heartbeat.live, ready=heartbeat.ready
    )
    await server.start()
    base = f"http://127.0.0.1:{server.port}"
    try:
        async with httpx.AsyncClient() as client:

            async def status(path: str) -> tuple[int, str]:
                r = await client.get(base + path)
                return r.status_code, r.text

            assert await status("/healthz") == (200, "ok: started 0 s ago\n")
            assert (await status("/readyz"))[0] == 503
            clock.advance(stale_after)  # a slow first cycle: still alive
            assert (await status("/healthz"))[0] == 200
            heartbeat.beat()
            assert await status("/readyz") == (200, "ok\n")
            clock.advance(stale_after)
            assert (await status("/healthz"))[0] == 200
            clock.advance(1)  # the loop is stuck
            code, text = await status("/healthz")
            assert code == 503
            assert text.startswith(f"no control cycle completed for {stale_after + 1:.0f} s")
            assert (await status("/readyz"))[0] == 200  # readiness does not follow
            heartbeat.beat()
            assert (await status("/healthz"))[0] == 200
    finally:
        await server.stop()


def test_a_learning_capacity_signal_exports_no_target_sample() -> None:
    """Prometheus' convention for an unknown value is no sample: a 0 would draw a target line
    at 0 on a dashboard (recommend's JSON says "target": null)."""
    metrics = ScalerMetrics()
    policy = case_target()
    obs = Observation(
        ReplicaCounts(current=3, status=3, ready=3, starting=0),
        {
            SignalName.QUEUE_DEPTH: SignalReading(SignalName.QUEUE_DEPTH, SignalStatus.OK, 6.0),
            SignalName.TTFT_P95: SignalReading(SignalName.TTFT_P95, SignalStatus.OK, 0.5),
        },
    )
    d = decide(policy, obs, None, 0.0, ttft_window_seconds=60.0)
    [capacity] = [e for e in d.signals if e.name is SignalName.CAPACITY]
    assert capacity.status is SignalStatus.LEARNING
    metrics.record_decision(
        policy.key, d, min_replicas=1, max_replicas=10, tolerance_up=0.1, tolerance_down=0.1
    )

    def target(signal: str) -> float | None:
        labels = {"target": policy.key, "signal": signal}
        return metrics.registry.get_sample_value("vllm_scaler_signal_target", labels)

    assert target("capacity") is None
    assert target("queue_depth") == 10.0
    assert target("ttft_p95") == 2.0
