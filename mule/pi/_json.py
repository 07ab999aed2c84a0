"""JSON value types shared by Pi's data model, and JavaScript-style JSON text.

`stringify` writes what Pi's `JSON.stringify` writes for the values providers send and replay
(compact separators, non-ASCII kept as it is); `loads` is `json.loads` whose only failure is a
`ValueError`, also for input nested too deeply for Python's recursive decoder.
"""

from __future__ import annotations

import json
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


def stringify(value: object) -> str:
    """Serialise like JavaScript's `JSON.stringify`: no spaces, non-ASCII characters kept.

    Python's spelling of floats stays (`1.0`, where JavaScript writes `1`).

    >>> stringify({"a": [1, "ü"], "b": None})
    '{"a":[1,"ü"],"b":null}'
    """
    return _compact(value)


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
