"""Coercion of tool arguments towards their schema, as pi-schema 1.6.0's `coerce()` does it.

Three passes, in order: optional `null`s dropped (a `null` in an optional property whose schema
rejects `null`, unless that schema is a `$ref`); conversions keyed on the schema's keywords
(`$ref`, then the first of `const`, `enum`, `anyOf`, `oneOf`, `allOf`, `type`: numeric strings
to numbers, `"3.5"` to 3 for an integer, `"TRUE"` to true, a single value to a one-item array, a
union's first branch whose conversion the union accepts); then primitive coercion by `type`,
also type lists (`["integer", "null"]`). Copy-on-write: only changed paths are copied, and a
value no rule applies to stays as it is.

Not followed: conversions to the JS-only `bigint` and `undefined` types (no JSON value has them).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any, Final, final

from mule.pi._js_values import (
    as_json_number,
    is_js_number,
    js_equal,
    js_keys,
    js_number,
    js_number_to_string,
    js_trim,
    to_double,
)
from mule.pi._schema import Compiler, is_integer, is_number
from mule.pi._schema_refs import is_schema_object, list_at, object_at
from mule.pi._schema_regex import compile_pattern

_ABSENT: Final = object()
_SAFE: Final = 2**53 - 1


def _is_primitive(value: Any) -> bool:
    return not isinstance(value, dict | list)


def same(a: Any, b: Any) -> bool:
    """JS `a === b` for JSON values: containers by identity, primitives by JS equality."""
    if a is b:
        return True
    return _is_primitive(a) and _is_primitive(b) and js_equal(a, b)


def _identity(value: Any) -> tuple[str, Any]:
    """Return a key under which two values are `Object.is`-equal (containers by identity)."""
    if isinstance(value, dict | list):
        return ("ref", id(value))
    if is_js_number(value):
        d = to_double(value)
        return ("num", (d, math.copysign(1.0, d)))
    return (type(value).__name__, value)


def _finite(value: Any) -> bool:
    return is_js_number(value) and math.isfinite(to_double(value))


def _number(parsed: float) -> int | float:
    return as_json_number(parsed)


# --- the conversions of pass 2 (each returns _ABSENT when it does not apply) ---


def try_string(value: Any) -> Any:
    if isinstance(value, bool):
        return "true" if value else "false"
    if _finite(value):
        return js_number_to_string(value)
    if value is None:
        return "null"
    if isinstance(value, str):
        return value
    return _ABSENT


def _big_int_of_string(value: str) -> int | None:
    import re

    if re.fullmatch(r"-?(?:0|[1-9][0-9]*)n", value, re.ASCII):
        return int(value[:-1])
    if re.fullmatch(r"-?(?:0|[1-9][0-9]*)\.[0-9]+", value, re.ASCII):
        return int(value.split(".")[0])
    if re.fullmatch(r"-?(?:0|[1-9][0-9]*)", value, re.ASCII):
        return int(value)
    return None


def try_number(value: Any) -> Any:
    if isinstance(value, bool):
        return 1 if value else 0
    if _finite(value):
        return value
    if value is None:
        return 0
    if not isinstance(value, str):
        return _ABSENT
    coerced = js_number(value)
    if math.isfinite(coerced):
        return _number(coerced)
    lower = value.lower()
    if lower == "false":
        return 0
    if lower == "true":
        return 1
    big = _big_int_of_string(value)
    return big if big is not None and -_SAFE <= big <= _SAFE else _ABSENT


def try_boolean(value: Any) -> Any:
    if isinstance(value, bool):
        return value
    if _finite(value):
        return False if value == 0 else True if value == 1 else _ABSENT
    if value is None:
        return False
    if not isinstance(value, str):
        return _ABSENT
    lower = value.lower()
    if lower == "false" or value == "0":
        return False
    if lower == "true" or value == "1":
        return True
    return _ABSENT


def try_null(value: Any) -> Any:
    if isinstance(value, bool):
        return None if value is False else _ABSENT
    if _finite(value):
        return None if value == 0 else _ABSENT
    if value is None:
        return None
    if not isinstance(value, str):
        return _ABSENT
    lower = value.lower()
    return None if lower in ("undefined", "null") or value in ("", "0") else _ABSENT


def _trunc(value: Any) -> Any:
    if isinstance(value, int):
        return value
    return _number(float(math.trunc(value)))


def convert_literal(literal: Any, value: Any) -> Any:
    """Return a literal (`const`, an enum member) from a value that converts to exactly it."""
    if same(literal, value):
        return value
    if isinstance(literal, bool):
        result = try_boolean(value)
    elif isinstance(literal, str):
        result = try_string(value)
    elif is_js_number(literal):
        result = try_number(value)
    else:
        return value
    return result if result is not _ABSENT and same(result, literal) else value


class _Edited:
    """A JSON object copied on its first change, so a pass that changes nothing keeps the value."""

    __slots__ = ("_out", "_value")

    def __init__(self, value: dict[str, Any]) -> None:
        self._value = value
        self._out: dict[str, Any] | None = None

    def current(self) -> dict[str, Any]:
        """Return the object as edited so far (the original while nothing changed)."""
        return self._value if self._out is None else self._out

    def _copy(self) -> dict[str, Any]:
        if self._out is None:
            self._out = dict(self._value)
        return self._out

    def put(self, key: str, new: Any) -> None:
        """Set `key` unless it already holds the same value."""
        if not same(new, self.current().get(key, _ABSENT)):
            self._copy()[key] = new

    def drop(self, key: str) -> None:
        """Remove `key`."""
        self._copy().pop(key, None)


def _map_items(items: list[Any], fn: Callable[[Any, int], Any]) -> list[Any]:
    out: list[Any] | None = None
    for i, item in enumerate(items):
        new = fn(item, i)
        if same(new, item):
            continue
        if out is None:
            out = list(items)
        out[i] = new
    return items if out is None else out


def _item_schema_at(schema: Mapping[str, Any], index: int) -> Any:
    items = schema.get("items", _ABSENT)
    if isinstance(items, list):
        return items[index] if index < len(items) else _ABSENT
    prefix = schema.get("prefixItems")
    if isinstance(prefix, list) and index < len(prefix):
        return prefix[index]
    return items


def _types_of(schema: Mapping[str, Any]) -> list[str]:
    kind = schema.get("type")
    if isinstance(kind, str):
        return [kind]
    if isinstance(kind, list):
        return [k for k in kind if isinstance(k, str)]
    return []


def _matches_type(value: Any, kind: str) -> bool:
    match kind:
        case "number":
            return is_number(value)
        case "integer":
            return is_integer(value)
        case "boolean":
            return isinstance(value, bool)
        case "string":
            return isinstance(value, str)
        case "null":
            return value is None
        case "array":
            return isinstance(value, list)
        case "object":
            return isinstance(value, dict)
        case _:
            return False


def coerce_primitive(value: Any, kind: str) -> Any:
    """Ajv-style primitive coercion to `kind` (pass 3); `value` itself when none applies."""
    match kind:
        case "number" | "integer":
            if value is None:
                return 0
            if isinstance(value, str) and js_trim(value) != "":
                parsed = js_number(value)
                ok = math.isfinite(parsed) and (kind == "number" or parsed.is_integer())
                if ok:
                    return _number(parsed)
            if isinstance(value, bool):
                return 1 if value else 0
            return value
        case "boolean":
            if value is None:
                return False
            if value == "true" or (is_js_number(value) and value == 1):
                return True
            if value == "false" or (is_js_number(value) and value == 0):
                return False
            return value
        case "string":
            if value is None:
                return ""
            if isinstance(value, bool):
                return "true" if value else "false"
            if is_js_number(value):
                return js_number_to_string(value)
            return value
        case "null":
            if value == "" or value is False or (is_js_number(value) and value == 0):
                return None
            return value
        case _:
            return value


@final
class Coercer:
    """Coerces values for one compiled schema."""

    def __init__(self, compiler: Compiler) -> None:
        self.c = compiler
        self._entered: list[tuple[int, tuple[str, Any]]] = []
        self._cuts = 0
        self._memo: dict[tuple[int, tuple[str, Any]], tuple[Any, Any]] = {}

    def coerce(self, value: Any) -> Any:
        """Return `value` coerced: a copy along the changed paths, or `value` itself."""
        base = self.c.r.root_base
        schema = self.c.schema
        without_nulls = self._drop_optional_nulls(value, schema, base)
        try:
            converted = self._convert(schema, base, without_nulls)
        finally:
            self._memo = {}
            self._cuts = 0
        return self._coerce_types(converted, schema, base)

    def _passes(self, node: Any, base: str, value: Any) -> bool | None:
        try:
            return self.c.check(node, self._base_of(node, base))(value)
        except Exception:  # pi-schema: a node that cannot compile passes nothing
            return None

    def _base_of(self, node: Any, base: str) -> str:
        return self.c.r.base_for(node, base) if is_schema_object(node) else base

    # --- pass 1: optional nulls ---

    def _drop_optional_nulls(self, value: Any, schema: Any, base: str) -> Any:
        if not is_schema_object(schema):
            return value
        b = self._base_of(schema, base)
        if isinstance(value, list):

            def each(item: Any, i: int) -> Any:
                sub = _item_schema_at(schema, i)
                return item if sub is _ABSENT else self._drop_optional_nulls(item, sub, b)

            return _map_items(value, each)
        if not isinstance(value, dict):
            return value
        properties = object_at(schema, "properties")
        raw_patterns = object_at(schema, "patternProperties")
        patterns = [(compile_pattern(p), raw_patterns[p]) for p in js_keys(raw_patterns)]
        extra = schema.get("additionalProperties")
        additional = extra if is_schema_object(extra) else None
        if not patterns and additional is None and not is_schema_object(schema.get("properties")):
            return value
        required = list_at(schema, "required")
        edit = _Edited(value)
        put, current = edit.put, edit.current

        for key in js_keys(properties):
            if key not in value:
                continue
            prop = properties[key]
            is_ref = is_schema_object(prop) and isinstance(prop.get("$ref"), str)
            if (
                value[key] is None
                and not any(r == key for r in required if isinstance(r, str))
                and not is_ref
                and self._passes(prop, b, None) is False
            ):
                edit.drop(key)
                continue
            put(key, self._drop_optional_nulls(value[key], prop, b))
        if patterns or additional is not None:
            for key in js_keys(value):
                matched = key in properties
                for test, sub in patterns:
                    if not test(key):
                        continue
                    matched = True
                    here = current().get(key, _ABSENT)
                    if here is not _ABSENT:
                        put(key, self._drop_optional_nulls(here, sub, b))
                if not matched and additional is not None:
                    put(key, self._drop_optional_nulls(value[key], additional, b))
        return current()

    # --- pass 2: conversions ---

    def _reenter(self, node: Any, base: str, value: Any, memoize: bool) -> Any:
        key = (id(node), _identity(value))
        if key in self._entered:
            self._cuts += 1
            return value
        if memoize and key in self._memo:
            return self._memo[key][0]
        cuts = self._cuts
        self._entered.append(key)
        try:
            result = self._convert(node, base, value)
        finally:
            self._entered.pop()
        if memoize and self._cuts == cuts:
            self._memo[key] = (result, value)  # `value` kept alive: its id stays its own
        return result

    def _convert(self, node: Any, base: str, value: Any) -> Any:
        if not is_schema_object(node):
            return value
        b = self._base_of(node, base)
        ref = node.get("$ref")
        if isinstance(ref, str):
            target, target_base = self.c.r.resolve(ref, b)
            if not is_schema_object(target):
                return value
            return self._reenter(target, target_base, value, True)
        return self._convert_node(node, b, value)

    def _convert_node(self, node: Mapping[str, Any], b: str, value: Any) -> Any:
        if "const" in node:
            return convert_literal(node["const"], value)
        if isinstance(node.get("enum"), list):
            return self._convert_enum(node, node["enum"], b, value)
        for key in ("anyOf", "oneOf"):
            if isinstance(node.get(key), list):
                return self._convert_union(node, node[key], b, value)
        if isinstance(node.get("allOf"), list):
            new = value
            for member in node["allOf"]:
                new = self._convert(member, b, new)
            return self._convert_members(node, b, new)
        kind = node.get("type", _ABSENT)
        if kind == "string":
            result = try_string(value)
        elif kind == "number":
            result = try_number(value)
        elif kind == "integer":
            result = try_number(value)
            return value if result is _ABSENT else _trunc(result)
        elif kind == "boolean":
            result = try_boolean(value)
        elif kind == "null":
            result = try_null(value)
        elif kind == "array":
            return self._convert_array(node, b, value)
        elif kind == "object":
            return self._convert_object(node, b, value)
        elif kind is _ABSENT:
            if "properties" in node or "patternProperties" in node:
                return self._convert_object(node, b, value)
            if "items" in node or "prefixItems" in node:
                return self._convert_array(node, b, value)
            return value
        else:
            return value
        return value if result is _ABSENT else result

    def _convert_enum(self, node: Mapping[str, Any], members: list[Any], b: str, value: Any) -> Any:
        if any(same(m, value) for m in members):
            return value
        for member in members:
            candidate = convert_literal(member, value)
            if not same(candidate, value) and self._passes(node, b, candidate) is True:
                return candidate
        return value

    def _convert_union(
        self, node: Mapping[str, Any], branches: list[Any], b: str, value: Any
    ) -> Any:
        if any(self._passes(branch, b, value) is True for branch in branches):
            return self._convert_members(node, b, value)
        for branch in branches:
            candidate = self._convert_members(node, b, self._convert(branch, b, value))
            if self._passes(node, b, candidate) is True:
                return candidate
        return self._convert_members(node, b, value)

    def _convert_members(self, node: Mapping[str, Any], b: str, value: Any) -> Any:
        declares = any(
            k in node for k in ("properties", "patternProperties", "additionalProperties")
        )
        return self._convert_object(node, b, value) if declares else value

    def _convert_array(self, node: Mapping[str, Any], b: str, value: Any) -> Any:
        items = node.get("items", _ABSENT)
        prefix = (
            items
            if isinstance(items, list)
            else node["prefixItems"]
            if isinstance(node.get("prefixItems"), list)
            else None
        )
        if prefix is not None:
            if not isinstance(value, list):
                return value
            rest = _ABSENT if isinstance(items, list) else items

            def each(item: Any, i: int) -> Any:
                sub = prefix[i] if i < len(prefix) else rest
                return item if sub is _ABSENT else self._convert(sub, b, item)

            return _map_items(value, each)
        if isinstance(value, list):
            if items is _ABSENT:
                return value
            return _map_items(value, lambda item, _: self._convert(items, b, item))
        # A single value becomes a one-item array, converted by the item schema.
        return [self._reenter(items, b, value, False) if is_schema_object(items) else value]

    def _convert_object(self, node: Mapping[str, Any], b: str, value: Any) -> Any:
        if not isinstance(value, dict):
            return value
        properties = object_at(node, "properties")
        raw_patterns = object_at(node, "patternProperties")
        patterns = [(compile_pattern(p), raw_patterns[p]) for p in js_keys(raw_patterns)]
        extra = node.get("additionalProperties")
        additional = extra if is_schema_object(extra) else None
        out: dict[str, Any] | None = None
        for key in js_keys(value):
            new = value[key]
            matched = key in properties
            if matched:
                new = self._convert(properties[key], b, new)
            for test, sub in patterns:
                if not test(key):
                    continue
                matched = True
                new = self._convert(sub, b, new)
            if not matched and additional is not None:
                new = self._convert(additional, b, new)
            if not same(new, value[key]):
                if out is None:
                    out = dict(value)
                out[key] = new
        return value if out is None else out

    # --- pass 3: primitive coercion by type ---

    def _coerce_types(self, value: Any, schema: Any, base: str) -> Any:
        if not is_schema_object(schema):
            return value
        b = self._base_of(schema, base)
        new = value
        if isinstance(schema.get("allOf"), list):
            for member in schema["allOf"]:
                new = self._coerce_types(new, member, b)
        for key in ("anyOf", "oneOf"):
            if isinstance(schema.get(key), list):
                new = self._coerce_union(new, schema[key], b)
        kinds = _types_of(schema)
        matches_member = len(kinds) > 1 and any(_matches_type(new, k) for k in kinds)
        if kinds and not matches_member:
            for kind in kinds:
                candidate = coerce_primitive(new, kind)
                if not same(candidate, new):
                    new = candidate
                    break
        if "object" in kinds and isinstance(new, dict):
            new = self._coerce_properties(new, schema, b)
        if "array" in kinds and isinstance(new, list):

            def each(item: Any, i: int) -> Any:
                sub = _item_schema_at(schema, i)
                return self._coerce_types(item, sub, b) if is_schema_object(sub) else item

            new = _map_items(new, each)
        return new

    def _coerce_union(self, value: Any, branches: list[Any], b: str) -> Any:
        if any(self._passes(branch, b, value) is True for branch in branches):
            return value
        for branch in branches:
            coerced = self._coerce_types(value, branch, b)
            if self._passes(branch, b, coerced) is True:
                return coerced
        return value

    def _coerce_properties(self, value: dict[str, Any], schema: Mapping[str, Any], b: str) -> Any:
        properties = object_at(schema, "properties")
        raw_patterns = object_at(schema, "patternProperties")
        patterns = [(compile_pattern(p), raw_patterns[p]) for p in js_keys(raw_patterns)]
        extra = schema.get("additionalProperties")
        additional = extra if is_schema_object(extra) else None
        edit = _Edited(value)
        put, current = edit.put, edit.current

        for key in js_keys(properties):
            if key in value:
                put(key, self._coerce_types(value[key], properties[key], b))
        for key in js_keys(value):
            matched = key in properties
            for test, sub in patterns:
                if not test(key):
                    continue
                matched = True
                put(key, self._coerce_types(current()[key], sub, b))
            if not matched and additional is not None:
                put(key, self._coerce_types(value[key], additional, b))
        return current()


__all__ = ["Coercer", "coerce_primitive", "convert_literal", "same"]
