"""TypeBox's error walk (`ErrorSchema`), which decides the lines of Pi's failure text.

Every failing keyword adds errors, in TypeBox's keyword order, capped at `MAX_ERRORS` per error
context. Validity itself is decided by the compiled validator (`mule.pi._schema`); this walk only
explains a failure. It follows local `$ref`s (`#`, `#/...`) only.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final, final

from mule.pi._js_values import is_js_number, js_equal, js_keys, to_double, type_matches
from mule.pi._pattern import search as pattern_search
from mule.pi._schema import Schema, formats, multiple_of

MAX_ERRORS: Final = 8  # TypeBox's `Settings.maxErrors`, a cap per error context.
_INDEX: Final = re.compile(r"0|[1-9][0-9]{0,9}")  # an array index of a JSON pointer (ASCII only)


@final
class ErrorContext:
    """One TypeBox error context: keyword errors, capped at `MAX_ERRORS`."""

    def __init__(self) -> None:
        self.items: list[tuple[str, str, dict[str, Any]]] = []

    def full(self) -> bool:
        return len(self.items) >= MAX_ERRORS

    def add(self, keyword: str, path: str, params: dict[str, Any] | None = None) -> bool:
        if not self.full():
            self.items.append((keyword, path, params or {}))
        return False

    def extend(self, other: ErrorContext) -> bool:
        for item in other.items:
            self.add(*item)
        return False


def _fragment(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


@final
class ErrorWalker:
    """TypeBox's `ErrorSchema`: every failing keyword adds errors, in TypeBox's keyword order."""

    def __init__(self, root: Schema) -> None:
        self._root = root

    def check(self, schema: Schema, value: Any) -> bool:
        errors = ErrorContext()
        errors.full = lambda: False  # type: ignore[method-assign]  # a check has no cap
        return self.walk(errors, "", schema, value)

    def walk(self, ctx: ErrorContext, path: str, schema: Schema, value: Any) -> bool:
        if ctx.full():
            return False
        if isinstance(schema, bool):
            return schema or ctx.add("boolean", path)
        if not isinstance(schema, Mapping):
            return True
        ok = True
        kind = schema.get("type")
        if isinstance(kind, str) or (
            isinstance(kind, list) and all(isinstance(k, str) for k in kind)
        ):
            names = [kind] if isinstance(kind, str) else kind
            known = ("number", "integer", "boolean", "string", "null", "array", "object")
            if not any(type_matches(value, k) if k in known else True for k in names):
                ok = ctx.add("type", path, {"type": kind})
        if isinstance(value, dict):
            ok = self._object(ctx, path, schema, value) and ok
        if isinstance(value, list):
            ok = self._array(ctx, path, schema, value) and ok
        if isinstance(value, str):
            ok = self._string(ctx, path, schema, value) and ok
        if is_js_number(value):
            ok = self._number(ctx, path, schema, value) and ok
        return self._logic(ctx, path, schema, value) and ok

    def _all(self, results: Iterable[bool]) -> bool:
        return all(list(results))  # evaluate every operand, like TypeBox's EveryAll

    def _object(
        self, ctx: ErrorContext, path: str, schema: Mapping[str, Any], value: dict[str, Any]
    ) -> bool:
        ok = True
        keys = js_keys(value)
        required = schema.get("required")
        if isinstance(required, list) and all(isinstance(k, str) for k in required):
            missing = [k for k in required if k not in value]
            if missing:
                ok = ctx.add("required", path, {"requiredProperties": missing})
        extra = schema.get("additionalProperties")
        if isinstance(extra, Mapping | bool):
            # TypeBox joins the patterns and `^key$` of each property into one regex; searching
            # each on its own matches the same keys, and flags such as `(?i)` or
            # back-references in one pattern cannot break (or renumber) the others.
            patterns = list(schema.get("patternProperties") or {})
            declared = schema.get("properties") or {}
            bad = [
                k
                for k in keys
                if not (
                    k in declared
                    or any(pattern_search(p, k) for p in patterns)
                    or self.walk(ctx, f"{path}/{_fragment(k)}", extra, value[k])
                )
            ]
            if bad:
                ok = ctx.add("additionalProperties", path, {"additionalProperties": bad})
        if keys:
            for name in ("dependencies", "dependentRequired", "dependentSchemas"):
                entries = schema.get(name)
                if isinstance(entries, Mapping):
                    ok = self._dependencies(ctx, path, name, entries, value) and ok
        pattern_props = schema.get("patternProperties")
        if isinstance(pattern_props, Mapping):
            ok = (
                self._all(
                    not pattern_search(pattern, k)
                    or self.walk(ctx, f"{path}/{_fragment(k)}", sub, value[k])
                    for pattern, sub in pattern_props.items()
                    for k in keys
                )
                and ok
            )
        properties = schema.get("properties")
        if isinstance(properties, Mapping):
            ok = (
                self._all(
                    k not in value
                    or self.walk(ctx, f"{path}/{_fragment(k)}", properties[k], value[k])
                    for k in js_keys(properties)
                )
                and ok
            )
        if "propertyNames" in schema:
            bad = [
                k
                for k in keys
                if not self.walk(ctx, f"{path}/{_fragment(k)}", schema["propertyNames"], k)
            ]
            if bad:
                ok = ctx.add("propertyNames", path, {"propertyNames": bad})
        for name, fits in (
            ("minProperties", len(keys).__ge__),
            ("maxProperties", len(keys).__le__),
        ):
            if is_js_number(schema.get(name)) and not fits(schema[name]):
                ok = ctx.add(name, path, {"limit": schema[name]})
        return ok

    def _dependencies(
        self,
        ctx: ErrorContext,
        path: str,
        name: str,
        entries: Mapping[str, Any],
        value: dict[str, Any],
    ) -> bool:
        results = []
        for key in js_keys(entries):
            if key not in value:
                continue
            dependency = entries[key]
            if isinstance(dependency, list):
                # `dependencies` stops at the first missing name (JS `every`);
                # `dependentRequired` reports each one.
                found = True
                for each in dependency:
                    if each not in value:
                        found = ctx.add(name, path, {"property": key, "dependencies": dependency})
                        if name == "dependencies":
                            break
                results.append(found)
            else:
                results.append(self.walk(ctx, path, dependency, value))
        return all(results)

    def _array(
        self, ctx: ErrorContext, path: str, schema: Mapping[str, Any], value: list[Any]
    ) -> bool:
        ok = True
        items = schema.get("items")
        if "additionalItems" in schema and isinstance(items, list):
            for index in range(
                len(items), len(value)
            ):  # TypeBox's `Every` stops at the first failure
                if not self.walk(ctx, f"{path}/{index}", schema["additionalItems"], value[index]):
                    ok = False
                    break
        contains = schema.get("contains")
        if (
            "contains" in schema
            and schema.get("minContains") != 0
            and not any(self.check(contains, item) for item in value)
        ):
            ok = ctx.add("contains", path, {"minContains": 1})
        if isinstance(items, list):
            ok = (
                self._all(
                    self.walk(ctx, f"{path}/{i}", s, value[i])
                    for i, s in enumerate(items)
                    if i < len(value)
                )
                and ok
            )
        elif isinstance(items, Mapping | bool):
            start = len(schema.get("prefixItems") or [])
            ok = (
                self._all(
                    self.walk(ctx, f"{path}/{i}", items, value[i]) for i in range(start, len(value))
                )
                and ok
            )
        if "contains" in schema:
            count = sum(1 for item in value if self.check(contains, item))
            if is_js_number(schema.get("minContains")) and count < schema["minContains"]:
                ok = ctx.add("contains", path, {"minContains": schema["minContains"]})
            if is_js_number(schema.get("maxContains")) and count > schema["maxContains"]:
                ok = ctx.add("contains", path, {"minContains": schema.get("minContains", 1)})
        for name, fits in (("minItems", len(value).__ge__), ("maxItems", len(value).__le__)):
            if is_js_number(schema.get(name)) and not fits(schema[name]):
                ok = ctx.add(name, path, {"limit": schema[name]})
        prefix = schema.get("prefixItems")
        if isinstance(prefix, list) and value:
            ok = (
                self._all(
                    self.walk(ctx, f"{path}/{i}", s, value[i])
                    for i, s in enumerate(prefix)
                    if i < len(value)
                )
                and ok
            )
        if schema.get("uniqueItems") is True:
            seen: list[Any] = []
            duplicate = False
            for item in value:
                duplicate = duplicate or any(js_equal(item, other) for other in seen)
                seen.append(item)
            if duplicate:
                ok = ctx.add("uniqueItems", path)
        return ok

    def _string(self, ctx: ErrorContext, path: str, schema: Mapping[str, Any], value: str) -> bool:
        ok = True
        for name, fits in (("minLength", len(value).__ge__), ("maxLength", len(value).__le__)):
            if is_js_number(schema.get(name)) and not fits(schema[name]):
                ok = ctx.add(name, path, {"limit": schema[name]})
        if isinstance(schema.get("format"), str) and not formats().conforms(
            value, schema["format"]
        ):
            ok = ctx.add("format", path, {"format": schema["format"]})
        if isinstance(schema.get("pattern"), str) and not pattern_search(schema["pattern"], value):
            ok = ctx.add("pattern", path, {"pattern": schema["pattern"]})
        return ok

    def _number(
        self, ctx: ErrorContext, path: str, schema: Mapping[str, Any], value: float
    ) -> bool:
        ok = True
        bounds: tuple[tuple[str, str, Callable[[float, float], bool]], ...] = (
            ("exclusiveMinimum", ">", float.__gt__),
            ("exclusiveMaximum", "<", float.__lt__),
            ("minimum", ">=", float.__ge__),
            ("maximum", "<=", float.__le__),
        )
        for name, comparison, fits in bounds:
            limit = schema.get(name)
            if (
                isinstance(limit, int | float)
                and is_js_number(limit)
                and not fits(to_double(value), to_double(limit))
            ):
                ok = ctx.add(name, path, {"comparison": comparison, "limit": limit})
        if is_js_number(schema.get("multipleOf")) and not multiple_of(schema["multipleOf"], value):
            ok = ctx.add("multipleOf", path, {"multipleOf": schema["multipleOf"]})
        return ok

    def _logic(self, ctx: ErrorContext, path: str, schema: Mapping[str, Any], value: Any) -> bool:
        ok = True
        ref = schema.get("$ref")
        if isinstance(ref, str):
            target = self._resolve(ref)
            inner = ErrorContext()
            valid = target is not None and self.walk(inner, path, target, value)
            if not valid:
                ok = ctx.extend(inner)
        if "const" in schema and not js_equal(value, schema["const"]):
            ok = ctx.add("const", path)
        if isinstance(schema.get("enum"), list) and not any(
            js_equal(value, e) for e in schema["enum"]
        ):
            ok = ctx.add("enum", path)
        if "if" in schema:
            ok = self._if(ctx, path, schema, value) and ok
        if "not" in schema and self.check(schema["not"], value):
            ok = ctx.add("not", path)
        for name in ("allOf", "anyOf", "oneOf"):
            members = schema.get(name)
            if isinstance(members, list):
                ok = self._combinator(ctx, path, name, members, value) and ok
        return ok

    def _if(self, ctx: ErrorContext, path: str, schema: Mapping[str, Any], value: Any) -> bool:
        trial = ErrorContext()
        if self.walk(trial, path, schema["if"], value):
            return self.walk(trial, path, schema.get("then", True), value) or ctx.add(
                "if", path, {"failingKeyword": "then"}
            )
        return self.walk(ctx, path, schema.get("else", True), value) or ctx.add(
            "if", path, {"failingKeyword": "else"}
        )

    def _combinator(
        self, ctx: ErrorContext, path: str, name: str, members: list[Schema], value: Any
    ) -> bool:
        failed: list[ErrorContext] = []
        passed = 0
        for member in members:
            inner = ErrorContext()
            if self.walk(inner, path, member, value):
                passed += 1
            else:
                failed.append(inner)
        if name == "allOf":
            if passed == len(members):
                return True
            for inner in failed:
                ctx.extend(inner)
            return False
        if (name == "anyOf" and passed > 0) or (name == "oneOf" and passed == 1):
            return True
        if passed == 0:
            for inner in failed:
                ctx.extend(inner)
        return ctx.add(name, path)

    def _resolve(self, ref: str) -> Schema | None:
        if not ref.startswith("#"):
            return None
        node: Any = self._root
        pointer = ref[1:]
        if pointer == "":
            return node
        if not pointer.startswith("/"):
            return None
        for raw in pointer[1:].split("/"):
            part = raw.replace("~1", "/").replace("~0", "~")
            if isinstance(node, Mapping) and part in node:
                node = node[part]
            elif isinstance(node, list) and _INDEX.fullmatch(part) and int(part) < len(node):
                node = node[int(part)]
            else:
                return None
        return node


__all__ = ["MAX_ERRORS", "ErrorContext", "ErrorWalker"]
