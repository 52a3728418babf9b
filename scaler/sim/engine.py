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
- the step in which a request's prefill completes samples its first token.

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

__all__ = ["ReplicaEngine", "ReplicaModel", "SimRequest"]

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
      and 48 requests in flight: 210, 377, 644, 975 and 1190 output tokens/s at a mean TTFT of
      63, 79, 155, 362 and 667 ms. :mod:`scaler.sim.calibration` replays that sweep on this
      model; it gives 213, 385, 649, 987 and 1194 tokens/s (within 2%) at 48, 95, 191, 383
      and 574 ms (within 24%), and a test pins it.
    - KV cache: about 6 GB free after 16 GB of weights and 2 GB of overhead, at 144 KB/token
      (Qwen3 8B, GQA, BF16) about 43K tokens: 2688 blocks of 16 tokens = 43,008 tokens
      (PagedAttention block size 16, Kwon et al., SOSP 2023).

    Where the rougher single figures of the same write-ups disagree with the sweep, the sweep
    wins: the model gives an idle TPOT of 17.4 ms (not "about 30 ms", which the sweep's own
    210 tokens/s at concurrency 4 rules out), 41 tokens/s per session at concurrency 16 (not
    "about 50"), and an idle TTFT of 383 ms for an 8K prompt (not "about 250 ms": the sweep's
    prefill rate, 21,400 tokens/s, gives that).

    Step duration, seconds (a roofline: a step is bound by memory bandwidth or by compute,
    whichever is slower, plus a per-sequence cost that does not overlap)::

        max(step_overhead_seconds                        # reading the weights once per step
            + kv_read_seconds_per_token * kv_tokens,     # decode attention reads the batch's KV
            (prefill_tokens + decodes) / prefill_tokens_per_second)   # compute
        + decode_seconds_per_seq * decodes               # per-sequence sampling and scheduling

    where ``kv_tokens`` is the KV blocks in use times the block size. The KV read cost is
    144 KB/token at about 1 TB/s of memory bandwidth: 1.4e-7 s per token, 6 ms for a full
    cache.

    ``max_num_batched_tokens`` is 16,384. vLLM's API server defaults to 2,048 on GPUs under
    70 GB, but the sweep's TTFT at concurrency 32-48 (362-667 ms for waves of 8-12K prompt
    tokens that arrive together) is only reproduced when such a wave is prefilled in one step:
    with 2,048 the waves split into small groups and the model's TTFT at concurrency 48 stays
    near 130 ms. The residual error is the sweep's TTFT growing faster than linearly with the
    concurrency (79 ms at 8, 667 ms at 48), which a step-time formula linear in the prompt
    tokens of a wave cannot follow: -24% at concurrency 4, +21-23% at 8-16.

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
    """

    kv_cache_blocks: int = 2688
    block_size: int = 16
    max_num_seqs: int = 256
    max_num_batched_tokens: int = 16384
    max_model_len: int = 32768
    step_overhead_seconds: float = 0.017
    decode_seconds_per_seq: float = 0.00035
    kv_read_seconds_per_token: float = 1.4e-7
    prefill_tokens_per_second: float = 21_400.0
    model_load_seconds: float = 120.0

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

    @property
    def kv_capacity_tokens(self) -> int:
        """KV-cache capacity in tokens."""
        return self.kv_cache_blocks * self.block_size

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
    # Engine bookkeeping (not results).
    _computed: int = field(default=0, repr=False)  # tokens whose KV is computed this admission
    _context: int = field(default=0, repr=False)  # tokens to prefill at this admission
    _blocks: int = field(default=0, repr=False)  # KV blocks held
    _origin_step: int = field(default=0, repr=False)  # step index its decoding started
    _gen_at_origin: int = field(default=0, repr=False)  # tokens_generated after that step
    _epoch: int = field(default=0, repr=False)  # bumped on preemption: invalidates events
    _last_token_at: float = field(default=0.0, repr=False)

    @property
    def ttft(self) -> float | None:
        """Time to first token, seconds (None before the first token)."""
        return None if self.first_token_at is None else self.first_token_at - self.arrival

    @property
    def e2e(self) -> float | None:
        """End-to-end latency, seconds (None while in flight)."""
        return None if self.finished_at is None else self.finished_at - self.arrival

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

    def _preempt_last(self) -> SimRequest:
        """Preempt the most recently admitted running request (recompute mode)."""
        key, victim = self._running.popitem()
        del self._keys[id(victim)]
        if self._prefilling.pop(key, None) is None:
            self._num_decoding -= 1
            self._sync_generated(victim)
            victim._last_token_at = self.clock
        # Its blocks are freed; it is resumed by prefilling prompt + generated tokens again.
        self._free_blocks += victim._blocks
        victim._blocks = 0
        victim._computed = 0
        victim._epoch += 1
        victim.preemptions += 1
        self._waiting.appendleft(victim)
        if self.metrics is not None:
            self.metrics.num_preemptions += 1
        return victim

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
                chunk = min(context, budget)
                req._computed = chunk
                budget -= chunk
                prefill_tokens += chunk
                if req.first_scheduled_at is None:
                    req.first_scheduled_at = start
                if self.metrics is not None:
                    # No prefix cache in the model: every looked-up token misses.
                    self.metrics.prefix_cache_queries += context
                self._key += 1
                running[self._key] = req
                self._keys[id(req)] = self._key
                if chunk == context:
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
            if req.first_token_at is None:
                req.first_token_at = end
                step_prompt_tokens += req.prompt_tokens
                if m is not None:
                    m.ttft.observe(end - req.arrival)
                    m.prompt_tokens += req.prompt_tokens
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
