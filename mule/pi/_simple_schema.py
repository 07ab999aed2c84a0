"""jsonschema's verdict for the plain schemas most tools declare, without importing jsonschema.

jsonschema and its meta-schemas (referencing, jsonschema_specifications) cost a fresh process
more than a whole run; a tool's gate needs them only to decide validity and to check that the
schema is one. For a schema built only from the keywords below, with well-formed values,
`simple_check` returns a function giving jsonschema's own verdict (Draft 2020-12 with Pi's
`multipleOf`, the dialect of `_schema`): the same type checker, the same comparisons, the same
keyword semantics. Any other keyword, or a keyword value the meta-schema might reject, returns
None, and the gate compiles the schema with jsonschema as before: this never decides a schema
jsonschema would have judged differently, it only declines.

The error lines of a failure never came from here: they are TypeBox's walk (`_error_walk`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mule.pi._schema import multiple_of

Check = Callable[[Any], bool]


def _is_integer(v: Any) -> bool:
    # jsonschema's Draft 4+ integer: an int, or a float with an integral value; never a bool.
    if isinstance(v, bool):
        return False
    return isinstance(v, int) or (isinstance(v, float) and v.is_integer())


def _is_number(v: Any) -> bool:
    if isinstance(v, bool):
        return False
    if isinstance(v, int | float):
        return True
    import numbers  # jsonschema's test, for what JSON never holds (Decimal, Fraction...)

    return isinstance(v, numbers.Number)


def _is_string(v: Any) -> bool:
    return isinstance(v, str)


def _is_array(v: Any) -> bool:
    return isinstance(v, list)


def _is_boolean(v: Any) -> bool:
    return isinstance(v, bool)


def _is_object(v: Any) -> bool:
    return isinstance(v, dict)


def _is_null(v: Any) -> bool:
    return v is None


def _anything(_: Any) -> bool:
    return True


def _nothing(_: Any) -> bool:
    return False


_TYPES: dict[str, Check] = {
    "array": _is_array,
    "boolean": _is_boolean,
    "integer": _is_integer,
    "null": _is_null,
    "number": _is_number,
    "object": _is_object,
    "string": _is_string,
}
_IS_NUMBER = _is_number

# Keywords that only annotate (no effect on validity), with the type the meta-schema requires.
_ANNOTATIONS: dict[str, Check] = {
    "title": _is_string,
    "description": _is_string,
    "$comment": _is_string,
    "default": _anything,
    "examples": _is_array,
    "deprecated": _is_boolean,
    "readOnly": _is_boolean,
    "writeOnly": _is_boolean,
}
_BOUNDS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")
_COUNTS = ("minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties")
_KEYWORDS = frozenset(
    {
        "type",
        "properties",
        "required",
        "additionalProperties",
        "items",
        "enum",
        "const",
        "multipleOf",
        *_BOUNDS,
        *_COUNTS,
        *_ANNOTATIONS,
    }
)


class _Declined(Exception):
    """The schema is outside the subset: jsonschema decides."""


def simple_check(schema: Any) -> Check | None:
    """Return jsonschema's validity check for a schema in the plain subset, or None."""
    try:
        return _compile(schema)
    except _Declined:
        return None


def _count(value: Any) -> int:
    # The meta-schema's nonNegativeInteger; an integral float would pass it too (declined).
    if type(value) is not int or value < 0:
        raise _Declined
    return value


def _compile(schema: Any) -> Check:
    if schema is True:
        return _anything
    if schema is False:
        return _nothing
    if type(schema) is not dict or not _KEYWORDS.issuperset(schema):
        raise _Declined
    # In the schema's key order, as jsonschema's `is_valid` stops at the first failing keyword
    # (which matters only if a later one would raise: Pi's multipleOf on a huge integer).
    checks: list[Check] = []
    for key, value in schema.items():
        annotation = _ANNOTATIONS.get(key)
        if annotation is not None:
            if not annotation(value):
                raise _Declined
            continue
        checks.append(_keyword(key, value, schema))
    if not checks:
        return _anything
    if len(checks) == 1:
        return checks[0]
    every = tuple(checks)
    return lambda v: all(check(v) for check in every)


def _keyword(key: str, value: Any, schema: dict[str, Any]) -> Check:
    if key == "type":
        return _type(value)
    if key == "enum":
        return _enum(value)
    if key == "const":
        return _const(value)
    if key in _BOUNDS:
        return _bound(key, value)
    if key == "multipleOf":
        if not _IS_NUMBER(value) or not value > 0:
            raise _Declined
        return lambda v: multiple_of(value, v)
    if key in _COUNTS:
        return _length(key, _count(value))
    if key == "required":
        return _required(value)
    if key == "properties":
        return _properties(value)
    if key == "additionalProperties":
        return _additional(value, schema.get("properties", {}))
    return _items(value)  # the last keyword of _KEYWORDS


def _type(declared: Any) -> Check:
    names = [declared] if type(declared) is str else declared
    if type(names) is not list or not names or len(set(map(str, names))) != len(names):
        raise _Declined  # the meta-schema wants a type name or a non-empty list of unique ones
    if any(type(n) is not str or n not in _TYPES for n in names):
        raise _Declined
    tests = tuple(_TYPES[n] for n in names)
    if len(tests) == 1:
        return tests[0]
    return lambda v: any(test(v) for test in tests)


def _enum(members: Any) -> Check:
    # Strings only: jsonschema's `equal` compares a string with `==` and a string never equals
    # a non-string; other members (1 against True, 1 against 1.0) are its business.
    if type(members) is not list or any(type(m) is not str for m in members):
        raise _Declined
    allowed = frozenset(members)
    return lambda v: isinstance(v, str) and v in allowed


def _const(value: Any) -> Check:
    if type(value) is not str:
        raise _Declined
    return lambda v: isinstance(v, str) and v == value


def _bound(key: str, limit: Any) -> Check:
    if not _IS_NUMBER(limit):
        raise _Declined
    n = _IS_NUMBER
    if key == "minimum":
        return lambda v: not (n(v) and v < limit)
    if key == "maximum":
        return lambda v: not (n(v) and v > limit)
    if key == "exclusiveMinimum":
        return lambda v: not (n(v) and v <= limit)
    return lambda v: not (n(v) and v >= limit)


def _length(key: str, limit: int) -> Check:
    kind = _TYPES[{"Length": "string", "Items": "array", "Properties": "object"}[key[3:]]]
    if key.startswith("min"):
        return lambda v: not (kind(v) and len(v) < limit)
    return lambda v: not (kind(v) and len(v) > limit)


def _required(names: Any) -> Check:
    if type(names) is not list or any(type(n) is not str for n in names):
        raise _Declined
    if len(set(names)) != len(names):
        raise _Declined  # the meta-schema's stringArray is uniqueItems
    wanted = tuple(names)
    return lambda v: not isinstance(v, dict) or all(name in v for name in wanted)


def _properties(declared: Any) -> Check:
    if type(declared) is not dict or any(type(k) is not str for k in declared):
        raise _Declined
    each = tuple((key, _compile(sub)) for key, sub in declared.items())

    def check(v: Any) -> bool:
        if not isinstance(v, dict):
            return True
        return all(sub(v[key]) for key, sub in each if key in v)

    return check


def _additional(extra: Any, declared: Any) -> Check:
    sub = _compile(extra)
    if type(declared) is not dict:
        raise _Declined
    known = frozenset(declared)

    def check(v: Any) -> bool:
        if not isinstance(v, dict):
            return True
        return all(sub(value) for key, value in v.items() if key not in known)

    return check


def _items(items: Any) -> Check:
    # Only the 2020-12 form (one schema); the array form is Draft 7's and `_schema`'s.
    sub = _compile(items)
    return lambda v: not isinstance(v, list) or all(sub(x) for x in v)


__all__ = ["Check", "simple_check"]
