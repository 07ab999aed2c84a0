"""Usage pricing against Pi's own `calculateCost` results."""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from mule.pi import Model, ModelCost, Usage, UsageCost, calculate_cost, decode, to_wire

GOLDEN = Path(__file__).parents[1] / "golden" / "costs.json"


def priced(price: ModelCost) -> Model:
    return Model("m", "M", "api", "p", "http://localhost", cost=price)


def test_matches_pi_bit_for_bit_on_every_catalogue_price() -> None:
    """Every distinct price in Pi's model catalogue gives Pi's exact floats, total included."""
    rows = json.loads(GOLDEN.read_text())
    assert len(rows) > 100
    assert any("tiers" in price for price, _, _ in rows)
    for price, tokens, cost in rows:
        t_in, t_out, t_read, t_write, t_1h = tokens
        usage = Usage(t_in, t_out, t_read, t_write, total_tokens=17, cache_write_1h=t_1h)
        out = calculate_cost(priced(decode(ModelCost, price)), usage)
        assert to_wire(out.cost) == cost, (price, tokens)
        assert list(to_wire(out.cost)) == list(cost)  # Pi's key order
        # the counts are untouched
        assert (out.input, out.output, out.cache_read, out.cache_write) == tuple(tokens[:4])
        assert out.total_tokens == 17


def test_prices_are_per_million_tokens() -> None:
    """A million tokens at $3 cost $3; the input usage object is not changed."""
    usage = Usage(input=1_000_000, output=2_000_000, cost=UsageCost(total=99.0))
    out = calculate_cost(priced(ModelCost(input=3, output=15)), usage)
    assert out.cost == UsageCost(input=3.0, output=30.0, total=33.0, total_from_provider=False)
    assert usage.cost.total == 99.0


prices = st.floats(min_value=0, max_value=1000, allow_nan=False)
counts = st.integers(min_value=0, max_value=10_000_000)


@given(st.tuples(prices, prices, prices, prices), st.tuples(counts, counts, counts, counts))
def test_total_is_the_left_to_right_sum(
    price: tuple[float, float, float, float], tokens: tuple[int, int, int, int]
) -> None:
    """The total is input + output + cacheRead + cacheWrite, summed in Pi's order."""
    c = calculate_cost(priced(ModelCost(*price)), Usage(*tokens)).cost
    assert c.total == c.input + c.output + c.cache_read + c.cache_write
    assert c.input == price[0] / 1e6 * tokens[0]
    assert all(x >= 0 for x in (c.input, c.output, c.cache_read, c.cache_write))
