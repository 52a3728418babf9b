"""The demo's lines for the controller's JSON log events."""

from __future__ import annotations

from scaler.sim.demo import format_event


def test_a_non_decision_event_reads_key_value() -> None:
    event = {
        "event": "started",
        "level": "info",
        "timestamp": "2026-01-01T00:00:04+00:00",
        "targets": ["llm/Deployment/vllm"],
        "metrics_port": None,
        "prometheus": {"url": "http://127.0.0.1:9090", "headers": []},
    }
    start = 1767225600.0  # 2026-01-01T00:00:00Z
    assert format_event(event, start) == (
        "    +4s info: started targets=llm/Deployment/vllm metrics_port=none "
        "prometheus.url=http://127.0.0.1:9090 prometheus.headers=none"
    )
