"""Hostile JSON text and values shared by the fuzz targets: truncated, deep, oversized, odd."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import strategies as st

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=12),
    st.sampled_from(["\ud800", "\udfff", "\x00", "\u2028", "9" * 500, "1e999", "-0"]),
)
json_values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=12,
)


def nested(depth: int, as_list: bool, leaf: Any = None) -> Any:
    """Return a value nested `depth` levels.

    Built in the test body: hypothesis prints its arguments recursively, so a deep argument
    would make its own failure report fail.
    """
    value: Any = leaf
    for _ in range(depth):
        value = [value] if as_list else {"a": value}
    return value


depths = st.one_of(st.integers(1, 200), st.integers(200, 3000))


@st.composite
def damaged_text(draw: st.DrawFn, valid: str) -> str:
    """Return `valid` JSON text damaged one way: truncated, spliced, nested, padded, or kept."""
    how = draw(st.sampled_from(["truncate", "splice", "deep", "number", "garbage", "keep"]))
    if how == "truncate" and valid:
        return valid[: draw(st.integers(0, len(valid) - 1))]
    if how == "splice" and valid:
        at = draw(st.integers(0, len(valid)))
        return (
            valid[:at]
            + draw(st.sampled_from(['"', "{", "]", ",", "\\", "\ud800", "\x00"]))
            + valid[at:]
        )
    if how == "deep":
        n = draw(st.integers(100, 20_000))
        return "[" * n + valid + "]" * draw(st.sampled_from([0, n]))
    if how == "number":
        return valid.replace("1", "1" * draw(st.integers(300, 5000)), 1)
    if how == "garbage":
        return draw(st.text(max_size=60))
    return valid


def dumps(value: Any) -> str:
    """JSON text of a value as a hostile peer would write it (lone surrogates escaped)."""
    return json.dumps(value)


__all__ = ["damaged_text", "depths", "dumps", "json_values", "nested", "scalars"]
