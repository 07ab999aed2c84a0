"""The errors of a value that failed its tool schema, as pi-schema 1.6.0's `errors()` lists them.

A walk over the schema that reports each failing keyword at the value it failed on (a JSON
Pointer), in pi-schema's keyword order, using the compiled checks for subschemas: a subschema
the value passes adds nothing, a wrong type stops its schema's other keywords, a missing or
unknown property is reported at the property, a failed union blames one branch (the one a tag
selects, else the one declaring most of the object's keys, else the one whose first error is
deepest). Every error is listed (there is no cap).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, final

from mule.pi._js_values import (
    is_js_number,
    js_equal,
    js_json,
    js_keys,
    js_number_to_string,
    to_double,
)
from mule.pi._schema import (
    TYPE_CHECKS,
    Compiler,
    code_points,
    format_check,
    is_integer,
    is_multiple,
    is_number,
    never,
    unique,
)
from mule.pi._schema_refs import is_schema_object, list_at, object_at
from mule.pi._schema_regex import compile_pattern

SchemaError = tuple[str, str, str]  # (JSON Pointer path, keyword, message)
_LISTED_VALUES: Final = 20


def _num(value: Any) -> str:
    return js_number_to_string(value)


def _join_item(item: Any) -> str:
    """JS `Array.prototype.join`'s text of one element."""
    if item is None:
        return ""
    if item is True or item is False:
        return "true" if item else "false"
    if is_js_number(item):
        return js_number_to_string(item)
    if isinstance(item, str):
        return item
    if isinstance(item, list):
        return ",".join(_join_item(x) for x in item)
    return "[object Object]"


def type_name(v: Any) -> str:
    """pi-schema's name of a value's type in a type error."""
    if v is None:
        return "null"
    if isinstance(v, list):
        return "array"
    if isinstance(v, bool):
        return "boolean"
    if is_js_number(v):
        if is_integer(v):
            return "integer"
        return "number" if is_number(v) else js_number_to_string(v)
    if isinstance(v, str):
        return "string"
    return "object"


def list_values(values: list[Any]) -> str:
    """`values` as JSON, the first 20 and how many more."""
    if len(values) <= _LISTED_VALUES:
        return js_json(values)
    listed = js_json(values[:_LISTED_VALUES])
    return f"{listed[:-1]}, ... and {len(values) - _LISTED_VALUES} more]"


def pointer(path: str, key: str) -> str:
    return f"{path}/{key.replace('~', '~0').replace('/', '~1')}"


def _contains_message(low: float, high: float) -> str:
    if high == float("inf"):
        return f"expected at least {_num(low)} matching {'item' if low == 1 else 'items'}"
    if low == 0:
        return f"expected at most {_num(high)} matching {'item' if high == 1 else 'items'}"
    return f"expected between {_num(low)} and {_num(high)} matching items"


def _units(text: str) -> int:
    """JS `string.length` (UTF-16 units)."""
    return len(text) + sum(1 for ch in text if ord(ch) > 0xFFFF)


def _js_key(value: Any) -> tuple[str, Any]:
    """Return a key under which two primitives are the same exactly when JS's Set sees one."""
    if is_js_number(value):
        return ("n", to_double(value))
    return (type(value).__name__, value)


@final
class Explainer:
    """Explains failures of one compiled schema."""

    def __init__(self, compiler: Compiler) -> None:
        self.c = compiler
        self._memo: dict[tuple[int, int], tuple[str, list[SchemaError], Any]] = {}

    def errors(self, value: Any) -> list[SchemaError]:
        """Return the errors of `value` (at least one; it failed the check)."""
        out: list[SchemaError] = []
        try:
            self.walk(self.c.schema, self.c.r.root_base, value, "", out)
        finally:
            self._memo = {}
        return out or [("", "schema", "invalid")]

    def ok(self, node: Any, base: str, v: Any) -> bool:
        return self.c.check(node, base)(v)

    def walk(self, node: Any, base: str, v: Any, path: str, out: list[SchemaError]) -> None:
        if node is True:
            return
        if node is False:
            out.append((path, "false", "no value is allowed here"))
            return
        if not is_schema_object(node):
            return
        b = self.c.r.base_for(node, base)
        if self.ok(node, b, v):
            return
        start = len(out)

        def push(keyword: str, message: str, at: str = path) -> None:
            out.append((at, keyword, message))

        if "type" in node:
            raw = node["type"]
            types = raw if isinstance(raw, list) else [raw]
            checks = [TYPE_CHECKS.get(t, never) if isinstance(t, str) else never for t in types]
            if not any(check(v) for check in checks):
                names = " or ".join(_join_item(t) for t in types)
                push("type", f"expected {names}, got {type_name(v)}")
                return
        if isinstance(node.get("enum"), list) and not any(js_equal(v, m) for m in node["enum"]):
            push("enum", f"expected one of {list_values(node['enum'])}")
        if "const" in node and not js_equal(v, node["const"]):
            push("const", f"expected {js_json(node['const'])}")
        if isinstance(v, str) and node.get("type") != "bytes":
            self._string(node, v, push)
        if is_js_number(v):
            self._number(node, v, push)
        if isinstance(v, dict):
            self._object(node, b, v, path, out, push)
        if isinstance(v, list):
            self._array(node, b, v, path, out, push)
        if isinstance(node.get("allOf"), list):
            for s in node["allOf"]:
                self.walk(s, b, v, path, out)
        if isinstance(node.get("anyOf"), list):
            self._union(node["anyOf"], b, v, path, out, exactly_one=False)
        if isinstance(node.get("oneOf"), list):
            self._union(node["oneOf"], b, v, path, out, exactly_one=True)
        if "not" in node and self.ok(node["not"], b, v):
            push("not", "must not match the schema in not")
        if "if" in node:
            branch = "then" if self.ok(node["if"], b, v) else "else"
            if branch in node:
                self.walk(node[branch], b, v, path, out)
        if isinstance(node.get("$ref"), str):
            self._ref(node["$ref"], b, v, path, out)
        if len(out) == start and ("unevaluatedProperties" in node or "unevaluatedItems" in node):
            self._unevaluated(node, b, v, path, out)
        if len(out) == start and isinstance(node.get("$dynamicRef"), str):
            push("$dynamicRef", "does not match the dynamically referenced schema")

    def _ref(self, ref: str, base: str, v: Any, path: str, out: list[SchemaError]) -> None:
        target, target_base = self.c.r.resolve(ref, base)
        if target is False and self.c.r.is_unresolved(ref, base):
            out.append((path, "$ref", f"unresolved reference {ref}"))
            return
        if not is_schema_object(target) or not isinstance(v, dict | list):
            self.walk(target, target_base, v, path, out)
            return
        # A recursive union explains each branch; the same child is explained once per call.
        key = (id(target), id(v))
        known = self._memo.get(key)
        if known is not None and known[0] == path:
            out.extend(known[1])
            return
        errors: list[SchemaError] = []
        self.walk(target, target_base, v, path, errors)
        self._memo[key] = (path, errors, v)  # `v` kept alive: its id stays its own
        out.extend(errors)

    def _string(self, node: Mapping[str, Any], v: str, push: Any) -> None:
        n = code_points(v)
        if is_js_number(node.get("minLength")) and n < to_double(node["minLength"]):
            push("minLength", f"expected at least {_num(node['minLength'])} characters")
        if is_js_number(node.get("maxLength")) and n > to_double(node["maxLength"]):
            push("maxLength", f"expected at most {_num(node['maxLength'])} characters")
        if isinstance(node.get("pattern"), str) and not compile_pattern(node["pattern"])(v):
            push("pattern", f"expected to match {node['pattern']}")
        name = node.get("format")
        fmt = format_check(name)
        if fmt is not None and not fmt(v):
            push("format", f"expected format {name}")

    def _number(self, node: Mapping[str, Any], v: Any, push: Any) -> None:
        d = to_double(v)
        for key, sign in (
            ("minimum", ">="),
            ("maximum", "<="),
            ("exclusiveMinimum", ">"),
            ("exclusiveMaximum", "<"),
        ):
            limit = node.get(key)
            if not isinstance(limit, int | float) or isinstance(limit, bool):
                continue
            bound = to_double(limit)
            fails = {">=": d < bound, "<=": d > bound, ">": d <= bound, "<": d >= bound}[sign]
            if fails:
                push(key, f"expected {sign} {_num(limit)}")
        divisor = node.get("multipleOf")
        if is_js_number(divisor) and not is_multiple(v, divisor):
            push("multipleOf", f"expected a multiple of {_num(divisor)}")

    def _object(
        self,
        node: Mapping[str, Any],
        b: str,
        v: dict[str, Any],
        path: str,
        out: list[SchemaError],
        push: Any,
    ) -> None:
        properties = object_at(node, "properties")
        for k in list_at(node, "required"):
            if isinstance(k, str) and k not in v:
                push("required", "missing", pointer(path, k))
        for k in js_keys(properties):
            if k in v:
                self.walk(properties[k], b, v[k], pointer(path, k), out)
        raw_patterns = object_at(node, "patternProperties")
        patterns = [(p, raw_patterns[p]) for p in js_keys(raw_patterns)]
        extra = node.get("additionalProperties", None)
        has_extra = "additionalProperties" in node
        names = node.get("propertyNames")
        for k in js_keys(v):
            matched = k in properties
            for p, s in patterns:
                if compile_pattern(p)(k):
                    matched = True
                    self.walk(s, b, v[k], pointer(path, k), out)
            if not matched and has_extra:
                if extra is False:
                    push("additionalProperties", "unknown field", pointer(path, k))
                else:
                    self.walk(extra, b, v[k], pointer(path, k), out)
            if "propertyNames" in node and not self.ok(names, b, k):
                push("propertyNames", "invalid property name", pointer(path, k))
        count = len(v)
        if is_js_number(node.get("minProperties")) and count < to_double(node["minProperties"]):
            push("minProperties", f"expected at least {_num(node['minProperties'])} properties")
        if is_js_number(node.get("maxProperties")) and count > to_double(node["maxProperties"]):
            push("maxProperties", f"expected at most {_num(node['maxProperties'])} properties")
        dependencies = {**object_at(node, "dependentRequired"), **object_at(node, "dependencies")}
        for k in js_keys(dependencies):
            if k not in v:
                continue
            d = dependencies[k]
            if not isinstance(d, list):
                self.walk(d, b, v, path, out)
                continue
            for r in d:
                if _own_key(r) not in v:
                    push(
                        "dependentRequired",
                        f"required when {k} is present",
                        pointer(path, _text(r)),
                    )
        dependent = object_at(node, "dependentSchemas")
        for k in js_keys(dependent):
            if k in v:
                self.walk(dependent[k], b, v, path, out)

    def _array(
        self,
        node: Mapping[str, Any],
        b: str,
        v: list[Any],
        path: str,
        out: list[SchemaError],
        push: Any,
    ) -> None:
        prefix: list[Any] = []
        if isinstance(node.get("items"), list):
            prefix = node["items"]
            rest_key = "additionalItems"
        else:
            if isinstance(node.get("prefixItems"), list):
                prefix = node["prefixItems"]
            rest_key = "items"
        for i, item in enumerate(v):
            if i < len(prefix):
                self.walk(prefix[i], b, item, f"{path}/{i}", out)
            elif rest_key in node:
                self.walk(node[rest_key], b, item, f"{path}/{i}", out)
        if is_js_number(node.get("minItems")) and len(v) < to_double(node["minItems"]):
            push("minItems", f"expected at least {_num(node['minItems'])} items")
        if is_js_number(node.get("maxItems")) and len(v) > to_double(node["maxItems"]):
            push("maxItems", f"expected at most {_num(node['maxItems'])} items")
        if node.get("uniqueItems") is True and not unique(v):
            push("uniqueItems", "expected unique items")
        if "contains" in node:
            low = to_double(node["minContains"]) if is_js_number(node.get("minContains")) else 1.0
            high = (
                to_double(node["maxContains"])
                if is_js_number(node.get("maxContains"))
                else float("inf")
            )
            matches = self.c.check(node["contains"], b)
            if not low <= sum(1 for x in v if matches(x)) <= high:
                push("contains", _contains_message(low, high))

    def _union(
        self,
        branches: list[Any],
        b: str,
        v: Any,
        path: str,
        out: list[SchemaError],
        *,
        exactly_one: bool,
    ) -> None:
        matches = sum(1 for s in branches if self.ok(s, b, v))
        if matches == 1 or (not exactly_one and matches > 0):
            return
        keyword = "oneOf" if exactly_one else "anyOf"
        if matches > 1:
            out.append((path, keyword, "matches more than one alternative"))
            return
        tag = self._tag(branches, b)
        if tag is not None and isinstance(v, dict):
            key, values = tag
            index = next((i for i, x in enumerate(values) if key in v and js_equal(v[key], x)), -1)
            if index < 0:
                out.append((pointer(path, key), keyword, f"expected one of {list_values(values)}"))
            else:
                self.walk(branches[index], b, v, path, out)
            return
        best: tuple[list[SchemaError], int] | None = None
        for s in branches:
            errors: list[SchemaError] = []
            self.walk(s, b, v, path, errors)
            if not errors:
                continue
            declared = self._declared_keys(s, b, v) if isinstance(v, dict) else 0
            if (
                best is None
                or declared > best[1]
                or (declared == best[1] and _units(errors[0][0]) > _units(best[0][0][0]))
            ):
                best = (errors, declared)
        out.extend(best[0] if best is not None else [(path, keyword, "matches no alternative")])

    def _resolved(self, s: Any, b: str) -> Any:
        if is_schema_object(s) and isinstance(s.get("$ref"), str):
            return self.c.r.resolve(s["$ref"], self.c.r.base_for(s, b))[0]
        return s

    def _declared_keys(self, s: Any, b: str, v: dict[str, Any]) -> int:
        node = self._resolved(s, b)
        properties = object_at(node, "properties") if isinstance(node, dict) else {}
        return sum(1 for k in v if k in properties)

    def _tag(self, branches: list[Any], b: str) -> tuple[str, list[Any]] | None:
        resolved = [self._resolved(s, b) for s in branches]
        first = resolved[0] if resolved else None
        if not isinstance(first, dict) or not isinstance(first.get("properties"), dict):
            return None
        for key in js_keys(first["properties"]):
            values: list[Any] = []
            for s in resolved:
                props = object_at(s, "properties") if isinstance(s, dict) else {}
                tag = props.get(key)
                if not isinstance(tag, dict) or "const" not in tag:
                    break
                values.append(tag["const"])
            else:
                if all(not isinstance(x, dict | list) for x in values) and len(
                    {_js_key(x) for x in values}
                ) == len(values):
                    return key, values
        return None

    def _unevaluated(
        self, node: Mapping[str, Any], b: str, v: Any, path: str, out: list[SchemaError]
    ) -> None:
        from mule.pi._schema_unevaluated import Annotations, annotating_check

        rest = {
            k: x
            for k, x in node.items()
            if k not in ("unevaluatedProperties", "unevaluatedItems", "$id")
        }
        a = Annotations()
        annotating_check(self.c, rest, b)(v, a)
        props = node.get("unevaluatedProperties")
        if isinstance(v, dict) and "unevaluatedProperties" in node and not a.all_props:
            for k in js_keys(v):
                if k in a.props:
                    continue
                if props is False:
                    out.append((pointer(path, k), "unevaluatedProperties", "unknown field"))
                else:
                    self.walk(props, b, v[k], pointer(path, k), out)
        items = node.get("unevaluatedItems")
        if isinstance(v, list) and "unevaluatedItems" in node and not a.all_items:
            for i in range(a.items, len(v)):
                if i in a.indexes:
                    continue
                if items is False:
                    out.append((f"{path}/{i}", "unevaluatedItems", "unexpected item"))
                else:
                    self.walk(items, b, v[i], f"{path}/{i}", out)


def _own_key(name: Any) -> Any:
    return _text(name) if not isinstance(name, dict | list) else None


def _text(name: Any) -> str:
    return name if isinstance(name, str) else _join_item(name)


__all__ = ["Explainer", "SchemaError", "list_values", "pointer", "type_name"]
