"""What a simulated vLLM replica is: its performance model and the requests it serves.

:class:`ReplicaModel` holds the speed, memory and scheduling constants of one replica (vLLM's
defaults for the modelled GPU, calibrated to a published sweep: :mod:`scaler.sim.calibration`);
:class:`SimRequest` is one request with its results. :mod:`scaler.sim.engine` runs them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = [
    "MODELED_GPU",
    "SLEEP_LEVELS",
    "ReplicaModel",
    "SimRequest",
    "vllm_default_max_num_batched_tokens",
]

#: vLLM's sleep levels: 1 offloads the weights to CPU memory and discards the KV cache, 2
#: discards both (``docs/features/sleep_mode.md``).
SLEEP_LEVELS = (1, 2)


def vllm_default_max_num_batched_tokens(
    gpu_memory_gib: float, gpu_name: str, *, api_server: bool = True
) -> int:
    """vLLM V1's default step budget (``max_num_batched_tokens``) for a GPU, tokens.

    The rule of ``EngineArgs.get_batch_defaults`` (``vllm/engine/arg_utils.py``): on a GPU
    with at least 70 GiB that is not an A100 (H100, H200, MI300X) 8,192 for the OpenAI API
    server and 16,384 for the offline ``LLM`` class; on every other GPU 2,048 and 8,192 (a
    large budget on an A100 lowered its throughput, vLLM PR #17885).

    Args:
        gpu_memory_gib: the GPU's memory, GiB.
        gpu_name: its device name (case does not matter).
        api_server: ``vllm serve`` (True) or the offline ``LLM`` class.
    """
    large = gpu_memory_gib >= 70 and "a100" not in gpu_name.lower()
    if large:
        return 8192 if api_server else 16384
    return 2048 if api_server else 8192


#: The GPU the replica model stands for, name and memory in GiB (see :class:`ReplicaModel`).
MODELED_GPU = ("NVIDIA GeForce RTX 4090", 24.0)


@dataclass(frozen=True, slots=True)
class ReplicaModel:
    """Performance model of one replica; defaults: a 7-8B model in BF16 on one 24 GB GPU.

    Calibrated on the figures collected in the project's serving-figures reference (public
    2025-2026 write-ups on serving vLLM), RTX 4090-class GPU:

    - Speed: the concurrency sweep of ``vllm bench serve`` with Mistral-7B-Instruct-v0.3 on an
      RTX 4090, 256 prompt / 128 output tokens, infinite request rate capped at 4, 8, 16, 32
      and 48 requests in flight. :mod:`scaler.sim.calibration` replays it on this model and a
      test holds output throughput, mean TTFT and mean TPOT within 25% of it at every
      concurrency (the table and the two step budgets are in that module's docstring).
    - KV cache: about 6 GB free after 16 GB of weights and 2 GB of overhead, at 144 KB/token
      (Qwen3 8B, GQA, BF16) about 43K tokens: 2688 blocks of 16 tokens = 43,008 tokens
      (PagedAttention block size 16, Kwon et al., SOSP 2023).

    Where the rougher single figures of the same write-ups disagree with the sweep, the sweep
    wins: the model gives an idle TPOT of 17.4 ms (not "about 30 ms", which the sweep's own
    210 tokens/s at concurrency 4 rules out), 41 tokens/s per session at concurrency 16 (not
    "about 50"), and an idle TTFT of 383 ms for an 8K prompt (not "about 250 ms": the sweep's
    prefill rate, 21,400 tokens/s, gives that; under the 2,048-token step budget the prompt
    is prefilled in four chunks).

    Step duration, seconds (a roofline: a step is bound by memory bandwidth or by compute,
    whichever is slower, plus a per-sequence cost that does not overlap)::

        max(step_overhead_seconds                        # reading the weights once per step
            + kv_read_seconds_per_token * kv_tokens,     # decode attention reads the batch's KV
            (prefill_tokens + decodes) / prefill_tokens_per_second)   # compute
        + decode_seconds_per_seq * decodes               # per-sequence sampling and scheduling

    where ``kv_tokens`` is the KV blocks in use times the block size and ``prefill_tokens``
    the prompt tokens computed in the step (prefix-cache hits are not computed). The KV read
    cost is 144 KB/token at about 1 TB/s of memory bandwidth: 1.4e-7 s per token, 6 ms for a
    full cache.

    ``max_num_batched_tokens`` is vLLM V1's default for this GPU: 2,048 tokens per step for
    ``vllm serve`` on a GPU under 70 GiB (:func:`vllm_default_max_num_batched_tokens`, the
    rule of ``EngineArgs.get_batch_defaults`` in ``vllm/engine/arg_utils.py``). A long prompt
    is therefore prefilled in chunks of about 2,048 tokens, each step about 0.1 s, and the
    running decodes get a token every step (an earlier budget of 16,384 stalled them for
    0.77 s behind one 16K prompt).

    Attributes:
        kv_cache_blocks: KV-cache blocks on the GPU (vLLM's ``num_gpu_blocks``).
        block_size: tokens per KV block.
        max_num_seqs: largest running batch (vLLM default 256).
        max_num_batched_tokens: token budget per step (chunked prefill), tokens.
        max_model_len: longest prompt + output accepted, tokens; longer requests are rejected
            at submission as vLLM's API server does.
        step_overhead_seconds: memory-bound floor of one step (weights read once), seconds.
        decode_seconds_per_seq: extra cost per decoding sequence, seconds.
        kv_read_seconds_per_token: cost per KV token held, seconds.
        prefill_tokens_per_second: compute throughput (prefill and decode tokens), tokens/s.
        model_load_seconds: time from pod start to ready (weights load), seconds; used by the
            fleet simulator (30 s to 5 minutes in the write-ups; 120 s is the middle).
        enable_prefix_caching: automatic prefix caching (vLLM V1's default: on).
        wake_level1_seconds: a level-1 wake-up, seconds: 14.5 GB of weights back from CPU
            memory over PCIe (about 12 GB/s) and the KV cache allocated again ("seconds" in
            vLLM's sleep-mode write-ups, against 30-100+ s for a cold load).
        wake_level2_seconds: a level-2 wake-up, seconds: the weights were discarded and are
            read again from storage (the bulk of a model load, without the process start).
    """

    kv_cache_blocks: int = 2688
    block_size: int = 16
    max_num_seqs: int = 256
    max_num_batched_tokens: int = vllm_default_max_num_batched_tokens(
        MODELED_GPU[1], MODELED_GPU[0]
    )
    max_model_len: int = 32768
    step_overhead_seconds: float = 0.017
    decode_seconds_per_seq: float = 0.00035
    kv_read_seconds_per_token: float = 1.4e-7
    prefill_tokens_per_second: float = 21_400.0
    model_load_seconds: float = 120.0
    enable_prefix_caching: bool = True
    wake_level1_seconds: float = 2.0
    wake_level2_seconds: float = 60.0

    def __post_init__(self) -> None:
        if self.kv_cache_blocks <= 0 or self.block_size <= 0 or self.max_num_seqs <= 0:
            raise ValueError("kv_cache_blocks, block_size and max_num_seqs must be > 0")
        if self.max_num_batched_tokens < self.max_num_seqs:
            # Otherwise decodes alone could exceed the budget; vLLM enforces the same.
            raise ValueError("max_num_batched_tokens must be >= max_num_seqs")
        if self.max_model_len + 1 > self.kv_capacity_tokens:
            # vLLM refuses to start when one maximal request cannot fit in the KV cache.
            raise ValueError(
                f"max_model_len {self.max_model_len} does not fit in the KV cache "
                f"({self.kv_capacity_tokens} tokens)"
            )
        if self.prefill_tokens_per_second <= 0 or self.step_overhead_seconds <= 0:
            raise ValueError("prefill_tokens_per_second and step_overhead_seconds must be > 0")
        if not (self.wake_level1_seconds >= 0 and self.wake_level2_seconds >= 0):
            raise ValueError("wake_level1_seconds and wake_level2_seconds must be >= 0")

    @property
    def kv_capacity_tokens(self) -> int:
        """KV-cache capacity in tokens."""
        return self.kv_cache_blocks * self.block_size

    def wake_seconds(self, level: int) -> float:
        """Seconds a wake-up from sleep ``level`` (1 or 2) takes."""
        return self.wake_level1_seconds if level == 1 else self.wake_level2_seconds

    def step_seconds(self, decodes: int, kv_tokens: int, prefill_tokens: int) -> float:
        """Duration of one engine step, seconds (the roofline in the class docstring)."""
        memory = self.step_overhead_seconds + self.kv_read_seconds_per_token * kv_tokens
        compute = (prefill_tokens + decodes) / self.prefill_tokens_per_second
        return max(memory, compute) + self.decode_seconds_per_seq * decodes


@dataclass(slots=True, eq=False)
class SimRequest:
    """One request in a simulated replica, with its results (times in seconds).

    Attributes:
        id: caller's identifier.
        arrival: arrival time, seconds.
        prompt_tokens: prompt length, tokens.
        output_tokens: tokens to generate (at least 1 is generated).
        first_scheduled_at: start of the step that first scheduled it (queue time ends).
        first_token_at: end of the step that completed its prefill.
        finished_at: end of the step that produced its last token, or the abort time.
        tokens_generated: output tokens produced so far.
        preemptions: times it was preempted.
        cut: aborted by :meth:`ReplicaEngine.abort_all` (scale-down) before finishing.
        rejected: refused at submission (longer than ``max_model_len``).
        cached_tokens: the prompt's stated prefix-cache hit, tokens (a trace with a stated hit
            rate); used when the request carries no ``block_hashes``.
        block_hashes: hashes of the prompt's blocks, each ``hash_block_tokens`` tokens, chained
            (a trace's ``hash_ids``): the prefix cache looks them up.
        hash_block_tokens: tokens per hash of ``block_hashes``.
        prefix_hit_tokens: prompt tokens found in the prefix cache at its first admission.
    """

    id: int
    arrival: float
    prompt_tokens: int
    output_tokens: int
    first_scheduled_at: float | None = None
    first_token_at: float | None = None
    finished_at: float | None = None
    tokens_generated: int = 0
    preemptions: int = 0
    cut: bool = False
    rejected: bool = False
    cached_tokens: int = 0
    block_hashes: tuple[int, ...] = ()
    hash_block_tokens: int = 0
    prefix_hit_tokens: int = 0
    # Engine bookkeeping (not results).
    _computed: int = field(default=0, repr=False)  # tokens whose KV is computed this admission
    _context: int = field(default=0, repr=False)  # tokens to prefill at this admission
    _blocks: int = field(default=0, repr=False)  # KV blocks held while prefilling
    _d: int = field(default=0, repr=False)  # decoding: KV tokens at step s are s + _d
    _origin_step: int = field(default=0, repr=False)  # step index its decoding started
    _gen_at_origin: int = field(default=0, repr=False)  # tokens_generated after that step
    _epoch: int = field(default=0, repr=False)  # bumped on preemption: invalidates events
    _last_token_at: float = field(default=0.0, repr=False)
    _recomputed: int = field(default=0, repr=False)  # cached tokens computed anyway (the last)

    @property
    def ttft(self) -> float | None:
        """Time to first token, seconds (None before the first token)."""
        return None if self.first_token_at is None else self.first_token_at - self.arrival

    @property
    def e2e(self) -> float | None:
        """End-to-end latency, seconds (None while in flight)."""
        return None if self.finished_at is None else self.finished_at - self.arrival

    @property
    def mean_itl(self) -> float | None:
        """The request's mean inter-token latency, seconds: from its first to its last token
        over the gaps between them (its TPOT). None unless it finished normally with at least
        two tokens."""
        if not self.done or self.tokens_generated < 2 or self.first_token_at is None:
            return None
        assert self.finished_at is not None
        return (self.finished_at - self.first_token_at) / (self.tokens_generated - 1)

    @property
    def queue_time(self) -> float | None:
        """Time from arrival to first scheduling, seconds."""
        return None if self.first_scheduled_at is None else self.first_scheduled_at - self.arrival

    @property
    def done(self) -> bool:
        """Finished normally (not cut, not rejected)."""
        return self.finished_at is not None and not self.cut and not self.rejected
