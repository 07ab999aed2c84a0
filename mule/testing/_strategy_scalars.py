"""The scalar strategies both families of `mule.testing.strategies` draw from, and their bounds."""

from __future__ import annotations

import base64
from typing import Any, TypeAlias, TypeVar

from mule.pi import JsonObject, JsonValue, StopReason, needs_extra

with needs_extra("testing", "mule.testing's strategies"):
    from hypothesis import strategies as st

T = TypeVar("T")
Strategy: TypeAlias = st.SearchStrategy
Wire: TypeAlias = dict[str, Any]

MAX_SAFE_INTEGER = 2**53 - 1
"""JavaScript's largest exact integer; Pi's numbers beyond it lose precision."""

MAX_BLOCKS = 4
SUCCESS_REASONS: tuple[StopReason, ...] = ("stop", "length", "toolUse")
FAILURE_REASONS: tuple[StopReason, ...] = ("error", "aborted")
THINKING_LEVELS = ("minimal", "low", "medium", "high", "xhigh", "max")
MODEL_THINKING_LEVELS = ("off", *THINKING_LEVELS)
PARTIAL_REASONS: tuple[StopReason, ...] = ("pending", "stop")
"""A partial's stop reason: "pending", or the mapped reason once the provider sent it."""


def texts(max_size: int = 24) -> Strategy[str]:
    return st.text(max_size=max_size)


def ids() -> Strategy[str]:
    return st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E), min_size=1, max_size=12)


def counts() -> Strategy[int]:
    return st.integers(min_value=0, max_value=10_000_000)


def prices() -> Strategy[float]:
    return st.floats(min_value=0, max_value=1000, allow_nan=False, allow_infinity=False)


def timestamps() -> Strategy[int]:
    """Draw epoch milliseconds (non-negative JavaScript-safe integers)."""
    return st.integers(min_value=0, max_value=MAX_SAFE_INTEGER)


def json_values(max_leaves: int = 8) -> Strategy[JsonValue]:
    """Draw any JSON value, as `json.loads` returns it (finite floats, safe ints)."""
    scalars = (
        st.none()
        | st.booleans()
        | st.integers(min_value=-MAX_SAFE_INTEGER, max_value=MAX_SAFE_INTEGER)
        | st.floats(allow_nan=False, allow_infinity=False)
        | texts(12)
    )
    return st.recursive(
        scalars,
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts(8), inner, max_size=3),
        max_leaves=max_leaves,
    )


def json_objects(max_leaves: int = 8) -> Strategy[JsonObject]:
    """Draw a JSON object (a `dict` with string keys)."""
    return st.dictionaries(texts(8), json_values(max_leaves), max_size=4)


def non_null_json() -> Strategy[JsonValue]:
    # An optional JSON field holding null is indistinguishable from an omitted one.
    return json_values().filter(lambda v: v is not None)


def b64(data: bytes) -> str:
    """Return `data` in base64, as Pi's image blocks carry it."""
    return base64.b64encode(data).decode()


__all__ = [
    "FAILURE_REASONS",
    "MAX_BLOCKS",
    "MAX_SAFE_INTEGER",
    "MODEL_THINKING_LEVELS",
    "PARTIAL_REASONS",
    "SUCCESS_REASONS",
    "THINKING_LEVELS",
    "Strategy",
    "T",
    "Wire",
    "b64",
    "counts",
    "ids",
    "json_objects",
    "json_values",
    "non_null_json",
    "prices",
    "texts",
    "timestamps",
]
