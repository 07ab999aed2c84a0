"""Strict JSONL framing of pi's stdout: only LF ends a record, oversize records are skipped.

Decoding is bounded too: a record nested deeper than a limit is refused before `json.loads`
sees it (Python's decoder and every walker after it recurse), with a typed `LineError`.

pi's hot record, the streamed `message_update`, holds the response so far twice; it is read by
a fast path that decodes that response once and gives the value json.loads gives (or leaves
the line to json.loads when it is in any other form).
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable
from typing import Any, Final, Literal, NamedTuple, TypeAlias, final

from attrs import define

from mule.pirc._commands import BridgeError

log = logging.getLogger("mule.pirc")


@define
class FrameStats:
    """Live counters of the framer and decoder (mutated in place by the reader).

    Attributes:
        lines: Lines framed (within `max_line_bytes`), good or bad.
        bytes: Bytes read from pi's stdout.
        oversize_lines: Lines longer than `max_line_bytes`, skipped.
        oversize_bytes: The bytes those lines held.
        bad_lines: Lines that were not JSON, not an object or not UTF-8, skipped.
        deep_lines: Lines nested deeper than `max_line_depth`, skipped undecoded.

    """

    lines: int = 0
    bytes: int = 0
    oversize_lines: int = 0
    oversize_bytes: int = 0
    bad_lines: int = 0
    deep_lines: int = 0


@final
class LineFramer:
    r"""Split a byte stream into records at `\n` (one trailing `\r` stripped).

    U+2028, U+2029 and U+0085 are never separators (pi writes them raw inside strings). A record
    longer than `max_line_bytes` is discarded up to its `\n` without being held in memory, and
    counted in `stats.oversize_lines`.

    >>> f = LineFramer(1024)
    >>> f.feed(b'{"a":1}\r\n{"b"') + f.feed(b':2}\n')
    [b'{"a":1}', b'{"b":2}']

    Attributes:
        stats: The framer's live counters.

    """

    def __init__(self, max_line_bytes: int, stats: FrameStats | None = None) -> None:
        if max_line_bytes < 1:
            raise ValueError("max_line_bytes must be positive")
        self._max = max_line_bytes
        self._parts: list[bytes] = []
        self._size = 0
        self._skipping = False
        self._skipped = 0
        self.stats = stats if stats is not None else FrameStats()

    def feed(self, chunk: bytes) -> list[bytes]:
        """Return the complete records that `chunk` finishes, in order."""
        self.stats.bytes += len(chunk)
        out: list[bytes] = []
        start = 0
        if self._parts or self._skipping:  # finish the record an earlier chunk began
            nl = chunk.find(b"\n")
            if nl < 0:
                self._take(chunk)
                return out
            self._take(chunk[:nl])
            line = self._finish()
            if line is not None:
                out.append(line)
            start = nl + 1
        # Records wholly inside the chunk: sliced out once, no parts held (one \r stripped).
        limit, find, append = self._max, chunk.find, out.append
        if len(chunk) - start <= limit:  # none of them can be oversize: no size check each
            finished = len(out)  # counted by _finish
            while (nl := find(b"\n", start)) >= 0:
                append(chunk[start : nl - 1 if nl > start and chunk[nl - 1] == 13 else nl])
                start = nl + 1
            lines = len(out) - finished
        else:
            lines = 0
            while (nl := find(b"\n", start)) >= 0:
                if nl - start > limit:
                    self._oversize(nl - start)
                else:
                    append(chunk[start : nl - 1 if nl > start and chunk[nl - 1] == 13 else nl])
                    lines += 1
                start = nl + 1
        self.stats.lines += lines
        if start < len(chunk):
            self._take(chunk[start:] if start else chunk)
        return out

    def close(self) -> bytes | None:
        """Return an unterminated last record at end of stream (pi may die mid-write)."""
        if not self._parts and not self._skipping:
            return None
        line = self._finish()
        return line or None

    def _take(self, piece: bytes) -> None:
        if not piece:
            return
        if self._skipping:
            self._skipped += len(piece)
            return
        if self._size + len(piece) > self._max:
            self._skipping = True
            self._skipped = self._size + len(piece)
            self._parts.clear()
            self._size = 0
            return
        self._parts.append(piece)
        self._size += len(piece)

    def _oversize(self, size: int) -> None:
        self.stats.oversize_lines += 1
        self.stats.oversize_bytes += size
        log.error("pi stdout: skipped a %d-byte line (limit %d bytes)", size, self._max)

    def _finish(self) -> bytes | None:
        if self._skipping:
            self._skipping = False
            self._oversize(self._skipped)
            self._skipped = 0
            return None
        line = b"".join(self._parts)
        self._parts.clear()
        self._size = 0
        if line.endswith(b"\r"):
            line = line[:-1]
        self.stats.lines += 1
        return line


DEFAULT_DEPTH: Final = 256

LineProblem: TypeAlias = Literal["json", "not_object", "too_deep"]

# A JSON string (skipped whole) or one bracket: the depth scan's tokens.
_DEPTH_TOKEN = re.compile(rb'"(?:[^"\\]|\\.)*"|[\[\]{}]')


@final
class LineError(BridgeError, ValueError):
    """A record that is not a JSON object mule will decode; `problem` says why.

    Attributes:
        problem: `"json"` (not JSON or not UTF-8), `"not_object"` or `"too_deep"`.

    """

    def __init__(self, problem: LineProblem, detail: str) -> None:
        self.problem: LineProblem = problem
        super().__init__(detail)


def _openings_exceed(line: bytes, limit: int) -> bool:
    """Whether `line` holds more than `limit` `[` and `{` in all (inside strings too).

    `bytes.count` walks every byte; on a long line, `bytes.find` of one byte (memchr) hops
    from bracket to bracket several times faster, and pi's long lines are mostly text. A
    bracket-rich line is counted after a few hops.
    """
    if len(line) < _FIND_FROM:
        return line.count(b"[") + line.count(b"{") > limit
    n = 0
    for bracket in b"[{":
        i = line.find(bracket)
        hops = 0
        while i >= 0:
            n += 1
            hops += 1
            if hops == _HOPS:
                n += line.count(bracket, i + 1)
                break
            i = line.find(bracket, i + 1)
        if n > limit:
            return True
    return False


_FIND_FROM: Final = 6144  # bytes; below, two counts are cheaper than a dozen finds
_HOPS: Final = 32  # finds per bracket before counting the rest


def nesting_exceeds(line: bytes, limit: int) -> bool:
    """Whether JSON text `line` nests arrays and objects more than `limit` deep.

    Most records have fewer brackets than the limit in all, which settles it at C speed; only
    the others are scanned (brackets inside strings do not count).
    """
    if not _openings_exceed(line, limit):
        return False
    depth = 0
    for m in _DEPTH_TOKEN.finditer(line):
        c = m.group()
        if c in b"[{" and len(c) == 1:
            depth += 1
            if depth > limit:
                return True
        elif c in b"]}" and len(c) == 1:
            depth -= 1
    return False


# The C scanner behind json.loads (`scan_once` is set in JSONDecoder.__init__; the stubs omit
# it): it decodes the value at an index and returns it with the index after it.
scan_json: Callable[[str, int], tuple[Any, int]] = json.JSONDecoder().scan_once  # type: ignore[attr-defined]

_UPDATE: Final = b'{"type":"message_update",'


class _Unsure(ValueError):
    """Text the update reader leaves to json.loads (not pi's compact form, or not JSON)."""


def _object(text: str, pos: int, copy: list[tuple[str, Any]], top: bool) -> tuple[Any, int]:
    """Decode the compact JSON object at `pos` key by key; return it and the index after it.

    The top level's `assistantMessageEvent` is read the same way; the first of its `partial`
    and the top level's `message` is decoded and kept in `copy` with its text, and the second,
    when its text is the same, is that value (equal text, equal value: an object's text ends
    at its closing brace, so a prefix match is the whole value).
    """
    if text[pos] != "{":
        raise _Unsure
    obj: dict[str, Any] = {}
    pos += 1
    if text[pos] == "}":
        return obj, pos + 1
    while True:
        if text[pos] != '"':
            raise _Unsure
        key, pos = scan_json(text, pos)
        if text[pos] != ":":
            raise _Unsure
        pos += 1
        if top and key == "assistantMessageEvent" and text[pos] == "{":
            value, pos = _object(text, pos, copy, False)
        elif key == ("message" if top else "partial") and text[pos] == "{":
            if copy and text.startswith(copy[0][0], pos):
                value = copy[0][1]
                pos += len(copy[0][0])
            else:
                start = pos
                value, pos = scan_json(text, pos)
                if not copy:
                    copy.append((text[start:pos], value))
        else:
            value, pos = scan_json(text, pos)
        obj[key] = value
        c = text[pos]
        pos += 1
        if c == "}":
            return obj, pos
        if c != ",":
            raise _Unsure


# pi's streamed delta, in the key order pi writes it; the delta string is scanned from its quote.
_DELTA_HEAD: Final = re.compile(
    r'\{"type":"message_update","assistantMessageEvent":\{"type":"(text_delta|thinking_delta|'
    r'toolcall_delta)","contentIndex":(0|[1-9][0-9]{0,8}),"delta":(?=")'
)
_PARTIAL_KEY: Final = ',"partial":'
_MESSAGE_KEY: Final = '},"message":'


def _span_openings_exceed(text: str, start: int, stop: int, limit: int) -> bool:
    """Whether `text[start:stop]` holds more than `limit` `[` and `{` (as `_openings_exceed`)."""
    n = 0
    for bracket in "[{":
        i = text.find(bracket, start, stop)
        hops = 0
        while i >= 0:
            n += 1
            hops += 1
            if hops == _HOPS:
                n += text.count(bracket, i + 1, stop)
                break
            i = text.find(bracket, i + 1, stop)
        if n > limit:
            return True
    return False


class Twin(NamedTuple):
    """Where a `*_delta` update's parts lie, its two copies of the response checked alike."""

    text: str  # the line, decoded
    kind: str  # the event's type
    block: int  # its contentIndex
    delta: str
    start: int  # where the first copy (the event's `partial`) starts in `text`
    stop: int  # where it ends (the second copy, `message`, follows `_MESSAGE_KEY`)


def twin_layout(line: bytes, limit: int) -> Twin | None:
    """Find a `*_delta` update whose two copies are one text, bounds included; else None.

    The copies' text is found from the line's length and compared before anything is decoded;
    the line then nests 2 levels more than the copy, whose brackets alone are counted.
    """
    try:
        text = line.decode("utf-8", "surrogatepass")  # as json.loads decodes UTF-8 bytes
        head = _DELTA_HEAD.match(text)
        if head is None:
            return None
        delta, pos = scan_json(text, head.end())
        start = pos + len(_PARTIAL_KEY)
        size, odd = divmod(len(text) - start - len(_MESSAGE_KEY) - 1, 2)
        stop = start + size
        if (
            odd
            or size < 2
            or not text.startswith(_PARTIAL_KEY, pos)
            or text[start] != "{"
            or not text.startswith(_MESSAGE_KEY, stop)
            or text[-1] != "}"
            or not text.startswith(text[start:stop], stop + len(_MESSAGE_KEY))
            or _span_openings_exceed(text, start, stop, limit - 2)
        ):
            return None
    except (LookupError, StopIteration, ValueError, RecursionError):
        return None
    return Twin(text, head[1], int(head[2]), delta, start, stop)


def twin_record(twin: Twin, partial: dict[str, Any]) -> dict[str, Any]:
    """Return the record of a twin update whose response so far decoded as `partial`."""
    event = {"type": twin.kind, "contentIndex": twin.block, "delta": twin.delta}
    event["partial"] = partial
    return {"type": "message_update", "assistantMessageEvent": event, "message": partial}


def _decode_twin(line: bytes, limit: int) -> dict[str, Any] | None:
    """Decode a `*_delta` update whose two copies are one text (see `twin_layout`); else None."""
    twin = twin_layout(line, limit)
    if twin is None:
        return None
    try:
        partial, end = scan_json(twin.text, twin.start)
    except (StopIteration, ValueError, RecursionError):
        return None
    return twin_record(twin, partial) if end == twin.stop else None


def _decode_delta(text: str) -> dict[str, Any] | None:
    """Decode a `*_delta` update written in pi's key order, or return None (any other form)."""
    head = _DELTA_HEAD.match(text)
    if head is None:
        return None
    delta, pos = scan_json(text, head.end())
    if not text.startswith(_PARTIAL_KEY, pos) or text[pos + len(_PARTIAL_KEY)] != "{":
        return None
    start = pos + len(_PARTIAL_KEY)
    partial, end = scan_json(text, start)
    if not text.startswith(_MESSAGE_KEY, end):
        return None
    at = end + len(_MESSAGE_KEY)
    if len(text) - 1 - at == end - start and text.startswith(text[start:end], at):
        message, last = partial, len(text) - 1  # the same text: the same value
    else:
        message, last = scan_json(text, at)
    if last != len(text) - 1 or text[last] != "}":
        return None
    event = {"type": head[1], "contentIndex": int(head[2]), "delta": delta, "partial": partial}
    return {"type": "message_update", "assistantMessageEvent": event, "message": message}


def _decode_update(line: bytes) -> dict[str, Any] | None:
    """Decode pi's `message_update` record with its response so far decoded once, or None.

    pi writes that response twice, as the event's `partial` and as `message`, usually as the
    same text: then both keys hold one decoded value (no caller mutates records). The value
    is the one json.loads gives; anything but pi's compact form (whitespace, an error) is
    None, for json.loads to decode or refuse.
    """
    try:
        text = line.decode("utf-8", "surrogatepass")  # as json.loads decodes UTF-8 bytes
        delta = _decode_delta(text)
        if delta is not None:
            return delta
        value, end = _object(text, 0, [], True)
    except (LookupError, StopIteration, ValueError, RecursionError):
        return None
    return value if end == len(text) else None


def _decode_compact(line: bytes) -> dict[str, Any] | None:
    """Decode a record that starts `{"` and has no whitespace around it, or return None.

    json.loads reads such bytes as UTF-8 (its encoding detection looks at the first bytes)
    and gives the scanner's value; called directly, the scanner skips that detection and
    json.loads's two whitespace matches (about half of json.loads's time on a short record).
    Anything else is None, for json.loads to decode or refuse.
    """
    try:
        text = line.decode("utf-8", "surrogatepass")  # as json.loads decodes UTF-8 bytes
        value, end = scan_json(text, 0)
    except (StopIteration, ValueError, RecursionError):
        return None
    return value if end == len(text) else None  # an object: the text starts with its brace


def decode_line(line: bytes, max_depth: int = DEFAULT_DEPTH) -> dict[str, Any]:
    """Decode one record as a JSON object, or raise `LineError` (never anything else)."""
    if line.startswith(_UPDATE):  # the hottest form first: it bounds its own depth
        twin = _decode_twin(line, max_depth)
        if twin is not None:
            return twin
    return decode_other(line, max_depth)


# pi >= 0.84's update: the delta and the usage so far, no response (no twin copies to share).
_DELTA_UPDATE: Final = b'{"type":"message_update","usage":'


def decode_other(line: bytes, max_depth: int = DEFAULT_DEPTH) -> dict[str, Any]:
    """Decode a record that is not a twin update (as `decode_line`), or raise `LineError`."""
    if nesting_exceeds(line, max_depth):
        raise LineError("too_deep", f"nested deeper than {max_depth} levels")
    if line.startswith(_UPDATE) and not line.startswith(_DELTA_UPDATE):
        # pi < 0.84's hot record: most of its lines, and the longest (its response, twice)
        update = _decode_update(line)
        if update is not None:
            return update
    elif line.startswith(b'{"'):  # every other record pi writes (and pi >= 0.84's updates)
        compact = _decode_compact(line)
        if compact is not None:
            return compact
    try:
        value = json.loads(line)
    except RecursionError:  # cannot happen below the limit; kept typed whatever the stack
        raise LineError("too_deep", "nested too deeply to decode") from None
    except ValueError as exc:  # UnicodeDecodeError and JSONDecodeError both land here
        raise LineError("json", f"unparsable line ({exc})") from None
    if not isinstance(value, dict):
        raise LineError("not_object", "not a JSON object")
    return value


def parse_record(
    line: bytes,
    stats: FrameStats | None = None,
    max_depth: int = DEFAULT_DEPTH,
    decode: Callable[[bytes], dict[str, Any]] | None = None,
) -> dict[str, Any] | None:
    """Decode one record as a JSON object; log, count and return None for anything else.

    `decode` is the decoder to use (a `LineDecoder`'s, which holds the stream's state);
    without it, `decode_line` with `max_depth`.
    """
    if not line.strip():
        return None
    try:
        return decode(line) if decode is not None else decode_line(line, max_depth)
    except LineError as exc:
        if stats is not None:
            if exc.problem == "too_deep":
                stats.deep_lines += 1
            else:
                stats.bad_lines += 1
        log.error("pi stdout: %s: %.200r", exc, line)
        return None


__all__ = [
    "DEFAULT_DEPTH",
    "FrameStats",
    "LineError",
    "LineFramer",
    "LineProblem",
    "decode_line",
    "nesting_exceeds",
    "parse_record",
]
