"""Fuzz hostile schema patterns against hostile arguments (issue 30.1).

Invariant: whatever the pattern (nested quantifiers, overlapping alternations, arbitrary text)
and the argument (long runs that make a backtracking engine explore 2**n paths), validating
answers typed, within the example's deadline: the arguments or `ToolArgumentsError`, or
`ToolSchemaError` for a pattern mule refuses. The longest validation seen is reported (the
campaign's summary, `longest`), not asserted: speed is measured, the deadline is the bound.
"""

from __future__ import annotations

import contextlib
import random
import time
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mule.pi import Tool, ToolArgumentsError, ToolCall, ToolSchemaError, validate_tool_arguments
from tests.fuzz.budget import fuzz_settings, longest, tally

pytestmark = pytest.mark.slow

_ATOMS = ["a", "\\w", ".", "[a-z]", "\\d", "\\s", "[^b]", "\\S", "(?:a|b)", "\\p{L}"]
_SHAPES = [
    "^({x}+)+$",
    "^({x}*)*$",
    "^({x}|{x})*$",
    "^({x}|{x}{x})+$",
    "({x}+{x}+)+b",
    "^({x}+\\s?)*$",
    "^(({x}+)+)+!$",
    "^({x}{{1,30}}){{1,30}}$",
    "({x}*){{2,}}z",
    "^(?:{x}+|{x}+{x})*c$",
    "{x}*a{x}{{60}}z",  # exponentially many DFA states: RE2 falls back to its NFA
    "({x}{{1,30}}){{1,25}}z",  # a large program
]
# Arbitrary text over regex syntax: most is refused or invalid, all of it must answer typed.
_SYNTAX = st.text(st.sampled_from("()[]{}|*+?^$\\.-,:=!<>a1dwsbkuxpP0"), max_size=24)
patterns = st.one_of(
    st.builds(
        lambda shape, x: shape.format(x=x), st.sampled_from(_SHAPES), st.sampled_from(_ATOMS)
    ),
    _SYNTAX,
)


@st.composite
def arguments(draw: st.DrawFn) -> str:
    n = draw(st.one_of(st.integers(0, 64), st.integers(1000, 20_000)))
    tail = draw(st.sampled_from(["", "!", "b", "\n", "\ud800", "c", "z"]))
    if draw(st.booleans()):  # a's and b's at random: what keeps a DFA building new states
        seeded = random.Random(draw(st.integers(0, 2**32)))
        return "".join(seeded.choice("ab") for _ in range(n)) + tail
    run = draw(st.sampled_from(["a", "1", " ", "ab", "a ", "é", "\u2028"]))
    return run * n + tail


def _placements(pattern: str, text: str) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    return [
        (
            {"type": "object", "properties": {"s": {"type": "string", "pattern": pattern}}},
            {"s": text},
        ),
        (
            {
                "type": "object",
                "patternProperties": {pattern: {"type": "integer"}},
                "additionalProperties": False,
            },
            {text: 1},
        ),
        ({"type": "object", "propertyNames": {"pattern": pattern}}, {text: 1}),
        (
            {
                "type": "object",
                "properties": {"s": {"anyOf": [{"type": "integer"}, {"pattern": pattern}]}},
            },
            {"s": text},
        ),
    ]


# jsonschema and RE2 load with the first schema that needs them: not a pattern's cost.
validate_tool_arguments(
    Tool("W", "", {"type": "object", "patternProperties": {"^w$": {"pattern": "w"}}}),
    ToolCall("c", "W", {"w": "w"}),
)


@fuzz_settings(100, deadline_ms=5000)
@given(patterns, arguments())
def test_a_hostile_pattern_never_stalls_validation(pattern: str, text: str) -> None:
    tally("patterns: hostile pattern x argument")
    for schema, args in _placements(pattern, text):
        start = time.perf_counter()
        with contextlib.suppress(ToolArgumentsError, ToolSchemaError):
            validate_tool_arguments(Tool("T", "", schema), ToolCall("c", "T", args))
        longest("patterns: one validation (s)", time.perf_counter() - start)
