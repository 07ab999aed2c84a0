"""Usage pricing: Pi's `calculateCost`, as a pure function."""

from __future__ import annotations

from attrs import evolve

from mule.pi._messages import Usage, UsageCost
from mule.pi._model import Model


def calculate_cost(model: Model, usage: Usage) -> Usage:
    """Return `usage` with its cost filled from the model's per-million-token prices.

    Same float operations and order as Pi (price / 1e6 * tokens, then the four summed left to
    right), so results match Pi's bit for bit. Pi mutates the usage; this returns a new one.

    >>> from mule.pi._model import ModelCost
    >>> m = Model("m", "M", "api", "p", "http://x", cost=ModelCost(3, 15, 0.3, 3.75))
    >>> calculate_cost(m, Usage(input=1000, output=100)).cost.output
    0.0015
    """
    price = model.cost
    cost_input = price.input / 1000000 * usage.input
    cost_output = price.output / 1000000 * usage.output
    cost_cache_read = price.cache_read / 1000000 * usage.cache_read
    cost_cache_write = price.cache_write / 1000000 * usage.cache_write
    total = cost_input + cost_output + cost_cache_read + cost_cache_write
    return evolve(
        usage,
        cost=UsageCost(cost_input, cost_output, cost_cache_read, cost_cache_write, total),
    )


__all__ = ["calculate_cost"]
