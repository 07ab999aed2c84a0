"""A tool schema compiled into one check, with pi-schema 1.6.0's verdicts on JSON values.

pi-ai 1.6.0 validates tool arguments with `@earendil-works/pi-schema` (`compile(schema, {formats,
coerce: true, unresolvedRefs: "reject"})`). This is that check for the values Python holds for
JSON: keywords grouped by the type they constrain, each subschema compiled once into a closure
(cached by node, so a recursive `$ref` goes through an indirection), JS value semantics (numbers
are doubles, `true` is not 1, string lengths count code points, object keys in JS order).

What pi-schema does and this follows: draft 2020-12 always (also `items` arrays with
`additionalItems`, and draft 7's `dependencies`); `format` checked for the formats pi-schema
knows (`_schema_formats`), others are annotations; `pattern` as an ECMAScript regex
(`_schema_regex`); a `$ref` that names nothing fails only where it stands. A subschema that is
neither an object nor a boolean does not compile (`SchemaCompileError`), as in pi-schema.

Not followed (non-JSON values never reach a tool): `bytes`, `bigint` and `undefined` types
match nothing here; a bookended `$dynamicRef` resolves statically, like a `$ref`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any, Final, TypeAlias, final

from mule.pi._js_values import is_js_number, js_equal, js_number_to_string, to_double
from mule.pi._schema_refs import Resolver, is_schema_object
from mule.pi._schema_regex import compile_pattern

# A schema as Pi sees it: usually a mapping; `true`/`false` are schemas too.
Schema: TypeAlias = Any
Check: TypeAlias = Callable[[Any], bool]


def format_check(name: object) -> Callable[[str], bool] | None:
    """Return the check of a `format` pi-schema knows, or None (any other is an annotation).

    The formats' regexes load with the first schema that names one: most tool schemas name
    none, and compiling them was a tenth of `import mule`.
    """
    if not isinstance(name, str):
        return None
    from mule.pi._schema_formats import FORMATS

    return FORMATS.get(name)


class SchemaCompileError(ValueError):
    """A schema pi-schema would not compile (a subschema that is not an object or a boolean)."""


def always(_: Any) -> bool:
    return True


def never(_: Any) -> bool:
    return False


def is_number(v: Any) -> bool:
    """JS `Number.isFinite` on a JSON value (a bool is no number)."""
    return is_js_number(v) and math.isfinite(to_double(v))


def is_integer(v: Any) -> bool:
    """JS `Number.isInteger` on a JSON value."""
    if not is_js_number(v):
        return False
    d = to_double(v)
    return math.isfinite(d) and d.is_integer()


def is_object(v: Any) -> bool:
    return isinstance(v, dict)


def is_array(v: Any) -> bool:
    return isinstance(v, list)


def _is_string(v: Any) -> bool:
    return isinstance(v, str)


def _is_boolean(v: Any) -> bool:
    return isinstance(v, bool)


def _is_null(v: Any) -> bool:
    return v is None


TYPE_CHECKS: Final[dict[str, Check]] = {
    "string": _is_string,
    "number": is_number,
    "integer": is_integer,
    "boolean": _is_boolean,
    "null": _is_null,
    "array": is_array,
    "object": is_object,
    # JS-only types: no JSON value has them.
    "bytes": never,
    "bigint": never,
    "undefined": never,
}

NEUTRAL_KEYWORDS: Final = frozenset(
    {
        "$schema",
        "$comment",
        "title",
        "description",
        "default",
        "examples",
        "deprecated",
        "readOnly",
        "writeOnly",
        "$defs",
        "definitions",
        "contentEncoding",
        "contentMediaType",
        "minContains",
        "maxContains",
        "$vocabulary",
    }
)


def type_check(types: list[Any]) -> Check:
    """Any of the named types (unknown names match nothing)."""
    checks = [TYPE_CHECKS[t] for t in types if isinstance(t, str) and t in TYPE_CHECKS]
    if len(types) == 1:
        return checks[0] if checks else never
    return lambda v: any(check(v) for check in checks)


def number_bound(value: Any) -> float | None:
    """Return a number keyword's value as a double (pi-schema reads only numbers)."""
    return to_double(value) if is_js_number(value) else None


def code_points(text: str) -> int:
    return len(text)


def is_multiple(value: Any, divisor: Any) -> bool:
    """pi-schema's `multipleOf`: exact for decimals (0.0075 is a multiple of 0.0001)."""
    v, d = to_double(value), to_double(divisor)
    try:
        q = v / d
    except ZeroDivisionError:
        q = math.nan
    if math.isfinite(q) and q.is_integer():
        return True
    if not math.isfinite(q):
        try:
            return math.fmod(v, d) == 0
        except ValueError:
            return False
    vc, ve = _decimal(v)
    dc, de = _decimal(d)
    if ve >= de:
        return bool((vc * 10 ** (ve - de)) % dc == 0)
    return bool(vc % (dc * 10 ** (de - ve)) == 0)


def _decimal(x: float) -> tuple[int, int]:
    """Return (coefficient, exponent) of JS `Math.abs(x).toString()`."""
    mantissa, _, exponent = js_number_to_string(abs(x)).partition("e")
    point = mantissa.find(".")
    fraction = 0 if point < 0 else len(mantissa) - point - 1
    return int(mantissa.replace(".", "")), int(exponent or "0") - fraction


@final
class Compiler:
    """One tool schema's checks: `root()` is the whole schema's; `check(node, base)` any node's."""

    def __init__(self, schema: Schema, resolver: Resolver) -> None:
        self.schema = schema
        self.r = resolver
        self._cache: dict[int, Check] = {}

    def root(self) -> Check:
        return self.check(self.schema, self.r.root_base)

    def check(self, node: Any, base: str) -> Check:
        """Return the check of `node` (cached; a node being built is reached through a slot)."""
        if node is True:
            return always
        if node is False:
            return never
        if not is_schema_object(node):
            raise SchemaCompileError(
                f"A schema must be an object or a boolean, got {_json_text(node)}"
            )
        cached = self._cache.get(id(node))
        if cached is not None:
            return cached
        bare = self._bare_type(node)
        if bare is not None:
            return bare
        slot: list[Check] = []
        self._cache[id(node)] = lambda v: bool(slot[0](v))
        built = self._build(node, self.r.base_for(node, base))
        slot.append(built)
        self._cache[id(node)] = built
        return built

    def _bare_type(self, node: Mapping[str, Any]) -> Check | None:
        kind: Any = None
        for key in node:
            if key == "type":
                kind = node["type"]
            elif key not in NEUTRAL_KEYWORDS:
                return None
        if "type" not in node:
            return always
        return TYPE_CHECKS.get(kind) if isinstance(kind, str) else None

    def _build(self, node: Mapping[str, Any], base: str) -> Check:
        if "unevaluatedProperties" in node or "unevaluatedItems" in node:
            from mule.pi._schema_unevaluated import unevaluated_check

            return unevaluated_check(self, node, base)
        return self.plain(node, base)

    def plain(self, node: Mapping[str, Any], base: str) -> Check:
        """Every keyword of `node`, without tracking what was evaluated."""
        parts: list[Check] = []
        raw = node.get("type")
        types = None if "type" not in node else raw if isinstance(raw, list) else [raw]
        single = types[0] if types is not None and len(types) == 1 else None
        if single == "bytes":
            parts.append(never)
        else:
            groups = (
                self._string_group(node, single == "string"),
                self._number_group(node, single),
                self._object_group(node, base, single == "object"),
                self._array_group(node, base, single == "array"),
            )
            parts.extend(g for g in groups if g is not None)
            in_group = (
                (single == "string" and groups[0] is not None)
                or (single in ("number", "integer", "bigint") and groups[1] is not None)
                or (single == "object" and groups[2] is not None)
                or (single == "array" and groups[3] is not None)
            )
            if types is not None and not in_group:
                parts.insert(0, type_check(types))
        self._in_place(node, base, parts)
        return _and(parts)

    def _in_place(self, node: Mapping[str, Any], base: str, parts: list[Check]) -> None:
        if isinstance(node.get("enum"), list):
            members = list(node["enum"])
            parts.append(lambda v: any(js_equal(v, m) for m in members))
        if "const" in node:
            constant = node["const"]
            parts.append(lambda v: js_equal(v, constant))
        if isinstance(node.get("allOf"), list):
            parts.append(_and([self.check(s, base) for s in node["allOf"]]))
        if isinstance(node.get("anyOf"), list):
            branches = [self.check(s, base) for s in node["anyOf"]]
            parts.append(lambda v: any(b(v) for b in branches))
        if isinstance(node.get("oneOf"), list):
            options = [self.check(s, base) for s in node["oneOf"]]
            parts.append(lambda v: sum(1 for o in options if o(v)) == 1)
        if "not" in node:
            negated = self.check(node["not"], base)
            parts.append(lambda v: not negated(v))
        if "if" in node and ("then" in node or "else" in node):
            cond = self.check(node["if"], base)
            then = self.check(node["then"], base) if "then" in node else always
            other = self.check(node["else"], base) if "else" in node else always
            parts.append(lambda v: then(v) if cond(v) else other(v))
        for key in ("$ref", "$dynamicRef"):
            if isinstance(node.get(key), str):
                parts.append(self.ref(node[key], base))

    def ref(self, ref: str, base: str) -> Check:
        target, target_base = self.r.resolve(ref, base)
        return self.check(target, target_base)

    def _string_group(self, node: Mapping[str, Any], strict: bool) -> Check | None:
        low = number_bound(node.get("minLength"))
        high = number_bound(node.get("maxLength"))
        source = node.get("pattern")
        test = compile_pattern(source) if isinstance(source, str) else None
        fmt = format_check(node.get("format"))
        if low is None and high is None and test is None and fmt is None:
            return None
        lo = low if low is not None else 0.0
        hi = high if high is not None else math.inf

        def check(v: Any) -> bool:
            if not isinstance(v, str):
                return not strict
            n = code_points(v)
            return lo <= n <= hi and (test is None or test(v)) and (fmt is None or fmt(v))

        return check

    def _number_group(self, node: Mapping[str, Any], single: Any) -> Check | None:
        bounds = [
            number_bound(node.get(k))
            for k in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")
        ]
        divisor = node.get("multipleOf") if is_js_number(node.get("multipleOf")) else None
        if all(b is None for b in bounds) and divisor is None:
            return None
        low, high, xlow, xhigh = (
            b if b is not None else d
            for b, d in zip(bounds, (-math.inf, math.inf, -math.inf, math.inf), strict=True)
        )
        mode = (
            {"number": 1, "integer": 2, "bigint": 3}.get(single, 0)
            if isinstance(single, str)
            else 0
        )

        def check(v: Any) -> bool:
            if not is_js_number(v):
                return mode == 0
            if mode == 3 or (mode != 0 and not is_number(v)):
                return False
            if mode == 2 and not is_integer(v):
                return False
            d = to_double(v)
            return (
                low <= d <= high
                and d > xlow
                and d < xhigh
                and (divisor is None or is_multiple(v, divisor))
            )

        return check

    def _object_group(self, node: Mapping[str, Any], base: str, strict: bool) -> Check | None:
        parts: list[Check] = []
        core = self._object_core(node, base)
        if core is not None:
            parts.append(core)
        if "propertyNames" in node:
            names = self.check(node["propertyNames"], base)
            parts.append(lambda v: all(names(k) for k in v))
        low = number_bound(node.get("minProperties"))
        high = number_bound(node.get("maxProperties"))
        if low is not None or high is not None:
            lo = low if low is not None else 0.0
            hi = high if high is not None else math.inf
            parts.append(lambda v: lo <= len(v) <= hi)
        required_when: list[tuple[str, list[Any]]] = []
        schema_when: list[tuple[str, Check]] = []
        if isinstance(node.get("dependentRequired"), dict):
            required_when.extend(
                (k, d) for k, d in node["dependentRequired"].items() if isinstance(d, list)
            )
        if isinstance(node.get("dependentSchemas"), dict):
            schema_when.extend(
                (k, self.check(s, base)) for k, s in node["dependentSchemas"].items()
            )
        if isinstance(node.get("dependencies"), dict):
            for k, d in node["dependencies"].items():
                if isinstance(d, list):
                    required_when.append((k, d))
                else:
                    schema_when.append((k, self.check(d, base)))
        if required_when:
            parts.append(
                lambda v: all(
                    all(_key(r) in v for r in names) for k, names in required_when if k in v
                )
            )
        if schema_when:
            parts.append(lambda v: all(check(v) for k, check in schema_when if k in v))
        if not parts:
            return is_object if strict else None
        inner = _and(parts)
        if strict:
            return lambda v: isinstance(v, dict) and inner(v)
        return lambda v: not isinstance(v, dict) or inner(v)

    def _object_core(self, node: Mapping[str, Any], base: str) -> Check | None:
        properties = node.get("properties") if is_schema_object(node.get("properties")) else {}
        assert isinstance(properties, dict)
        required = node.get("required") if isinstance(node.get("required"), list) else []
        assert isinstance(required, list)
        required_keys = [k for k in required if isinstance(k, str)]
        patterns = (
            node.get("patternProperties") if is_schema_object(node.get("patternProperties")) else {}
        )
        assert isinstance(patterns, dict)
        additional = node.get("additionalProperties", True)
        if not properties and not required_keys and not patterns and additional is True:
            return None
        declared = [(k, self.check(s, base)) for k, s in properties.items()]
        pats = [(compile_pattern(p), self.check(s, base)) for p, s in patterns.items()]
        extra = None if additional is True else self.check(additional, base)
        known = set(properties)
        wanted = tuple(required_keys)

        def check(v: Any) -> bool:
            if not all(k in v for k in wanted):
                return False
            if not all(check_(v[k]) for k, check_ in declared if k in v):
                return False
            if not pats and extra is None:
                return True
            for k, value in v.items():
                matched = k in known
                for test, sub in pats:
                    if test(k):
                        matched = True
                        if not sub(value):
                            return False
                if not matched and extra is not None and not extra(value):
                    return False
            return True

        return check

    def _array_group(self, node: Mapping[str, Any], base: str, strict: bool) -> Check | None:
        prefix: list[Any] = []
        rest: Any
        if isinstance(node.get("items"), list):
            prefix = node["items"]
            rest = node.get("additionalItems", True)
        else:
            if isinstance(node.get("prefixItems"), list):
                prefix = node["prefixItems"]
            rest = node.get("items", True)
        heads = [self.check(s, base) for s in prefix]
        tail = None if rest is True else self.check(rest, base)
        parts: list[Check] = []
        if heads or tail is not None:
            n = len(heads)

            def items(v: list[Any]) -> bool:
                if not all(h(x) for h, x in zip(heads, v, strict=False)):
                    return False
                return tail is None or all(tail(x) for x in v[n:])

            parts.append(items)
        low = number_bound(node.get("minItems"))
        high = number_bound(node.get("maxItems"))
        if low is not None or high is not None:
            lo = low if low is not None else 0.0
            hi = high if high is not None else math.inf
            parts.append(lambda v: lo <= len(v) <= hi)
        if "contains" in node:
            parts.append(self.contains(node, base))
        if node.get("uniqueItems") is True:
            parts.append(unique)
        if not parts:
            return is_array if strict else None
        inner = _and(parts)
        if strict:
            return lambda v: isinstance(v, list) and inner(v)
        return lambda v: not isinstance(v, list) or inner(v)

    def contains(self, node: Mapping[str, Any], base: str) -> Check:
        """`contains` with `minContains`/`maxContains` (on an array)."""
        matches = self.check(node["contains"], base)
        low = number_bound(node.get("minContains"))
        high = number_bound(node.get("maxContains"))
        lo = 1.0 if low is None else low
        hi = math.inf if high is None else high
        return lambda v: lo <= sum(1 for x in v if matches(x)) <= hi


def unique(v: list[Any]) -> bool:
    """`uniqueItems` on an array: no two items JSON-equal."""
    return not any(js_equal(v[i], v[j]) for i in range(1, len(v)) for j in range(i))


def _key(name: Any) -> str | None:
    """Return the property key JS looks up for `name` (`Object.hasOwn(o, 1)` looks up "1")."""
    if isinstance(name, str):
        return name
    if name is None or isinstance(name, bool):
        return {None: "null", True: "true", False: "false"}[name]
    if is_js_number(name):
        return js_number_to_string(name)
    return None  # an object or array: its text is no key a tool's arguments hold


def _and(parts: list[Check]) -> Check:
    if not parts:
        return always
    if len(parts) == 1:
        return parts[0]
    every = tuple(parts)
    return lambda v: all(p(v) for p in every)


def _json_text(value: Any) -> str:
    from mule.pi._js_values import js_json

    return js_json(value)


__all__ = [
    "NEUTRAL_KEYWORDS",
    "TYPE_CHECKS",
    "Check",
    "Compiler",
    "Schema",
    "SchemaCompileError",
    "always",
    "is_array",
    "is_integer",
    "is_multiple",
    "is_number",
    "is_object",
    "never",
    "type_check",
    "unique",
]
