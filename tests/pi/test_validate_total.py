"""The tool-argument gate is total: whatever the schema and arguments, it answers typed.

Each case reproduced a raw `ValueError`, `RecursionError` or `re.error` (or a network fetch)
before the gate was bounded (issue 17, defect 2).

The bounds are the private rules `mule.pi._schema_bounds.MAX_ARGUMENT_DEPTH` and `MAX_SCHEMA_DEPTH`.
"""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from typing import Any, TypeVar

import pytest
from referencing import Registry, Resource

from mule.pi import (
    Tool,
    ToolArgumentsError,
    ToolCall,
    ToolSchemaError,
    ToolValidator,
    validate_tool_arguments,
)
from mule.pi._schema_bounds import MAX_ARGUMENT_DEPTH, MAX_SCHEMA_DEPTH

E = TypeVar("E", bound=Exception)


def check(schema: Any, args: Any) -> dict[str, Any]:
    return validate_tool_arguments(Tool("T", "", schema), ToolCall("c1", "T", args))


def raised(kind: type[E], schema: Any, args: Any, registry: Registry[Any] | None = None) -> E:
    """Return the error of kind `kind` that validating `args` against `schema` raises."""
    with pytest.raises(kind) as caught:
        validate_tool_arguments(Tool("T", "", schema), ToolCall("c1", "T", args), registry)
    return caught.value


def nested(depth: int, leaf: Any = None) -> Any:
    value: Any = {} if leaf is None else leaf
    for _ in range(depth - 1):
        value = {"a": value}
    return value


def test_a_key_of_5000_digits_fails_validation_typed() -> None:
    schema = {"type": "object", "additionalProperties": False}
    error = raised(ToolArgumentsError, schema, {"1" * 5000: 1})
    assert error.errors == (("1" * 5000, "unknown field"),)


@pytest.mark.parametrize("depth", [MAX_ARGUMENT_DEPTH + 1, 600, 5000])
def test_deep_arguments_fail_validation_typed(depth: int) -> None:
    for schema in ({"type": "object"}, {"type": "object", "properties": {"a": {"type": "string"}}}):
        error = raised(ToolArgumentsError, schema, nested(depth))
        assert f"must not be nested deeper than {MAX_ARGUMENT_DEPTH} levels" in error.text
        assert "(not shown: nested too deeply)" in error.text


def test_arguments_at_the_depth_bound_validate() -> None:
    tree = {"$defs": {"n": {"type": "object", "properties": {"a": {"$ref": "#/$defs/n"}}}}}
    schema = {**tree, "$ref": "#/$defs/n"}
    value = nested(MAX_ARGUMENT_DEPTH)
    assert check(schema, value) == value
    bad = nested(MAX_ARGUMENT_DEPTH - 1, {"a": 1})
    error = raised(ToolArgumentsError, schema, bad)
    assert error.errors == (
        ("a." * (MAX_ARGUMENT_DEPTH - 2) + "a", "expected object, got integer"),
    )


def test_pattern_properties_and_additional_properties() -> None:
    schema = {
        "type": "object",
        "patternProperties": {"^a": {"type": "string"}},
        "properties": {"b": {}},
        "additionalProperties": False,
    }
    # "a": 3 converts to "3" by its pattern's schema; "c" is unknown.
    assert raised(ToolArgumentsError, schema, {"b": 1, "c": 2, "a": 3}).errors == (
        ("c", "unknown field"),
    )
    assert check(schema, {"b": 1, "a": 3}) == {"b": 1, "a": "3"}


@pytest.mark.parametrize(
    ("pattern", "why"),
    [
        ("(?i)^a", "not a JavaScript group"),
        ("(x)\\1", "backreference"),
        ("^(?P<n>a)(?P=n)$", "not a JavaScript group"),
        ("(?<n>a)\\k<n>", "backreference"),
        ("^(?=a)", "lookaround"),
        ("(?<!a)b", "lookaround"),
    ],
)
def test_pattern_properties_that_cannot_be_matched_in_linear_time_are_refused(
    pattern: str, why: str
) -> None:
    schema = {
        "type": "object",
        "patternProperties": {pattern: {"type": "string"}},
        "properties": {"b": {}},
        "additionalProperties": False,
    }
    error = raised(ToolSchemaError, schema, {"b": 1, "c": 2})
    assert why in str(error)
    assert repr(pattern) in str(error)


def test_a_declared_key_is_not_matched_with_a_trailing_newline() -> None:
    # TypeBox's `^b$` is a JS regex: `$` does not match before a final newline (Python's does).
    schema = {"type": "object", "properties": {"b": {}}, "additionalProperties": False}
    raised(ToolArgumentsError, schema, {"b\n": 1})


@pytest.mark.parametrize(
    "schema",
    [
        {"$ref": "#"},
        {"allOf": [{"$ref": "#"}]},
        {
            "$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"anyOf": [{"$ref": "#/$defs/a"}]}},
            "$ref": "#/$defs/a",
        },
        {"type": "object", "properties": {"x": {"not": {"$ref": "#/properties/x"}}}},
    ],
)
def test_a_self_referential_schema_is_a_schema_error(schema: Any) -> None:
    with pytest.raises(ToolSchemaError) as caught:
        ToolValidator("T", schema)
    assert "self-referential" in str(caught.value)
    raised(ToolSchemaError, schema, {"a": 1})


def test_a_schema_nested_too_deeply_is_a_schema_error() -> None:
    schema: Any = {"type": "object"}
    for _ in range(MAX_SCHEMA_DEPTH):
        schema = {"type": "object", "properties": {"a": schema}}
    raised(ToolSchemaError, schema, {})
    cyclic: dict[str, Any] = {"type": "object"}
    cyclic["properties"] = {"a": cyclic}
    raised(ToolSchemaError, cyclic, {})


def test_a_pointer_through_an_array_with_a_non_ascii_digit() -> None:
    schema = {
        "$defs": {"x": [{"type": "string"}]},
        "type": "object",
        "properties": {"a": {"$ref": "#/$defs/x/²"}},
    }
    with pytest.raises((ToolArgumentsError, ToolSchemaError)):
        check(schema, {"a": 1})


@pytest.fixture
def schema_server() -> Iterator[tuple[str, list[str]]]:
    """Serve a schema over real HTTP on 127.0.0.1, recording every request."""
    hits: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            hits.append(self.path)
            body = b'{"type": "string"}'
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/schema", hits
    finally:
        server.shutdown()
        server.server_close()


def test_a_remote_ref_is_never_fetched(schema_server: tuple[str, list[str]]) -> None:
    """A reference to a document nobody registered names nothing: it rejects only its place."""
    url, hits = schema_server
    schema = {"type": "object", "properties": {"a": {"$ref": url}}}
    error = raised(ToolArgumentsError, schema, {"a": 1})
    assert error.errors == (("a", f"unresolved reference {url}"),)
    assert check(schema, {}) == {}
    relative = {"$id": url, "type": "object", "properties": {"a": {"$ref": "other"}}}
    assert raised(ToolArgumentsError, relative, {"a": 1}).errors == (
        ("a", "unresolved reference other"),
    )
    assert hits == []


def test_a_host_registry_resolves_a_remote_ref_without_fetching(
    schema_server: tuple[str, list[str]],
) -> None:
    url, hits = schema_server
    registry: Registry[Any] = Registry().with_resource(
        url,
        Resource.from_contents(
            {"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "integer"}
        ),
    )
    schema: dict[str, Any] = {"type": "object", "properties": {"a": {"$ref": url}}}
    tool = Tool("T", "", schema)
    assert validate_tool_arguments(tool, ToolCall("c", "T", {"a": 3}), registry) == {"a": 3}
    assert raised(ToolArgumentsError, schema, {"a": "x"}, registry).errors
    assert hits == []


def test_a_local_unresolvable_fragment_fails_validation_at_its_place() -> None:
    schema = {"type": "object", "properties": {"a": {"$ref": "#/$defs/missing"}}}
    error = raised(ToolArgumentsError, schema, {"a": 1})
    assert error.errors == (("a", "unresolved reference #/$defs/missing"),)
