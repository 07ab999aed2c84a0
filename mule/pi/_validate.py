r"""Pi's tool-argument gate: coerce a call's arguments against the tool's schema, then validate.

Mirrors pi-ai 0.73.1 `validateToolArguments` (`dist/utils/validation.js`) and the TypeBox 1.4
validator it compiles. A Python `Tool.parameters` is plain JSON, and TypeBox's own `Value.Convert`
pass is a no-op in Pi for plain JSON schemas (it acts only on in-memory TypeBox types), so only
Pi's JSON-Schema coercion applies; it is mirrored here.

Validity is decided by `jsonschema` (Draft 2020-12, extended with what TypeBox also accepts:
array-form `items`, `additionalItems`, `dependencies`, and TypeBox's tolerant `multipleOf`). The
error lines of a failure follow TypeBox's error walk (its keyword order, its cap of 8 errors per
context, its English messages), so the failure text matches Pi's line for line.

Known divergences from Pi (outside what tool schemas normally use):
- `pattern`/`patternProperties` use Python `re`, not JS `RegExp(p, "u")` (Python's `\d` and `\w`
  also match non-ASCII digits and letters); `format` uses jsonschema's format checker, whose set
  of known formats differs from TypeBox's registry.
- Error lines follow only local `$ref`s (`#`, `#/...`); for `$dynamicRef`, `$recursiveRef`,
  `unevaluatedItems` and `unevaluatedProperties` jsonschema still decides validity, but when the
  walk finds nothing the lines fall back to jsonschema's own paths and messages.
- JS `key in value` also sees inherited names ("toString", "constructor"); Python does not.
- Numbers are JS doubles: a coerced integral value within 2**53 comes back as `int`, otherwise as
  `float`; an `int` beyond 2**53 is printed (String(), "Received arguments") as the double JS sees.
"""

from __future__ import annotations

import functools
import json
import math
import re
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, ClassVar, Final, TypeAlias, final

from jsonschema import Draft7Validator, Draft202012Validator, FormatChecker, validators
from jsonschema.exceptions import SchemaError, ValidationError
from jsonschema.protocols import Validator
from referencing.exceptions import Unresolvable

from mule.pi._content import ToolCall
from mule.pi._context import Tool
from mule.pi._json import JsonObject, JsonValue

# A schema as Pi sees it: usually a mapping; `true`/`false` are schemas too.
Schema: TypeAlias = Any

_MAX_ERRORS: Final = 8  # TypeBox's `Settings.maxErrors`, a cap per error context.
_SAFE_INT: Final = 2**53


# -------------------------------------------------------------------------------------------------
# Errors


class ToolArgumentsError(ValueError):
    """A tool call's arguments failed the tool's schema; `str(error)` is Pi's full failure text."""

    def __init__(self, tool_name: str, errors: tuple[tuple[str, str], ...], text: str) -> None:
        super().__init__(text)
        self.tool_name = tool_name
        self.errors = errors
        self.text = text


class ToolSchemaError(ValueError):
    """A tool's `parameters` is not a usable JSON Schema."""

    def __init__(self, tool_name: str, detail: str) -> None:
        super().__init__(f'Invalid parameters schema for tool "{tool_name}": {detail}')
        self.tool_name = tool_name
        self.detail = detail


# -------------------------------------------------------------------------------------------------
# JS value semantics

# ECMAScript WhiteSpace + LineTerminator, what trim() and Number() strip (not Python's isspace).
_JS_SPACE: Final = (
    "\t\n\v\f\r \xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a"
    "\u2028\u2029\u202f\u205f\u3000\ufeff"
)
_DECIMAL: Final = re.compile(r"[+-]?(?:Infinity|(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)")
_RADIX: Final = {
    "x": (16, re.compile(r"[0-9a-fA-F]+")),
    "o": (8, re.compile(r"[0-7]+")),
    "b": (2, re.compile(r"[01]+")),
}
_ARRAY_INDEX: Final = re.compile(r"0|[1-9][0-9]*")


def _is_num(value: object) -> bool:
    """Return whether `value` is a JS number (Python's bool is an int, but never a JS number)."""
    return isinstance(value, int | float) and not isinstance(value, bool)


def _js_trim(text: str) -> str:
    return text.strip(_JS_SPACE)


def _js_number(text: str) -> float:
    """Return JS `Number(text)` (NaN when JS would give NaN)."""
    body = _js_trim(text)
    if body == "":
        return 0.0
    if _DECIMAL.fullmatch(body):
        return float(body.replace("Infinity", "inf"))
    if len(body) > 2 and body[0] == "0" and body[1].lower() in _RADIX:
        radix, digits = _RADIX[body[1].lower()]
        if digits.fullmatch(body[2:]):
            try:
                return float(int(body[2:], radix))
            except OverflowError:
                return math.inf
    return math.nan


def _as_js_number(parsed: float) -> int | float:
    """Return a parsed double as Python holds JSON numbers: `int` when integral and exact."""
    if math.isfinite(parsed) and parsed.is_integer() and abs(parsed) <= _SAFE_INT:
        return int(parsed)
    return parsed


def _to_double(value: int | float) -> float:
    try:
        return float(value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf


def js_number_to_string(value: int | float) -> str:
    """Return JS `String(value)` for a number (shortest round-trip digits, JS exponent rules).

    >>> [js_number_to_string(x) for x in (1.0, 1e21, 1.5e-7, 123456.789, -0.0)]
    ['1', '1e+21', '1.5e-7', '123456.789', '0']
    """
    if isinstance(value, int) and abs(value) <= _SAFE_INT:
        return str(value)
    number = _to_double(value)
    if math.isnan(number):
        return "NaN"
    if math.isinf(number):
        return "Infinity" if number > 0 else "-Infinity"
    if number == 0:
        return "0"
    sign = "-" if number < 0 else ""
    mantissa, _, exponent = repr(abs(number)).partition("e")
    whole, _, fraction = mantissa.partition(".")
    digits = whole + fraction
    point = len(whole) + (int(exponent) if exponent else 0)
    stripped = digits.lstrip("0")
    point -= len(digits) - len(stripped)
    digits = stripped.rstrip("0")
    k, n = len(digits), point
    if k <= n <= 21:
        body = digits + "0" * (n - k)
    elif 0 < n <= 21:
        body = digits[:n] + "." + digits[n:]
    elif -6 < n <= 0:
        body = "0." + "0" * -n + digits
    else:
        e = n - 1
        body = (
            digits[0]
            + ("." + digits[1:] if k > 1 else "")
            + ("e+" if e >= 0 else "e-")
            + str(abs(e))
        )
    return sign + body


def _js_keys(mapping: Mapping[str, Any]) -> list[str]:
    """Return a mapping's keys in JS order: array-index keys ascending, then insertion order."""
    keys = list(mapping)
    index = [k for k in keys if _ARRAY_INDEX.fullmatch(k) and int(k) < 2**32 - 1]
    if not index:
        return keys
    chosen = set(index)
    return sorted(index, key=int) + [k for k in keys if k not in chosen]


def _js_string_literal(text: str) -> str:
    out = ['"']
    for ch in text:
        code = ord(ch)
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif code < 0x20:
            out.append(
                {"\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}.get(
                    ch, f"\\u{code:04x}"
                )
            )
        elif 0xD800 <= code <= 0xDFFF:  # a lone surrogate: JSON.stringify escapes it
            out.append(f"\\u{code:04x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def js_stringify(value: object, indent: str = "  ", _depth: int = 0) -> str:
    """Return JS `JSON.stringify(value, null, 2)` for a JSON value (JS number format, JS key order).

    >>> print(js_stringify({"b": [1.0, True], "a": {}}))
    {
      "b": [
        1,
        true
      ],
      "a": {}
    }
    """
    if value is None or value is True or value is False:
        return {None: "null", True: "true", False: "false"}[value]
    if _is_num(value):
        assert isinstance(value, int | float)
        number = _to_double(value) if isinstance(value, float) else value
        return js_number_to_string(number) if math.isfinite(_to_double(number)) else "null"
    if isinstance(value, str):
        return _js_string_literal(value)
    inner = "\n" + indent * (_depth + 1)
    if isinstance(value, Mapping):
        if not value:
            return "{}"
        items = [
            f"{_js_string_literal(k)}: {js_stringify(value[k], indent, _depth + 1)}"
            for k in _js_keys(value)
        ]
        return "{" + inner + ("," + inner).join(items) + "\n" + indent * _depth + "}"
    if isinstance(value, Sequence):
        if not value:
            return "[]"
        items = [js_stringify(item, indent, _depth + 1) for item in value]
        return "[" + inner + ("," + inner).join(items) + "\n" + indent * _depth + "]"
    return "null"  # JSON.stringify drops what JSON cannot hold; arguments never carry such values


def _js_equal(left: object, right: object) -> bool:
    """Return TypeBox's deep equality: JS `===` on primitives (1 == 1.0, true != 1)."""
    if _is_num(left) and _is_num(right):
        return bool(left == right)
    if isinstance(left, bool) or isinstance(right, bool) or left is None or right is None:
        return left is right
    if isinstance(left, str) or isinstance(right, str):
        return isinstance(left, str) and isinstance(right, str) and left == right
    if isinstance(left, Mapping) and isinstance(right, Mapping):
        return set(left) == set(right) and all(_js_equal(left[k], right[k]) for k in left)
    if isinstance(left, Sequence) and isinstance(right, Sequence):
        return len(left) == len(right) and all(
            _js_equal(a, b) for a, b in zip(left, right, strict=True)
        )
    return False


def _clone(value: JsonValue) -> JsonValue:
    """Return a plain deep copy (dicts and lists), like `structuredClone` of parsed JSON."""
    if isinstance(value, Mapping):
        return {k: _clone(v) for k, v in value.items()}
    if isinstance(value, Sequence) and not isinstance(value, str):
        return [_clone(v) for v in value]
    return value


def _type_matches(value: object, name: str) -> bool:
    match name:
        case "number":
            return _is_num(value) and math.isfinite(_to_double(value))  # type: ignore[arg-type]
        case "integer":
            return _is_num(value) and _to_double(value).is_integer()  # type: ignore[arg-type]
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


# -------------------------------------------------------------------------------------------------
# Coercion (Pi's coerceWithJsonSchema), on a private copy, in place where Pi mutates in place


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
            if isinstance(value, str) and _js_trim(value) != "":
                parsed = _js_number(value)
                ok = math.isfinite(parsed) and (kind == "number" or parsed.is_integer())
                if ok:
                    return _as_js_number(parsed)
            return value
        case "boolean":
            if value is None:
                return False
            if value == "true" and isinstance(value, str):
                return True
            if value == "false" and isinstance(value, str):
                return False
            if _is_num(value) and value == 1:
                return True
            if _is_num(value) and value == 0:
                return False
            return value
        case "string":
            if value is None:
                return ""
            if isinstance(value, bool):
                return "true" if value else "false"
            if _is_num(value):
                return js_number_to_string(value)
            return value
        case "null":
            if value == "" and isinstance(value, str):
                return None
            if (_is_num(value) and value == 0) or value is False:
                return None
            return value
        case _:
            return value


class _Coercer:
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
        in_union = len(kinds) > 1 and any(_type_matches(result, k) for k in kinds)
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
            coerced = self.coerce(_clone(value), member)
            if isinstance(member, Mapping) and self._member_check(member, coerced):
                return coerced
        return value

    def _coerce_object(self, value: dict[str, Any], schema: Mapping[str, Any]) -> None:
        properties = schema.get("properties")
        declared: set[str] = set()
        if isinstance(properties, Mapping):
            declared = set(properties)
            for key in _js_keys(properties):
                if key in value:
                    value[key] = self.coerce(value[key], properties[key])
        extra = schema.get("additionalProperties")
        if isinstance(extra, Mapping):
            for key in _js_keys(value):
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


# -------------------------------------------------------------------------------------------------
# jsonschema, extended with what TypeBox also accepts


def _items(
    validator: Any, items: Any, instance: Any, schema: Mapping[str, Any]
) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "array"):
        return
    if isinstance(items, list):  # draft-7 tuple form, which TypeBox still honours
        for index, (item, sub) in enumerate(zip(instance, items, strict=False)):
            yield from validator.descend(item, sub, path=index, schema_path=index)
        return
    start = len(schema.get("prefixItems", []))
    for index in range(start, len(instance)):
        yield from validator.descend(instance[index], items, path=index)


def _additional_items(
    validator: Any, extra: Any, instance: Any, schema: Mapping[str, Any]
) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "array") or not isinstance(schema.get("items"), list):
        return
    for index in range(len(schema["items"]), len(instance)):
        yield from validator.descend(instance[index], extra, path=index)


def _dependencies(
    validator: Any, dependencies: Any, instance: Any, schema: Mapping[str, Any]
) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    for key, dependency in dependencies.items():
        if key not in instance:
            continue
        if isinstance(dependency, list):
            for each in dependency:
                if each not in instance:
                    yield ValidationError(f"{each!r} is a dependency of {key!r}")
        else:
            yield from validator.descend(instance, dependency, schema_path=key)


def _ref(
    validator: Any, ref: Any, instance: Any, schema: Mapping[str, Any]
) -> Iterator[ValidationError]:
    # TypeBox treats a `$ref` it cannot resolve as a failing schema, not as a fatal error. That
    # matters for union members, which Pi compiles on their own, away from the root's `$defs`.
    try:
        errors = list(validator._validate_reference(ref=ref, instance=instance))
    except Unresolvable:
        errors = [ValidationError(f"cannot resolve $ref {ref!r}")]
    yield from errors


def _multiple_of(divisor: Any, value: Any) -> bool:
    """Return TypeBox's tolerant `multipleOf` (JS `%` is `math.fmod`)."""
    if not _is_num(value):
        return True
    if _to_double(value).is_integer() and divisor != 0 and math.fmod(1 / divisor, 1) == 0:
        return True
    try:
        mod = math.fmod(value, divisor)
    except (ValueError, ZeroDivisionError):
        return False
    return bool(min(abs(mod), abs(mod - divisor), abs(mod + divisor)) < 1e-10)


def _multiple_of_keyword(
    validator: Any, divisor: Any, instance: Any, schema: Mapping[str, Any]
) -> Iterator[ValidationError]:
    if not _multiple_of(divisor, instance):
        yield ValidationError(f"{instance!r} is not a multiple of {divisor}")


_PiValidator: Any = validators.extend(  # type: ignore[no-untyped-call]
    Draft202012Validator,
    {
        "items": _items,
        "additionalItems": _additional_items,
        "dependencies": _dependencies,
        "multipleOf": _multiple_of_keyword,
        "$ref": _ref,
    },
)
_FORMATS: Final = FormatChecker()


def _check_schema(schema: Schema) -> str | None:
    """Return why `schema` is not a JSON Schema (Draft 2020-12, or Draft 7 for tuples), or None."""
    if not isinstance(schema, Mapping | bool):
        return f"expected a JSON object, got {type(schema).__name__}"
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as modern:
        try:
            Draft7Validator.check_schema(schema)
        except SchemaError:
            return modern.message
    return None


# -------------------------------------------------------------------------------------------------
# TypeBox's error walk (ErrorSchema), for Pi's error lines


@final
class _Errors:
    """One TypeBox error context: keyword errors, capped at `_MAX_ERRORS`."""

    def __init__(self) -> None:
        self.items: list[tuple[str, str, dict[str, Any]]] = []

    def full(self) -> bool:
        return len(self.items) >= _MAX_ERRORS

    def add(self, keyword: str, path: str, params: dict[str, Any] | None = None) -> bool:
        if not self.full():
            self.items.append((keyword, path, params or {}))
        return False

    def extend(self, other: _Errors) -> bool:
        for item in other.items:
            self.add(*item)
        return False


def _fragment(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def _property_pattern(key: str) -> str:
    return "^" + re.escape(key) + "$"


def _limit(value: Any) -> str:
    return js_number_to_string(value) if _is_num(value) else str(value)


def _message(keyword: str, params: Mapping[str, Any]) -> str:
    """Return TypeBox's en_US message for one error."""
    simple = {
        "additionalProperties": "must not have additional properties",
        "anyOf": "must match a schema in anyOf",
        "boolean": "schema is false",
        "const": "must be equal to constant",
        "contains": "must contain at least 1 valid item",
        "enum": "must be equal to one of the allowed values",
        "not": "must not be valid",
        "oneOf": "must match exactly one schema in oneOf",
        "uniqueItems": "must not have duplicate items",
        "unevaluatedItems": "must not have unevaluated items",
        "unevaluatedProperties": "must not have unevaluated properties",
    }
    if keyword in simple:
        return simple[keyword]
    match keyword:
        case "dependencies" | "dependentRequired":
            deps = ", ".join(params["dependencies"])
            return f"must have properties {deps} when property {params['property']} is present"
        case "exclusiveMaximum" | "exclusiveMinimum" | "maximum" | "minimum":
            return f"must be {params['comparison']} {_limit(params['limit'])}"
        case "format":
            return f'must match format "{params["format"]}"'
        case "if":
            return f'must match "{params["failingKeyword"]}" schema'
        case (
            "maxItems" | "maxLength" | "maxProperties" | "minItems" | "minLength" | "minProperties"
        ):
            noun = {"Items": "items", "Length": "characters", "Properties": "properties"}[
                keyword[3:]
            ]
            side = "more" if keyword.startswith("max") else "fewer"
            return f"must not have {side} than {_limit(params['limit'])} {noun}"
        case "multipleOf":
            return f"must be multiple of {_limit(params['multipleOf'])}"
        case "pattern":
            return f'must match pattern "{params["pattern"]}"'
        case "propertyNames":
            return f"property names {', '.join(params['propertyNames'])} are invalid"
        case "required":
            return f"must have required properties {', '.join(params['requiredProperties'])}"
        case "type":
            kind = params["type"]
            return (
                f"must be {kind}"
                if isinstance(kind, str)
                else f"must be either {' or '.join(kind)}"
            )
        case _:
            return "an unknown validation error occurred"


def _display_path(keyword: str, path: str, params: Mapping[str, Any]) -> str:
    """Return Pi's path of an error: dots for slashes, `root` if empty, `.key` if key is missing."""
    base = path.removeprefix("/").replace("/", ".")
    if keyword == "required" and params.get("requiredProperties"):
        first = params["requiredProperties"][0]
        return f"{base}.{first}" if base else first
    return base or "root"


@final
class _Walker:
    """TypeBox's `ErrorSchema`: every failing keyword adds errors, in TypeBox's keyword order."""

    def __init__(self, root: Schema) -> None:
        self._root = root

    def check(self, schema: Schema, value: Any) -> bool:
        errors = _Errors()
        errors.full = lambda: False  # type: ignore[method-assign]  # a check has no cap
        return self.walk(errors, "", schema, value)

    def walk(self, ctx: _Errors, path: str, schema: Schema, value: Any) -> bool:
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
            if not any(_type_matches(value, k) if k in known else True for k in names):
                ok = ctx.add("type", path, {"type": kind})
        if isinstance(value, dict):
            ok = self._object(ctx, path, schema, value) and ok
        if isinstance(value, list):
            ok = self._array(ctx, path, schema, value) and ok
        if isinstance(value, str):
            ok = self._string(ctx, path, schema, value) and ok
        if _is_num(value):
            ok = self._number(ctx, path, schema, value) and ok
        return self._logic(ctx, path, schema, value) and ok

    def _all(self, results: Iterable[bool]) -> bool:
        return all(list(results))  # evaluate every operand, like TypeBox's EveryAll

    def _object(
        self, ctx: _Errors, path: str, schema: Mapping[str, Any], value: dict[str, Any]
    ) -> bool:
        ok = True
        keys = _js_keys(value)
        required = schema.get("required")
        if isinstance(required, list) and all(isinstance(k, str) for k in required):
            missing = [k for k in required if k not in value]
            if missing:
                ok = ctx.add("required", path, {"requiredProperties": missing})
        extra = schema.get("additionalProperties")
        if isinstance(extra, Mapping | bool):
            patterns = list(schema.get("patternProperties") or {})
            patterns += [_property_pattern(k) for k in schema.get("properties") or {}]
            regex = re.compile("(" + "|".join(patterns) + ")" if patterns else "(?!)")
            bad = [
                k
                for k in keys
                if not (
                    regex.search(k) or self.walk(ctx, f"{path}/{_fragment(k)}", extra, value[k])
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
                    not re.search(pattern, k)
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
                    for k in _js_keys(properties)
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
            if _is_num(schema.get(name)) and not fits(schema[name]):
                ok = ctx.add(name, path, {"limit": schema[name]})
        return ok

    def _dependencies(
        self, ctx: _Errors, path: str, name: str, entries: Mapping[str, Any], value: dict[str, Any]
    ) -> bool:
        results = []
        for key in _js_keys(entries):
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

    def _array(self, ctx: _Errors, path: str, schema: Mapping[str, Any], value: list[Any]) -> bool:
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
            if _is_num(schema.get("minContains")) and count < schema["minContains"]:
                ok = ctx.add("contains", path, {"minContains": schema["minContains"]})
            if _is_num(schema.get("maxContains")) and count > schema["maxContains"]:
                ok = ctx.add("contains", path, {"minContains": schema.get("minContains", 1)})
        for name, fits in (("minItems", len(value).__ge__), ("maxItems", len(value).__le__)):
            if _is_num(schema.get(name)) and not fits(schema[name]):
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
                duplicate = duplicate or any(_js_equal(item, other) for other in seen)
                seen.append(item)
            if duplicate:
                ok = ctx.add("uniqueItems", path)
        return ok

    def _string(self, ctx: _Errors, path: str, schema: Mapping[str, Any], value: str) -> bool:
        ok = True
        for name, fits in (("minLength", len(value).__ge__), ("maxLength", len(value).__le__)):
            if _is_num(schema.get(name)) and not fits(schema[name]):
                ok = ctx.add(name, path, {"limit": schema[name]})
        if isinstance(schema.get("format"), str) and not _FORMATS.conforms(value, schema["format"]):
            ok = ctx.add("format", path, {"format": schema["format"]})
        if isinstance(schema.get("pattern"), str) and not re.search(schema["pattern"], value):
            ok = ctx.add("pattern", path, {"pattern": schema["pattern"]})
        return ok

    def _number(self, ctx: _Errors, path: str, schema: Mapping[str, Any], value: float) -> bool:
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
                and _is_num(limit)
                and not fits(_to_double(value), _to_double(limit))
            ):
                ok = ctx.add(name, path, {"comparison": comparison, "limit": limit})
        if _is_num(schema.get("multipleOf")) and not _multiple_of(schema["multipleOf"], value):
            ok = ctx.add("multipleOf", path, {"multipleOf": schema["multipleOf"]})
        return ok

    def _logic(self, ctx: _Errors, path: str, schema: Mapping[str, Any], value: Any) -> bool:
        ok = True
        ref = schema.get("$ref")
        if isinstance(ref, str):
            target = self._resolve(ref)
            inner = _Errors()
            valid = target is not None and self.walk(inner, path, target, value)
            if not valid:
                ok = ctx.extend(inner)
        if "const" in schema and not _js_equal(value, schema["const"]):
            ok = ctx.add("const", path)
        if isinstance(schema.get("enum"), list) and not any(
            _js_equal(value, e) for e in schema["enum"]
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

    def _if(self, ctx: _Errors, path: str, schema: Mapping[str, Any], value: Any) -> bool:
        trial = _Errors()
        if self.walk(trial, path, schema["if"], value):
            return self.walk(trial, path, schema.get("then", True), value) or ctx.add(
                "if", path, {"failingKeyword": "then"}
            )
        return self.walk(ctx, path, schema.get("else", True), value) or ctx.add(
            "if", path, {"failingKeyword": "else"}
        )

    def _combinator(
        self, ctx: _Errors, path: str, name: str, members: list[Schema], value: Any
    ) -> bool:
        failed: list[_Errors] = []
        passed = 0
        for member in members:
            inner = _Errors()
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
            elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
                node = node[int(part)]
            else:
                return None
        return node


# -------------------------------------------------------------------------------------------------
# The compiled gate


@final
class ToolValidator:
    """A tool's compiled argument gate: jsonschema validators built once, reused for every call."""

    _cache: ClassVar[dict[int, tuple[weakref.ref[Tool], ToolValidator]]] = {}

    def __init__(self, name: str, parameters: Schema) -> None:
        problem = _check_schema(parameters)
        if problem is not None:
            raise ToolSchemaError(name, problem)
        self.name = name
        self.parameters = parameters
        self._validator = _PiValidator(parameters, format_checker=_FORMATS)
        self._members: dict[int, Validator | None] = {}
        self._coercer = _Coercer(self._member_valid)
        self._walker = _Walker(parameters)

    @classmethod
    def for_tool(cls, tool: Tool) -> ToolValidator:
        """Return the tool's validator, compiled once and cached.

        Cached per `Tool` object while it lives, and by schema content (a bounded LRU), so a
        host that rebuilds equal tools for every run does not pay for compiling them again.
        """
        key = id(tool)
        hit = cls._cache.get(key)
        if hit is not None and hit[0]() is tool:
            return hit[1]
        made = _by_content(tool.name, json.dumps(tool.parameters, default=repr))
        cls._cache[key] = (weakref.ref(tool, lambda _: cls._cache.pop(key, None)), made)
        return made

    def _member_valid(self, member: Schema, value: Any) -> bool:
        """Return whether a union member, compiled on its own as Pi does, accepts `value`."""
        key = id(member)
        if key not in self._members:
            try:
                self._members[key] = _PiValidator(member, format_checker=_FORMATS)
            except Exception:
                self._members[key] = None
        validator = self._members[key]
        if validator is None:
            return False
        try:
            return bool(validator.is_valid(value))
        except Exception:  # an unresolvable $ref or a bad pattern: Pi's compiled member rejects too
            return False

    def _valid(self, value: Any) -> bool:
        try:
            return bool(self._validator.is_valid(value))
        except (
            Exception
        ) as why:  # a schema jsonschema cannot evaluate (bad regex, unresolvable $ref)
            raise ToolSchemaError(self.name, str(why)) from why

    def coerce(self, arguments: JsonObject) -> dict[str, Any]:
        """Return Pi's coercion of a deep copy of `arguments` (the input is never mutated)."""
        args = _clone(arguments)
        assert isinstance(args, dict)
        coerced = self._coercer.coerce(args, self.parameters)
        # Pi refills the copy when a union swapped in a coerced clone. Coercion never turns an
        # object into a non-object, so Pi's branch for that case cannot arise from a JSON object.
        if coerced is not args and isinstance(coerced, dict):
            args.clear()
            args.update(coerced)
        return args

    def errors(self, value: Any) -> tuple[tuple[str, str], ...]:
        """Return Pi's (path, message) error lines for an invalid value."""
        ctx = _Errors()
        self._walker.walk(ctx, "", self.parameters, value)
        lines = tuple(
            (_display_path(k, p, params), _message(k, params)) for k, p, params in ctx.items
        )
        if lines:
            return lines
        # The walk missed what jsonschema saw (a keyword it does not model): use jsonschema's view.
        found = sorted(self._validator.iter_errors(value), key=lambda e: list(e.absolute_path))
        return tuple(
            (".".join(str(p) for p in e.absolute_path) or "root", e.message)
            for e in found[:_MAX_ERRORS]
        )

    def validate(self, call: ToolCall) -> dict[str, JsonValue]:
        """Return the call's coerced arguments, or raise `ToolArgumentsError` with Pi's text."""
        coerced = self.coerce(call.arguments)
        if self._valid(coerced):
            return coerced
        errors = self.errors(coerced)
        lines = (
            "\n".join(f"  - {path}: {message}" for path, message in errors)
            or "Unknown validation error"
        )
        received = js_stringify(call.arguments)
        text = (
            f'Validation failed for tool "{call.name}":\n{lines}\n\nReceived arguments:\n{received}'
        )
        raise ToolArgumentsError(call.name, errors, text)


@functools.lru_cache(maxsize=256)
def _by_content(name: str, schema_json: str) -> ToolValidator:
    return ToolValidator(name, json.loads(schema_json))


def validate_tool_arguments(tool: Tool, call: ToolCall) -> dict[str, JsonValue]:
    """Return `call`'s arguments coerced and validated against `tool.parameters`, as Pi's gate does.

    Raises `ToolArgumentsError` (Pi's failure text) or `ToolSchemaError` (an unusable schema).

    >>> schema = {"type": "object", "properties": {"n": {"type": "number"}}}
    >>> tool = Tool("V", "", schema)
    >>> validate_tool_arguments(tool, ToolCall("c1", "V", {"n": "0x10"}))
    {'n': 16}
    """
    return ToolValidator.for_tool(tool).validate(call)


__all__ = [
    "ToolArgumentsError",
    "ToolSchemaError",
    "ToolValidator",
    "js_number_to_string",
    "js_stringify",
    "validate_tool_arguments",
]
