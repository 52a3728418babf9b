"""The replica model against a published concurrency sweep (``vllm bench serve``).

:data:`RTX4090_SWEEP` is the RTX 4090 row of the sweep table in the project's serving-figures
reference: Mistral-7B-Instruct-v0.3 in BF16 on one RTX 4090 (24 GB), fixed 256 prompt and 128
output tokens, infinite request rate with a cap on the requests in flight, from a public
capacity-planning write-up (2025-2026). :func:`closed_loop` replays that benchmark on one
:class:`~scaler.sim.engine.ReplicaEngine`: ``concurrency`` clients, each sending its next
request the moment its previous one finished, as ``vllm bench serve --max-concurrency`` does.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from scaler.sim.engine import ReplicaEngine, ReplicaModel, SimRequest

__all__ = ["RTX4090_SWEEP", "SweepPoint", "closed_loop"]


@dataclass(frozen=True, slots=True)
class SweepPoint:
    """One point of a concurrency sweep.

    Attributes:
        concurrency: requests in flight (the benchmark's ``--max-concurrency``).
        output_tokens_per_second: output tokens over the benchmark's duration, tokens/s.
        mean_ttft_seconds: mean time to first token, seconds.
    """

    concurrency: int
    output_tokens_per_second: float
    mean_ttft_seconds: float


#: RTX 4090, Mistral-7B-Instruct-v0.3, 256 prompt / 128 output tokens.
RTX4090_SWEEP: tuple[SweepPoint, ...] = (
    SweepPoint(4, 210.0, 0.063),
    SweepPoint(8, 377.0, 0.079),
    SweepPoint(16, 644.0, 0.155),
    SweepPoint(32, 975.0, 0.362),
    SweepPoint(48, 1190.0, 0.667),
)


def closed_loop(
    model: ReplicaModel,
    concurrency: int,
    *,
    prompt_tokens: int = 256,
    output_tokens: int = 128,
    requests: int = 1000,
) -> SweepPoint:
    """Run ``requests`` requests through one replica with ``concurrency`` clients.

    Every client sends a request at time 0 and its next one when the previous finished (no
    think time), until ``requests`` were sent (``vllm bench serve``'s default is 1000 prompts).

    Returns:
        The measured point: output tokens over the time from the first arrival to the last
        finish (tokens/s) and the mean TTFT (seconds).

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
    return SweepPoint(concurrency, tokens / end, ttft)
