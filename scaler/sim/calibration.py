"""The replica model against a published concurrency sweep (``vllm bench serve``).

:data:`RTX4090_SWEEP` is the RTX 4090 row of the sweep table in the project's serving-figures
reference: Mistral-7B-Instruct-v0.3 in BF16 on one RTX 4090 (24 GB), fixed 256 prompt and 128
output tokens, infinite request rate with a cap on the requests in flight, from a public
capacity-planning write-up (2025-2026). :func:`closed_loop` replays that benchmark on one
:class:`~scaler.sim.engine.ReplicaEngine`: ``concurrency`` clients, each sending its next
request the moment its previous one finished, as ``vllm bench serve --max-concurrency`` does.

The sweep publishes output throughput and mean TTFT; its mean TPOT follows from them (each
request's end-to-end latency is ``concurrency x 128 / throughput``, of which TTFT comes first
and 127 inter-token gaps follow).

Two step budgets. The sweep's TTFTs are the prefill of a whole wave of ``concurrency x 256``
prompt tokens at one rate (21,400 tokens/s gives 48, 96, 191, 383 and 574 ms against the
published 63, 79, 155, 362 and 667): the clients of a closed loop with fixed lengths finish
together and send together, and the engine that measured it prefilled each wave in one step,
as vLLM does with chunked prefill off (the step budget is then the context length). Under
vLLM V1's default for this GPU (2,048 tokens a step, first come first served, the model's
default: :func:`~scaler.sim.engine.vllm_default_max_num_batched_tokens`) a wave of 48 is
prefilled in groups of 8 over six steps; the groups then finish, and come back, one step
apart, and each is prefilled in the step after it arrives: TTFT stays one step or two. So
the speed constants (prefill rate, step floor, per-sequence and KV costs) are fitted on the
sweep replayed as it was measured (:func:`sweep_model`: the budget as large as the context),
and the default budget is checked on the figures that do not depend on how a wave is split:
output throughput and TPOT.

=========== ========================= ========================= =========================
concurrency published                 model, as measured        model, V1 default budget
=========== ========================= ========================= =========================
4           210 tok/s, 63 ms, 18.7 ms 213 (+1%), 48 (-24%),     213 (+1%), 48 (-24%),
                                      18.6 (-1%)                18.6 (-1%)
8           377, 79, 20.8             385 (+2%), 96 (+21%),     385 (+2%), 96 (+21%),
                                      20.2 (-3%)                20.2 (-3%)
16          644, 155, 23.8            646 (+0%), 191 (+23%),    652 (+1%), 82 (-47%),
                                      23.3 (-2%)                23.9 (+0%)
32          975, 362, 30.2            975 (-0%), 381 (+5%),     990 (+2%), 96 (-74%),
                                      29.6 (-2%)                31.3 (+4%)
48          1190, 667, 35.4           1190 (-0%), 570 (-14%),   1213 (+2%), 114 (-83%),
                                      35.9 (+1%)                38.7 (+9%)
=========== ========================= ========================= =========================

(output tokens/s, mean TTFT ms, mean TPOT ms.) The residual TTFT error as measured is the
sweep's TTFT growing faster than linearly with the concurrency (63 ms at 4, 667 ms at 48),
which a step time linear in the prompt tokens of a wave cannot follow.

The tests hold every published figure within 25% on the sweep as measured, and throughput
and TPOT within 25% at the default budget.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from scaler.sim.engine import ReplicaEngine, ReplicaModel, SimRequest

__all__ = ["RTX4090_SWEEP", "SWEEP_OUTPUT_TOKENS", "SweepPoint", "closed_loop", "sweep_model"]

#: The sweep's fixed output length, tokens (its prompts are 256 tokens).
SWEEP_OUTPUT_TOKENS = 128


@dataclass(frozen=True, slots=True)
class SweepPoint:
    """One point of a concurrency sweep.

    Attributes:
        concurrency: requests in flight (the benchmark's ``--max-concurrency``).
        output_tokens_per_second: output tokens over the benchmark's duration, tokens/s.
        mean_ttft_seconds: mean time to first token, seconds.
        mean_tpot_seconds: mean time per output token after the first, seconds (for a
            published point: derived from the other two, see the module docstring).
    """

    concurrency: int
    output_tokens_per_second: float
    mean_ttft_seconds: float
    mean_tpot_seconds: float = math.nan


def _published(concurrency: int, tokens_per_second: float, ttft: float) -> SweepPoint:
    e2e = concurrency * SWEEP_OUTPUT_TOKENS / tokens_per_second
    return SweepPoint(
        concurrency, tokens_per_second, ttft, (e2e - ttft) / (SWEEP_OUTPUT_TOKENS - 1)
    )


#: RTX 4090, Mistral-7B-Instruct-v0.3, 256 prompt / 128 output tokens.
RTX4090_SWEEP: tuple[SweepPoint, ...] = (
    _published(4, 210.0, 0.063),
    _published(8, 377.0, 0.079),
    _published(16, 644.0, 0.155),
    _published(32, 975.0, 0.362),
    _published(48, 1190.0, 0.667),
)


def sweep_model(model: ReplicaModel) -> ReplicaModel:
    """``model`` scheduled as the sweep was measured: a step budget as large as the context,
    so that each wave of arrivals is prefilled in one step (see the module docstring)."""
    return replace(model, max_num_batched_tokens=max(model.max_model_len, model.max_num_seqs))


def closed_loop(
    model: ReplicaModel,
    concurrency: int,
    *,
    prompt_tokens: int = 256,
    output_tokens: int = SWEEP_OUTPUT_TOKENS,
    requests: int = 1000,
) -> SweepPoint:
    """Run ``requests`` requests through one replica with ``concurrency`` clients.

    Every client sends a request at time 0 and its next one when the previous finished (no
    think time), until ``requests`` were sent (``vllm bench serve``'s default is 1000 prompts).

    Returns:
        The measured point: output tokens over the time from the first arrival to the last
        finish (tokens/s), the mean TTFT and the mean TPOT (seconds).

    Raises:
        ValueError: ``concurrency`` or ``requests`` below 1.
    """
    if concurrency < 1 or requests < 1:
        raise ValueError(f"concurrency and requests must be >= 1, got {concurrency}, {requests}")
    engine = ReplicaEngine(model, name="sweep")
    done: list[SimRequest] = []
    in_flight: list[SimRequest] = []
    sent = 0

    def send(now: float) -> None:
        nonlocal sent
        req = SimRequest(sent, now, prompt_tokens, output_tokens)
        sent += 1
        engine.submit(req, now)
        in_flight.append(req)

    for _ in range(min(concurrency, requests)):
        send(0.0)
    while in_flight:
        # One engine step: finishes happen at step ends, where the clients send again.
        engine.advance_to(math.nextafter(engine.clock, math.inf))
        for req in [r for r in in_flight if r.finished_at is not None]:
            in_flight.remove(req)
            done.append(req)
            if sent < requests:
                send(engine.clock)
    end = max(r.finished_at or 0.0 for r in done)
    tokens = sum(r.tokens_generated for r in done)
    ttft = sum(r.ttft or 0.0 for r in done) / len(done)
    itls = [r.mean_itl for r in done if r.mean_itl is not None]
    tpot = sum(itls) / len(itls) if itls else math.nan
    return SweepPoint(concurrency, tokens / end, ttft, tpot)
