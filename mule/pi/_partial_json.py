"""Lenient parsing of streamed tool-call arguments, as Pi's `parseStreamingJson` does.

Pi completes truncated JSON with the `partial-json` npm package; mule uses its Python port,
`partial-json-parser`, from the same authors, so partial arguments match Pi's. Before that,
both try a strict parse and Pi's repair of string literals (raw control characters escaped,
invalid escapes made literal backslashes).
"""

from __future__ import annotations

import re
from typing import Any

from mule.pi._json import MAX_DEPTH, JsonObject, loads, nested_deeper_than

_VALID_ESCAPES = frozenset('"\\/bfnrtu')
_HEX = frozenset("0123456789abcdefABCDEF")
_CONTROL_ESCAPES = {"\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def repair_json(text: str) -> str:
    """Escape raw control characters and invalid escapes inside JSON string literals."""
    out: list[str] = []
    in_string = False
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if not in_string:
            out.append(ch)
            in_string = ch == '"'
        elif ch == '"':
            out.append(ch)
            in_string = False
        elif ch == "\\":
            nxt = text[i + 1] if i + 1 < n else None
            if nxt == "u" and len(text) >= i + 6 and all(c in _HEX for c in text[i + 2 : i + 6]):
                out.append(text[i : i + 6])
                i += 6
                continue
            if nxt is not None and nxt in _VALID_ESCAPES and nxt != "u":
                out.append("\\" + nxt)
                i += 2
                continue
            out.append("\\\\")
        elif ord(ch) < 0x20:
            out.append(_CONTROL_ESCAPES.get(ch, f"\\u{ord(ch):04x}"))
        else:
            out.append(ch)
        i += 1
    return "".join(out)


_DANGLING_NUMBER = re.compile(r"-?\d+\.$")


def _in_string(text: str) -> bool:
    inside, escaped = False, False
    for ch in text:
        if escaped:
            escaped = False
        elif ch == "\\":
            escaped = inside
        elif ch == '"':
            inside = not inside
    return inside


def _drop_dangling_number(text: str) -> str:
    """Drop a number cut right after its decimal point, as the npm `partial-json` does."""
    m = _DANGLING_NUMBER.search(text)
    if m is None or _in_string(text[: m.start()]):
        return text
    return text[: m.start()]


def parse_json_with_repair(text: str) -> Any:
    """Parse JSON, retrying once on Pi's repaired copy; any failure is a `ValueError`."""
    try:
        return loads(text)
    except ValueError:
        repaired = repair_json(text)
        if repaired == text:
            raise
        return loads(repaired)


def parse_streaming_json(text: str) -> JsonObject:
    """Parse possibly incomplete JSON arguments; always return an object (`{}` as fallback).

    Arguments nested deeper than `MAX_DEPTH` are that fallback too (Pi would parse them).
    """
    if not text or text.isspace():
        return {}
    value: Any
    try:
        value = parse_json_with_repair(text)
    except ValueError:
        # Loaded with the first incomplete text, not with `import mule`.
        from partial_json_parser import Allow
        from partial_json_parser import loads as loads_partial

        try:
            value = loads_partial(_drop_dangling_number(text), Allow.ALL)
        except Exception:  # the partial parser's errors, RecursionError among them
            try:
                value = loads_partial(repair_json(text), Allow.ALL)
            except Exception:
                return {}
    if not isinstance(value, dict) or nested_deeper_than(value, MAX_DEPTH):
        return {}  # the partial parser has no depth bound of its own
    return value


__all__ = ["parse_json_with_repair", "parse_streaming_json", "repair_json"]
