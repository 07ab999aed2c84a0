"""pi's streamed text decoded from the line before: only the text that is new is read.

Every `message_update` pi writes holds the whole response so far, twice, so decoding each
line in full costs the square of the response's length over a run. Between two text (or
thinking) updates of one block that response changes in one place: its growing string. A
`LineDecoder` keeps the response it last decoded, with that response's bytes before the
string's closing quote and from it on; a line whose two copies are those bytes with new
string content between them is decoded by reading that content alone, and gives the value
json.loads gives. Any other line is decoded in full, as `decode_line` does, and a text
update decoded in full is the next one's reference.

pi serialises its live response when it writes, so a line may hold more text than its delta
(or none of it): the new content is whatever lies between the kept bytes, checked to be the
inside of a JSON string.
"""

from __future__ import annotations

import functools
import re
from typing import Any, Final, Literal, TypeAlias, final

from mule.pirc._framing import (
    DEFAULT_DEPTH,
    FrameStats,
    Twin,
    decode_other,
    parse_record,
    scan_json,
    twin_layout,
    twin_record,
)

_STRING: Final = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)  # a JSON string's extent
# pi >= 0.84's streamed delta as pi writes it: the usage so far (an object holding one object,
# `cost`), then the event, with a delta free of escapes. Anything else is decoded in full.
_DELTA_PREFIX: Final = b'{"type":"message_update","usage":'
_DELTA_EVENT: Final = b',"assistantMessageEvent":{"type":"'
# The event after a known usage: the kind, the index and the delta.
_DELTA_TAIL: Final = re.compile(
    rb'(text_delta|thinking_delta|toolcall_delta)","contentIndex":(0|[1-9][0-9]{0,8}),'
    rb'"delta":"([^"\\\x00-\x1f]*)"\}\}'
)
DeltaKind: TypeAlias = Literal["text_delta", "thinking_delta", "toolcall_delta"]
_KINDS: Final[dict[bytes, DeltaKind]] = {
    b"text_delta": "text_delta",
    b"thinking_delta": "thinking_delta",
    b"toolcall_delta": "toolcall_delta",
}
_DELTA_LINE: Final = re.compile(
    rb'\{"type":"message_update","usage":(\{[^{}"]*(?:"[a-zA-Z]+":[^{}"]*)*'
    rb'"cost":\{[^{}]*\}[^{}]*\}),"assistantMessageEvent":\{"type":"'
    rb'(text_delta|thinking_delta|toolcall_delta)","contentIndex":(0|[1-9][0-9]{0,8}),'
    rb'"delta":"([^"\\\x00-\x1f]*)"\}\}'
)
_DELTA_END: Final = b'","partial":'
_HIGH, _HIGH_END, _LOW, _LOW_END = "\ud800", "\udbff", "\udc00", "\udfff"
_MESSAGE: Final = b'},"message":'
_UPDATE: Final = b'{"type":"message_update",'
_TWIN_GAP: Final = len(_MESSAGE) + 1  # what a twin update holds besides its head and copies
_GROWS: Final = {"text_delta": "text", "thinking_delta": "thinking"}  # the string a kind grows
_PREFIX: Final = (
    '{"type":"message_update","assistantMessageEvent":{"type":"%s","contentIndex":%d,"delta":"'
)

# The reference: the head of its kind and block; its response's bytes before the growing
# string's closing quote ("before"); the bytes from that quote on followed by _MESSAGE
# ("joint": the same for every line of the block); the bytes from the quote on followed by the
# line's closing brace; the response, its content, the block, the string's key, the block's
# index, the kind and the string.
_Ref = tuple[
    tuple["re.Pattern[bytes]", bytes],
    bytes,
    bytes,
    bytes,
    dict[str, Any],
    list[Any],
    dict[str, Any],
    str,
    int,
    str,
    str,
]

_Path = tuple[str | int, ...]


@functools.lru_cache(maxsize=64)
def _head(kind: str, index: int) -> tuple[re.Pattern[bytes], bytes]:
    """Return the pattern of a `kind` update of block `index` to its `"partial":` key.

    Its group 1 is a delta that has no escapes; the second item is the head up to the
    delta's opening quote.
    """
    prefix = (_PREFIX % (kind, index)).encode()
    return re.compile(re.escape(prefix) + rb'([^"\\\x00-\x1f]*)","partial":'), prefix


def _value_at(text: str, pos: int, path: _Path) -> tuple[Any, int, int]:
    """Decode the compact JSON value at `pos` as the C scanner does, with the index after it.

    The third item is where the string at `path` (keys and indexes) closes: the index of its
    closing quote, or -1 when that path holds no string. Objects and arrays on the path are
    read member by member (a later duplicate key replaces an earlier one, as in json.loads);
    everything else goes to the scanner whole.
    """
    if not path:
        value, end = scan_json(text, pos)
        return value, end, end - 1 if text[pos] == '"' else -1
    step, rest = path[0], path[1:]
    opening = text[pos]
    if opening == "{" and isinstance(step, str):
        return _object_at(text, pos + 1, step, rest)
    if opening == "[" and isinstance(step, int):
        return _array_at(text, pos + 1, step, rest)
    value, end = scan_json(text, pos)
    return value, end, -1


def _separator(text: str, pos: int, close: str) -> tuple[bool, int]:
    """Step past what follows a member: whether it closed its container, and the index after."""
    c = text[pos]
    if c == close:
        return True, pos + 1
    if c != ",":
        raise ValueError("not compact")
    return False, pos + 1


def _object_at(text: str, pos: int, step: str, rest: _Path) -> tuple[Any, int, int]:
    obj: dict[str, Any] = {}
    mark = -1
    if text[pos] == "}":
        return obj, pos + 1, mark
    while True:
        if text[pos] != '"':
            raise ValueError("not compact")
        key, pos = scan_json(text, pos)
        if text[pos] != ":":
            raise ValueError("not compact")
        if key == step:
            obj[key], pos, mark = _value_at(text, pos + 1, rest)
        else:
            obj[key], pos = scan_json(text, pos + 1)
        closed, pos = _separator(text, pos, "}")
        if closed:
            return obj, pos, mark


def _array_at(text: str, pos: int, step: int, rest: _Path) -> tuple[Any, int, int]:
    items: list[Any] = []
    mark = -1
    if text[pos] == "]":
        return items, pos + 1, mark
    while True:
        if len(items) == step:
            value, pos, mark = _value_at(text, pos, rest)
        else:
            value, pos = scan_json(text, pos)
        items.append(value)
        closed, pos = _separator(text, pos, "]")
        if closed:
            return items, pos, mark


def _size(text: str) -> int:
    """Return the length of `text` in UTF-8 (lone surrogates too, as pi's line held them)."""
    return len(text.encode("utf-8", "surrogatepass"))


def _string(raw: str) -> str:
    """Return the value of JSON string text `raw` (quotes included), all of it, or raise."""
    value, end = scan_json(raw, 0)
    if end != len(raw) or not isinstance(value, str):
        raise ValueError("not one JSON string")
    return value


# A pi >= 0.84 `message_update` streaming a delta, decoded once (`LineDecoder.read`): its
# kind, its `contentIndex`, the delta and the usage so far (as decoded: the records that repeat
# one usage share the value). Most of pi's lines are these; the decoder hands over the parts it
# matched and `EventMapper.delta` makes the update from them, where a record would be built as
# a dict only for the mapper to take it apart again. A plain tuple: a class (a NamedTuple too)
# would cost a Python-level constructor call per line.
StreamedDelta: TypeAlias = tuple[DeltaKind, int, str, Any]


def delta_record(streamed: StreamedDelta) -> dict[str, Any]:
    """Return a streamed delta's record as pi wrote it (what `decode_line` gives for the line)."""
    kind, index, delta, usage = streamed
    return {
        "type": "message_update",
        "usage": usage,
        "assistantMessageEvent": {"type": kind, "contentIndex": index, "delta": delta},
    }


@final
class LineDecoder:
    """Decode one stream's records in order, as `decode_line` does, pi's text updates by growth.

    One decoder per pi stdout: it keeps the last text update's response (and the line that
    held it). The values it returns share that response's unchanged parts between records,
    as the two copies of one record already share one value: records are read-only.

    >>> d = LineDecoder()
    >>> d.decode(b'{"type":"agent_start"}')
    {'type': 'agent_start'}

    Attributes:
        max_depth: The deepest nesting decoded (deeper lines raise `LineError` "too_deep").
        grown: Text updates decoded from the one before (the rest were decoded in full).

    """

    __slots__ = ("_head", "_ref", "_usage", "grown", "max_depth")

    def __init__(self, max_depth: int = DEFAULT_DEPTH) -> None:
        self.max_depth = max_depth
        self.grown = 0
        self._ref: _Ref | None = None
        # The last delta line's bytes up to its kind (its usage as pi wrote it), and that
        # usage decoded (shared by the records that repeat it).
        self._head = b"\x00"
        self._usage: Any = None

    def decode(self, line: bytes) -> dict[str, Any]:
        """Decode one record as a JSON object, or raise `LineError` (never anything else)."""
        if line.startswith(_DELTA_PREFIX):
            delta = self._delta_line(line)
            if delta is not None:
                return delta_record(delta)
        if self._ref is not None:
            record = self._grow(line, self._ref)
            if record is not None:
                return record
        return self._decode_full(line)

    def parse(self, line: bytes, stats: FrameStats | None = None) -> dict[str, Any] | None:
        """Decode one record as `parse_record` does: log, count and return None for a bad one."""
        record = self.read(line, stats)
        return delta_record(record) if isinstance(record, tuple) else record

    def read(
        self, line: bytes, stats: FrameStats | None = None
    ) -> dict[str, Any] | StreamedDelta | None:
        """Decode one record as `parse` does, a streamed delta as its parts (the bridge's)."""
        if line.startswith(_DELTA_PREFIX):
            delta = self._delta_line(line)
            if delta is not None:
                return delta
        if self._ref is not None:
            record = self._grow(line, self._ref)
            if record is not None:
                return record
        return parse_record(line, stats, decode=self._decode_full)

    def _delta_line(self, line: bytes) -> StreamedDelta | None:
        """Decode a pi >= 0.84 delta line from its parts (as json.loads would), or None.

        pi repeats one usage on line after line: a line that starts as the last one did (the
        usage's bytes included) is matched from its event on; the usage is decoded only when
        it changes, and the records share that value.
        """
        head = self._head
        if line.startswith(head):
            m = _DELTA_TAIL.fullmatch(line, len(head))
            if m is None:
                return None
            kind, index, delta = m.groups()
        else:
            full = _DELTA_LINE.fullmatch(line)
            if full is None:
                return None
            raw = full[1]
            try:
                usage, end = scan_json(raw.decode("utf-8", "surrogatepass"), 0)
            except (StopIteration, ValueError, RecursionError):
                return None
            if end != len(raw):
                return None
            self._usage = usage
            self._head = _DELTA_PREFIX + raw + _DELTA_EVENT
            kind, index, delta = full[2], full[3], full[4]
        try:
            text = delta.decode("utf-8", "surrogatepass")
        except ValueError:
            return None
        return (_KINDS[kind], int(index), text, self._usage)

    def _decode_full(self, line: bytes) -> dict[str, Any]:
        if line.startswith(_UPDATE):
            twin = twin_layout(line, self.max_depth)
            if twin is not None:
                record = self._decode_twin(line, twin)
                if record is not None:
                    return record
        return decode_other(line, self.max_depth)

    def _grow(self, line: bytes, ref: _Ref) -> dict[str, Any] | None:
        """Decode `line` from the reference response, or None when it is not that grown."""
        head, before, joint, closing, partial, content, block, key, index, kind, text = ref
        m = head[0].match(line)  # this kind and block, and a delta with no escapes
        try:
            if m is not None:
                delta = m[1].decode("utf-8", "surrogatepass")
                start = m.end()
            else:  # escapes, or not this reference's form
                if not line.startswith(head[1]):
                    return None
                quoted = _STRING.match(line, len(head[1]) - 1)
                if quoted is None or not line.startswith(_DELTA_END, quoted.end() - 1):
                    return None
                delta = _string(quoted[0].decode("utf-8", "surrogatepass"))
                start = quoted.end() - 1 + len(_DELTA_END)
        except (LookupError, StopIteration, ValueError, RecursionError):
            return None
        # The line must be: head, before + added + after, _MESSAGE, the same again, "}". The
        # line's length gives where added ends; the rest of the line is then compared with
        # those parts joined, in one call (five startswith calls with offsets cost more).
        rest = len(line) - start
        new = start + len(before)
        new_end = start + ((rest - _TWIN_GAP) >> 1) - len(closing) + 1
        if rest & 1 == 0 or new_end < new:  # the two copies cannot be the same length
            return None
        added = line[new:new_end]
        grown = before + added  # the copies' bytes before the closing quote, if the line grew
        # With those lengths the parts joined are exactly as long as the rest of the line.
        if not line.endswith(b"".join((grown, joint, grown, closing))):
            return None
        try:
            more = added.decode("utf-8", "surrogatepass")
            # Text with no quote, backslash or control character is its own value (a printable
            # one has none of the last); anything else is scanned as a JSON string.
            if '"' in more or "\\" in more or not more.isprintable():
                more = _string('"' + more + '"')
                if more and text and _HIGH <= text[-1] <= _HIGH_END and _LOW <= more[0] <= _LOW_END:
                    return None  # json.loads joins an escaped pair across the seam: read it all
            text += more
        except (LookupError, StopIteration, ValueError, RecursionError):
            return None
        block = block.copy()
        block[key] = text
        content = content.copy()
        content[index] = block
        partial = partial.copy()
        partial["content"] = content
        self._ref = (head, grown, joint, closing, partial, content, block, key, index, kind, text)
        self.grown += 1
        return {
            "type": "message_update",
            "assistantMessageEvent": {
                "type": kind,
                "contentIndex": index,
                "delta": delta,
                "partial": partial,
            },
            "message": partial,
        }

    def _decode_twin(self, line: bytes, twin: Twin) -> dict[str, Any] | None:
        """Decode a twin update in full; a text or thinking one becomes the reference."""
        key = _GROWS.get(twin.kind)
        try:
            if key is None:
                partial, end = scan_json(twin.text, twin.start)
                mark = -1
            else:
                partial, end, mark = _value_at(twin.text, twin.start, ("content", twin.block, key))
        except (LookupError, StopIteration, ValueError, RecursionError):
            return None
        if end != twin.stop:
            return None
        if key is not None and mark >= 0:
            self._refer(line, twin, partial, key, mark)
        return twin_record(twin, partial)

    def _refer(self, line: bytes, twin: Twin, partial: dict[str, Any], key: str, mark: int) -> None:
        """Keep `partial` (decoded from `line`) as the reference, its string closing at `mark`."""
        text, start, stop = twin.text, twin.start, twin.stop
        if len(text) != len(line):  # not all ASCII: byte offsets differ from the text's
            start = _size(text[:start])
            mark, stop = (
                start + _size(text[twin.start : mark]),
                start + _size(text[twin.start : stop]),
            )
        content = partial["content"]
        block = content[twin.block]
        after = line[mark:stop]
        self._ref = (
            _head(twin.kind, twin.block),
            line[start:mark],
            after + _MESSAGE,
            after + b"}",
            partial,
            content,
            block,
            key,
            twin.block,
            twin.kind,
            block[key],
        )


__all__ = ["DeltaKind", "LineDecoder", "StreamedDelta", "delta_record"]
