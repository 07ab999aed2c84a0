"""The bridge's record decoder: pi's hot `message_update` lines decode once, as json.loads would.

`decode_line` reads pi's streamed updates by a fast path that decodes the response so far once
(pi writes it twice) and scans brackets with `find` on long lines. These tests hold it to
json.loads: the same value (keys in the same order) for every line json.loads decodes, and a
`LineError` for every line it refuses, deep or not JSON.

Tests the private rules of `mule.pirc._framing`: `_decode_compact`, `_openings_exceed` and
`nesting_exceeds` (at `DEFAULT_DEPTH`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mule.pi import stringify
from mule.pirc import LineError, decode_line, parse_record
from mule.pirc._framing import DEFAULT_DEPTH, _decode_compact, _openings_exceed, nesting_exceeds

RECORDED = sorted((Path(__file__).parent / "recorded").glob("*.jsonl"))
KINDS = ["text_delta", "thinking_delta", "toolcall_delta", "text_start", "text_end", "toolcall_end"]

SCALARS = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text()
VALUES = st.recursive(
    SCALARS, lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(), c, max_size=4)
)
TEXT = st.text(alphabet=st.characters(codec="utf-8") | st.sampled_from(['"', "\\", "\ud800"]))


@st.composite
def updates(draw: st.DrawFn) -> dict[str, Any]:
    """Draw a `message_update` record: pi's form (key order, kinds), or one near it.

    Its two copies of the response are the same, or differ in one letter (the same length).
    """
    content = [{"type": "text", "text": draw(TEXT)}, *draw(st.lists(VALUES, max_size=2))]
    partial: dict[str, Any] = {"role": "assistant", "content": content}
    partial["usage"] = {"input": draw(st.integers())}
    partial |= draw(st.dictionaries(st.text(max_size=5), VALUES, max_size=3))
    message = partial if draw(st.booleans()) else {**partial, "role": "assistanT"}
    if draw(st.booleans()):  # pi's own form of a streamed delta
        kind = draw(st.sampled_from(KINDS[:3]))
        event = {"type": kind, "contentIndex": draw(st.integers(0, 3)), "delta": draw(TEXT)}
        event["partial"] = partial
        return {"type": "message_update", "assistantMessageEvent": event, "message": message}
    event = {"type": draw(st.sampled_from(KINDS))}
    event["contentIndex"] = draw(st.integers(0, 3) | st.integers() | st.text(max_size=2))
    if draw(st.booleans()):
        event[draw(st.sampled_from(["delta", "content", "toolCall"]))] = draw(TEXT | VALUES)
    event["partial"] = partial
    rec = {"type": "message_update", "assistantMessageEvent": event, "message": message}
    return rec | draw(st.dictionaries(st.sampled_from(["message", "x"]), VALUES, max_size=1))


def damaged(draw: Callable[[st.SearchStrategy[Any]], Any], line: bytes) -> bytes:
    """Return `line` as it is, or cut, with a byte changed or added, a tail, or deepened."""
    how = draw(st.sampled_from(["keep", "keep", "truncate", "flip", "space", "tail", "deepen"]))
    i: int = draw(st.integers(0, len(line)))
    if how == "truncate":
        return line[:i]
    if how == "flip":
        byte: int = draw(st.integers(0, 255))
        return line[:i] + bytes([byte]) + line[i + 1 :]
    if how == "space":
        extra: bytes = draw(st.sampled_from([b" ", b"\t", b"\n", b","]))
        return line[:i] + extra + line[i:]
    if how == "tail":  # after the record: whitespace json.loads allows, or extra data
        tail: bytes = draw(st.sampled_from([b" ", b"\r", b"}", b"]", b"x", b",1", b'{"a":1}']))
        return line + tail
    if how == "deepen":  # somewhere in the partial's text, possibly inside a string
        n: int = draw(st.sampled_from([100, 256, 257, 2000]))
        return line[:i] + b"[" * n + b"]" * n + line[i:]
    return line


def same_as_json_loads(line: bytes) -> None:
    try:
        expected = json.loads(line)
    except (ValueError, RecursionError):
        with pytest.raises(LineError):
            decode_line(line)
        return
    if not isinstance(expected, dict):
        with pytest.raises(LineError, match="not a JSON object"):
            decode_line(line)
        return
    if nesting_exceeds(line, DEFAULT_DEPTH):  # json.loads reads some lines mule refuses
        with pytest.raises(LineError, match="nested deeper"):
            decode_line(line)
        return
    got = decode_line(line)
    assert got == expected
    assert json.dumps(got) == json.dumps(expected)  # keys in the same order, at every level


@given(updates(), st.booleans(), st.data())
def test_updates_decode_as_json_loads_does(
    rec: dict[str, Any], ascii_only: bool, data: st.DataObject
) -> None:
    """Compact or not, whole or damaged, an update line decodes to json.loads's value or fails."""
    text = json.dumps(rec, separators=(",", ":"), ensure_ascii=ascii_only)
    same_as_json_loads(damaged(data.draw, text.encode("utf-8", "surrogatepass")))


@given(
    st.dictionaries(st.text(), VALUES, max_size=5),
    st.sampled_from([(",", ":"), (", ", ": ")]),
    st.booleans(),
    st.data(),
)
def test_other_records_decode_as_json_loads_does(
    rec: dict[str, Any], separators: tuple[str, str], ascii_only: bool, data: st.DataObject
) -> None:
    """Any other object, compact or not, whole or damaged, decodes to json.loads's value or fails.

    A line that starts `{"` is read by the scanner directly; the rest go to json.loads.
    """
    text = json.dumps(rec, separators=separators, ensure_ascii=ascii_only)
    same_as_json_loads(damaged(data.draw, text.encode("utf-8", "surrogatepass")))


@pytest.mark.parametrize(
    "line",
    [
        b'{"type":"agent_start"}',
        b'{"type":"agent_start"} ',  # whitespace after: json.loads allows it
        b'{"type":"agent_start"}\r',
        b'{"type":"agent_start"}x',  # extra data
        b'{"type":"agent_start"',  # cut
        b'{"a":1}{"b":2}',
        b'{"a":"\xff"}',  # not UTF-8
        b'{"a":"\xed\xa0\x80"}',  # a lone surrogate, as json.loads reads UTF-8 bytes
        b'{"a":"\\ud83d\\ude00","b":[1.0,-0.0,true,null]}',
        b'{"a":1,"a":2}',  # a repeated key: the last one, as in json.loads
        '{"a":1}'.encode("utf-16-le"),  # json.loads detects UTF-16 from the zero bytes
        b"\xef\xbb\xbf{}",  # a UTF-8 byte order mark
        b'{"a":NaN,"b":-Infinity}',
    ],
)
def test_edge_records_decode_as_json_loads_does(line: bytes) -> None:
    """Records at the compact reader's edges: the value json.loads gives, or a `LineError`."""
    same_as_json_loads(line)


def test_compact_records_skip_json_loads() -> None:
    """A compact object line is read by the scanner; one with whitespace after it is not."""
    assert _decode_compact(b'{"type":"agent_start"}') == {"type": "agent_start"}
    assert _decode_compact(b'{"type":"agent_start"} ') is None
    assert _decode_compact(b'{"type":"agent_start"') is None


@pytest.mark.parametrize("path", RECORDED, ids=[p.stem for p in RECORDED])
def test_recorded_lines_decode_as_json_loads_and_reserialise(path: Path) -> None:
    """Real pi lines decode to json.loads's value and write back as pi's bytes."""
    for line in path.read_bytes().splitlines():
        rec = parse_record(line)
        assert rec == json.loads(line)
        assert stringify(rec).encode() == line


def test_the_response_so_far_is_decoded_once() -> None:
    """The two copies pi writes of a streamed response, written alike, are one value."""
    updates = [
        rec
        for line in (RECORDED[0].parent / "text.jsonl").read_bytes().splitlines()
        if (rec := decode_line(line))["type"] == "message_update"
    ]
    assert updates
    assert all(u["message"] is u["assistantMessageEvent"]["partial"] for u in updates)


def test_copies_that_differ_are_decoded_apart() -> None:
    """Tool-call updates carry two copies that differ (stopReason): each is decoded."""
    lines = (RECORDED[0].parent / "tool.jsonl").read_bytes().splitlines()
    pairs = [(decode_line(line), json.loads(line)) for line in lines]
    differ = [
        (got, want)
        for got, want in pairs
        if want["type"] == "message_update"
        and want["message"] != want["assistantMessageEvent"]["partial"]
    ]
    assert differ
    for got, want in differ:
        assert got == want
        assert got["message"] is not got["assistantMessageEvent"]["partial"]


@given(
    st.lists(st.sampled_from([b"[", b"{", b"]", b'"x"', b"a" * 500]), max_size=400),
    st.integers(0, 300),
)
def test_bracket_scan_counts_like_count(pieces: list[bytes], limit: int) -> None:
    """The find-hopping bracket count agrees with bytes.count, on short and long lines."""
    line = b"".join(pieces)
    assert _openings_exceed(line, limit) == (line.count(b"[") + line.count(b"{") > limit)


def test_a_deep_update_is_refused_before_decoding() -> None:
    """A `message_update` line nested past the limit is a typed `too_deep`, long or short."""
    for pad in (0, 10_000):
        deep = b"[" * 300 + b"]" * 300
        line = (
            b'{"type":"message_update","assistantMessageEvent":{"type":"text_delta",'
            b'"contentIndex":0,"delta":"' + b"a" * pad + b'","partial":{"content":' + deep
        )
        line += b'}},"message":{"content":' + deep + b"}}"
        assert json.loads(line)["type"] == "message_update"
        with pytest.raises(LineError) as info:
            decode_line(line)
        assert info.value.problem == "too_deep"


def twin_line() -> tuple[bytes, bytes]:
    """Return a recorded text delta line's head (to its `"partial":`) and its response's text."""
    for line in (RECORDED[0].parent / "text.jsonl").read_bytes().splitlines():
        if line.startswith(b'{"type":"message_update","assistantMessageEvent":{"type":"text_d'):
            head, _, rest = line.partition(b',"partial":')
            copy = rest[: (len(rest) - len(b'},"message":') - 1) // 2]
            assert line == head + b',"partial":' + copy + b'},"message":' + copy + b"}"
            return head + b',"partial":', copy
    raise AssertionError("no text delta in the recording")


def test_every_one_byte_damage_decodes_as_json_loads_does() -> None:
    """Each byte of a real delta line replaced, dropped or doubled: json.loads's answer."""
    head, copy = twin_line()
    line = head + copy + b'},"message":' + copy + b"}"
    for i in range(len(line)):
        for new in (b"", b"x", b'"', b"}", b" ", b"0", line[i : i + 1] * 2):
            same_as_json_loads(line[:i] + new + line[i + 1 :])


@given(st.data())
def test_copies_damaged_alike_decode_as_json_loads_does(data: st.DataObject) -> None:
    """Both copies of the response damaged the same way (they still match): json.loads's answer."""
    head, copy = twin_line()
    bad = damaged(data.draw, copy)
    same_as_json_loads(head + bad + b'},"message":' + bad + b"}")
