"""Lenient parsing of streamed tool-call arguments, as Pi's `parseStreamingJson` does.

Pi completes truncated JSON with the `partial-json` npm package; mule uses its Python port,
`partial-json-parser`, from the same authors, so partial arguments match Pi's. Before that,
both try a strict parse and Pi's repair of string literals (raw control characters escaped,
invalid escapes made literal backslashes).
"""

from __future__ import annotations

import json
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


def parse_tool_call_arguments(text: str) -> tuple[JsonObject, str | None]:
    """Parse a finished tool call's arguments: `(arguments, None)`, or `({}, why)`.

    Pi 1.6.0's `parseToolCallArguments`: no partial prefix is kept once the call is complete;
    text that is not a JSON object leaves the arguments empty, and the error says why (in
    JavaScript's words where mule knows them) and quotes the text the model sent.
    """
    if not text or text.isspace():
        return {}, None
    try:
        value = parse_json_with_repair(text)
    except ValueError:
        repaired = repair_json(text)
        reason = js_parse_error(repaired if repaired != text else text)
        return {}, f"{reason}\n\nReceived arguments:\n{text}"
    if not isinstance(value, dict):
        return {}, f"Tool arguments must be a JSON object\n\nReceived arguments:\n{text}"
    return value, None


def _container_at(doc: str, pos: int) -> str:
    """Return the innermost open bracket (`{` or `[`) before `pos`, strings skipped."""
    stack: list[str] = []
    in_string = escaped = False
    for ch in doc[:pos]:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "{[":
            stack.append(ch)
        elif ch in "}]" and stack:
            stack.pop()
    return stack[-1] if stack else ""


def js_parse_error(doc: str) -> str:
    """Return the message V8's `JSON.parse` gives for `doc` (Python's when mule has no match)."""
    try:
        json.loads(doc)
    except json.JSONDecodeError as exc:
        pos, msg, python_text = exc.pos, exc.msg, str(exc)
    except ValueError as exc:
        return str(exc)
    else:
        return "Unexpected JSON input"
    rest = doc[pos:].strip()
    where = (
        f"in JSON at position {pos} (line {doc.count(chr(10), 0, pos) + 1} "
        f"column {pos - (doc.rfind(chr(10), 0, pos) + 1) + 1})"
    )
    end = len(doc)
    at_end = (
        f"in JSON at position {end} (line {doc.count(chr(10)) + 1} "
        f"column {end - (doc.rfind(chr(10)) + 1) + 1})"
    )
    if msg.startswith("Unterminated string") or (
        msg.startswith("Invalid \\uXXXX escape") and pos + 6 > end  # cut inside the escape
    ):
        return f"Unterminated string {at_end}"
    if rest == "-":  # a number cut after its sign, or after its point
        return f"No number after minus sign {at_end}"
    if rest == "." and msg == "Expecting ',' delimiter":
        return f"Unterminated fractional number {at_end}"
    if msg == "Expecting value":
        if not rest or any(w.startswith(rest) for w in ("true", "false", "null")):
            return "Unexpected end of JSON input"
        return f"Unexpected token '{rest[0]}', \"{doc}\" is not valid JSON"
    if msg == "Expecting ',' delimiter":
        if _container_at(doc, pos) == "[":
            return f"Expected ',' or ']' after array element {where}"
        return f"Expected ',' or '}}' after property value {where}"
    if msg == "Expecting property name enclosed in double quotes":
        before = doc[:pos].rstrip()
        if before.endswith("{"):
            return f"Expected property name or '}}' {where}"
        return f"Expected double-quoted property name {where}"
    if msg == "Expecting ':' delimiter":
        return f"Expected ':' after property name {where}"
    if msg == "Extra data":
        return f"Unexpected non-whitespace character after JSON {where[8:]}"
    return python_text


__all__ = [
    "js_parse_error",
    "parse_json_with_repair",
    "parse_streaming_json",
    "parse_tool_call_arguments",
    "repair_json",
]
