"""JavaScript value semantics that Pi's tool-argument gate depends on.

`Number(text)`, `String(number)`, `JSON.stringify(value, null, 2)`, `===` deep equality, property
key order and JSON-schema type tests, as JS (and so pi-ai and TypeBox) see JSON values held by
Python. Numbers are JS doubles: a parsed integral value within 2**53 comes back as `int`,
otherwise as `float`; an `int` beyond 2**53 prints as the double JS sees.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any, Final

from mule.pi._json import JsonValue

_SAFE_INT: Final = 2**53

# ECMAScript WhiteSpace + LineTerminator, what trim() and Number() strip (not Python's isspace).
_JS_SPACE: Final = (
    "\t\n\v\f\r \xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a"
    "\u2028\u2029\u202f\u205f\u3000\ufeff"
)
# Unambiguous (`[0-9]+(?:\.[0-9]*)?`, not `[0-9]+\.?[0-9]*`): a failed match on a long run of
# digits backtracks linearly, not quadratically (8,000 digits took a second; issue 30).
_DECIMAL: Final = re.compile(
    r"[+-]?(?:Infinity|(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)"
)
_RADIX: Final = {
    "x": (16, re.compile(r"[0-9a-fA-F]+")),
    "o": (8, re.compile(r"[0-7]+")),
    "b": (2, re.compile(r"[01]+")),
}
_ARRAY_INDEX: Final = re.compile(r"0|[1-9][0-9]*")
_DIGITS: Final = frozenset("0123456789")


def is_js_number(value: object) -> bool:
    """Return whether `value` is a JS number (Python's bool is an int, but never a JS number)."""
    return isinstance(value, int | float) and not isinstance(value, bool)


def js_trim(text: str) -> str:
    return text.strip(_JS_SPACE)


def js_number(text: str) -> float:
    """Return JS `Number(text)` (NaN when JS would give NaN)."""
    body = js_trim(text)
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


def as_json_number(parsed: float) -> int | float:
    """Return a parsed double as Python holds JSON numbers: `int` when integral and exact."""
    if math.isfinite(parsed) and parsed.is_integer() and abs(parsed) <= _SAFE_INT:
        return int(parsed)
    return parsed


def to_double(value: int | float) -> float:
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
    number = to_double(value)
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


def js_keys(mapping: Mapping[str, Any]) -> list[str]:
    """Return a mapping's keys in JS order: array-index keys ascending, then insertion order."""
    keys = list(mapping)
    # At most 10 digits: an index is below 2**32 - 1 (and int() of a 4,300-digit key raises).
    index = [
        k
        for k in keys
        if k[:1] in _DIGITS and len(k) <= 10 and _ARRAY_INDEX.fullmatch(k) and int(k) < 2**32 - 1
    ]
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
    if is_js_number(value):
        assert isinstance(value, int | float)
        number = to_double(value) if isinstance(value, float) else value
        return js_number_to_string(number) if math.isfinite(to_double(number)) else "null"
    if isinstance(value, str):
        return _js_string_literal(value)
    inner = "\n" + indent * (_depth + 1)
    if isinstance(value, Mapping):
        if not value:
            return "{}"
        items = [
            f"{_js_string_literal(k)}: {js_stringify(value[k], indent, _depth + 1)}"
            for k in js_keys(value)
        ]
        return "{" + inner + ("," + inner).join(items) + "\n" + indent * _depth + "}"
    if isinstance(value, Sequence):
        if not value:
            return "[]"
        items = [js_stringify(item, indent, _depth + 1) for item in value]
        return "[" + inner + ("," + inner).join(items) + "\n" + indent * _depth + "]"
    return "null"  # JSON.stringify drops what JSON cannot hold; arguments never carry such values


def js_json(value: object) -> str:
    """Return JS `JSON.stringify(value)` (compact) for a JSON value.

    >>> js_json({"b": [1.0, None], "1": "x"})
    '{"1":"x","b":[1,null]}'
    """
    if isinstance(value, Mapping):
        return (
            "{"
            + ",".join(f"{_js_string_literal(k)}:{js_json(value[k])}" for k in js_keys(value))
            + "}"
        )
    if isinstance(value, list | tuple):
        return "[" + ",".join(js_json(item) for item in value) + "]"
    return js_stringify(value)


def js_equal(left: object, right: object) -> bool:
    """Return TypeBox's deep equality: JS `===` on primitives (1 == 1.0, true != 1)."""
    if is_js_number(left) and is_js_number(right):
        return bool(left == right)
    if isinstance(left, bool) or isinstance(right, bool) or left is None or right is None:
        return left is right
    if isinstance(left, str) or isinstance(right, str):
        return isinstance(left, str) and isinstance(right, str) and left == right
    if isinstance(left, Mapping) and isinstance(right, Mapping):
        return set(left) == set(right) and all(js_equal(left[k], right[k]) for k in left)
    if isinstance(left, Sequence) and isinstance(right, Sequence):
        return len(left) == len(right) and all(
            js_equal(a, b) for a, b in zip(left, right, strict=True)
        )
    return False


def clone_json(value: JsonValue) -> JsonValue:
    """Return a plain deep copy (dicts and lists), like `structuredClone` of parsed JSON."""
    if isinstance(value, Mapping):
        return {k: clone_json(v) for k, v in value.items()}
    if isinstance(value, Sequence) and not isinstance(value, str):
        return [clone_json(v) for v in value]
    return value


def type_matches(value: object, name: str) -> bool:
    match name:
        case "number":
            return is_js_number(value) and math.isfinite(to_double(value))  # type: ignore[arg-type]
        case "integer":
            return is_js_number(value) and to_double(value).is_integer()  # type: ignore[arg-type]
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


__all__ = [
    "as_json_number",
    "clone_json",
    "is_js_number",
    "js_equal",
    "js_json",
    "js_keys",
    "js_number",
    "js_number_to_string",
    "js_stringify",
    "js_trim",
    "to_double",
    "type_matches",
]
