"""JSON value types shared by Pi's data model, and JavaScript-style JSON text.

`stringify` writes what Pi's `JSON.stringify` writes (compact separators, non-ASCII kept as it
is, numbers in JavaScript's form: `1`, not `1.0`; `0.000036`, not `3.6e-05`). `loads` is the one
JSON decoder of everything outside data enters by (provider chunks, tool arguments, codecs,
journals): bounded, so that hostile text gets a typed `JsonError` and never a `RecursionError`,
a number Python cannot convert, or an object too deep for the code that walks it later.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, ForwardRef, TypeAlias

# A JSON value as Python holds it after `json.loads`. Sequences and mappings are accepted so that
# immutable containers (tuples, MappingProxyType) are JSON values too.
if TYPE_CHECKING:
    JsonValue: TypeAlias = (
        bool | int | float | str | Sequence["JsonValue"] | Mapping[str, "JsonValue"] | None
    )
else:
    # The recursion names its module: a class exported by a face (whose globals do not hold
    # JsonValue) still resolves its annotations with typing.get_type_hints.
    _JSON = ForwardRef("JsonValue", module=__name__)
    JsonValue = bool | int | float | str | Sequence[_JSON] | Mapping[str, _JSON] | None
JsonObject: TypeAlias = Mapping[str, JsonValue]

# One encoder, built once: json.dumps builds a new one per call when given separators.
_compact = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode

# A JSON string (skipped whole), or a float as Python spells it where JavaScript does not: an
# integral one (`1.0`, `-0.0`) or a small one (`3.6e-05`). json writes floats with
# float.__repr__, so these are the only forms; JavaScript writes each as `String(x)`. Floats
# from 1e16 keep Python's `1e+16`: JS writes their digits, which Python would read back as an
# int of another value (JSON parsed by JS reads either text as the same double).
_PY_FLOAT = re.compile(r'"(?:[^"\\]|\\.)*"|-?[0-9]+\.0(?![0-9])|-?[0-9](?:\.[0-9]+)?e-[0-9]+')


_SURROGATE = re.compile("[\ud800-\udfff]")


def _escape_surrogate(m: re.Match[str]) -> str:
    return f"\\u{ord(m.group(0)):04x}"


def _js_float(m: re.Match[str]) -> str:
    token = m.group(0)
    if token[0] == '"':
        return token
    from mule.pi._js_values import js_number_to_string  # it imports this module's types

    return js_number_to_string(float(token))


def stringify(value: object) -> str:
    """Serialise like JavaScript's `JSON.stringify`: no spaces, non-ASCII kept, JS numbers.

    The text is scanned again only when a float in Python's spelling can be in it at all; the
    wire codecs turn integral floats into ints first, so their output rarely is.

    >>> stringify({"a": [1.0, "ü", 3.6e-05, -0.0], "b": None, "c": "1.0"})
    '{"a":[1,"ü",0.000036,0],"b":null,"c":"1.0"}'
    """
    text = _compact(value)
    # A lone surrogate (JSON's "\ud800" decodes to one) is escaped, as JS's well-formed
    # JSON.stringify does: raw, it is text no UTF-8 writer (SQLite, HTTP) can encode.
    # `isascii` is O(1) on str, so only non-ASCII text pays for the search.
    if not text.isascii() and _SURROGATE.search(text):
        text = _SURROGATE.sub(_escape_surrogate, text)
    # Only a float ending in ".0" (then `,`, `]`, `}` or the end) or with an exponent is
    # respelt: a float such as 0.05 alone must not cost a second pass over a long message.
    if "e-" in text or ".0," in text or ".0}" in text or ".0]" in text or text.endswith(".0"):
        return _PY_FLOAT.sub(_js_float, text)
    return text


MAX_DEPTH: Final = 128  # containers on any path of a decoded document
MAX_NUMBER_CHARS: Final = 400  # longer than any finite double needs (JS reads more as Infinity)


class JsonError(ValueError):
    """Text that `loads` refuses: not JSON, too deep, or with too long a number.

    Too deep is more than `MAX_DEPTH` containers; too long, more than `MAX_NUMBER_CHARS`.
    """


def nested_deeper_than(value: object, limit: int) -> bool:
    """Return whether a JSON value has more than `limit` containers on some path.

    Iterative, so a value of any depth, even one that contains itself, gets an answer.
    """
    if type(value) is dict and limit >= 1:  # the common case, a flat object: one level
        for child in value.values():
            if isinstance(child, Mapping | list | tuple):
                break
        else:
            return False
    stack: list[tuple[object, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, Mapping):
            children: Any = node.values()
        elif isinstance(node, list | tuple):
            children = node
        else:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children if not isinstance(child, str))
    return False


def _number(parse: Callable[[str], Any]) -> Callable[[str], Any]:
    def bounded(token: str) -> Any:
        if len(token) > MAX_NUMBER_CHARS:
            raise JsonError(f"JSON number longer than {MAX_NUMBER_CHARS} characters")
        return parse(token)

    return bounded


_int, _float = _number(int), _number(float)
# A number token longer than the bound is a run this long of number characters; only text with
# such a run (in a number or a string) is decoded again with the per-number checks, which cost a
# Python call per number on the common path.
_LONG_RUN: Final = re.compile(f"[-+.eE0-9]{{{MAX_NUMBER_CHARS + 1}}}")
_LONG_RUN_BYTES: Final = re.compile(_LONG_RUN.pattern.encode())

# The C scanner behind json.loads, called directly for the common case of a document with no
# surrounding whitespace (stream events): a third of json.loads's cost is its Python wrappers.
# (`scan_once` is set in JSONDecoder.__init__; the stubs omit it.)
_scan: Callable[[str, int], tuple[Any, int]] = json.JSONDecoder().scan_once  # type: ignore[attr-defined]


# A document nested deeper than MAX_DEPTH that decodes has at least MAX_DEPTH + 1 brackets and
# as many closing ones; shorter text nested that deep is not JSON, and the decoder says so.
_DEEP_ENOUGH: Final = 2 * (MAX_DEPTH + 1)


def _decode_checked(text: str | bytes) -> Any:
    """Decode text long enough to break a bound (the common short event never comes here)."""
    if len(text) > MAX_NUMBER_CHARS and (
        _LONG_RUN.search(text) if isinstance(text, str) else _LONG_RUN_BYTES.search(text)
    ):
        value = json.loads(text, parse_int=_int, parse_float=_float)
    else:
        value = _decode(text)
    if len(text) >= _DEEP_ENOUGH:
        if isinstance(text, str):
            brackets = text.count("{") + text.count("[")
        else:
            brackets = text.count(b"{") + text.count(b"[")
        if brackets > MAX_DEPTH and nested_deeper_than(value, MAX_DEPTH):
            raise JsonError(f"JSON nested deeper than {MAX_DEPTH} levels")
    return value


def _decode(text: str | bytes) -> Any:
    if type(text) is str:
        try:
            value, end = _scan(text, 0)
        except StopIteration:
            pass  # not a value at 0 (whitespace, or not JSON): json.loads says which
        else:
            if end == len(text):
                return value
    return json.loads(text)


def loads(text: str | bytes) -> Any:
    """Decode a JSON document; raise `JsonError` (a `ValueError`) for anything else.

    Beyond `json.loads`, refused: nesting deeper than `MAX_DEPTH` and numbers longer than
    `MAX_NUMBER_CHARS` characters. A document shorter than `2 * (MAX_DEPTH + 1)` characters
    cannot break either bound and is decoded as it is (most stream events); longer text costs
    two bracket counts, text longer than `MAX_NUMBER_CHARS` one regex search (C speed), and the
    depth is walked only when the text has more opening brackets than `MAX_DEPTH`.

    >>> try:
    ...     loads("[" * 100_000)
    ... except JsonError as error:
    ...     print(error)
    JSON nested deeper than 128 levels
    """
    try:
        return _decode_checked(text) if len(text) >= _DEEP_ENOUGH else _decode(text)
    except JsonError:
        raise
    except RecursionError:
        raise JsonError(f"JSON nested deeper than {MAX_DEPTH} levels") from None
    except ValueError as exc:  # JSONDecodeError, an int beyond Python's digit limit
        raise JsonError(str(exc)) from None


__all__ = [
    "MAX_DEPTH",
    "MAX_NUMBER_CHARS",
    "JsonError",
    "JsonObject",
    "JsonValue",
    "loads",
    "nested_deeper_than",
    "stringify",
]
