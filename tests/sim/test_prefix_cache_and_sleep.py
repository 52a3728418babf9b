"""The replica's prefix cache (stated hits and block hashes) and sleep mode, through the engine
and its /metrics."""

from __future__ import annotations

import pytest
from prometheus_client.parser import text_string_to_metric_families

from scaler.sim.engine import ReplicaEngine, ReplicaModel, SimRequest
from scaler.sim.exposition import VllmMetrics
from scaler.sim.prefix_cache import PrefixCache

RATE = ReplicaModel().prefill_tokens_per_second


def _engine(model: ReplicaModel | None = None) -> tuple[ReplicaEngine, VllmMetrics]:
    m = VllmMetrics(model_name="m")
    return ReplicaEngine(model, name="r", metrics=m), m


def _samples(m: VllmMetrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for fam in text_string_to_metric_families(m.render().decode()):
        for s in fam.samples:
            labels = tuple(sorted((k, v) for k, v in s.labels.items() if k != "model_name"))
            out[(s.name, labels)] = s.value
    return out


def test_a_stated_hit_is_not_computed_and_is_counted_by_source() -> None:
    e, m = _engine()
    r = SimRequest(1, 0.0, 8000, 2, cached_tokens=6400)
    e.submit(r, 0.0)
    e.advance_to(10.0)
    # 1,600 tokens computed in one compute-bound step instead of 8,000 in four.
    assert r.ttft == pytest.approx(1600 / RATE, rel=1e-9)
    assert r.prefix_hit_tokens == 6400
    got = _samples(m)
    assert got[("vllm:prefix_cache_queries_total", (("engine", "0"),))] == 8000
    assert got[("vllm:prefix_cache_hits_total", (("engine", "0"),))] == 6400
    by = "vllm:prompt_tokens_by_source_total"
    assert got[(by, (("engine", "0"), ("source", "local_cache_hit")))] == 6400
    assert got[(by, (("engine", "0"), ("source", "local_compute")))] == 1600
    assert got[(by, (("engine", "0"), ("source", "external_kv_transfer")))] == 0
    assert got[("vllm:prompt_tokens_cached_total", (("engine", "0"),))] == 6400
    assert got[("vllm:prompt_tokens_total", (("engine", "0"),))] == 8000
    assert got[("vllm:request_prefill_kv_computed_tokens_sum", (("engine", "0"),))] == 1600


def test_a_prompt_found_whole_still_computes_its_last_block() -> None:
    e, m = _engine()
    r = SimRequest(1, 0.0, 4000, 1, cached_tokens=4000)
    e.submit(r, 0.0)
    e.advance_to(10.0)
    # Hits are whole 16-token blocks and stop before the last token (vLLM needs its logits).
    assert r.prefix_hit_tokens == 3984
    assert m.prompt_tokens_recomputed == 16
    assert m.prompt_tokens_by_source["local_compute"] == 16


def test_prefix_caching_off_computes_everything() -> None:
    e, m = _engine(ReplicaModel(enable_prefix_caching=False))
    r = SimRequest(1, 0.0, 4000, 1, cached_tokens=3000)
    e.submit(r, 0.0)
    e.advance_to(10.0)
    assert r.prefix_hit_tokens == 0 and m.prefix_cache_hits == 0
    assert 'enable_prefix_caching="False"' in m.render().decode()


def test_block_hashes_hit_what_an_earlier_prompt_left_in_the_cache() -> None:
    e, m = _engine()
    first = SimRequest(1, 0.0, 2048, 2, block_hashes=(11, 12, 13, 14), hash_block_tokens=512)
    e.submit(first, 0.0)
    e.advance_to(5.0)
    assert first.prefix_hit_tokens == 0
    # Shares the first three blocks (a system prompt and a conversation's earlier turns).
    second = SimRequest(2, 5.0, 2048, 2, block_hashes=(11, 12, 13, 99), hash_block_tokens=512)
    e.submit(second, 5.0)
    e.advance_to(10.0)
    assert second.prefix_hit_tokens == 1536
    assert second.ttft == pytest.approx(512 / RATE, rel=1e-9)
    other = SimRequest(3, 10.0, 2048, 2, block_hashes=(21, 22, 23, 24), hash_block_tokens=512)
    e.submit(other, 10.0)
    e.advance_to(20.0)
    assert other.prefix_hit_tokens == 0
    assert m.prefix_cache_hits == 1536 and m.prefix_cache_queries == 3 * 2048


def test_the_cache_evicts_the_least_recently_used_blocks() -> None:
    cache = PrefixCache(capacity_tokens=3 * 512)
    cache.insert((1, 2), 512)
    cache.insert((3,), 512)
    assert cache.lookup((1,), 512) == 512  # 1 is now the most recent
    cache.insert((4,), 512)  # evicts 2, the least recently used
    assert cache.lookup((1, 2), 512) == 512
    assert cache.lookup((3, 4), 512) == 1024
    assert len(cache) == 3 and cache.used_tokens == 1536
    with pytest.raises(ValueError, match="capacity_tokens"):
        PrefixCache(0)


def test_sleep_serves_nothing_until_the_wake_up_completes() -> None:
    e, m = _engine()
    reqs = [SimRequest(i, 0.0, 1000, 200) for i in range(3)]
    for r in reqs:
        e.submit(r, 0.0)
    e.advance_to(1.0)
    e.sleep(1, 1.0)
    generated = [r.tokens_generated for r in reqs]  # brought up to date as they left the batch
    assert all(g > 40 for g in generated)
    assert e.asleep and e.num_running == 0 and e.num_waiting == 3 and e.kv_usage_ratio == 0
    got = _samples(m)
    state = "vllm:engine_sleep_state"
    assert got[(state, (("engine", "0"), ("sleep_state", "weights_offloaded")))] == 1
    assert got[(state, (("engine", "0"), ("sleep_state", "awake")))] == 0
    resource = "vllm:engine_sleep_resource_state"
    assert got[(resource, (("engine", "0"), ("resource", "weights"), ("state", "offloaded")))] == 1
    assert got[(resource, (("engine", "0"), ("resource", "scheduler"), ("state", "paused")))] == 1
    assert got[(resource, (("engine", "0"), ("resource", "kv_cache"), ("state", "released")))] == 1
    assert got[("vllm:engine_fully_awake", (("engine", "0"),))] == 0
    late = SimRequest(9, 30.0, 100, 10)
    e.submit(late, 30.0)  # accepted into the paused queue
    e.advance_to(100.0)
    assert [r.tokens_generated for r in reqs] == generated and late.first_token_at is None
    e.wake_up(100.0)
    e.advance_to(101.9)
    assert late.first_token_at is None and e.asleep  # level 1 wakes in 2 s
    e.advance_to(200.0)
    assert not e.asleep and all(r.done for r in [*reqs, late])
    # Their KV was discarded: prefilled again from the prompt and the tokens they had.
    assert all(r.preemptions == 0 for r in reqs) and m.num_preemptions == 0
    assert late.first_token_at is not None and late.first_token_at > 102.0
    assert _samples(m)[("vllm:engine_fully_awake", (("engine", "0"),))] == 1


def test_level_2_discards_the_weights_and_wakes_slower() -> None:
    e, m = _engine()
    e.sleep(2, 0.0)
    assert m.sleep_level == 2
    text = m.render().decode()
    assert 'sleep_state="discard_all"} 1.0' in text
    assert 'resource="weights",state="discarded"} 1.0' in text
    r = SimRequest(1, 1.0, 100, 2)
    e.submit(r, 1.0)
    e.wake_up(10.0)
    e.wake_up(20.0)  # already waking: no later
    e.advance_to(200.0)
    assert r.first_token_at is not None
    assert r.first_token_at == pytest.approx(10.0 + 60.0 + 101 / RATE, abs=0.02)


def test_sleep_empties_the_prefix_cache_and_refuses_an_unknown_level() -> None:
    e, _ = _engine()
    r = SimRequest(1, 0.0, 1024, 1, block_hashes=(1, 2), hash_block_tokens=512)
    e.submit(r, 0.0)
    e.advance_to(1.0)
    assert len(e.prefix_cache) == 2
    e.sleep(1, 1.0)
    assert len(e.prefix_cache) == 0
    with pytest.raises(ValueError, match="sleep level: expected 1 or 2, got 3"):
        e.sleep(3, 2.0)


def test_mean_itl_is_the_requests_tpot() -> None:
    e, _ = _engine()
    r = SimRequest(1, 0.0, 512, 101)
    one = SimRequest(2, 0.0, 512, 1)
    e.submit(r, 0.0)
    e.submit(one, 0.0)
    e.advance_to(60.0)
    assert r.mean_itl is not None and r.finished_at is not None and r.first_token_at is not None
    assert r.mean_itl == pytest.approx((r.finished_at - r.first_token_at) / 100)
    assert 0.017 < r.mean_itl < 0.019
    assert one.mean_itl is None  # a single token has no gap
