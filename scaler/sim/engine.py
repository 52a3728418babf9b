"""A virtual-time model of one vLLM replica: continuous batching with chunked prefill.

Pure and deterministic: no asyncio, no wall clock, no randomness. Time is a float in seconds
passed in by the caller (the fleet simulator), and :meth:`ReplicaEngine.advance_to` runs whole
engine steps until the engine's clock reaches it.

The scheduler follows vLLM V1's in spirit (``vllm/v1/core/sched/scheduler.py``):

- every step has a token budget (``max_num_batched_tokens``); running requests come first:
  each decoding request takes one token, partially prefilled requests take prefill chunks;
  then waiting requests are admitted in FCFS order and fill the rest of the budget with
  prefill chunks (chunked prefill);
- a waiting request is admitted only if the KV cache has free blocks for its whole context
  (prompt plus tokens already generated, rounded up to blocks) and the batch has fewer than
  ``max_num_seqs`` requests; the queue is head-of-line blocked, as in vLLM;
- every decode step adds one token of KV per request; when a request needs a new block and
  none is free, the most recently admitted running request is preempted (recompute mode: its
  blocks are freed and it goes back to the front of the waiting queue, to prefill its prompt
  and the tokens it already generated again); no request is admitted in a step that preempted;
- the step in which a request's prefill completes samples its first token;
- automatic prefix caching (on by default, as in V1): at admission the longest cached prefix
  of the prompt is not computed again (:mod:`scaler.sim.prefix_cache` when the request carries
  block hashes, else the hit its trace states); the last prompt token is always computed, as
  vLLM needs its logits;
- sleep mode (``--enable-sleep-mode``, ``POST /sleep?level=1|2``, ``POST /wake_up``): a
  sleeping engine schedules nothing and its KV cache (and prefix cache) is discarded; the
  requests it held go back to its queue and are prefilled again after the wake-up, which takes
  ``wake_level1_seconds`` (weights back from CPU memory) or ``wake_level2_seconds`` (weights
  discarded: read again).

Speed: decoding requests are not visited every step. A decoding request advances one token per
step until it finishes or needs a new KV block, both of which are known in advance, so those
two events sit in a heap keyed by step index. A step costs O(prefilling requests + events),
about O(batch / block_size) amortised.
"""

from __future__ import annotations

import copy
import heapq
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from scaler.sim.exposition import VllmMetrics
from scaler.sim.prefix_cache import PrefixCache

__all__ = [
    "MODELED_GPU",
    "SLEEP_LEVELS",
    "ReplicaEngine",
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


# Heap event kinds; a block is needed at the start of a step, a finish happens at its end.
_NEED_BLOCK = 0
_FINISH = 1


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
    _blocks: int = field(default=0, repr=False)  # KV blocks held
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


class ReplicaEngine:
    """One simulated vLLM replica in virtual time (see the module docstring for the model).

    Args:
        model: the performance model.
        name: the replica's name (pod name in the fleet).
        metrics: where to record vLLM's metrics; None records nothing.
    """

    def __init__(
        self,
        model: ReplicaModel | None = None,
        *,
        name: str = "replica-0",
        metrics: VllmMetrics | None = None,
    ) -> None:
        self.model = model if model is not None else ReplicaModel()
        self.name = name
        self.metrics = metrics
        self.clock = 0.0
        self.accepting = True
        self.steps = 0
        self._waiting: deque[SimRequest] = deque()
        # Insertion-ordered: popitem() gives the most recently admitted (preemption victim).
        self._running: dict[int, SimRequest] = {}
        self._prefilling: dict[int, SimRequest] = {}
        self._num_decoding = 0
        self._free_blocks = self.model.kv_cache_blocks
        self._events: list[tuple[int, int, int, SimRequest, int]] = []
        self._seq = 0  # heap tie-breaker keeps event order deterministic
        self._key = 0  # internal key per admission (caller ids may repeat)
        self._keys: dict[int, int] = {}  # id(request) -> key in _running
        self.prefix_cache = PrefixCache(self.model.kv_capacity_tokens)
        self.sleep_level = 0  # 0 awake, else the sleep level
        self.wake_at: float | None = None  # when a wake-up in progress completes
        if metrics is not None:
            metrics.enable_prefix_caching = self.model.enable_prefix_caching

    def __deepcopy__(self, memo: dict[int, Any]) -> ReplicaEngine:
        """A copy of the engine with copies of its requests (a fork of a simulation); the
        index from request identity to batch key is rebuilt for the copies."""
        new = type(self).__new__(type(self))
        memo[id(self)] = new
        for key, value in self.__dict__.items():
            setattr(new, key, copy.deepcopy(value, memo))
        new._keys = {id(r): k for k, r in new._running.items()}
        return new

    # ----------------------------------------------------------------- state
    @property
    def num_waiting(self) -> int:
        """Requests queued, not scheduled (includes preempted ones)."""
        return len(self._waiting)

    @property
    def num_running(self) -> int:
        """Requests in the running batch (prefilling or decoding)."""
        return len(self._running)

    @property
    def in_flight(self) -> int:
        """Waiting plus running requests."""
        return len(self._waiting) + len(self._running)

    @property
    def asleep(self) -> bool:
        """Put to sleep and not yet awake again (a wake-up in progress included): schedules
        nothing."""
        return self.sleep_level != 0

    @property
    def kv_usage_ratio(self) -> float:
        """KV-cache blocks in use, a 0-1 ratio."""
        total = self.model.kv_cache_blocks
        return (total - self._free_blocks) / total

    # ------------------------------------------------------------- control
    def submit(self, req: SimRequest, now: float) -> None:
        """Hand a request to the replica at time ``now`` (seconds).

        Advances the engine to ``now`` first. A request longer than ``max_model_len`` is
        rejected at once (``rejected``, ``finished_at = now``), as vLLM's API server does.

        Raises:
            RuntimeError: the replica is draining or aborted and accepts nothing.
        """
        if not self.accepting:
            raise RuntimeError(f"replica {self.name} is not accepting requests (draining)")
        self.advance_to(now)
        if req.prompt_tokens + max(1, req.output_tokens) > self.model.max_model_len:
            req.rejected = True
            req.finished_at = now
            return
        self._waiting.append(req)
        if self.metrics is not None:
            self.metrics.num_requests_waiting = len(self._waiting)

    def drain(self) -> None:
        """Stop accepting requests; those in flight keep running to completion."""
        self.accepting = False

    def sleep(self, level: int, now: float) -> None:
        """Put the engine to sleep at ``now`` (vLLM's ``POST /sleep?level=``).

        The engine is advanced to ``now`` first. Its KV cache is discarded at either level:
        the running requests go back to the front of the queue (in admission order) to be
        prefilled again after the wake-up, and the prefix cache is emptied. Nothing is
        scheduled until :meth:`wake_up` completes. Putting a sleeping engine to sleep again
        changes only its level.

        Raises:
            ValueError: a level other than 1 or 2.
        """
        if level not in SLEEP_LEVELS:
            raise ValueError(f"sleep level: expected 1 or 2, got {level!r}")
        self.advance_to(now)
        requeued: list[SimRequest] = []
        while self._running:
            requeued.append(self._release_last())
        self._waiting.extendleft(requeued)  # the last released first: admission order kept
        self.prefix_cache.clear()
        self.sleep_level = level
        self.wake_at = None
        self.clock = max(self.clock, now)
        self._update_gauges()

    def hand_back(self, now: float) -> list[SimRequest]:
        """Take every request in flight out of the engine at ``now``, uncut (their clients
        retry them elsewhere), in arrival order; the engine is advanced to ``now`` first and
        their KV blocks are freed (a request that had tokens is prefilled again with them)."""
        self.advance_to(now)
        out: list[SimRequest] = []
        while self._running:
            out.append(self._release_last())
        out += self._waiting
        self._waiting.clear()
        self._update_gauges()
        return sorted(out, key=lambda r: r.arrival)

    def wake_up(self, now: float) -> None:
        """Start waking the engine up at ``now`` (vLLM's ``POST /wake_up``); it schedules
        again :meth:`ReplicaModel.wake_seconds` later. Nothing to do when awake or already
        waking."""
        if self.sleep_level and self.wake_at is None:
            self.advance_to(now)
            self.wake_at = max(now, self.clock) + self.model.wake_seconds(self.sleep_level)
            self._update_gauges()

    def abort_all(self, now: float) -> list[SimRequest]:
        """Cut every in-flight request at ``now`` (scale-down); returns them, marked ``cut``.

        The replica accepts nothing afterwards. Does not advance the clock: whatever a step in
        progress would have produced is lost, as when a pod is killed mid-step.
        """
        self.accepting = False
        for key, r in self._running.items():
            if key not in self._prefilling:
                self._sync_generated(r)
        cut = [*self._running.values(), *self._waiting]
        for r in cut:
            r.cut = True
            r.finished_at = max(now, r.arrival)
            r._epoch += 1
        self._running.clear()
        self._prefilling.clear()
        self._waiting.clear()
        self._events.clear()
        self._keys.clear()
        self._num_decoding = 0
        self._free_blocks = self.model.kv_cache_blocks
        m = self.metrics
        if m is not None:
            m.request_success["abort"] += len(cut)
            self._update_gauges()
        return cut

    def advance_to(self, t: float) -> None:
        """Run whole engine steps while the clock is before ``t`` (seconds).

        With nothing to do the replica idles and the clock jumps to ``t``; a step in progress
        may end after ``t``.
        """
        while self.clock < t:
            if self.sleep_level:
                if self.wake_at is None or self.wake_at > t:
                    self.clock = t  # asleep: nothing is scheduled
                    return
                self.clock = max(self.clock, self.wake_at)
                self.sleep_level = 0
                self.wake_at = None
                self._update_gauges()
                continue
            if not self._running and not self._waiting:
                self.clock = t
                return
            self._step()

    # --------------------------------------------------------------- engine
    def _push(self, step: int, kind: int, req: SimRequest) -> None:
        self._seq += 1
        heapq.heappush(self._events, (step, kind, self._seq, req, req._epoch))

    def _schedule_decode_events(self, req: SimRequest, origin: int) -> None:
        """After the prefill step ``origin``: queue its finish and its next block need."""
        bs = self.model.block_size
        req._origin_step = origin
        req._gen_at_origin = req.tokens_generated
        # Decode step k (at step origin+k) computes KV for context+k tokens and produces
        # token gen_at_origin+k.
        finish_k = req.output_tokens - req.tokens_generated
        block_k = req._blocks * bs - req._context + 1
        if block_k <= finish_k:
            self._push(origin + block_k, _NEED_BLOCK, req)
        self._push(origin + finish_k, _FINISH, req)

    def _free(self, req: SimRequest) -> None:
        self._free_blocks += req._blocks
        req._blocks = 0
        del self._running[self._keys.pop(id(req))]

    def _release_last(self) -> SimRequest:
        """Take the most recently admitted running request out of the batch, its KV blocks
        freed: it will be prefilled again (prompt and generated tokens)."""
        key, victim = self._running.popitem()
        del self._keys[id(victim)]
        if self._prefilling.pop(key, None) is None:
            self._num_decoding -= 1
            self._sync_generated(victim)
            victim._last_token_at = self.clock
        self._free_blocks += victim._blocks
        victim._blocks = 0
        victim._computed = 0
        victim._epoch += 1
        return victim

    def _preempt_last(self) -> SimRequest:
        """Preempt the most recently admitted running request (recompute mode)."""
        victim = self._release_last()
        victim.preemptions += 1
        self._waiting.appendleft(victim)
        if self.metrics is not None:
            self.metrics.num_preemptions += 1
        return victim

    def _prefix_hit(self, req: SimRequest, context: int) -> int:
        """Prompt tokens of ``req`` found in the prefix cache at an admission of ``context``
        tokens: whole blocks within ``context - 1`` tokens (the last token is computed for its
        logits; vLLM's ``max_cache_hit_length``), so a prompt found whole computes its last
        block again. Sets ``req._recomputed``."""
        if not self.model.enable_prefix_caching:
            return 0
        if req.block_hashes and req.hash_block_tokens > 0:
            raw = self.prefix_cache.lookup(req.block_hashes, req.hash_block_tokens)
        else:
            raw = req.cached_tokens
        bs = self.model.block_size
        raw = min(raw, req.prompt_tokens) // bs * bs
        hit = max(0, min(raw, (context - 1) // bs * bs))
        req._recomputed = raw - hit
        return hit

    def _sync_generated(self, req: SimRequest) -> None:
        """Bring a decoding request's lazy token count up to the last completed step."""
        req.tokens_generated = req._gen_at_origin + self.steps - req._origin_step

    def _step(self) -> None:
        model = self.model
        bs = model.block_size
        step = self.steps + 1
        start = self.clock
        events = self._events
        preempted = False

        # 1. Decoding requests that cross a block boundary need a block before the step runs.
        while events and events[0][0] == step and events[0][1] == _NEED_BLOCK:
            _, _, _, req, epoch = heapq.heappop(events)
            if epoch != req._epoch:
                continue
            while self._free_blocks == 0:
                preempted = True
                if self._preempt_last() is req:
                    break
            if epoch != req._epoch:  # it preempted itself
                continue
            self._free_blocks -= 1
            req._blocks += 1
            if req._blocks * bs - req._context - (step - req._origin_step) < 0:
                raise AssertionError("block bookkeeping")  # pragma: no cover
            # Next boundary: block_size decode steps later.
            next_k = req._blocks * bs - req._context + 1
            if next_k <= req.output_tokens - req._gen_at_origin:
                self._push(req._origin_step + next_k, _NEED_BLOCK, req)

        decodes = self._num_decoding
        budget = model.max_num_batched_tokens - decodes

        # 2. Prefill chunks of running requests, in admission order.
        prefill_tokens = 0
        completed: list[SimRequest] = []
        for req in self._prefilling.values():
            if budget <= 0:
                break
            chunk = min(req._context - req._computed, budget)
            req._computed += chunk
            budget -= chunk
            prefill_tokens += chunk
            if req._computed == req._context:
                completed.append(req)

        # 3. Admit waiting requests (FCFS, head-of-line blocked), not in a preempting step.
        if not preempted:
            waiting = self._waiting
            running = self._running
            while waiting and budget > 0 and len(running) < model.max_num_seqs:
                req = waiting[0]
                context = req.prompt_tokens + req.tokens_generated
                need = -(-context // bs)
                if need > self._free_blocks:
                    break
                waiting.popleft()
                self._free_blocks -= need
                req._blocks = need
                req._context = context
                hit = self._prefix_hit(req, context)
                chunk = min(context - hit, budget)
                req._computed = hit + chunk
                budget -= chunk
                prefill_tokens += chunk
                if req.first_scheduled_at is None:
                    req.first_scheduled_at = start
                if req.first_token_at is None:
                    req.prefix_hit_tokens = hit  # the admission that gives the first token
                if self.metrics is not None:
                    # vLLM counts every admitted context as queried, its cached part as hits.
                    self.metrics.prefix_cache_queries += context
                    self.metrics.prefix_cache_hits += hit
                self._key += 1
                running[self._key] = req
                self._keys[id(req)] = self._key
                if req._computed == context:
                    completed.append(req)
                else:
                    self._prefilling[self._key] = req

        kv_tokens = (model.kv_cache_blocks - self._free_blocks) * bs
        duration = model.step_seconds(decodes, kv_tokens, prefill_tokens)
        end = start + duration
        self.clock = end
        self.steps = step
        m = self.metrics
        if m is not None:
            m.generation_tokens += decodes + len(completed)
            m.inter_token_latency.observe(duration, decodes)

        # 4. Prefills that completed sample their first (or next, after preemption) token.
        step_prompt_tokens = 0
        for req in completed:
            key = self._keys[id(req)]
            self._prefilling.pop(key, None)
            if req.block_hashes and self.model.enable_prefix_caching:
                self.prefix_cache.insert(req.block_hashes, req.hash_block_tokens)
            if req.first_token_at is None:
                req.first_token_at = end
                step_prompt_tokens += req.prompt_tokens
                if m is not None:
                    m.ttft.observe(end - req.arrival)
                    m.prompt_tokens += req.prompt_tokens
                    m.record_prompt_sources(
                        req.prompt_tokens, req.prefix_hit_tokens, req._recomputed
                    )
            elif m is not None:
                m.inter_token_latency.observe(end - req._last_token_at)
            req.tokens_generated += 1
            if req.tokens_generated >= req.output_tokens:
                self._finish(req, end)
            else:
                self._num_decoding += 1
                self._schedule_decode_events(req, step)

        # 5. Decoding requests that produced their last token this step.
        while events and events[0][0] == step:
            _, kind, _, req, epoch = heapq.heappop(events)
            if epoch != req._epoch or kind != _FINISH:
                continue
            req.tokens_generated = req.output_tokens
            self._num_decoding -= 1
            self._finish(req, end)

        if m is not None:
            # vLLM's tokens per engine step: prompts whose prefill completed, plus new tokens.
            step_tokens = step_prompt_tokens + decodes + len(completed)
            if step_tokens:
                m.iteration_tokens.observe(step_tokens)
            self._update_gauges()

    def _finish(self, req: SimRequest, end: float) -> None:
        self._free(req)
        req.tokens_generated = max(req.tokens_generated, req.output_tokens)
        req.finished_at = end
        # The engine forgets a finished request (its results are on the request the caller
        # holds): a list of every finished request grew by ~15 requests per 5 s cycle in the
        # soak, without bound over a long-lived pod's life.
        m = self.metrics
        if m is not None:
            # A request that filled the context stopped on vLLM's length limit.
            full = req.prompt_tokens + req.tokens_generated >= self.model.max_model_len
            m.request_success["length" if full else "stop"] += 1
            m.e2e_latency.observe(end - req.arrival)
            first = req.first_scheduled_at if req.first_scheduled_at is not None else end
            m.queue_time.observe(first - req.arrival)
            # vLLM's phases: RUNNING from the first scheduling, PREFILL until the first token,
            # DECODE from the first to the last token.
            first_token = req.first_token_at if req.first_token_at is not None else end
            m.inference_time.observe(end - first)
            m.prefill_time.observe(first_token - first)
            m.decode_time.observe(end - first_token)
            m.request_prompt_tokens.observe(req.prompt_tokens)
            m.request_generation_tokens.observe(req.tokens_generated)
            # One completion per request; max_tokens as vLLM's API server sets it when the
            # client leaves it out: whatever fits in the context after the prompt.
            m.request_params_n.observe(1)
            m.request_params_max_tokens.observe(self.model.max_model_len - req.prompt_tokens)

    def _update_gauges(self) -> None:
        m = self.metrics
        if m is None:
            return
        m.num_requests_running = len(self._running)
        m.num_requests_waiting = len(self._waiting)
        m.kv_cache_usage = self.kv_usage_ratio
        m.sleep_level = self.sleep_level
        m.waking = self.wake_at is not None
