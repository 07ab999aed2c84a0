"""Fuzz the tool-argument gate on arbitrary schemas and arguments (issue 17.2, defect 2).

Invariant: `validate_tool_arguments` returns the coerced arguments or raises
`ToolArgumentsError` / `ToolSchemaError`, nothing else, within the example's deadline; compiling
a schema (`ToolValidator`) raises only `ToolSchemaError`.
"""

from __future__ import annotations

import contextlib
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mule.pi import (
    Tool,
    ToolArgumentsError,
    ToolCall,
    ToolSchemaError,
    ToolValidator,
    validate_tool_arguments,
)
from tests.fuzz.budget import fuzz_settings, tally
from tests.fuzz.hostile import depths, json_values, nested

PATTERNS = ["^a", "(?i)^A", "(x)\\1", "[", "a{2,1}", "(?P<n>a)(?P=n)", "\\d+", "(a+)+$", "é", ""]
TYPES = ["object", "array", "string", "number", "integer", "boolean", "null", "frob", 3]
REFS = [
    "#",
    "#/$defs/a",
    "#/$defs/missing",
    "#/properties/x",
    "#/$defs/list/0",
    "#/$defs/list/²",
    "http://127.0.0.1:9/schema",
    "other.json",
    "#a",
    "#/" + "9" * 5000,
]
FORMATS = ["email", "date-time", "regex", "uri", "ipv4", "frob"]
keys = st.sampled_from(["a", "b", "x", "0", "1" * 50, "\ud800", "constructor", ""])
numbers = st.one_of(st.integers(-5, 5), st.sampled_from([0, 0.5, 1e308, -(2**80), 10**400]))

pytestmark = pytest.mark.slow  # a few seconds of examples each


def keyword_values(schemas: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    entries = st.one_of(
        st.tuples(
            st.just("type"), st.sampled_from(TYPES) | st.lists(st.sampled_from(TYPES), max_size=3)
        ),
        st.tuples(st.just("properties"), st.dictionaries(keys, schemas, max_size=3)),
        st.tuples(
            st.just("patternProperties"),
            st.dictionaries(st.sampled_from(PATTERNS), schemas, max_size=2),
        ),
        st.tuples(st.just("additionalProperties"), schemas),
        st.tuples(st.just("required"), st.lists(keys, max_size=3)),
        st.tuples(st.just("items"), schemas | st.lists(schemas, max_size=2)),
        st.tuples(st.just("prefixItems"), st.lists(schemas, max_size=2)),
        st.tuples(
            st.sampled_from(["anyOf", "oneOf", "allOf"]), st.lists(schemas, min_size=1, max_size=3)
        ),
        st.tuples(
            st.sampled_from(["not", "if", "then", "else", "contains", "propertyNames"]), schemas
        ),
        st.tuples(st.just("$ref"), st.sampled_from(REFS)),
        st.tuples(
            st.just("$defs"),
            st.fixed_dictionaries({"a": schemas, "list": st.lists(schemas, max_size=2)}),
        ),
        st.tuples(st.just("pattern"), st.sampled_from(PATTERNS)),
        st.tuples(st.just("format"), st.sampled_from(FORMATS)),
        st.tuples(
            st.sampled_from(
                [
                    "minimum",
                    "maximum",
                    "exclusiveMinimum",
                    "multipleOf",
                    "minLength",
                    "maxItems",
                    "minProperties",
                    "minContains",
                ]
            ),
            numbers,
        ),
        st.tuples(st.sampled_from(["const", "default"]), json_values),
        st.tuples(st.just("enum"), st.lists(json_values, max_size=3)),
        st.tuples(
            st.just("dependencies"),
            st.dictionaries(keys, st.lists(keys, max_size=2) | schemas, max_size=2),
        ),
        st.tuples(st.just("uniqueItems"), st.booleans()),
        st.tuples(st.just("$id"), st.sampled_from(["http://127.0.0.1:9/root", "urn:x", "rel/", 5])),
    )
    return st.lists(entries, max_size=5).map(dict)


schemas: st.SearchStrategy[Any] = st.recursive(
    st.booleans() | st.just({}), keyword_values, max_leaves=8
)
arguments = st.dictionaries(keys, json_values, max_size=4)


@fuzz_settings(400)
@given(schemas, arguments, st.none() | depths)
def test_the_gate_answers_typed_on_any_schema_and_arguments(
    schema: Any, args: dict[str, Any], depth: int | None
) -> None:
    tally("validate: arbitrary schema and arguments")
    if depth is not None:
        args = {**args, "deep": nested(depth, depth % 2 == 0, 1)}
    if isinstance(schema, dict) and schema.get("type") == "object" and depth is not None:
        schema = {**schema, "properties": {"deep": {"$ref": "#"}}}
    with contextlib.suppress(ToolSchemaError):
        ToolValidator("T", schema)
    with contextlib.suppress(ToolArgumentsError, ToolSchemaError):
        validate_tool_arguments(Tool("T", "", schema), ToolCall("c", "T", args))
