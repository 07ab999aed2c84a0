"""JSON value types shared by Pi's data model, and JavaScript-style JSON text.

`stringify` writes what Pi's `JSON.stringify` writes (compact separators, non-ASCII kept as it
is, numbers in JavaScript's form: `1`, not `1.0`; `0.000036`, not `3.6e-05`); `loads` is
`json.loads` whose only failure is a `ValueError`, also for input nested too deeply for Python's
recursive decoder.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeAlias

# A JSON value as Python holds it after `json.loads`. Sequences and mappings are accepted so that
# immutable containers (tuples, MappingProxyType) are JSON values too.
JsonValue: TypeAlias = (
    bool | int | float | str | Sequence["JsonValue"] | Mapping[str, "JsonValue"] | None
)
JsonObject: TypeAlias = Mapping[str, JsonValue]

# One encoder, built once: json.dumps builds a new one per call when given separators.
_compact = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode

# A JSON string (skipped whole), or a float as Python spells it where JavaScript does not: an
# integral one (`1.0`, `-0.0`) or a small one (`3.6e-05`). json writes floats with
# float.__repr__, so these are the only forms; JavaScript writes each as `String(x)`. Floats
# from 1e16 keep Python's `1e+16`: JS writes their digits, which Python would read back as an
# int of another value (JSON parsed by JS reads either text as the same double).
_PY_FLOAT = re.compile(r'"(?:[^"\\]|\\.)*"|-?[0-9]+\.0(?![0-9])|-?[0-9](?:\.[0-9]+)?e-[0-9]+')


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
    # Only a float ending in ".0" (then `,`, `]`, `}` or the end) or with an exponent is
    # respelt: a float such as 0.05 alone must not cost a second pass over a long message.
    if "e-" in text or ".0," in text or ".0}" in text or ".0]" in text or text.endswith(".0"):
        return _PY_FLOAT.sub(_js_float, text)
    return text


# The C scanner behind json.loads, called directly for the common case of a document with no
# surrounding whitespace (stream events): a third of json.loads's cost is its Python wrappers.
# (`scan_once` is set in JSONDecoder.__init__; the stubs omit it.)
_scan: Callable[[str, int], tuple[Any, int]] = json.JSONDecoder().scan_once  # type: ignore[attr-defined]


def loads(text: str | bytes) -> Any:
    """Decode JSON text; raise `ValueError` for anything that is not a JSON document.

    >>> loads("[" * 100_000)
    Traceback (most recent call last):
    ...
    ValueError: JSON nested too deeply to decode
    """
    try:
        if type(text) is str:
            try:
                value, end = _scan(text, 0)
            except StopIteration:
                pass  # not a value at 0 (whitespace, or not JSON): json.loads says which
            else:
                if end == len(text):
                    return value
        return json.loads(text)
    except RecursionError:
        raise ValueError("JSON nested too deeply to decode") from None


__all__ = ["JsonObject", "JsonValue", "loads", "stringify"]
