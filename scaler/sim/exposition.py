"""The simulated replica's ``/metrics``: vLLM's Prometheus metrics in its exposition format.

Names, types, labels, help texts and the V1 default histogram buckets follow vLLM's own source
(``vllm/v1/metrics/loggers.py``, ``vllm/v1/metrics/buckets.py``). Every family of the V1 set
that vLLM's own metrics test lists (``tests/entrypoints/openai/test_metrics.py``) is exported:
scheduler gauges, KV-cache usage, prefix-cache counters, token counters, finished requests by
reason, the per-request latency and phase histograms (TTFT, inter-token, end-to-end, queue,
inference, prefill, decode), the per-request length and parameter histograms and the tokens per
engine step. The newest families are exported too: prompt tokens by source
(``vllm:prompt_tokens_by_source_total``, ``_cached_total``, ``_recomputed_total``), the prompt
tokens each request computed (``vllm:request_prefill_kv_computed_tokens``) and the sleep state
(``vllm:engine_sleep_state``, ``vllm:engine_sleep_resource_state``,
``vllm:engine_fully_awake``); an emulated older vLLM (the ``vllm:gpu_cache_usage_perc`` name)
has none of them. Each replica has its own ``CollectorRegistry`` rendered with
``prometheus_client.generate_latest``.

The values live in plain Python fields and a custom collector turns them into metric families
at scrape time: the engine updates them at every simulated step (tens of thousands of steps per
CPU second), and a histogram can record one step's inter-token latency for the whole batch in
one call (:meth:`Histogram.observe` with ``count``), which prometheus-client's own ``Histogram``
cannot.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Final

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

#: The ``model_name`` label of the simulated replicas: the model of the concurrency sweep the
#: replica model is calibrated to (:mod:`scaler.sim.calibration`), as vLLM names a Hugging Face
#: model it serves.
SERVED_MODEL_NAME: Final = "mistralai/Mistral-7B-Instruct-v0.3"

__all__ = [
    "CONTENT_TYPE",
    "E2E_BUCKETS",
    "ITERATION_TOKEN_BUCKETS",
    "ITL_BUCKETS",
    "KV_METRIC_NEW",
    "KV_METRIC_OLD",
    "PARAMS_N_BUCKETS",
    "PROMPT_TOKEN_SOURCES",
    "SERVED_MODEL_NAME",
    "SLEEP_RESOURCE_STATES",
    "SLEEP_STATES",
    "TTFT_BUCKETS",
    "Histogram",
    "VllmMetrics",
    "one_two_five_buckets",
]

# What vLLM's /metrics answers: the classic Prometheus text format. (prometheus-client 0.26's
# CONTENT_TYPE_LATEST says version=1.0.0; vLLM and Prometheus scrapers know 0.0.4, and
# generate_latest writes exactly that format.)
CONTENT_TYPE: Final = "text/plain; version=0.0.4; charset=utf-8"

# KV-cache usage gauge, 0-1 fraction: new name from vLLM 0.9.2, old name up to 0.10.
KV_METRIC_NEW: Final = "vllm:kv_cache_usage_perc"
KV_METRIC_OLD: Final = "vllm:gpu_cache_usage_perc"

# V1 default buckets, seconds (vllm/v1/metrics/loggers.py).
TTFT_BUCKETS: Final[tuple[float, ...]] = (
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
    20.0, 40.0, 80.0, 160.0, 640.0, 2560.0,
)  # fmt: skip
ITL_BUCKETS: Final[tuple[float, ...]] = (
    0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
    20.0, 40.0, 80.0,
)  # fmt: skip
E2E_BUCKETS: Final[tuple[float, ...]] = (
    0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0,
    240.0, 480.0, 960.0, 1920.0, 7680.0,
)  # fmt: skip

# Tokens per engine step (vllm:iteration_tokens_total) and the n parameter, V1 defaults.
ITERATION_TOKEN_BUCKETS: Final[tuple[float, ...]] = (
    1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384,
)  # fmt: skip
PARAMS_N_BUCKETS: Final[tuple[float, ...]] = (1, 2, 5, 10, 20)


def one_two_five_buckets(max_value: int) -> tuple[float, ...]:
    """1, 2, 5, 10, 20, 50, ... up to ``max_value`` inclusive: vLLM's ``build_1_2_5_buckets``,
    the bounds of its token-length histograms (``max_value`` is ``max_model_len``)."""
    out: list[float] = []
    scale = 1
    while True:
        for mantissa in (1, 2, 5):
            if mantissa * scale > max_value:
                return tuple(out)
            out.append(mantissa * scale)
        scale *= 10


# vLLM pre-creates request_success series for every finished reason (its FinishReason enum,
# newest first-class members included), so they exist at 0.
FINISHED_REASONS: Final = ("stop", "length", "abort", "error", "repetition")

#: Sources of ``vllm:prompt_tokens_by_source_total`` (vLLM's PromptTokenStats.ALL_SOURCES).
PROMPT_TOKEN_SOURCES: Final = ("local_compute", "local_cache_hit", "external_kv_transfer")
#: ``vllm:engine_sleep_state``'s ``sleep_state`` values: awake, sleep level 1, sleep level 2.
SLEEP_STATES: Final = ("awake", "weights_offloaded", "discard_all")
#: ``vllm:engine_sleep_resource_state``'s resources and their states.
SLEEP_RESOURCE_STATES: Final = (
    ("scheduler", ("running", "paused")),
    ("weights", ("resident", "offloaded", "discarded", "unknown")),
    ("kv_cache", ("resident", "released", "unknown")),
)

# Deprecated names vLLM still exports when started with --show-hidden-metrics-for-version.
_OLD_PREFIX_CACHE: Final = "vllm:gpu_prefix_cache"
_NEW_PREFIX_CACHE: Final = "vllm:prefix_cache"
_OLD_ITL: Final = "vllm:time_per_output_token_seconds"
_NEW_ITL: Final = "vllm:inter_token_latency_seconds"


class Histogram:
    """A Prometheus histogram kept as plain counts (upper bounds in seconds or tokens, ``le``
    inclusive)."""

    __slots__ = ("bounds", "count", "counts", "sum")

    def __init__(self, bounds: Sequence[float]) -> None:
        self.bounds: tuple[float, ...] = tuple(bounds)
        # counts[i] = observations in (bounds[i-1], bounds[i]]; the last slot is +Inf.
        self.counts: list[int] = [0] * (len(self.bounds) + 1)
        self.sum = 0.0
        self.count = 0

    def observe(self, value: float, count: int = 1, *, total: float | None = None) -> None:
        """Record ``count`` observations of ``value`` (seconds or tokens); ``total``: their
        exact sum when they are several values whose mean is ``value``."""
        if count <= 0:
            return
        self.counts[bisect.bisect_left(self.bounds, value)] += count
        self.sum += value * count if total is None else total
        self.count += count

    def cumulative(self) -> list[tuple[str, float]]:
        """``(le, cumulative count)`` pairs as the exposition format wants them, ending +Inf."""
        out: list[tuple[str, float]] = []
        running = 0
        for bound, c in zip(self.bounds, self.counts, strict=False):
            running += c
            # repr matches prometheus-client's floatToGoString for these bounds ("1.0", "0.001").
            out.append((repr(float(bound)), float(running)))
        out.append(("+Inf", float(self.count)))
        return out


class VllmMetrics:
    """One replica's vLLM metrics (V1 engine layout: labels ``model_name`` and ``engine``).

    The engine writes the public fields directly; :meth:`render` produces the ``/metrics`` body.

    Attributes:
        num_requests_running: requests in the running batch (gauge).
        num_requests_waiting: requests queued, not yet scheduled (gauge).
        kv_cache_usage: KV-cache usage, a 0-1 fraction (gauge, exported under
            ``kv_metric_name`` and, with hidden metrics shown, the old name too).
        prefix_cache_queries, prefix_cache_hits: prompt tokens looked up in the prefix cache
            and found there (counters, ``vllm:prefix_cache_queries_total`` / ``_hits_total``).
        num_preemptions: cumulative preemptions (counter, ``vllm:num_preemptions_total``).
        prompt_tokens: cumulative prefill tokens (counter).
        generation_tokens: cumulative generated tokens (counter).
        request_success: finished requests by ``finished_reason`` (counter).
        ttft, inter_token_latency, e2e_latency, queue_time: histograms, seconds.
        inference_time, prefill_time, decode_time: per finished request, seconds from its
            first scheduling to its last token, to its first token, and from its first to its
            last token (vLLM's RUNNING, PREFILL and DECODE phases).
        request_prompt_tokens, request_generation_tokens: per finished request, tokens.
        request_params_n, request_params_max_tokens: per finished request, the ``n`` and
            ``max_tokens`` sampling parameters.
        iteration_tokens: per engine step, prompt plus generated tokens
            (``vllm:iteration_tokens_total``, a histogram despite its name).
        prompt_tokens_by_source: prompt tokens of requests whose prefill completed, by where
            their KV came from (``local_compute``, ``local_cache_hit``,
            ``external_kv_transfer``); ``prompt_tokens_cached`` their cached part,
            ``prompt_tokens_recomputed`` cached tokens computed anyway (the last prompt token
            of a prompt found whole in the cache).
        request_prefill_kv_computed_tokens: per request, prompt tokens computed (not cached).
        sleep_level: 0 awake, 1 or 2 asleep at that level; ``waking``: a wake-up in progress.
        enable_prefix_caching: the ``enable_prefix_caching`` label of ``cache_config_info``.
    """

    def __init__(
        self,
        *,
        model_name: str = SERVED_MODEL_NAME,
        engine: str = "0",
        kv_metric_name: str = KV_METRIC_NEW,
        show_hidden_metrics: bool = False,
        max_model_len: int = 32768,
        block_size: int = 16,
        num_gpu_blocks: int = 2688,
        gpu_memory_utilization: float = 0.92,
        extra_cache_info: Mapping[str, str] | None = None,
    ) -> None:
        """Create the metrics and their registry.

        Args:
            model_name: value of the ``model_name`` label (vLLM's served model name).
            engine: value of the ``engine`` label (engine index as a string).
            kv_metric_name: ``vllm:kv_cache_usage_perc`` (vLLM >= 0.9.2) or
                ``vllm:gpu_cache_usage_perc`` to emulate an older vLLM, which also names the
                prefix-cache counters ``vllm:gpu_prefix_cache_*`` and has
                ``vllm:time_per_output_token_seconds`` instead of the inter-token latency.
            show_hidden_metrics: also export those deprecated names beside the new ones, as
                vLLM does with ``--show-hidden-metrics-for-version`` (and 0.9.2-0.10 did for
                the KV-cache gauge).
            max_model_len: tokens; the largest bound of the token-length histograms.
            block_size, num_gpu_blocks, gpu_memory_utilization: labels of
                ``vllm:cache_config_info``.
            extra_cache_info: more ``vllm:cache_config_info`` labels.

        Raises:
            ValueError: an unknown ``kv_metric_name``.
        """
        if kv_metric_name not in (KV_METRIC_NEW, KV_METRIC_OLD):
            raise ValueError(
                f"kv_metric_name must be {KV_METRIC_NEW!r} or {KV_METRIC_OLD!r}, "
                f"got {kv_metric_name!r}"
            )
        self.model_name = model_name
        self.engine = engine
        old_only = kv_metric_name == KV_METRIC_OLD

        def names(new: str, old: str) -> tuple[str, ...]:
            return (old,) if old_only else (new, old) if show_hidden_metrics else (new,)

        self.newest = not old_only
        self.kv_metric_names = names(KV_METRIC_NEW, KV_METRIC_OLD)
        self.prefix_cache_names = names(_NEW_PREFIX_CACHE, _OLD_PREFIX_CACHE)
        self.itl_names = names(_NEW_ITL, _OLD_ITL)
        self.cache_info: dict[str, str] = {
            "block_size": str(block_size),
            "cache_dtype": "auto",
            "gpu_memory_utilization": str(gpu_memory_utilization),
            "num_cpu_blocks": "0",
            "num_gpu_blocks": str(num_gpu_blocks),
            **(extra_cache_info or {}),
            "engine": engine,
        }
        self.num_requests_running = 0
        self.num_requests_waiting = 0
        self.kv_cache_usage = 0.0
        self.prefix_cache_queries = 0
        self.prefix_cache_hits = 0
        self.num_preemptions = 0
        self.prompt_tokens = 0
        self.generation_tokens = 0
        self.request_success: dict[str, int] = dict.fromkeys(FINISHED_REASONS, 0)
        self.ttft = Histogram(TTFT_BUCKETS)
        self.inter_token_latency = Histogram(ITL_BUCKETS)
        self.e2e_latency = Histogram(E2E_BUCKETS)
        self.queue_time = Histogram(E2E_BUCKETS)
        self.inference_time = Histogram(E2E_BUCKETS)
        self.prefill_time = Histogram(E2E_BUCKETS)
        self.decode_time = Histogram(E2E_BUCKETS)
        lengths = one_two_five_buckets(max_model_len)
        self.request_prompt_tokens = Histogram(lengths)
        self.request_generation_tokens = Histogram(lengths)
        self.request_params_n = Histogram(PARAMS_N_BUCKETS)
        self.request_params_max_tokens = Histogram(lengths)
        self.iteration_tokens = Histogram(ITERATION_TOKEN_BUCKETS)
        self.prompt_tokens_by_source: dict[str, int] = dict.fromkeys(PROMPT_TOKEN_SOURCES, 0)
        self.prompt_tokens_cached = 0
        self.prompt_tokens_recomputed = 0
        self.request_prefill_kv_computed_tokens = Histogram(lengths)
        self.sleep_level = 0
        self.waking = False
        # vLLM V1's default; the engine sets it from its model
        self.enable_prefix_caching = True
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(_VllmCollector(self))

    def record_prompt_sources(self, prompt_tokens: int, cached: int, recomputed: int) -> None:
        """Count a request whose prefill completed: ``prompt_tokens`` of which ``cached`` came
        from the prefix cache and ``recomputed`` cached ones were computed anyway (vLLM's
        PromptTokenStats; nothing comes from an external KV transfer here)."""
        self.prompt_tokens_by_source["local_cache_hit"] += cached
        self.prompt_tokens_by_source["local_compute"] += prompt_tokens - cached
        self.prompt_tokens_cached += cached
        self.prompt_tokens_recomputed += recomputed
        self.request_prefill_kv_computed_tokens.observe(prompt_tokens - cached)

    def render(self) -> bytes:
        """The ``/metrics`` body (Prometheus text format 0.0.4, see :data:`CONTENT_TYPE`)."""
        return generate_latest(self.registry)


class _VllmCollector(Collector):
    """Turns a :class:`VllmMetrics`' fields into metric families at scrape time."""

    def __init__(self, m: VllmMetrics) -> None:
        self._m = m

    def collect(self) -> Iterable[Metric]:
        return list(self._families())

    def _families(self) -> Iterator[Metric]:
        m = self._m
        names = ["model_name", "engine"]
        values = [m.model_name, m.engine]

        def gauge(name: str, doc: str, value: float) -> GaugeMetricFamily:
            g = GaugeMetricFamily(name, doc, labels=names)
            g.add_metric(values, value)
            return g

        def counter(name: str, doc: str, value: float) -> CounterMetricFamily:
            c = CounterMetricFamily(name, doc, labels=names)
            c.add_metric(values, value)
            return c

        def histogram(name: str, doc: str, h: Histogram) -> HistogramMetricFamily:
            f = HistogramMetricFamily(name, doc, labels=names)
            f.add_metric(values, h.cumulative(), h.sum)
            return f

        yield gauge(
            "vllm:num_requests_running",
            "Number of requests in model execution batches.",
            m.num_requests_running,
        )
        yield gauge(
            "vllm:num_requests_waiting",
            "Number of requests waiting to be processed.",
            m.num_requests_waiting,
        )
        for kv_name in m.kv_metric_names:
            prefix = "GPU " if kv_name == KV_METRIC_OLD else ""
            doc = f"{prefix}KV-cache usage. 1 means 100 percent usage."
            yield gauge(kv_name, doc, m.kv_cache_usage)
        for pc in m.prefix_cache_names:
            gpu = "GPU " if pc == _OLD_PREFIX_CACHE else ""
            yield counter(
                f"{pc}_queries",
                f"{gpu}Prefix cache queries, in terms of number of queried tokens.",
                m.prefix_cache_queries,
            )
            yield counter(
                f"{pc}_hits",
                f"{gpu}Prefix cache hits, in terms of number of cached tokens.",
                m.prefix_cache_hits,
            )
        yield counter(
            "vllm:num_preemptions",
            "Cumulative number of preemption from the engine.",
            m.num_preemptions,
        )
        if m.newest:
            yield from _sleep_families(m, names, values)
        yield counter("vllm:prompt_tokens", "Number of prefill tokens processed.", m.prompt_tokens)
        if m.newest:
            by_source = CounterMetricFamily(
                "vllm:prompt_tokens_by_source",
                "Number of prompt tokens by source.",
                labels=[*names, "source"],
            )
            for source, n in m.prompt_tokens_by_source.items():
                by_source.add_metric([*values, source], n)
            yield by_source
            yield counter(
                "vllm:prompt_tokens_cached",
                "Number of cached prompt tokens (local + external).",
                m.prompt_tokens_cached,
            )
            yield counter(
                "vllm:prompt_tokens_recomputed",
                "Number of cached tokens recomputed for forward pass.",
                m.prompt_tokens_recomputed,
            )
        yield counter(
            "vllm:generation_tokens",
            "Number of generation tokens processed.",
            m.generation_tokens,
        )
        success = CounterMetricFamily(
            "vllm:request_success",
            "Count of successfully processed requests.",
            labels=[*names, "finished_reason"],
        )
        for reason, n in m.request_success.items():
            success.add_metric([*values, reason], n)
        yield success
        itl = {
            _NEW_ITL: "Histogram of inter-token latency in seconds.",
            _OLD_ITL: "Histogram of time per output token in seconds.",
        }
        phase = "Histogram of time spent in {} phase for request."
        for name, doc, h in (
            (
                "vllm:request_prompt_tokens",
                "Number of prefill tokens processed.",
                m.request_prompt_tokens,
            ),
            (
                "vllm:request_generation_tokens",
                "Number of generation tokens processed.",
                m.request_generation_tokens,
            ),
            (
                "vllm:iteration_tokens_total",
                "Histogram of number of tokens per engine_step.",
                m.iteration_tokens,
            ),
            ("vllm:request_params_n", "Histogram of the n request parameter.", m.request_params_n),
            (
                "vllm:request_params_max_tokens",
                "Histogram of the max_tokens request parameter.",
                m.request_params_max_tokens,
            ),
            (
                "vllm:time_to_first_token_seconds",
                "Histogram of time to first token in seconds.",
                m.ttft,
            ),
            *((name, itl[name], m.inter_token_latency) for name in m.itl_names),
            (
                "vllm:e2e_request_latency_seconds",
                "Histogram of e2e request latency in seconds.",
                m.e2e_latency,
            ),
            ("vllm:request_queue_time_seconds", phase.format("WAITING"), m.queue_time),
            ("vllm:request_inference_time_seconds", phase.format("RUNNING"), m.inference_time),
            ("vllm:request_prefill_time_seconds", phase.format("PREFILL"), m.prefill_time),
            ("vllm:request_decode_time_seconds", phase.format("DECODE"), m.decode_time),
        ):
            yield histogram(name, doc, h)
        if m.newest:
            yield histogram(
                "vllm:request_prefill_kv_computed_tokens",
                "Histogram of new KV tokens computed during prefill (excluding cached tokens).",
                m.request_prefill_kv_computed_tokens,
            )
        cache_info = {**m.cache_info, "enable_prefix_caching": str(m.enable_prefix_caching)}
        info = GaugeMetricFamily(
            "vllm:cache_config_info",
            "Information of the LLMEngine CacheConfig",
            labels=list(cache_info),
        )
        info.add_metric(list(cache_info.values()), 1.0)
        yield info


def _sleep_families(m: VllmMetrics, names: list[str], values: list[str]) -> Iterator[Metric]:
    """``vllm:engine_sleep_state`` (one of awake / weights_offloaded / discard_all is 1),
    ``vllm:engine_sleep_resource_state`` and ``vllm:engine_fully_awake``, as the newest vLLM
    exports them. A wake-up in progress still reads as asleep: vLLM reports a state once it
    is confirmed."""
    level = m.sleep_level
    state = SLEEP_STATES[level]
    legacy = GaugeMetricFamily(
        "vllm:engine_sleep_state",
        "Engine sleep state; awake = 0 means engine is sleeping; awake = 1 means engine is "
        "awake; weights_offloaded = 1 means sleep level 1; discard_all = 1 means sleep level 2.",
        labels=[*names, "sleep_state"],
    )
    for s in SLEEP_STATES:
        legacy.add_metric([*values, s], 1.0 if s == state else 0.0)
    yield legacy
    current = {
        "scheduler": "paused" if level else "running",
        "weights": ("resident", "offloaded", "discarded")[level],
        "kv_cache": "released" if level else "resident",
    }
    resource = GaugeMetricFamily(
        "vllm:engine_sleep_resource_state",
        "Engine sleep resource state: 1 for the current state of each resource.",
        labels=[*names, "resource", "state"],
    )
    for name, states in SLEEP_RESOURCE_STATES:
        for s in states:
            resource.add_metric([*values, name, s], 1.0 if current[name] == s else 0.0)
    yield resource
    awake = GaugeMetricFamily(
        "vllm:engine_fully_awake",
        "1 when scheduling runs and the weights and the KV cache are resident.",
        labels=names,
    )
    awake.add_metric(values, 0.0 if level else 1.0)
    yield awake
