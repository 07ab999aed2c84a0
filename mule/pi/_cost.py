"""Usage pricing: Pi's `calculateCost`, as a pure function."""

from __future__ import annotations

from attrs import evolve

from mule.pi._messages import Usage, UsageCost
from mule.pi._model import Model, ModelCost, ModelCostTier


def _rates(price: ModelCost, prompt_tokens: int) -> ModelCost | ModelCostTier:
    """Return the prices that apply: the tier with the highest threshold the prompt exceeds."""
    rates: ModelCost | ModelCostTier = price
    matched = -1
    for tier in price.tiers or ():
        if prompt_tokens > tier.input_tokens_above > matched:
            rates = tier
            matched = tier.input_tokens_above
    return rates


def calculate_cost(model: Model, usage: Usage) -> Usage:
    """Return `usage` with its cost filled from the model's per-million-token prices.

    Same float operations and order as Pi 1.6.0 (price / 1e6 * tokens; cache writes with
    one-hour retention at twice the input price; then the four summed left to right), so
    results match Pi's bit for bit. The cost is marked as an estimate
    (`total_from_provider=False`). Pi mutates the usage; this returns a new one.

    >>> from mule.pi._model import ModelCost
    >>> m = Model("m", "M", "api", "p", "http://x", cost=ModelCost(3, 15, 0.3, 3.75))
    >>> calculate_cost(m, Usage(input=1000, output=100)).cost.output
    0.0015
    """
    rates = _rates(model.cost, usage.input + usage.cache_read + usage.cache_write)
    long_write = usage.cache_write_1h or 0
    short_write = usage.cache_write - long_write
    cost_input = rates.input / 1000000 * usage.input
    cost_output = rates.output / 1000000 * usage.output
    cost_cache_read = rates.cache_read / 1000000 * usage.cache_read
    cost_cache_write = (rates.cache_write * short_write + rates.input * 2 * long_write) / 1000000
    total = cost_input + cost_output + cost_cache_read + cost_cache_write
    return evolve(
        usage,
        cost=UsageCost(cost_input, cost_output, cost_cache_read, cost_cache_write, total, False),
    )


__all__ = ["calculate_cost"]
