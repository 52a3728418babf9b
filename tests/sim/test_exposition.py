"""The replica's /metrics text: vLLM's names, types, labels and V1 buckets."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from scaler.sim.engine import ReplicaEngine, SimRequest
from scaler.sim.exposition import (
    CONTENT_TYPE,
    E2E_BUCKETS,
    ITL_BUCKETS,
    TTFT_BUCKETS,
    VllmMetrics,
)

LABELS = {"model_name": "m", "engine": "0"}


def _families(m: VllmMetrics) -> dict[str, dict[tuple[str, tuple[tuple[str, str], ...]], float]]:
    out: dict[str, dict[tuple[str, tuple[tuple[str, str], ...]], float]] = {}
    for fam in text_string_to_metric_families(m.render().decode()):
        out[f"{fam.name}:{fam.type}"] = {
            (s.name, tuple(sorted(s.labels.items()))): s.value for s in fam.samples
        }
    return out


def _key(name: str, **extra: str) -> tuple[str, tuple[tuple[str, str], ...]]:
    return name, tuple(sorted({**LABELS, **extra}.items()))


def _served_metrics() -> VllmMetrics:
    m = VllmMetrics(model_name="m", num_gpu_blocks=2688)
    e = ReplicaEngine(name="r", metrics=m)
    for i in range(4):
        e.submit(SimRequest(i, 0.0, 8000, 10), 0.0)
    e.advance_to(60.0)
    return m


def test_names_types_and_values_after_serving() -> None:
    f = _families(_served_metrics())
    assert set(f) == {
        "vllm:num_requests_running:gauge",
        "vllm:num_requests_waiting:gauge",
        "vllm:kv_cache_usage_perc:gauge",
        "vllm:num_preemptions:counter",
        "vllm:prompt_tokens:counter",
        "vllm:generation_tokens:counter",
        "vllm:request_success:counter",
        "vllm:time_to_first_token_seconds:histogram",
        "vllm:inter_token_latency_seconds:histogram",
        "vllm:e2e_request_latency_seconds:histogram",
        "vllm:request_queue_time_seconds:histogram",
        "vllm:cache_config_info:gauge",
    }
    assert f["vllm:num_requests_running:gauge"] == {_key("vllm:num_requests_running"): 0.0}
    assert f["vllm:kv_cache_usage_perc:gauge"] == {_key("vllm:kv_cache_usage_perc"): 0.0}
    assert f["vllm:num_preemptions:counter"] == {_key("vllm:num_preemptions_total"): 0.0}
    assert f["vllm:prompt_tokens:counter"] == {_key("vllm:prompt_tokens_total"): 32000.0}
    assert f["vllm:generation_tokens:counter"] == {_key("vllm:generation_tokens_total"): 40.0}
    success = f["vllm:request_success:counter"]
    assert success[_key("vllm:request_success_total", finished_reason="stop")] == 4.0
    assert success[_key("vllm:request_success_total", finished_reason="abort")] == 0.0
    ttft = f["vllm:time_to_first_token_seconds:histogram"]
    assert ttft[_key("vllm:time_to_first_token_seconds_count")] == 4.0
    # 4 x 8000-token prompts under a 16,384-token budget: the first step prefills two and a
    # chunk of the third (16,384 tokens at 21,400 tokens/s), the second the rest: TTFTs
    # 0.77, 0.77, 1.50, 1.50 s.
    assert ttft[_key("vllm:time_to_first_token_seconds_bucket", le="0.75")] == 0.0
    assert ttft[_key("vllm:time_to_first_token_seconds_bucket", le="1.0")] == 2.0
    assert ttft[_key("vllm:time_to_first_token_seconds_bucket", le="2.5")] == 4.0
    assert ttft[_key("vllm:time_to_first_token_seconds_bucket", le="+Inf")] == 4.0
    itl = f["vllm:inter_token_latency_seconds:histogram"]
    assert itl[_key("vllm:inter_token_latency_seconds_count")] == 36.0
    info = f["vllm:cache_config_info:gauge"]
    ((name, labels), value), *_ = info.items()
    assert name == "vllm:cache_config_info" and value == 1.0
    assert dict(labels)["block_size"] == "16" and dict(labels)["num_gpu_blocks"] == "2688"
    assert dict(labels)["engine"] == "0"


def test_v1_default_buckets_exactly() -> None:
    f = _families(VllmMetrics(model_name="m"))

    def les(fam: str) -> list[str]:
        return [dict(labels)["le"] for (name, labels) in f[fam] if name.endswith("_bucket")]

    def expected(bounds: tuple[float, ...]) -> list[str]:
        return [repr(float(b)) for b in bounds] + ["+Inf"]

    assert les("vllm:time_to_first_token_seconds:histogram") == expected(TTFT_BUCKETS)
    assert les("vllm:inter_token_latency_seconds:histogram") == expected(ITL_BUCKETS)
    assert les("vllm:e2e_request_latency_seconds:histogram") == expected(E2E_BUCKETS)
    assert les("vllm:request_queue_time_seconds:histogram") == expected(E2E_BUCKETS)
    assert TTFT_BUCKETS[0] == 0.001 and TTFT_BUCKETS[-1] == 2560.0 and len(TTFT_BUCKETS) == 22
    assert ITL_BUCKETS[-1] == 80.0 and len(ITL_BUCKETS) == 19
    assert E2E_BUCKETS[-1] == 7680.0 and len(E2E_BUCKETS) == 21


def test_raw_text_lines() -> None:
    text = _served_metrics().render().decode()
    assert "# TYPE vllm:num_preemptions_total counter" in text
    assert 'vllm:num_requests_waiting{engine="0",model_name="m"} 0.0' in text
    assert 'vllm:e2e_request_latency_seconds_bucket{engine="0",le="7680.0",model_name="m"} 4.0' in (
        text
    )
    assert CONTENT_TYPE == "text/plain; version=0.0.4; charset=utf-8"


def test_old_and_both_kv_names() -> None:
    old = _families(VllmMetrics(kv_metric_name="vllm:gpu_cache_usage_perc"))
    assert "vllm:gpu_cache_usage_perc:gauge" in old
    assert "vllm:kv_cache_usage_perc:gauge" not in old
    m = VllmMetrics(model_name="m", export_both_kv_names=True)
    m.kv_cache_usage = 0.5
    both = _families(m)
    assert both["vllm:gpu_cache_usage_perc:gauge"] == {_key("vllm:gpu_cache_usage_perc"): 0.5}
    assert both["vllm:kv_cache_usage_perc:gauge"] == {_key("vllm:kv_cache_usage_perc"): 0.5}


def test_registries_are_per_replica() -> None:
    a, b = VllmMetrics(engine="0"), VllmMetrics(engine="0")
    a.num_requests_waiting = 7
    assert b"vllm:num_requests_waiting" in b.render()
    assert a.registry is not b.registry
    assert 'vllm:num_requests_waiting{engine="0",model_name' in a.render().decode()
    assert a.render() != b.render()
