"""Tool-argument validation: Pi's coercion, its failure text, and a differential run vs pi-ai.

Also tests the private rules `mule.pi._js_values.js_number_to_string` and `js_stringify`: numbers
and JSON written as JavaScript writes them.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mule.pi import (
    JsonObject,
    JsonValue,
    Tool,
    ToolArgumentsError,
    ToolCall,
    ToolSchemaError,
    ToolValidator,
    validate_tool_arguments,
)
from mule.pi._js_values import js_number_to_string, js_stringify
from tests.node import NodeLines

REPO = Path(__file__).resolve().parents[2]
NODE_SCRIPT = REPO / "tests" / "node" / "validate.mjs"
HAVE_PI = (REPO / "node" / "node_modules" / "@earendil-works" / "pi-ai").is_dir()


def obj(properties: dict[str, Any], required: list[str] | None = None, **extra: Any) -> JsonObject:
    """Return an object schema."""
    schema: dict[str, Any] = {"type": "object", "properties": properties, **extra}
    if required is not None:
        schema["required"] = required
    return schema


def check(schema: JsonObject, args: JsonObject, name: str = "V") -> dict[str, Any]:
    """Validate `args` against `schema` with a fresh tool."""
    return validate_tool_arguments(Tool(name, "", schema), ToolCall("c1", name, args))


def fails(schema: JsonObject, args: JsonObject, name: str = "V") -> ToolArgumentsError:
    """Return the validation error `args` must raise."""
    with pytest.raises(ToolArgumentsError) as caught:
        check(schema, args, name)
    return caught.value


N_NUMBER = obj({"n": {"type": "number"}}, ["n"])


# --- Section 6, scenarios 10-12, as pi-ai 1.6.0 (pi-schema) answers them ---


def test_missing_required_number_gives_pi_failure_text() -> None:
    """Scenario 10: `{}` against a required number `n` fails with Pi's frame, at `n`."""
    error = fails(N_NUMBER, {})
    assert (
        error.text == 'Validation failed for tool "V":\n  - n: missing\n\nReceived arguments:\n{}'
    )
    assert error.errors == (("n", "missing"),)
    assert error.tool_name == "V"
    assert str(error) == error.text
    assert isinstance(error, ValueError)


def test_string_number_passes_and_raw_call_is_untouched() -> None:
    """Scenario 11: `{"n": "5"}` passes as 5, and the raw call still holds "5"."""
    call = ToolCall("c1", "V", {"n": "5"})
    assert validate_tool_arguments(Tool("V", "", N_NUMBER), call) == {"n": 5}
    assert call.arguments == {"n": "5"}


def test_nested_arguments_are_not_mutated() -> None:
    """Coercion works on a copy: nested lists and dicts of the call are left as they were."""
    schema = obj({"o": obj({"xs": {"type": "array", "items": {"type": "integer"}}})})
    raw = {"o": {"xs": ["1", "2"]}}
    call = ToolCall("c1", "V", raw)
    assert validate_tool_arguments(Tool("V", "", schema), call) == {"o": {"xs": [1, 2]}}
    assert raw == {"o": {"xs": ["1", "2"]}}


def test_an_optional_null_is_dropped() -> None:
    """A null for an optional property whose schema rejects null is dropped, as if omitted."""
    assert check(obj({"v": {"type": "number"}}), {"v": None, "w": None}) == {"w": None}
    assert check(obj({"v": {"type": ["number", "null"]}}), {"v": None}) == {"v": None}


@pytest.mark.parametrize(
    ("kind", "expected"),
    [("number", 0), ("integer", 0), ("string", "null"), ("boolean", False), ("null", None)],
)
def test_a_required_null_converts_for_each_type(kind: str, expected: object) -> None:
    """Scenario 12: a required null becomes 0, "null" (TypeBox's rule wins), false, or stays."""
    result = check(obj({"v": {"type": kind}}, ["v"]), {"v": None})
    assert result == {"v": expected}
    assert type(result["v"]) is type(expected)


@pytest.mark.parametrize(
    ("kind", "raw", "expected"),
    [
        ("number", "0x10", 16),
        ("number", " 0X1f ", 31),
        ("number", "0b101", 5),
        ("number", "1e3", 1000),
        ("number", "-2.5", -2.5),
        ("number", ".5", 0.5),
        ("number", "", 0),
        ("number", "   ", 0),
        ("number", "TRUE", 1),
        ("number", "12n", 12),
        ("number", True, 1),
        ("integer", "3.5", 3),
        ("integer", 3.5, 3),
        ("integer", "-0.5", 0),
        ("integer", "1e3", 1000),
        ("boolean", "true", True),
        ("boolean", "TRUE", True),
        ("boolean", "False", False),
        ("boolean", "1", True),
        ("boolean", 0, False),
        ("string", 1.0, "1"),
        ("string", 1e21, "1e+21"),
        ("string", 2.5e-7, "2.5e-7"),
        ("string", True, "true"),
        ("null", "", None),
        ("null", "NULL", None),
        ("null", "0", None),
        ("null", 0, None),
        ("null", False, None),
    ],
)
def test_primitive_coercions(kind: str, raw: JsonValue, expected: object) -> None:
    """TypeBox's conversions by type, with JS Number()/String() semantics."""
    result = check(obj({"v": {"type": kind}}), {"v": raw})["v"]
    assert result == expected
    assert type(result) is type(expected)


@pytest.mark.parametrize(
    ("kind", "raw", "got"),
    [
        ("number", "Infinity", "string"),
        ("number", "1e400", "string"),
        ("number", "1_000", "string"),
        ("number", "abc", "string"),
        ("integer", "0.1e1x", "string"),
        ("boolean", "yes", "string"),
        ("boolean", 2, "integer"),
        ("boolean", 0.5, "number"),
        ("null", 1, "integer"),
        ("object", '{"a": 1}', "string"),
    ],
)
def test_values_pi_does_not_coerce_fail(kind: str, raw: JsonValue, got: str) -> None:
    """Non-finite, non-numeric or foreign values stay as they are, and so fail by type."""
    error = fails(obj({"v": {"type": kind}}), {"v": raw})
    assert error.errors == (("v", f"expected {kind}, got {got}"),)


def test_a_single_value_becomes_a_one_item_array() -> None:
    """An array schema wraps a single value, then converts the item."""
    assert check(obj({"v": {"type": "array", "items": {"type": "integer"}}}), {"v": "7"}) == {
        "v": [7]
    }
    assert check(obj({"v": {"type": "array"}}), {"v": "[1]"}) == {"v": ["[1]"]}


def test_enum_and_const_take_the_member_the_value_converts_to() -> None:
    """`true` converts to the enum member 1; a string to a numeric const."""
    assert check(obj({"v": {"enum": [1]}}), {"v": True}) == {"v": 1}
    assert check(obj({"v": {"const": 2}}), {"v": "2"}) == {"v": 2}
    assert fails(obj({"v": {"enum": ["low", "high"]}}), {"v": "mid"}).errors == (
        ("v", 'expected one of ["low","high"]'),
    )
    assert fails(obj({"v": {"const": "x"}}), {"v": "y"}).errors == (("v", 'expected "x"'),)


def test_tuple_items_and_prefix_items() -> None:
    """Draft-7 tuple `items` and `prefixItems` convert per index; later items are left alone."""
    tuple_schema = obj({"t": {"type": "array", "items": [{"type": "number"}, {"type": "string"}]}})
    assert check(tuple_schema, {"t": ["1", 2, "3"]}) == {"t": [1, "2", "3"]}
    prefix = obj({"t": {"type": "array", "prefixItems": [{"type": "number"}]}})
    assert check(prefix, {"t": ["1", "x"]}) == {"t": [1, "x"]}


def test_any_of_takes_the_first_branch_whose_conversion_passes() -> None:
    """anyOf[number, boolean]: "true" converts by the number branch to 1; "x" blames a branch."""
    schema = obj({"v": {"anyOf": [{"type": "number"}, {"type": "boolean"}]}})
    assert check(schema, {"v": "true"}) == {"v": 1}
    assert check(schema, {"v": "5"}) == {"v": 5}
    assert fails(schema, {"v": "x"}).errors == (("v", "expected number, got string"),)


def test_a_tagged_union_reports_by_its_tag() -> None:
    """A union of objects tagged by a const reports the tag, or the branch it selects."""

    def branch(tag: str, **props: Any) -> JsonObject:
        return obj({"kind": {"const": tag}, **props}, ["kind"])

    schema = obj({"k": {"anyOf": [branch("a", x={"type": "number"}), branch("b")]}})
    assert fails(schema, {"k": {"kind": "c"}}).errors == (("k.kind", 'expected one of ["a","b"]'),)
    assert fails(schema, {"k": {"kind": "a", "x": "y"}}).errors == (
        ("k.x", "expected number, got string"),
    )


def test_type_list_keeps_a_matching_value_and_tries_types_in_order() -> None:
    """A type list leaves a value of any listed type alone, else the first converting type wins."""
    schema = obj({"v": {"type": ["string", "number"]}})
    assert check(schema, {"v": "5"}) == {"v": "5"}
    assert check(schema, {"v": True}) == {"v": "true"}
    assert check(obj({"v": {"type": ["boolean", "number"]}}), {"v": "7"}) == {"v": 7}


def test_all_of_and_additional_properties_coerce() -> None:
    """Members of allOf apply in turn; schema-valued additionalProperties coerces extra keys."""
    schema = {
        "allOf": [
            obj({"a": {"type": "number"}}),
            obj({"b": {"type": "boolean"}}, additionalProperties={"type": "integer"}),
        ]
    }
    assert check(schema, {"a": "1", "b": "true", "c": "2"}) == {"a": 1, "b": True, "c": 2}


def test_extra_keys_are_kept_unless_forbidden() -> None:
    """Undeclared keys survive; additionalProperties false reports each one, and only that."""
    assert check(N_NUMBER, {"n": 1, "x": "y"}) == {"n": 1, "x": "y"}
    error = fails(obj({"n": {"type": "number"}}, additionalProperties=False), {"n": 1, "x": "y"})
    assert error.errors == (("x", "unknown field"),)


def test_failure_text_formats_paths_and_original_arguments() -> None:
    """Nested paths use dots, a missing key is reported at itself, the args print as JS JSON."""
    schema = obj(
        {
            "o": obj({"k": {"type": "string"}}, ["k"]),
            "xs": {"type": "array", "items": {"type": "number"}},
        },
        ["o"],
    )
    error = fails(schema, {"xs": ["1", "x", 2.0], "o": {}, "é": "\n"}, name="T")
    assert error.text == (
        'Validation failed for tool "T":\n'
        "  - o.k: missing\n"
        "  - xs.1: expected number, got string\n"
        "\n"
        "Received arguments:\n"
        '{\n  "xs": [\n    "1",\n    "x",\n    2\n  ],\n  "o": {},\n  "é": "\\n"\n}'
    )


def test_error_messages_follow_pi_schema_wording() -> None:
    """Missing fields first, then each property's failures in declaration order."""
    schema = obj(
        {
            "n": {"type": "integer", "minimum": 3, "maximum": 9},
            "s": {"type": "string", "minLength": 3, "pattern": "^a"},
            "e": {"enum": ["a", "b"]},
            "xs": {"type": "array", "maxItems": 1},
        },
        ["n", "m", "k"],
    )
    error = fails(schema, {"n": "2.0", "s": "b", "e": "c", "xs": [1, 2]})
    assert error.errors == (
        ("m", "missing"),
        ("k", "missing"),
        ("n", "expected >= 3"),
        ("s", "expected at least 3 characters"),
        ("s", "expected to match ^a"),
        ("e", 'expected one of ["a","b"]'),
        ("xs", "expected at most 1 items"),
    )


def test_every_error_is_listed() -> None:
    """pi-schema has no cap: twelve bad properties, twelve lines."""
    schema = obj({f"p{i}": {"type": "number"} for i in range(12)})
    error = fails(schema, {f"p{i}": "x" for i in range(12)})
    assert [path for path, _ in error.errors] == [f"p{i}" for i in range(12)]


def test_refs_are_followed_and_an_unresolved_one_rejects_only_its_place() -> None:
    """A local `$ref` checks through its target; one that names nothing fails where it stands."""
    schema: JsonObject = {
        "type": "object",
        "$defs": {"pos": {"type": "integer", "minimum": 1}},
        "properties": {"n": {"$ref": "#/$defs/pos"}, "m": {"$ref": "#/$defs/missing"}},
    }
    assert fails(schema, {"n": 0}).errors == (("n", "expected >= 1"),)
    assert check(schema, {"n": 2}) == {"n": 2}
    assert fails(schema, {"m": 1}).errors == (("m", "unresolved reference #/$defs/missing"),)


def test_validator_is_compiled_once_per_tool() -> None:
    """`for_tool` compiles once per schema: equal tools share it; a dead tool's entry goes."""
    tool = Tool("V", "", N_NUMBER)
    first = ToolValidator.for_tool(tool)
    assert ToolValidator.for_tool(tool) is first
    other = Tool("V", "", N_NUMBER)
    assert ToolValidator.for_tool(other) is first  # same schema: compiled once, shared
    assert ToolValidator.for_tool(Tool("V", "", {"type": "object"})) is not first
    key = id(tool)
    del tool, first
    gc.collect()
    assert key not in ToolValidator._cache


@pytest.mark.parametrize(
    ("schema", "detail"),
    [
        (
            {"type": "object", "properties": {"a": 5}},
            "A schema must be an object or a boolean, got 5",
        ),
        ({"type": "object", "additionalProperties": None}, "got null"),
        ({"type": "object", "properties": {"a": {"pattern": "("}}}, "pattern '(' is not a regular"),
    ],
)
def test_a_schema_pi_schema_cannot_compile_is_a_typed_error(
    schema: JsonObject, detail: str
) -> None:
    """A subschema that is no schema, or a bad pattern, raises ToolSchemaError naming the tool."""
    with pytest.raises(ToolSchemaError, match='tool "Bad"') as caught:
        check(schema, {}, name="Bad")
    assert caught.value.tool_name == "Bad"
    assert detail in caught.value.detail
    assert isinstance(caught.value, ValueError)


def test_a_root_schema_that_wraps_the_arguments_is_a_schema_error() -> None:
    """pi-schema wraps the arguments object into an array for `type: "array"`; mule refuses."""
    with pytest.raises(ToolSchemaError, match="non-object"):
        check({"type": "array"}, {"a": 1})


def test_an_odd_keyword_value_is_what_pi_schema_makes_of_it() -> None:
    """`type: 5` is no type name: every value fails it (pi-schema compiles it, as here)."""
    assert fails({"type": 5}, {}).errors == (("root", "expected 5, got object"),)


@pytest.mark.parametrize(
    ("number", "text"),
    [
        (0, "0"),
        (-0.0, "0"),
        (1.0, "1"),
        (123.456, "123.456"),
        (1e21, "1e+21"),
        (1e20, "100000000000000000000"),
        (1.5e-7, "1.5e-7"),
        (0.000001, "0.000001"),
        (-1.25e-10, "-1.25e-10"),
        (2**53, "9007199254740992"),
        (2**64, "18446744073709552000"),
        (float("inf"), "Infinity"),
    ],
)
def test_js_number_to_string(number: float, text: str) -> None:
    """Numbers print as JS String() does."""
    assert js_number_to_string(number) == text


def test_js_stringify_orders_index_keys_first_and_escapes_like_js() -> None:
    """JSON.stringify key order (index keys first) and escapes (controls, lone surrogates)."""
    assert js_stringify({"b": 1, "2": 2, "1": 3}, indent="") == '{\n"1": 3,\n"2": 2,\n"b": 1\n}'
    assert js_stringify("\x01\ud800\u2028") == '"\\u0001\\ud800\u2028"'


# --- Differential: the real pi-ai validateToolArguments in Node ---


class PiValidator(NodeLines):
    """A long-lived Node process running pi-ai's validateToolArguments, one JSON line per case."""

    def __init__(self) -> None:
        super().__init__(NODE_SCRIPT)

    def run(self, schema: JsonObject, args: JsonObject) -> tuple[bool, str]:
        """Return (ok, JSON.stringify(value, null, 2) or the error message)."""
        reply = self.ask({"name": "V", "schema": schema, "args": args})
        return (True, reply["value"]) if reply["ok"] else (False, reply["message"])


@pytest.fixture(scope="module")
def pi() -> Iterator[PiValidator]:
    """Start one Node validator for the module."""
    if not HAVE_PI:
        pytest.skip("node/node_modules is missing (run ./dev setup)")
    runner = PiValidator()
    yield runner
    runner.close()


def mule_result(schema: JsonObject, args: JsonObject) -> tuple[bool, str]:
    """Return mule's result in the Node script's shape."""
    try:
        return True, js_stringify(check(schema, args))
    except ToolArgumentsError as error:
        return False, error.text


HAND_CASES: list[tuple[JsonObject, JsonObject]] = [
    (N_NUMBER, {}),
    (N_NUMBER, {"n": "5"}),
    (N_NUMBER, {"n": " 0x10 "}),
    (N_NUMBER, {"n": "Infinity"}),
    (N_NUMBER, {"n": ""}),
    (N_NUMBER, {"n": None}),
    (N_NUMBER, {"n": True, "extra": [1, {"z": None}]}),
    (obj({"n": {"type": "integer"}}), {"n": "1.0"}),
    (obj({"n": {"type": "integer"}}), {"n": "3.5"}),
    (obj({"n": {"type": "integer"}}), {"n": 2.0}),
    (obj({"b": {"type": "boolean"}}), {"b": "yes"}),
    (obj({"b": {"type": "boolean"}}), {"b": 1}),
    (obj({"s": {"type": "string"}}), {"s": 1e21}),
    (obj({"s": {"type": "string"}}), {"s": 0.1}),
    (obj({"s": {"type": "string"}}), {"s": False}),
    (obj({"z": {"type": "null"}}), {"z": 0}),
    (obj({"xs": {"type": "array", "items": {"type": "number"}}}), {"xs": ["1", "2"]}),
    (obj({"v": {"anyOf": [{"type": "number"}, {"type": "boolean"}]}}), {"v": "true"}),
    (obj({"v": {"anyOf": [{"type": "number"}, {"type": "boolean"}]}}), {"v": "x"}),
    (obj({"v": {"oneOf": [{"type": "number"}, {"type": "integer"}]}}), {"v": 1}),
    (obj({"v": {"oneOf": [{"type": "string"}, {"type": "number"}]}}), {"v": None}),
    (obj({"v": {"type": ["null", "number"]}}), {"v": "4"}),
    (obj({"o": obj({"k": {"type": "string"}}, ["k"])}, ["o"]), {"o": {}}),
    (obj({"o": obj({"k": {"type": "string"}}, ["k"])}, ["o"]), {}),
    (obj({"n": {"type": "number"}}, additionalProperties=False), {"n": "1", "x": 1, "y": 2}),
    (obj({}, additionalProperties={"type": "number"}), {"a": "1", "b": "x"}),
    (obj({"a/b": {"type": "number"}, "t~": {"type": "string"}}), {"a/b": "x", "t~": 1}),
    (obj({"n": {"type": "number", "minimum": 1, "exclusiveMaximum": 10}}), {"n": 10}),
    (obj({"n": {"type": "number", "multipleOf": 0.1}}), {"n": 0.3}),
    (obj({"s": {"type": "string", "maxLength": 2, "pattern": "^[a-z]+$"}}), {"s": "ABC"}),
    (obj({"e": {"const": "x"}, "f": {"enum": [1, "1", None]}}), {"e": "y", "f": True}),
    (obj({"xs": {"type": "array", "minItems": 2, "uniqueItems": True}}), {"xs": [1]}),
    (obj({"xs": {"type": "array", "uniqueItems": True}}), {"xs": [1, 1.0]}),
    (obj({"xs": {"type": "array", "contains": {"type": "string"}}}), {"xs": [1]}),
    (
        obj({"t": {"type": "array", "items": [{"type": "number"}], "additionalItems": False}}),
        {"t": ["1", 2]},
    ),
    (obj({f"p{i}": {"type": "number"} for i in range(10)}), {f"p{i}": "x" for i in range(10)}),
    (
        obj(
            {"a": {"type": "number"}, "b": {"type": "number"}}, dependentRequired={"a": ["b", "c"]}
        ),
        {"a": 1},
    ),
    (obj({"a": {"type": "number"}}, dependencies={"a": ["b", "c"]}), {"a": 1}),
    (obj({"a": {"not": {"type": "number"}}}), {"a": 1}),
    (
        obj({"a": {"if": {"type": "number"}, "then": {"minimum": 5}, "else": {"type": "string"}}}),
        {"a": 2},
    ),
    (
        obj({"a": {"if": {"type": "number"}, "then": {"minimum": 5}, "else": {"type": "string"}}}),
        {"a": True},
    ),
    (obj({"a": {"allOf": [{"type": "number"}, {"minimum": 3}]}}), {"a": "2"}),
    (obj({"a": {"type": "object", "propertyNames": {"pattern": "^x"}}}), {"a": {"y": 1, "x": 2}}),
    (obj({"a": {"type": "object", "minProperties": 2}}), {"a": {"k": 1}}),
    (obj({"d": {"type": "string", "format": "email"}}), {"d": "nope"}),
    (
        {
            "type": "object",
            "$defs": {"p": {"type": "integer", "minimum": 1}},
            "properties": {"n": {"$ref": "#/$defs/p"}},
        },
        {"n": "0"},
    ),
    (obj({"n": {"type": "number"}}), {"2": "x", "b": "\u2028\x00", "1": "ü"}),
    (obj({"v": {"type": "number"}}), {"v": 12345678901234567890}),
    (obj({"v": {"type": "integer"}}), {"v": 10**400}),
    # pi-schema 1.6.0: coercion passes, messages, unions, references, formats
    (obj({"v": {"type": "number"}}), {"v": None, "w": None}),
    (obj({"v": {"type": "string"}}, ["v"]), {"v": None}),
    (obj({"v": {"type": "boolean"}}), {"v": "TRUE"}),
    (obj({"v": {"type": "number"}}), {"v": "12n"}),
    (obj({"v": {"type": "integer"}}), {"v": 3.5}),
    (obj({"v": {"type": "array", "items": {"type": "integer"}}}), {"v": "7"}),
    (obj({"v": {"type": "array"}}), {"v": None}),
    (obj({"v": {"type": "array", "prefixItems": [{"type": "number"}]}}), {"v": "1"}),
    (obj({"v": {"enum": [1, "a", None]}}), {"v": True}),
    (obj({"v": {"enum": list(range(25))}}), {"v": 99}),
    (obj({"v": {"const": {"a": [1]}}}), {"v": {"a": [1.0]}}),
    (obj({"v": {"const": {"a": [1]}}}), {"v": {"a": [2]}}),
    ({"type": 5}, {}),
    ({"type": ["string", 7, None]}, {}),
    (obj({"v": {"type": ["integer", "null"]}}), {"v": ""}),
    (obj({"v": {"type": ["integer", "null"]}}, ["v"]), {"v": "x"}),
    (obj({"v": {"oneOf": [{"type": "integer"}, {"type": "number"}]}}), {"v": 1}),
    (obj({"v": {"oneOf": [{"type": "integer"}, {"minimum": 5}]}}), {"v": "x"}),
    (
        obj(
            {
                "k": {
                    "anyOf": [
                        obj({"kind": {"const": "a"}, "x": {"type": "number"}}, ["kind"]),
                        obj({"kind": {"const": "b"}, "y": {"type": "string"}}, ["kind"]),
                    ]
                }
            }
        ),
        {"k": {"kind": "a", "x": "no"}},
    ),
    (
        obj(
            {
                "k": {
                    "anyOf": [
                        obj({"kind": {"const": "a"}}, ["kind"]),
                        obj({"kind": {"const": "b"}}, ["kind"]),
                    ]
                }
            }
        ),
        {"k": {"kind": "c"}},
    ),
    (
        obj(
            {
                "k": {
                    "anyOf": [
                        obj({"a": {"type": "number"}, "b": {"type": "number"}}, ["a"]),
                        obj({"c": {"type": "string"}}, ["c"]),
                    ]
                }
            }
        ),
        {"k": {"a": "x", "b": "y"}},
    ),
    (
        obj({"v": {"anyOf": [{"type": "array", "items": {"type": "number"}}, {"type": "string"}]}}),
        {"v": [["x"]]},
    ),
    (
        {
            "type": "object",
            "patternProperties": {"^n_": {"type": "number"}, "_s$": {"type": "string"}},
            "additionalProperties": False,
        },
        {"n_a": "1", "b_s": 2, "n_s": "3", "zz": 1},
    ),
    ({"type": "object", "propertyNames": {"pattern": "^[a-z]+$"}}, {"ok": 1, "Bad": 2}),
    ({"type": "object", "minProperties": 2, "maxProperties": 3}, {"a": 1}),
    (obj({"a": {}, "b": {}}, dependentSchemas={"a": {"required": ["b"]}}), {"a": 1}),
    (
        obj({"a": {}}, dependencies={"a": {"properties": {"b": {"type": "string"}}}}),
        {"a": 1, "b": 2},
    ),
    ({"type": "object", "unevaluatedProperties": False, "properties": {"a": {}}}, {"a": 1, "b": 2}),
    (
        {
            "type": "object",
            "allOf": [{"properties": {"a": {"type": "number"}}}],
            "unevaluatedProperties": {"type": "string"},
        },
        {"a": "1", "b": 2, "c": "x"},
    ),
    (
        obj({"xs": {"type": "array", "prefixItems": [{}], "unevaluatedItems": False}}),
        {"xs": [1, 2]},
    ),
    (
        obj(
            {
                "xs": {
                    "type": "array",
                    "contains": {"type": "string"},
                    "minContains": 2,
                    "maxContains": 3,
                }
            }
        ),
        {"xs": ["a", 1]},
    ),
    (
        obj({"xs": {"type": "array", "contains": {"type": "string"}, "maxContains": 1}}),
        {"xs": ["a", "b"]},
    ),
    (
        obj(
            {
                "xs": {
                    "type": "array",
                    "contains": {"type": "string"},
                    "minContains": 0,
                    "maxContains": 1,
                }
            }
        ),
        {"xs": ["a", "b"]},
    ),
    (obj({"xs": {"type": "array", "items": False}}), {"xs": [1]}),
    (
        obj({"xs": {"type": "array", "items": {"type": "number"}, "uniqueItems": True}}),
        {"xs": ["1", 1]},
    ),
    (obj({"n": {"type": "number", "multipleOf": 0.0001}}), {"n": 0.0075}),
    (obj({"n": {"type": "number", "multipleOf": 0.01}}), {"n": 0.015}),
    (obj({"n": {"type": "number", "exclusiveMinimum": 0, "maximum": 1.5}}), {"n": "0"}),
    (obj({"s": {"type": "string", "maxLength": 2}}), {"s": "\U0001f600\U0001f600\U0001f600"}),
    (obj({"a": {"if": {"minimum": 5}, "then": {"multipleOf": 2}}}), {"a": 7}),
    (obj({"a": {"not": {"type": "string"}}}), {"a": "x"}),
    (
        {
            "type": "object",
            "$defs": {
                "node": {
                    "type": "object",
                    "properties": {
                        "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}},
                        "n": {"type": "integer"},
                    },
                }
            },
            "properties": {"tree": {"$ref": "#/$defs/node"}},
        },
        {"tree": {"n": "1", "kids": [{"n": "2", "kids": {"n": "x"}}]}},
    ),
    (
        {
            "$id": "https://example.com/tool.json",
            "type": "object",
            "$defs": {"p": {"$anchor": "pos", "type": "integer", "minimum": 1}},
            "properties": {"a": {"$ref": "#pos"}, "b": {"$ref": "tool.json#/$defs/p"}},
        },
        {"a": "0", "b": 0},
    ),
    (
        {
            "$id": "schemas/tool.json",
            "type": "object",
            "$defs": {"p": {"type": "integer"}},
            "properties": {"a": {"$ref": "#/$defs/p"}},
        },
        {"a": "x"},
    ),
    (
        {
            "type": "object",
            "properties": {
                "a": {
                    "$id": "https://example.com/a.json",
                    "$defs": {"x": {"type": "string"}},
                    "$ref": "#/$defs/x",
                }
            },
        },
        {"a": 1},
    ),
    (
        obj({"a": {"$ref": "https://example.com/elsewhere.json"}, "b": {"$ref": "#/$defs/x/%"}}),
        {"a": 1, "b": 2},
    ),
    (obj({"a": {"$ref": "#/properties/b"}, "b": {"type": "integer"}}), {"a": "1", "b": "2"}),
    ({**obj({"a": {"$ref": "#/$defs/a b"}}), "$defs": {"a b": {"type": "string"}}}, {"a": 1}),
    ({**obj({"a": {"$ref": "#/$defs/%C3%A9"}}), "$defs": {"é": {"type": "string"}}}, {"a": 1}),
    (
        obj(
            {"a": {"type": "string", "minLength": 2}, "b": {"type": "number"}},
            ["a"],
            additionalProperties=False,
        ),
        {"b": "x", "c": None, "a": None},
    ),
    (
        obj({"u": {"type": "string", "format": "uuid"}}),
        {"u": "123e4567-e89b-12d3-a456-426614174000"},
    ),
    (
        obj({"u": {"type": "string", "format": "uuid"}}),
        {"u": "123e4567-e89b-12d3-a456-42661417400"},
    ),
    (obj({"d": {"type": "string", "format": "date-time"}}), {"d": "2024-02-29T23:59:60Z"}),
    (obj({"d": {"type": "string", "format": "date-time"}}), {"d": "2023-02-29T10:00:00Z"}),
    (obj({"d": {"type": "string", "format": "date"}}), {"d": "2024-02-30"}),
    (obj({"d": {"type": "string", "format": "time"}}), {"d": "10:00:00"}),
    (obj({"d": {"type": "string", "format": "duration"}}), {"d": "P1Y2M"}),
    (obj({"d": {"type": "string", "format": "ipv4"}}), {"d": "256.1.1.1"}),
    (obj({"d": {"type": "string", "format": "ipv6"}}), {"d": "::ffff:1.2.3.4"}),
    (obj({"d": {"type": "string", "format": "ipv6"}}), {"d": "1:2:3:4:5:6:7:8:9"}),
    (obj({"d": {"type": "string", "format": "uri"}}), {"d": "https://example.com/a?b#c"}),
    (obj({"d": {"type": "string", "format": "uri"}}), {"d": "//example.com"}),
    (obj({"d": {"type": "string", "format": "uri-reference"}}), {"d": "../a b"}),
    (obj({"d": {"type": "string", "format": "hostname"}}), {"d": "-bad.example"}),
    (obj({"d": {"type": "string", "format": "hostname"}}), {"d": "xn--bcher-kva.example"}),
    (obj({"d": {"type": "string", "format": "json-pointer"}}), {"d": "/a/~2"}),
    (obj({"d": {"type": "string", "format": "relative-json-pointer"}}), {"d": "1#"}),
    (obj({"d": {"type": "string", "format": "uri-template"}}), {"d": "/a/{b"}),
    (obj({"d": {"type": "string", "format": "no-such-format"}}), {"d": "x"}),
    (obj({"d": {"format": "email"}}), {"d": 5}),
    (obj({"s": {"type": "string", "pattern": "^\\d+$"}}), {"s": "12\n"}),
    (obj({"s": {"type": "string", "pattern": "a.c"}}), {"s": "a\nc"}),
    (obj({"s": {"type": "string", "pattern": "\\w"}}), {"s": "é"}),
    # malformed keyword values, edge numbers and strings, formats pi-schema approximates
    (obj({"s": {"type": "string", "minLength": 2.5}}), {"s": "ab"}),
    (obj({"n": {"type": "number", "multipleOf": 0}}), {"n": 0}),
    (obj({"n": {"type": "number", "multipleOf": -2}}), {"n": 4}),
    (obj({"n": {"type": "number", "maximum": "5"}}), {"n": 9}),
    (obj({"n": {"minimum": True}}), {"n": -1}),
    (obj({"n": {"type": "integer"}}), {"n": 1e300}),
    (obj({"n": {"type": "number", "multipleOf": 1e-320}}), {"n": 1}),
    (obj({"n": {"type": "number", "multipleOf": 0.1}}), {"n": 1e300}),
    (obj({"a": {"required": ["x", 5]}}), {"a": {}}),
    (obj({"a": {"type": "object", "dependentRequired": {"x": ["y", 1]}}}), {"a": {"x": 1}}),
    (obj({"a": {"enum": []}}), {"a": 1}),
    (obj({"a": {"anyOf": []}}), {"a": 1}),
    (obj({"a": {"oneOf": []}}), {"a": 1}),
    (obj({"a": {"allOf": []}}), {"a": "1"}),
    (obj({"a": {"type": []}}), {"a": 1}),
    (obj({"a": {"type": ["integer", "integer"]}}), {"a": "1"}),
    (obj({"a": {"contains": False}}), {"a": [1]}),
    (obj({"a": {"type": "array", "contains": {}, "minContains": 0}}), {"a": []}),
    (
        obj({"a": {"properties": {"toString": {"type": "string"}}, "required": ["constructor"]}}),
        {"a": {}},
    ),
    (obj({"a": {"type": "string", "pattern": "^\\p{L}+$"}}), {"a": "héllo"}),
    (obj({"a": {"type": "string", "pattern": "[\\d-x]"}}), {"a": "-"}),
    (obj({"a": {"type": "string", "pattern": "\\cJ"}}), {"a": "\n"}),
    (obj({"a": {"type": "string", "format": "regex"}}), {"a": "(?<=a)b"}),
    (obj({"a": {"type": "string", "format": "regex"}}), {"a": "(a"}),
    (obj({"a": {"type": "string", "format": "url"}}), {"a": "http://"}),
    (obj({"a": {"type": "string", "format": "url"}}), {"a": "mailto:x"}),
    (obj({"a": {"type": "string", "format": "iri"}}), {"a": "http://例え.jp/パス"}),
    (obj({"a": {"type": "string", "format": "idn-hostname"}}), {"a": "例え.jp"}),
    (obj({"a": {"type": "string", "format": "idn-email"}}), {"a": "ü@例え.jp"}),
    (obj({"a": {"type": "string", "format": "hostname"}}), {"a": "xn--80ak6aa92e.com"}),
    (obj({"a": {"type": "string", "format": "time"}}), {"a": "23:59:60+00:00"}),
    (obj({"a": {"type": "string", "format": "time"}}), {"a": "22:59:60-01:00"}),
    (obj({"a": {"$ref": "#"}}), {"a": {"a": {"a": 1}}}),
    (obj({"a": {"type": "null"}}), {"a": "undefined"}),
    (obj({"a": {"type": "string"}}), {"a": [1]}),
    (obj({"a": {"const": 1.0}}), {"a": "1"}),
    (obj({"a": {"enum": [True, 1]}}), {"a": "1"}),
    (obj({"a": {"enum": ["1", 1]}}), {"a": True}),
    (obj({"a": {"type": "number"}}), {"a": "0x1F"}),
    (obj({"a": {"type": "number"}}), {"a": "-0x1F"}),
    (obj({"a": {"type": "number"}}), {"a": "\u00a012\u2028"}),
    (obj({"a": {"type": "number"}}), {"a": "9007199254740993"}),
    (obj({"a": {"type": "integer"}}), {"a": "-12n"}),
    (obj({"a": {"type": "integer"}}), {"a": "99999999999999999999n"}),
    (obj({"a": {"type": "boolean"}}), {"a": 1.0}),
    (obj({"a": {"type": ["boolean", "null"]}}), {"a": "true"}),
    (obj({"a": {"type": ["integer", "string"]}}), {"a": None}),
    (obj({"a": {"type": ["null", "string"]}}, ["a"]), {"a": False}),
]


@pytest.mark.pi
@pytest.mark.parametrize(("schema", "args"), HAND_CASES)
def test_matches_pi_on_hand_written_cases(
    pi: PiValidator, schema: JsonObject, args: JsonObject
) -> None:
    """The coerced value or failure text equals pi-ai's, character for character."""
    assert mule_result(schema, args) == pi.run(schema, args)


PRIMITIVES = ["number", "integer", "boolean", "string", "null"]
KEYS = ["a", "b", "c"]

leaf_schemas = st.one_of(
    st.sampled_from([*PRIMITIVES, "array", "object"]).map(lambda t: {"type": t}),
    st.lists(st.sampled_from(PRIMITIVES), min_size=2, max_size=3, unique=True).map(
        lambda ts: {"type": ts}
    ),
    st.integers(-2, 5).map(lambda lo: {"type": "number", "minimum": lo}),
    st.sampled_from(
        [
            {},
            {"type": "string", "minLength": 2},
            {"type": "string", "maxLength": 1},
            {"type": "string", "pattern": "^[0-9]+$"},
            {"type": "string", "pattern": "a.c|\\d\\s"},
            {"type": "string", "format": "date"},
            {"type": "string", "format": "email"},
            {"type": "string", "format": "ipv4"},
            {"format": "uuid"},
            {"enum": ["a", 1, True, None]},
            {"enum": [[1], {"a": 1}]},
            {"enum": ["low", "high"]},
            {"const": 1},
            {"const": "x"},
            {"const": True},
            {"const": None},
            {"type": "integer", "multipleOf": 2},
            {"type": "number", "multipleOf": 0.5},
            {"type": "number", "exclusiveMaximum": 1},
            {"type": "integer", "exclusiveMinimum": 0, "maximum": 3},
            {"type": "array", "maxItems": 1, "uniqueItems": True},
            {"type": "array", "contains": {"type": "string"}},
            {"type": "array", "contains": {"type": "integer"}, "minContains": 2, "maxContains": 3},
            {"type": "array", "prefixItems": [{"type": "integer"}], "items": False},
            {"type": "object", "minProperties": 1},
            {"type": "object", "propertyNames": {"pattern": "^[a-c]$"}},
            {"type": "object", "patternProperties": {"^[ab]$": {"type": "integer"}}},
            {"type": "object", "properties": {"a": {}}, "unevaluatedProperties": False},
            {"not": {"type": "string"}},
            {"if": {"type": "number"}, "then": {"minimum": 2}, "else": {"type": "boolean"}},
            {"anyOf": [{"type": "integer"}, {"type": "null"}]},
            {"$ref": "#/$defs/num"},
            {"$ref": "#/$defs/missing"},
            {"$ref": "#/$defs/node"},
            {"$ref": "#/$defs/tagged"},
            {"$ref": "#/$defs/anchored"},
            {"$ref": "#pos"},
            {"items": {"type": "integer"}},
            {"properties": {"a": {"type": "integer"}}, "required": ["b"]},
            {"type": "object", "dependentSchemas": {"a": {"required": ["b"]}}},
            {"type": "array", "prefixItems": [{}], "unevaluatedItems": {"type": "string"}},
            {"type": "object", "maxProperties": 1, "additionalProperties": {"type": "boolean"}},
            {"oneOf": [{"type": "number"}, {"type": "integer"}, {"const": "x"}]},
            {"anyOf": [{"const": "a"}, {"const": 1}, {"const": None}]},
            {"enum": [{"a": 1}, [1, 2], "a"]},
            {"enum": list(range(30))},
            {"type": ["array", "string"], "items": {"type": "number"}},
            {"type": "string", "format": "date-time"},
            {"type": "string", "format": "uri"},
            {"type": "string", "format": "hostname"},
            {"type": "string", "format": "duration"},
            {"allOf": [{"type": "integer"}, {"minimum": 1}, {"maximum": 2}]},
            {"if": {"const": 1}},
            True,
            False,
        ]
    ),
)


def _object_schema(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    return st.builds(
        lambda props, required, extra: {
            "type": "object",
            "properties": props,
            **({"required": required} if required else {}),
            **({"dependentRequired": {"a": ["b"]}} if "c" in required else {}),
            **({} if extra is None else {"additionalProperties": extra}),
        },
        st.dictionaries(st.sampled_from(KEYS), inner, max_size=3),
        st.lists(st.sampled_from(KEYS), max_size=2, unique=True),
        st.one_of(st.none(), st.booleans(), inner),
    )


schemas = st.recursive(
    leaf_schemas,
    lambda inner: st.one_of(
        inner.map(lambda s: {"type": "array", "items": s}),
        st.lists(inner, min_size=1, max_size=3).map(lambda ss: {"type": "array", "items": ss}),
        st.lists(inner, min_size=1, max_size=3).map(
            lambda ss: {"type": "array", "prefixItems": ss}
        ),
        st.lists(inner, min_size=1, max_size=3).map(lambda ss: {"anyOf": ss}),
        st.lists(inner, min_size=1, max_size=3).map(lambda ss: {"oneOf": ss}),
        st.lists(inner, min_size=1, max_size=2).map(lambda ss: {"allOf": ss}),
        _object_schema(inner),
    ),
    max_leaves=6,
)

scalars = st.one_of(
    st.sampled_from(
        [
            *("1", "1.0", " 0x10 ", "true", "false", "", " ", "1e3", "3.5", "yes", "Infinity"),
            *("0b11", "-0", "1_0", "0o7", "TRUE", "False", "null", "NULL", "undefined", "12n"),
            *("a", "ab", "abc", "1e21", "\t2\n", "0x", ".5", "5.", "0", "x", "low", "a\nc"),
            *("2024-02-29", "2023-02-29", "a@b.co", "10.0.0.1", "\U0001f600", "1 2"),
            *("2024-02-29T10:00:00Z", "https://x.org/a?b", "a b", "ex-ample.com", "P1D", "PT"),
            "123e4567-e89b-12d3-a456-426614174000",
        ]
    ),
    st.integers(-3, 3),
    st.sampled_from([0.5, 1.0, -0.0, 1e21, 2.5e-7, 1.5, 2**53 + 2, 3.5, -2.5]),
    st.booleans(),
    st.none(),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(st.sampled_from([*KEYS, "d", "1", "kind"]), inner, max_size=3),
    ),
    max_leaves=8,
)
arguments = st.dictionaries(st.sampled_from([*KEYS, "d"]), values, max_size=4)


COERCIBLE: dict[str, list[Any]] = {
    "number": ["1", " 0x10 ", "1e3", "-2.5", "", "x", None, True, "Infinity", 7, "TRUE", "12n"],
    "integer": ["1.0", "3.5", "0b11", None, False, "1e3", 2, 2.5, "-0.5"],
    "boolean": ["true", "false", "yes", 1, 0, 2, None, "TRUE", "0", "1"],
    "string": [1.0, 1e21, 2.5e-7, True, None, "s"],
    "null": ["", 0, False, "0", None, "null", "undefined"],
}


@st.composite
def value_for(draw: st.DrawFn, schema: Any, depth: int = 0) -> Any:
    """Draw a value shaped for `schema` that Pi's coercion has something to do with (or not)."""
    if not isinstance(schema, dict) or depth > 4 or draw(st.integers(0, 9)) == 0:
        return draw(values)
    for union in ("anyOf", "oneOf", "allOf"):
        if union in schema:
            return draw(value_for(draw(st.sampled_from(schema[union])), depth + 1))
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        return draw(value_for(DEFS.get(name), depth + 1))
    kinds = schema.get("type", [])
    kind = kinds if isinstance(kinds, str) else draw(st.sampled_from(kinds)) if kinds else None
    if kind == "object":
        props = schema.get("properties", {})
        keys = draw(st.lists(st.sampled_from([*props, "d"]), unique=True)) if props else []
        return {
            k: draw(value_for(props.get(k, schema.get("additionalProperties")), depth + 1))
            for k in keys
        }
    if kind == "array":
        items = schema.get("items", schema.get("prefixItems"))
        if isinstance(items, list):
            return [
                draw(value_for(s, depth + 1)) for s in items[: draw(st.integers(0, len(items) + 1))]
            ]
        return draw(st.lists(value_for(items, depth + 1), max_size=3))
    if kind in COERCIBLE:
        return draw(st.sampled_from(COERCIBLE[kind]))
    return draw(values)


DEFS: dict[str, Any] = {
    "num": {"type": "number", "minimum": 0},
    "node": {
        "type": "object",
        "properties": {
            "n": {"type": "integer"},
            "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}},
        },
    },
    "anchored": {
        "$id": "https://example.com/anchored.json",
        "$defs": {"inner": {"$anchor": "pos", "type": "integer", "minimum": 1}},
        "$ref": "#pos",
    },
    "pos": {"$anchor": "pos", "type": "integer", "exclusiveMinimum": 0},
    "tagged": {
        "anyOf": [
            {
                "type": "object",
                "properties": {"kind": {"const": "a"}, "x": {"type": "number"}},
                "required": ["kind"],
            },
            {
                "type": "object",
                "properties": {"kind": {"const": "b"}, "y": {"type": "string"}},
                "required": ["kind", "y"],
            },
        ]
    },
}


@pytest.mark.pi
@settings(
    max_examples=400,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(properties=st.dictionaries(st.sampled_from(KEYS), schemas, max_size=3), data=st.data())
def test_matches_pi_on_generated_cases(
    pi: PiValidator, properties: dict[str, Any], data: st.DataObject
) -> None:
    """For generated schemas and arguments, the coerced value or failure text equals pi-ai's."""
    required = data.draw(st.lists(st.sampled_from(KEYS), max_size=2, unique=True))
    extra = data.draw(st.one_of(st.none(), st.booleans(), schemas))
    schema = obj(properties, required, **({} if extra is None else {"additionalProperties": extra}))
    schema = {**schema, "$defs": DEFS}
    args = data.draw(st.one_of(arguments, value_for(schema).filter(lambda v: isinstance(v, dict))))
    assert mule_result(schema, args) == pi.run(schema, args)


# --- The flat-schema fast path decides exactly as the full gate ---

_SCALAR_KINDS = ("string", "integer", "number", "boolean")
_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**60), max_value=2**60),
    st.floats(allow_nan=True, allow_infinity=True),
    st.just(10**400),
    st.sampled_from(["", "1", "0x10", " 2 ", "true", "false", "abc"]),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.sampled_from(["a", "b"]), st.integers(), max_size=2),
)
_NAMES = st.sampled_from(["a", "b", "c", "x"])


@st.composite
def _flat_cases(draw: st.DrawFn) -> tuple[JsonObject, JsonObject]:
    props = draw(
        st.dictionaries(
            _NAMES,
            st.builds(
                lambda kind, described: (
                    {"type": kind, "description": "d"} if described else {"type": kind}
                ),
                st.sampled_from(_SCALAR_KINDS),
                st.booleans(),
            ),
            max_size=3,
        )
    )
    schema: dict[str, Any] = {"type": "object", "properties": props}
    if draw(st.booleans()):
        schema["required"] = draw(st.lists(_NAMES, unique=True, max_size=3))
    extra = draw(st.sampled_from([None, True, False]))
    if extra is not None:
        schema["additionalProperties"] = extra
    args = draw(st.dictionaries(_NAMES, _VALUES, max_size=4))
    return schema, args


def _verdict(validator: ToolValidator, args: JsonObject) -> tuple[str, object]:
    try:
        return "ok", validator.validate(ToolCall("c1", "F", args))
    except ToolArgumentsError as exc:
        return "rejected", exc.text


@given(_flat_cases())
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_flat_schema_fast_path_matches_the_full_gate(case: tuple[JsonObject, JsonObject]) -> None:
    schema, args = case
    fast = ToolValidator("F", schema)
    assert fast._flat is not None  # the schemas drawn here are the fast path's
    full = ToolValidator("F", schema)
    full._flat = None  # the gate without its fast path: jsonschema and Pi's coercion
    got, want = _verdict(fast, args), _verdict(full, args)
    assert repr(got) == repr(want)  # repr: NaN != NaN, and 1 == 1.0 == True would hide a change
    if got[0] == "ok":
        assert got[1] is not args  # a copy, as the full gate returns


def test_flat_fast_path_is_only_for_flat_schemas() -> None:
    nested = obj({"p": obj({"q": {"type": "integer"}})})
    assert ToolValidator("F", nested)._flat is None
    assert ToolValidator("F", obj({"n": {"type": "integer", "minimum": 0}}))._flat is None
    assert ToolValidator("F", obj({"n": {"type": ["integer", "null"]}}))._flat is None
    assert ToolValidator("F", obj({"n": {"type": "integer"}}))._flat is not None
