"""Run limits and run totals: `RunLimits(max_turns, max_output_tokens, max_cost_usd)`.

A run that reaches a limit stops gracefully after the turn in which it was reached has
settled (its tools ran, `turn_end` was emitted), as if `should_stop_after_turn` had said
so; `MuleRunOutcome.limit` names the limit. The totals count every model attempt: retried and
failed attempts used tokens and cost money too.
"""

from __future__ import annotations

import math
from typing import Literal, TypeAlias, final

from attrs import frozen

from mule._fields_repr import fields_repr
from mule.pi import Usage, UsageCost

LimitName: TypeAlias = Literal["max_turns", "max_output_tokens", "max_cost_usd"]


def _positive_int(instance: object, attribute: object, value: int | None) -> None:
    if value is not None and (type(value) is not int or value < 1):
        raise ValueError(f"{getattr(attribute, 'name', '?')} must be an int >= 1, got {value!r}")


def _positive_cost(instance: object, attribute: object, value: float | None) -> None:
    if value is not None and (
        type(value) not in (int, float) or not math.isfinite(value) or value <= 0
    ):
        raise ValueError(f"max_cost_usd must be a finite number > 0, got {value!r}")


@final
@frozen(kw_only=True)
class RunLimits:
    """Bounds on one run; each is checked after every turn (None: no bound).

    Attributes:
        max_turns: Stop after this many turns (model responses with their tool batches).
        max_output_tokens: Stop after the turn in which the run's output tokens, over every
            attempt, reached this.
        max_cost_usd: Stop after the turn in which the run's total cost reached this (costs
            come from the model's prices: a model without prices costs 0).

    """

    max_turns: int | None = None
    max_output_tokens: int | None = None
    max_cost_usd: float | None = None

    def __attrs_post_init__(self) -> None:
        _positive_int(self, _Named("max_turns"), self.max_turns)
        _positive_int(self, _Named("max_output_tokens"), self.max_output_tokens)
        _positive_cost(self, None, self.max_cost_usd)

    __repr__ = fields_repr


@final
@frozen
class _Named:
    name: str

    __repr__ = fields_repr


def _opt_sum(a: int | None, b: int | None) -> int | None:
    return None if a is None and b is None else (a or 0) + (b or 0)


def add_usage(a: Usage, b: Usage) -> Usage:
    """Return the sum of two usages, tokens and costs.

    A sum is no provider's bill: its cost says nothing of `total_from_provider`. The optional
    breakdowns (one-hour cache writes, reasoning) add up when either side reports them.
    """
    ca, cb = a.cost, b.cost
    return Usage(
        input=a.input + b.input,
        output=a.output + b.output,
        cache_read=a.cache_read + b.cache_read,
        cache_write=a.cache_write + b.cache_write,
        total_tokens=a.total_tokens + b.total_tokens,
        cost=UsageCost(
            input=ca.input + cb.input,
            output=ca.output + cb.output,
            cache_read=ca.cache_read + cb.cache_read,
            cache_write=ca.cache_write + cb.cache_write,
            total=ca.total + cb.total,
        ),
        cache_write_1h=_opt_sum(a.cache_write_1h, b.cache_write_1h),
        reasoning=_opt_sum(a.reasoning, b.reasoning),
    )


def reached(limits: RunLimits | None, turns: int, usage: Usage) -> LimitName | None:
    """Return the first limit that `turns` and `usage` reached, or None."""
    if limits is None:
        return None
    if limits.max_turns is not None and turns >= limits.max_turns:
        return "max_turns"
    if limits.max_output_tokens is not None and usage.output >= limits.max_output_tokens:
        return "max_output_tokens"
    if limits.max_cost_usd is not None and usage.cost.total >= limits.max_cost_usd:
        return "max_cost_usd"
    return None


__all__ = ["LimitName", "RunLimits", "add_usage", "reached"]
