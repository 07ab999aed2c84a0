"""Pi's coercion of tool arguments against their JSON schema (pi-ai's `coerceWithJsonSchema`).

It works on a private copy, in place where Pi mutates in place; union members are tried on clones
and kept only when the member's own compiled validator accepts the result.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

from mule.pi._js_values import (
    as_json_number,
    clone_json,
    is_js_number,
    js_keys,
    js_number,
    js_number_to_string,
    js_trim,
    type_matches,
)
from mule.pi._schema import Schema


def _schema_types(schema: Mapping[str, Any]) -> list[str]:
    kind = schema.get("type")
    if isinstance(kind, str):
        return [kind]
    if isinstance(kind, list):
        return [k for k in kind if isinstance(k, str)]
    return []


def _coerce_primitive(value: Any, kind: str) -> Any:
    """Return `value` converted to `kind` by Pi's rules, or the very same object if none applies."""
    match kind:
        case "number" | "integer":
            if value is None:
                return 0
            if isinstance(value, bool):
                return 1 if value else 0
            if isinstance(value, str) and js_trim(value) != "":
                parsed = js_number(value)
                ok = math.isfinite(parsed) and (kind == "number" or parsed.is_integer())
                if ok:
                    return as_json_number(parsed)
            return value
        case "boolean":
            if value is None:
                return False
            if value == "true" and isinstance(value, str):
                return True
            if value == "false" and isinstance(value, str):
                return False
            if is_js_number(value) and value == 1:
                return True
            if is_js_number(value) and value == 0:
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
            if value == "" and isinstance(value, str):
                return None
            if (is_js_number(value) and value == 0) or value is False:
                return None
            return value
        case _:
            return value


class Coercer:
    """Pi's recursive coercion; union members are checked with cached validators."""

    def __init__(self, member_check: Callable[[Schema, Any], bool]) -> None:
        self._member_check = member_check

    def coerce(self, value: Any, schema: Schema) -> Any:
        if not isinstance(schema, Mapping):
            return value
        result = value
        if isinstance(schema.get("allOf"), list):
            for nested in schema["allOf"]:
                result = self.coerce(result, nested)
        for union in ("anyOf", "oneOf"):
            if isinstance(schema.get(union), list):
                result = self._coerce_union(result, schema[union])
        kinds = _schema_types(schema)
        in_union = len(kinds) > 1 and any(type_matches(result, k) for k in kinds)
        if kinds and not in_union:
            for kind in kinds:
                candidate = _coerce_primitive(result, kind)
                if (
                    candidate is not result
                ):  # every conversion changes the JS type, so identity is `!==`
                    result = candidate
                    break
        if "object" in kinds and isinstance(result, dict):
            self._coerce_object(result, schema)
        if "array" in kinds and isinstance(result, list):
            self._coerce_array(result, schema)
        return result

    def _coerce_union(self, value: Any, members: list[Schema]) -> Any:
        for member in members:
            coerced = self.coerce(clone_json(value), member)
            if isinstance(member, Mapping) and self._member_check(member, coerced):
                return coerced
        return value

    def _coerce_object(self, value: dict[str, Any], schema: Mapping[str, Any]) -> None:
        properties = schema.get("properties")
        declared: set[str] = set()
        if isinstance(properties, Mapping):
            declared = set(properties)
            for key in js_keys(properties):
                if key in value:
                    value[key] = self.coerce(value[key], properties[key])
        extra = schema.get("additionalProperties")
        if isinstance(extra, Mapping):
            for key in js_keys(value):
                if key not in declared:
                    value[key] = self.coerce(value[key], extra)

    def _coerce_array(self, value: list[Any], schema: Mapping[str, Any]) -> None:
        items = schema.get("items")
        if isinstance(items, list):
            for index in range(len(value)):
                item_schema = items[index] if index < len(items) else None
                if item_schema is None or item_schema is False:  # JS skips falsy item schemas
                    continue
                value[index] = self.coerce(value[index], item_schema)
        elif isinstance(items, Mapping):
            for index in range(len(value)):
                value[index] = self.coerce(value[index], items)


__all__ = ["Coercer"]
