"""A seed in work units prices each generated token at the context the demand prices it at
(the mean prompt plus half the mean output of a finished request): a seed priced without
context understated a replica's capacity about twice on a conversation mix, against a
demand that counts it, and the fleet doubled (the demo ran 8 replicas where 4 served)."""

from __future__ import annotations

import pytest

from scaler.config.signal_specs import CapacityCost, CapacitySignal


def test_the_seeds_requests_give_the_context_of_its_generated_tokens() -> None:
    cost = CapacityCost()
    with_rate = CapacitySignal(
        seed_prompt_tokens_per_second=4500.0,
        seed_generation_tokens_per_second=660.0,
        seed_requests_per_second=3.0,
    )
    context = (4500.0 + 660.0 / 2) / 3.0  # 1610 tokens
    assert with_rate.seed_tokens_per_second == pytest.approx(
        4500.0 * cost.prefill_seconds_per_token
        + 660.0 * (cost.decode_seconds_per_token + cost.decode_seconds_per_context_token * context)
    )
    without = CapacitySignal(
        seed_prompt_tokens_per_second=4500.0, seed_generation_tokens_per_second=660.0
    )
    assert without.seed_tokens_per_second == pytest.approx(
        4500.0 * cost.prefill_seconds_per_token + 660.0 * cost.decode_seconds_per_token
    )
    # on this mix the context more than doubles what a generated token costs
    assert with_rate.seed_tokens_per_second > 1.9 * without.seed_tokens_per_second
