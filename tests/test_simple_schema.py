"""The gate's plain-schema path (`mule.pi._simple_schema`) against jsonschema, differentially.

Whenever `simple_check` accepts a schema, jsonschema must accept it as a schema too, and give
the same verdict on every value; and the whole gate (coercion, verdict, failure text) must
answer as it does with the schema compiled by jsonschema.
"""

from __future__ import annotations

import contextlib
from typing import Any
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mule.pi import ToolArgumentsError, ToolSchemaError, ToolValidator
from mule.pi import _validate as validate_module
from mule.pi._content import ToolCall
from mule.pi._schema import check_schema, formats, pi_validator
from mule.pi._schema_bounds import schema_problem
from mule.pi._simple_schema import simple_check

KEYS = ["a", "b", "x", "constructor", ""]
TYPES = ["object", "array", "string", "number", "integer", "boolean", "null"]
NUMBERS = st.one_of(
    st.integers(-3, 3),
    st.sampled_from([0.5, 2.0, -1.5, 1e308, 10**400, -(2**80), 0, 3]),
)
COUNTS = st.one_of(st.integers(0, 3), st.sampled_from([-1, 1.0, True, "2"]))


def _schemas() -> st.SearchStrategy[Any]:
    """Schemas in and around the plain subset, well-formed or not."""

    def node(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
        entry = st.one_of(
            st.tuples(
                st.just("type"),
                st.sampled_from([*TYPES, "frob", 3])
                | st.lists(st.sampled_from([*TYPES, "frob"]), max_size=3),
            ),
            st.tuples(st.just("properties"), st.dictionaries(st.sampled_from(KEYS), children)),
            st.tuples(st.just("additionalProperties"), children),
            st.tuples(
                st.just("required"), st.lists(st.sampled_from(KEYS), max_size=3) | st.just("a")
            ),
            st.tuples(st.just("items"), children | st.lists(children, max_size=2)),
            st.tuples(
                st.just("enum"),
                st.lists(st.sampled_from(["a", "b", "", "1"]), max_size=3)
                | st.lists(st.sampled_from([1, True, None, "a", 1.0]), max_size=3),
            ),
            st.tuples(st.just("const"), st.sampled_from(["a", "1", 1, True, None])),
            st.tuples(
                st.sampled_from(["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"]),
                NUMBERS | st.sampled_from([True, "1", None]),
            ),
            st.tuples(st.just("multipleOf"), NUMBERS | st.sampled_from([True, "1"])),
            st.tuples(
                st.sampled_from(
                    [
                        "minLength",
                        "maxLength",
                        "minItems",
                        "maxItems",
                        "minProperties",
                        "maxProperties",
                    ]
                ),
                COUNTS,
            ),
            st.tuples(
                st.sampled_from(["title", "description", "$comment"]), st.sampled_from(["t", 1])
            ),
            st.tuples(st.just("default"), st.sampled_from([1, "d", None, [1]])),
            st.tuples(st.just("examples"), st.sampled_from([[1], "e"])),
            st.tuples(
                st.sampled_from(["deprecated", "readOnly", "writeOnly"]),
                st.sampled_from([True, 1]),
            ),
            # Outside the subset: these must be declined.
            st.tuples(
                st.sampled_from(["pattern", "format", "$ref", "anyOf", "not", "$schema"]),
                st.sampled_from(["^a", "email", "#", [{}], {}, "x"]),
            ),
        )
        return st.lists(entry, max_size=4).map(dict)

    return st.recursive(st.booleans(), node, max_leaves=8)


def _values() -> st.SearchStrategy[Any]:
    scalars = st.one_of(
        st.none(),
        st.booleans(),
        NUMBERS,
        st.sampled_from([1.0, 0.0, -0.0, 2.5, 3.0, float("inf")]),
        st.sampled_from(["", "a", "b", "ab", "1", "0x10", "true", "null"]),
    )
    return st.recursive(
        scalars,
        lambda children: (
            st.lists(children, max_size=3)
            | st.dictionaries(st.sampled_from([*KEYS, "z"]), children, max_size=3)
        ),
        max_leaves=8,
    )


SCALARS: list[Any] = [
    None,
    True,
    False,
    *(-1, 0, 1, 2, 3, 0.5, 2.0, -1.5, 1e308, float("inf"), 10**400, -(2**80)),
    *("", "a", "b", "ab", "1", "0x10"),
]
FIELDS: tuple[Any, ...] = (None, 1, "a", [], {}, {"a": 1})
# Every schema meets every scalar, and containers of them under the keys schemas use.
BATTERY: list[Any] = [
    *SCALARS,
    [],
    {},
    *([v] for v in SCALARS),
    [1, "a", None],
    *({k: v} for k in [*KEYS, "z"] for v in FIELDS),
    dict.fromkeys(KEYS, "a"),
    {"a": 1, "b": [1, 2], "x": {"a": None}},
]


def _verdict(check: Any, value: Any) -> bool | type[BaseException]:
    try:
        return bool(check(value))
    except Exception as exc:
        return type(exc)


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(_schemas(), st.lists(_values(), max_size=4))
def test_an_accepted_schema_is_one_and_gets_jsonschemas_verdicts(
    schema: Any, values: list[Any]
) -> None:
    check = simple_check(schema)
    if check is None:
        return
    assert check_schema(schema) is None
    assert schema_problem(schema) is None
    compiled = pi_validator()(schema, format_checker=formats())
    for value in BATTERY + values:
        assert _verdict(check, value) == _verdict(compiled.is_valid, value), value


# One plain schema per keyword (and a few together): each must be accepted and agree.
PLAIN: list[Any] = [
    True,
    False,
    {},
    *({"type": t} for t in TYPES),
    {"type": ["integer", "null"]},
    {"type": ["string", "number", "boolean"]},
    {"properties": {"a": {"type": "integer"}, "b": False}},
    {"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": False},
    {"additionalProperties": {"type": "number"}},
    {"required": ["a", "b"]},
    {"items": {"type": "integer"}},
    {"items": False},
    {"enum": ["a", "1"]},
    {"enum": []},
    {"const": "a"},
    {"minimum": 1},
    {"maximum": 2.0},
    {"exclusiveMinimum": 0},
    {"exclusiveMaximum": 3},
    {"multipleOf": 2},
    {"multipleOf": 0.5},
    {"minLength": 1},
    {"maxLength": 1},
    {"minItems": 1},
    {"maxItems": 1},
    {"minProperties": 1},
    {"maxProperties": 1},
    {"type": "integer", "minimum": 0, "maximum": 3, "title": "n", "default": 1},
    {"multipleOf": 3, "type": "string"},
    {"type": "string", "multipleOf": 3},
    {"description": "d", "$comment": "c", "examples": [1], "deprecated": True, "readOnly": False},
]


@pytest.mark.parametrize("schema", PLAIN)
def test_each_plain_keyword_gets_jsonschemas_verdicts(schema: Any) -> None:
    check = simple_check(schema)
    assert check is not None
    assert check_schema(schema) is None
    compiled = pi_validator()(schema, format_checker=formats())
    for value in BATTERY:
        assert _verdict(check, value) == _verdict(compiled.is_valid, value), value


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "string", "pattern": "^a"},
        {"type": "string", "format": "email"},
        {"$ref": "#"},
        {"anyOf": [{"type": "string"}]},
        {"items": [{"type": "string"}]},
        {"type": "object", "$schema": "https://json-schema.org/draft/2020-12/schema"},
        {"type": ["string", "string"]},
        {"type": []},
        {"required": ["a", "a"]},
        {"minLength": 1.0},
        {"multipleOf": 0},
        {"enum": [1, True]},
        {"properties": {"a": {"nullable": True}}},
        {"title": 3},
    ],
)
def test_what_the_subset_declines(schema: Any) -> None:
    assert simple_check(schema) is None


def _gate(schema: Any, *, plain: bool) -> ToolValidator | ToolSchemaError:
    """Compile `schema` on the plain path, or (`plain=False`) always with jsonschema."""
    with contextlib.ExitStack() as stack:
        if not plain:
            stack.enter_context(mock.patch.object(validate_module, "simple_check", _declined))
        try:
            return ToolValidator("T", schema)
        except ToolSchemaError as exc:
            return exc


def _declined(schema: Any) -> None:
    return None


def _answer(gate: ToolValidator | ToolSchemaError, args: dict[str, Any]) -> tuple[str, Any]:
    if isinstance(gate, ToolSchemaError):
        return ("schema", str(gate))
    try:
        return ("ok", gate.validate(ToolCall("c1", "T", args)))
    except (ToolArgumentsError, ToolSchemaError) as exc:
        return (type(exc).__name__, str(exc))


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(
    st.dictionaries(st.sampled_from(KEYS), _schemas(), max_size=3),
    st.lists(st.sampled_from(KEYS), max_size=2, unique=True),
    st.lists(st.dictionaries(st.sampled_from([*KEYS, "z"]), _values(), max_size=3), min_size=1),
)
def test_the_gate_answers_the_same_on_either_path(
    properties: dict[str, Any], required: list[str], calls: list[dict[str, Any]]
) -> None:
    schema = {"type": "object", "properties": properties, "required": required}
    plain, compiled = _gate(schema, plain=True), _gate(schema, plain=False)
    for args in calls:
        assert _answer(plain, args) == _answer(compiled, args)
