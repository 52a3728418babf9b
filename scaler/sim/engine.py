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

Speed. Decoding requests are not visited every step: a decoding request advances one token per
step until it finishes, which is known in advance (a heap keyed by step index), and the KV
blocks the decoding requests hold are counted in aggregate: a request with ``c`` tokens of
context when its decoding began at step ``o`` holds ``ceil((c + s - o) / block_size)`` blocks
at step ``s``, so grouping the requests by ``(c - o) mod block_size`` gives the total at any
step in ``block_size`` operations. Between two steps that change the batch (an admission, a
prefill chunk, a finish, a preemption) every step is a decode step of the same requests, and
the engine runs them as one *decode run*: their durations are summed in closed form (the KV
read grows by one block per request every ``block_size`` steps), the tokens and histograms are
counted at once (each step's inter-token latency is recorded at the run's mean step time,
which differs from every step's by under a tenth of a millisecond). ``decode_runs=False``
runs every step on its own, with the same results but for that rounding; a test holds the two
to the same figures on an hour of a trace.
"""

from __future__ import annotations

import bisect
import copy
import heapq
from collections import deque
from typing import Any

from scaler.sim.exposition import VllmMetrics
from scaler.sim.prefix_cache import PrefixCache
from scaler.sim.replica import (
    MODELED_GPU,
    SLEEP_LEVELS,
    ReplicaModel,
    SimRequest,
    vllm_default_max_num_batched_tokens,
)

__all__ = [
    "MODELED_GPU",
    "SLEEP_LEVELS",
    "ReplicaEngine",
    "ReplicaModel",
    "SimRequest",
    "vllm_default_max_num_batched_tokens",
]


class ReplicaEngine:
    """One simulated vLLM replica in virtual time (see the module docstring for the model).

    Args:
        model: the performance model.
        name: the replica's name (pod name in the fleet).
        metrics: where to record vLLM's metrics; None records nothing.
        decode_runs: run the steps between two batch changes as one decode run (the fast
            path, default); False runs every step on its own.
        full_metrics: record every family of ``metrics`` (default). False records only what
            the benchmark's emulated Prometheus (:class:`scaler.bench.tsdb.Tsdb`) reads: the
            TTFT histogram, the request, token and prefix-cache counters, the requests'
            prefill and decode phase histograms (their sums feed the capacity signal's cost
            fit), and the gauges,
            brought up to date by :meth:`sync_gauges` when they are read rather than after
            every step (the other histograms cost about a fifth of a long replay's time and
            nothing in it reads them).
    """

    def __init__(
        self,
        model: ReplicaModel | None = None,
        *,
        name: str = "replica-0",
        metrics: VllmMetrics | None = None,
        decode_runs: bool = True,
        full_metrics: bool = True,
    ) -> None:
        self.model = model if model is not None else ReplicaModel()
        self.name = name
        self.metrics = metrics
        self.decode_runs = decode_runs
        self.full_metrics = full_metrics
        self.clock = 0.0
        self.accepting = True
        self.steps = 0
        self._waiting: deque[SimRequest] = deque()
        # Insertion-ordered: popitem() gives the most recently admitted (preemption victim).
        self._running: dict[int, SimRequest] = {}
        self._prefilling: dict[int, SimRequest] = {}
        self._num_decoding = 0
        self._p_blocks = 0  # KV blocks held by requests being prefilled
        # Decoding requests by (context - origin) mod block size, and the sum of the quotients.
        self._phase = [0] * self.model.block_size
        self._q = 0
        self._dstep, self._dblocks = 0, 0  # the decoding requests' blocks at step _dstep
        self._events: list[tuple[int, int, SimRequest, int]] = []  # finish step, seq, req, epoch
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
        return self._used_blocks(self.steps) / self.model.kv_cache_blocks

    def _decode_blocks(self, step: int) -> int:
        """KV blocks the decoding requests hold at ``step`` (see the module docstring): moved
        on from the last step asked for when it is at most a block's worth of steps back,
        else counted over the phases."""
        bs = self.model.block_size
        ahead = step - self._dstep
        if 0 <= ahead <= bs:
            blocks = self._dblocks
            phase = self._phase
            for s in range(self._dstep + 1, step + 1):
                blocks += phase[(1 - s) % bs]
        else:
            blocks = self._q
            base = step + bs - 1
            for j, n in enumerate(self._phase):
                if n:
                    blocks += n * ((base + j) // bs)
        self._dstep, self._dblocks = step, blocks
        return blocks

    def _used_blocks(self, step: int) -> int:
        return self._p_blocks + self._decode_blocks(step)

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
        self._p_blocks = 0
        self._phase = [0] * self.model.block_size
        self._q = 0
        self._dblocks = 0
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
            if not (self.decode_runs and self._decode_run(t)):
                self._step()

    # --------------------------------------------------------------- engine
    def _join_decoding(self, req: SimRequest, origin: int) -> None:
        """After the prefill step ``origin``: count its KV blocks with the decoding requests
        and queue its finish."""
        req._origin_step = origin
        req._gen_at_origin = req.tokens_generated
        # Decode step origin + k computes the KV of context + k tokens and produces token
        # gen_at_origin + k.
        req._d = req._context - origin
        bs = self.model.block_size
        q, j = divmod(req._d, bs)
        self._phase[j] += 1
        self._q += q
        self._dblocks += (self._dstep + req._d + bs - 1) // bs
        self._num_decoding += 1
        self._seq += 1
        finish = origin + req.output_tokens - req.tokens_generated
        heapq.heappush(self._events, (finish, self._seq, req, req._epoch))

    def _leave_decoding(self, req: SimRequest) -> None:
        bs = self.model.block_size
        q, j = divmod(req._d, bs)
        self._phase[j] -= 1
        self._q -= q
        self._dblocks -= (self._dstep + req._d + bs - 1) // bs
        self._num_decoding -= 1

    def _release_last(self) -> SimRequest:
        """Take the most recently admitted running request out of the batch, its KV blocks
        freed: it will be prefilled again (prompt and generated tokens)."""
        key, victim = self._running.popitem()
        del self._keys[id(victim)]
        if self._prefilling.pop(key, None) is None:
            self._sync_generated(victim)
            self._leave_decoding(victim)
            victim._last_token_at = self.clock
        else:
            self._p_blocks -= victim._blocks
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

    def _decode_run(self, t: float) -> bool:
        """Run, as one, the decode steps from the next one on that change nothing but the
        decoding requests' tokens, while the clock is before ``t``, up to and including the
        step of the next finish; False when the next step must run on its own (a prefill
        chunk, a possible admission, a KV block the cache cannot give, or a batch whose decode
        compute could outlast the weights read)."""
        model = self.model
        n = self._num_decoding
        if self._prefilling or not n:
            return False
        if n / model.prefill_tokens_per_second > model.step_overhead_seconds:
            return False
        s = self.steps + 1
        total = model.kv_cache_blocks
        bs = model.block_size
        used = self._used_blocks(s)
        if self._waiting and len(self._running) < model.max_num_seqs:
            head = self._waiting[0]
            if -(-(head.prompt_tokens + head.tokens_generated) // bs) <= total - used:
                return False
        events = self._events
        while events and events[0][3] != events[0][2]._epoch:
            heapq.heappop(events)  # a preempted request's finish
        finish = events[0][0] if events else 1 << 62  # the run ends with the next finish
        # Memory-bound steps: the weights, the per-sequence cost, the KV of the blocks held.
        kv = model.kv_read_seconds_per_token * bs
        base = model.step_overhead_seconds + model.decode_seconds_per_seq * n
        phase = self._phase
        left = t - self.clock
        elapsed = 0.0
        k = 0
        first = last = 0.0
        while s <= finish and elapsed < left and used <= total:
            last = base + kv * used
            if not k:
                first = last
            elapsed += last
            k += 1
            s += 1
            used += phase[(1 - s) % bs]  # the requests crossing a block boundary at step s
        if not k:
            return False
        self.clock += elapsed
        self.steps += k
        self._dstep, self._dblocks = s, used - self._p_blocks
        m = self.metrics
        if m is not None:
            m.generation_tokens += n * k
        if m is not None and self.full_metrics:
            itl = m.inter_token_latency
            if bisect.bisect_left(itl.bounds, first) == bisect.bisect_left(itl.bounds, last):
                itl.observe(first, n * k, total=elapsed * n)
            else:  # the run's steps straddle a bucket bound: each step on its own
                for j in range(k):
                    itl.observe(first + (last - first) * j / max(1, k - 1), n)
            m.iteration_tokens.observe(n, k)
        # The decoding requests that produced their last token in the run's last step.
        while events and events[0][0] <= self.steps:
            _, _, req, epoch = heapq.heappop(events)
            if epoch != req._epoch:
                continue
            req.tokens_generated = req.output_tokens
            self._leave_decoding(req)
            self._finish(req, self.clock)
        if self.full_metrics:
            self._update_gauges()
        return True

    def _step(self) -> None:
        model = self.model
        bs = model.block_size
        step = self.steps + 1
        start = self.clock
        events = self._events
        total = model.kv_cache_blocks

        # 1. Decoding requests that cross a block boundary need a block before the step runs;
        # when the cache cannot hold them all, the most recently admitted are preempted.
        used = self._used_blocks(step)
        preempted = False
        while used > total and self._running:
            preempted = True
            self._preempt_last()
            used = self._used_blocks(step)

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
        free = total - used
        if not preempted:
            waiting = self._waiting
            running = self._running
            while waiting and budget > 0 and len(running) < model.max_num_seqs:
                req = waiting[0]
                context = req.prompt_tokens + req.tokens_generated
                need = -(-context // bs)
                if need > free:
                    break
                waiting.popleft()
                free -= need
                self._p_blocks += need
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

        kv_tokens = (total - free) * bs
        duration = model.step_seconds(decodes, kv_tokens, prefill_tokens)
        end = start + duration
        self.clock = end
        self.steps = step
        m = self.metrics
        full = m if self.full_metrics else None  # the families only a full export records
        if m is not None:
            m.generation_tokens += decodes + len(completed)
        if full is not None:
            full.inter_token_latency.observe(duration, decodes)

        # 4. Prefills that completed sample their first (or next, after preemption) token.
        step_prompt_tokens = 0
        for req in completed:
            key = self._keys[id(req)]
            self._prefilling.pop(key, None)
            self._p_blocks -= req._blocks
            req._blocks = 0
            if req.block_hashes and self.model.enable_prefix_caching:
                self.prefix_cache.insert(req.block_hashes, req.hash_block_tokens)
            if req.first_token_at is None:
                req.first_token_at = end
                step_prompt_tokens += req.prompt_tokens
                if m is not None:
                    m.ttft.observe(end - req.arrival)
                    m.prompt_tokens += req.prompt_tokens
                if full is not None:
                    full.record_prompt_sources(
                        req.prompt_tokens, req.prefix_hit_tokens, req._recomputed
                    )
            elif full is not None:
                full.inter_token_latency.observe(end - req._last_token_at)
            req.tokens_generated += 1
            if req.tokens_generated >= req.output_tokens:
                self._finish(req, end)
            else:
                self._join_decoding(req, step)

        # 5. Decoding requests that produced their last token this step.
        while events and events[0][0] <= step:
            _, _, req, epoch = heapq.heappop(events)
            if epoch != req._epoch:
                continue
            req.tokens_generated = req.output_tokens
            self._leave_decoding(req)
            self._finish(req, end)

        if full is not None:
            # vLLM's tokens per engine step: prompts whose prefill completed, plus new tokens.
            step_tokens = step_prompt_tokens + decodes + len(completed)
            if step_tokens:
                full.iteration_tokens.observe(step_tokens)
            self._update_gauges()

    def _finish(self, req: SimRequest, end: float) -> None:
        del self._running[self._keys.pop(id(req))]
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
            # vLLM's phases: RUNNING from the first scheduling, PREFILL until the first token,
            # DECODE from the first to the last token. The two phase histograms are recorded
            # in a lean export too: the benchmark's emulated Prometheus reads their sums (the
            # capacity signal's cost fit), and a sum left at zero would read as work done in
            # no time.
            first = req.first_scheduled_at if req.first_scheduled_at is not None else end
            first_token = req.first_token_at if req.first_token_at is not None else end
            m.prefill_time.observe(first_token - first)
            m.decode_time.observe(end - first_token)
            if not self.full_metrics:
                return
            m.e2e_latency.observe(end - req.arrival)
            m.queue_time.observe(first - req.arrival)
            m.inference_time.observe(end - first)
            m.request_prompt_tokens.observe(req.prompt_tokens)
            m.request_generation_tokens.observe(req.tokens_generated)
            # One completion per request; max_tokens as vLLM's API server sets it when the
            # client leaves it out: whatever fits in the context after the prompt.
            m.request_params_n.observe(1)
            m.request_params_max_tokens.observe(self.model.max_model_len - req.prompt_tokens)

    def sync_gauges(self) -> None:
        """Bring the gauges of ``metrics`` up to the engine's state (a no-op in effect with
        ``full_metrics``, which keeps them up to date after every step); call before reading
        them."""
        self._update_gauges()

    def _update_gauges(self) -> None:
        m = self.metrics
        if m is None:
            return
        m.num_requests_running = len(self._running)
        m.num_requests_waiting = len(self._waiting)
        m.kv_cache_usage = self.kv_usage_ratio
        m.sleep_level = self.sleep_level
        m.waking = self.wake_at is not None
