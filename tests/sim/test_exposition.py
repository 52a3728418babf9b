"""The replica's /metrics text: vLLM's names, types, labels and V1 buckets, every family of
vLLM's V1 set (as its own metrics test lists them) with the values the replica model gives."""

from __future__ import annotations

import pytest
from prometheus_client.parser import text_string_to_metric_families

from scaler.sim.engine import ReplicaEngine, SimRequest
from scaler.sim.exposition import (
    CONTENT_TYPE,
    E2E_BUCKETS,
    ITERATION_TOKEN_BUCKETS,
    ITL_BUCKETS,
    PARAMS_N_BUCKETS,
    SERVED_MODEL_NAME,
    TTFT_BUCKETS,
    VllmMetrics,
    one_two_five_buckets,
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


def _serve(m: VllmMetrics) -> tuple[ReplicaEngine, list[SimRequest]]:
    e = ReplicaEngine(name="r", metrics=m)
    reqs = [SimRequest(i, 0.0, 8000, 10) for i in range(4)]
    for r in reqs:
        e.submit(r, 0.0)
    e.advance_to(60.0)
    return e, reqs


def _served_metrics() -> VllmMetrics:
    m = VllmMetrics(model_name="m", num_gpu_blocks=2688)
    _serve(m)
    return m


# vLLM's EXPECTED_METRICS_V1 (tests/entrypoints/openai/test_metrics.py), by family, without
# the deprecated names it hides by default.
V1_FAMILIES = {
    "vllm:num_requests_running:gauge",
    "vllm:num_requests_waiting:gauge",
    "vllm:kv_cache_usage_perc:gauge",
    "vllm:prefix_cache_queries:counter",
    "vllm:prefix_cache_hits:counter",
    "vllm:num_preemptions:counter",
    "vllm:prompt_tokens:counter",
    "vllm:generation_tokens:counter",
    "vllm:iteration_tokens_total:histogram",
    "vllm:cache_config_info:gauge",
    "vllm:request_success:counter",
    "vllm:request_prompt_tokens:histogram",
    "vllm:request_generation_tokens:histogram",
    "vllm:request_params_n:histogram",
    "vllm:request_params_max_tokens:histogram",
    "vllm:time_to_first_token_seconds:histogram",
    "vllm:inter_token_latency_seconds:histogram",
    "vllm:e2e_request_latency_seconds:histogram",
    "vllm:request_queue_time_seconds:histogram",
    "vllm:request_inference_time_seconds:histogram",
    "vllm:request_prefill_time_seconds:histogram",
    "vllm:request_decode_time_seconds:histogram",
}
# The newest vLLM's families (prompt tokens by source, per-request computed prompt tokens,
# sleep state); an emulated older vLLM has none of them.
NEWEST_FAMILIES = {
    "vllm:prompt_tokens_by_source:counter",
    "vllm:prompt_tokens_cached:counter",
    "vllm:prompt_tokens_recomputed:counter",
    "vllm:request_prefill_kv_computed_tokens:histogram",
    "vllm:engine_sleep_state:gauge",
    "vllm:engine_sleep_resource_state:gauge",
    "vllm:engine_fully_awake:gauge",
}
HIDDEN_FAMILIES = {
    "vllm:gpu_cache_usage_perc:gauge",
    "vllm:gpu_prefix_cache_queries:counter",
    "vllm:gpu_prefix_cache_hits:counter",
    "vllm:time_per_output_token_seconds:histogram",
}


def test_names_types_and_values_after_serving() -> None:
    f = _families(_served_metrics())
    assert set(f) == V1_FAMILIES | NEWEST_FAMILIES
    assert f["vllm:num_requests_running:gauge"] == {_key("vllm:num_requests_running"): 0.0}
    assert f["vllm:kv_cache_usage_perc:gauge"] == {_key("vllm:kv_cache_usage_perc"): 0.0}
    assert f["vllm:num_preemptions:counter"] == {_key("vllm:num_preemptions_total"): 0.0}
    assert f["vllm:prompt_tokens:counter"] == {_key("vllm:prompt_tokens_total"): 32000.0}
    assert f["vllm:generation_tokens:counter"] == {_key("vllm:generation_tokens_total"): 40.0}
    success = f["vllm:request_success:counter"]
    assert success[_key("vllm:request_success_total", finished_reason="stop")] == 4.0
    for reason in ("length", "abort", "error", "repetition"):
        assert success[_key("vllm:request_success_total", finished_reason=reason)] == 0.0
    ttft = f["vllm:time_to_first_token_seconds:histogram"]
    assert ttft[_key("vllm:time_to_first_token_seconds_count")] == 4.0
    # 4 x 8000-token prompts under a 2,048-token budget (2,048 tokens at 21,400 tokens/s a
    # step, first come first served): TTFTs 0.38, 0.77, 1.15, 1.50 s.
    assert ttft[_key("vllm:time_to_first_token_seconds_bucket", le="0.25")] == 0.0
    assert ttft[_key("vllm:time_to_first_token_seconds_bucket", le="0.5")] == 1.0
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
    # Prefix caching is on by default in V1, and the replica has a prefix cache.
    assert dict(labels)["enable_prefix_caching"] == "True"


def test_request_histograms_hold_each_request_once() -> None:
    m = VllmMetrics(model_name="m")
    e, reqs = _serve(m)
    f = _families(m)

    def hist(family: str, suffix: str, **extra: str) -> float:
        return f[f"{family}:histogram"][_key(family + suffix, **extra)]

    def at(t: float | None) -> float:
        assert t is not None
        return t

    started = [at(r.first_scheduled_at) for r in reqs]
    first = [at(r.first_token_at) for r in reqs]
    done = [at(r.finished_at) for r in reqs]
    # 2,048 tokens a step: the first prompt is scheduled at 0, each next one in the step
    # that completes the one before it (its first chunk fills the rest of the budget).
    assert started[0] == 0.0
    assert all(a < b < c for a, b, c in zip(started[1:], first[:3], first[1:], strict=True))
    phases = {
        "vllm:request_prefill_time_seconds": [b - a for a, b in zip(started, first, strict=True)],
        "vllm:request_decode_time_seconds": [b - a for a, b in zip(first, done, strict=True)],
        "vllm:request_inference_time_seconds": [b - a for a, b in zip(started, done, strict=True)],
        "vllm:request_queue_time_seconds": started,  # every request arrived at 0
    }
    for family, values in phases.items():
        assert hist(family, "_count") == 4.0, family
        assert hist(family, "_sum") == pytest.approx(sum(values), rel=1e-12), family
    # The phases add up: queue + inference is the end-to-end latency.
    e2e = hist("vllm:e2e_request_latency_seconds", "_sum")
    queue = hist("vllm:request_queue_time_seconds", "_sum")
    inference = hist("vllm:request_inference_time_seconds", "_sum")
    assert queue + inference == pytest.approx(e2e, rel=1e-12)
    assert hist("vllm:request_prompt_tokens", "_sum") == 32000.0
    assert hist("vllm:request_prompt_tokens", "_bucket", le="5000.0") == 0.0
    assert hist("vllm:request_prompt_tokens", "_bucket", le="10000.0") == 4.0
    assert hist("vllm:request_generation_tokens", "_sum") == 40.0
    assert hist("vllm:request_generation_tokens", "_bucket", le="5.0") == 0.0
    assert hist("vllm:request_generation_tokens", "_bucket", le="10.0") == 4.0
    assert hist("vllm:request_params_n", "_sum") == 4.0
    assert hist("vllm:request_params_n", "_bucket", le="1.0") == 4.0
    # max_tokens left out by the client: vLLM sets max_model_len - prompt = 24,768, above the
    # largest bucket (20,000) of a 32,768-token context.
    assert hist("vllm:request_params_max_tokens", "_sum") == 4 * (32768 - 8000)
    assert hist("vllm:request_params_max_tokens", "_bucket", le="20000.0") == 0.0
    # Steps that produced tokens (every step but the three that only prefilled a chunk);
    # they add up to the prompt and generation counters. The four steps that completed a
    # prompt count its 8,000 tokens (vLLM counts a prompt in the step of its first token).
    assert hist("vllm:iteration_tokens_total", "_count") == e.steps - 3
    assert hist("vllm:iteration_tokens_total", "_sum") == 32000 + 40
    assert hist("vllm:iteration_tokens_total", "_bucket", le="8192.0") == e.steps - 3
    assert hist("vllm:iteration_tokens_total", "_bucket", le="4096.0") == e.steps - 3 - 4
    # Every admitted context is looked up in the prefix cache; distinct prompts never hit.
    queries = f["vllm:prefix_cache_queries:counter"]
    assert queries == {_key("vllm:prefix_cache_queries_total"): 32000.0}
    assert f["vllm:prefix_cache_hits:counter"] == {_key("vllm:prefix_cache_hits_total"): 0.0}


def test_prefix_cache_queries_count_a_preempted_request_again() -> None:
    m = VllmMetrics()
    e = ReplicaEngine(name="r", metrics=m)
    # Two requests whose outputs outgrow the KV cache: one is preempted and prefilled again
    # with the tokens it had generated.
    reqs = [SimRequest(i, 0.0, 16000, 12000) for i in range(2)]
    for r in reqs:
        e.submit(r, 0.0)
    e.advance_to(1e4)
    assert all(r.done for r in reqs) and m.num_preemptions >= 1
    assert m.prefix_cache_queries > 32000
    assert m.prefix_cache_hits == 0
    assert m.request_prompt_tokens.count == 2 and m.request_prompt_tokens.sum == 32000


def test_v1_default_buckets_exactly() -> None:
    f = _families(VllmMetrics(model_name="m"))

    def les(fam: str) -> list[str]:
        return [dict(labels)["le"] for (name, labels) in f[fam] if name.endswith("_bucket")]

    def expected(bounds: tuple[float, ...]) -> list[str]:
        return [repr(float(b)) for b in bounds] + ["+Inf"]

    assert les("vllm:time_to_first_token_seconds:histogram") == expected(TTFT_BUCKETS)
    assert les("vllm:inter_token_latency_seconds:histogram") == expected(ITL_BUCKETS)
    assert les("vllm:e2e_request_latency_seconds:histogram") == expected(E2E_BUCKETS)
    for phase in ("queue", "inference", "prefill", "decode"):
        assert les(f"vllm:request_{phase}_time_seconds:histogram") == expected(E2E_BUCKETS)
    lengths = expected(one_two_five_buckets(32768))
    assert les("vllm:request_prompt_tokens:histogram") == lengths
    assert les("vllm:request_generation_tokens:histogram") == lengths
    assert les("vllm:request_params_max_tokens:histogram") == lengths
    assert les("vllm:request_params_n:histogram") == expected(PARAMS_N_BUCKETS)
    assert les("vllm:iteration_tokens_total:histogram") == expected(ITERATION_TOKEN_BUCKETS)
    assert one_two_five_buckets(32768)[-3:] == (5000, 10000, 20000)
    assert one_two_five_buckets(1) == (1,) and one_two_five_buckets(2048)[-1] == 2000
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


def test_old_names_and_hidden_metrics() -> None:
    # An older vLLM: the deprecated names only.
    old = set(_families(VllmMetrics(kv_metric_name="vllm:gpu_cache_usage_perc")))
    renamed = {
        "vllm:kv_cache_usage_perc:gauge",
        "vllm:prefix_cache_queries:counter",
        "vllm:prefix_cache_hits:counter",
        "vllm:inter_token_latency_seconds:histogram",
    }
    assert old == (V1_FAMILIES - renamed) | HIDDEN_FAMILIES
    # --show-hidden-metrics-for-version: both, with the same values.
    m = VllmMetrics(model_name="m", show_hidden_metrics=True)
    m.kv_cache_usage = 0.5
    m.inter_token_latency.observe(0.02, 3)
    both = _families(m)
    assert set(both) == V1_FAMILIES | NEWEST_FAMILIES | HIDDEN_FAMILIES
    assert both["vllm:gpu_cache_usage_perc:gauge"] == {_key("vllm:gpu_cache_usage_perc"): 0.5}
    assert both["vllm:kv_cache_usage_perc:gauge"] == {_key("vllm:kv_cache_usage_perc"): 0.5}
    tpot = both["vllm:time_per_output_token_seconds:histogram"]
    assert tpot[_key("vllm:time_per_output_token_seconds_count")] == 3.0
    assert tpot[_key("vllm:time_per_output_token_seconds_bucket", le="0.025")] == 3.0


def test_registries_are_per_replica() -> None:
    a, b = VllmMetrics(engine="0"), VllmMetrics(engine="0")
    a.num_requests_waiting = 7
    assert b"vllm:num_requests_waiting" in b.render()
    assert a.registry is not b.registry
    assert 'vllm:num_requests_waiting{engine="0",model_name' in a.render().decode()
    assert a.render() != b.render()


def test_the_replicas_are_labelled_with_the_model_they_are_calibrated_to() -> None:
    """The fleet's pods carry the served-model name of the sweep the replica model is
    calibrated to (``scaler.sim.calibration``), and the demo's page says the same."""
    from pathlib import Path

    from scaler.sim import calibration
    from scaler.sim.fleet import FleetConfig

    assert SERVED_MODEL_NAME == "mistralai/Mistral-7B-Instruct-v0.3"
    assert "Mistral-7B-Instruct-v0.3" in (calibration.__doc__ or "")
    assert FleetConfig().model_name == SERVED_MODEL_NAME
    text = VllmMetrics().render().decode()
    assert (
        'vllm:num_requests_waiting{engine="0",model_name="mistralai/Mistral-7B-Instruct-v0.3"}'
        in text
    )
    page = (Path(__file__).resolve().parents[2] / "docs" / "demo.md").read_text(encoding="utf-8")
    assert f'labelled `model_name="{SERVED_MODEL_NAME}"`' in page
    assert "Llama" not in text
