"""The vendors' I/O-free stream parsers and the SSE/NDJSON decoder, property-tested.

Two properties for every vendor: a valid recorded body decodes to the same Pi events however
its bytes are split, and any garbage (mutated, dropped, repeated or invented events) ends in
Pi events and at most a `ProviderError`: never another exception, never an invalid event.
"""

from __future__ import annotations

import itertools
import json
from functools import cache
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mule.pi import AssistantMessageEvent, DoneEvent, ErrorEvent, from_wire, to_wire
from mule.pi.providers import NdjsonDecoder, ProviderError, SseDecoder
from mule.testing.vendor_streams import VENDORS, Recording, frames, replay, standard

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 2**40) | st.floats() | st.text(max_size=12),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)


@cache
def recording(vendor: str) -> Recording:
    return standard(vendor, deltas=24)


@cache
def short(vendor: str) -> Recording:
    """Return a reply with a few deltas per block: fewer frames to mangle."""
    return standard(vendor, deltas=4)


def comparable(events: list[AssistantMessageEvent]) -> list[Any]:
    """Return the events' wire JSON without clocks (each parser stamps and times its response)."""

    def strip(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items() if k not in ("timestamp", "durationMs")}
        if isinstance(value, list):
            return [strip(v) for v in value]
        return value

    return [strip(to_wire(e)) for e in events]


# -- valid streams in any chunking ----------------------------------------------------------


@pytest.mark.parametrize("vendor", VENDORS)
def test_recorded_reply_parses_to_pi_events(vendor: str) -> None:
    """Each standard reply gives start, the three blocks' events and done(toolUse)."""
    events = replay(recording(vendor))
    assert events[0].type == "start"
    last = events[-1]
    assert isinstance(last, DoneEvent)
    assert last.reason == "toolUse"
    kinds = [type(block).__name__ for block in last.message.content]
    assert kinds == ["ThinkingContent", "TextContent", "ToolCall"]
    assert last.message.usage.total_tokens > 0


@pytest.mark.parametrize("vendor", VENDORS)
def test_one_byte_at_a_time(vendor: str) -> None:
    """Feeding single bytes splits every UTF-8 character and every CRLF: same events."""
    rec = recording(vendor)
    pieces = [rec.body[i : i + 1] for i in range(len(rec.body))]
    assert comparable(replay(rec, pieces)) == comparable(replay(rec))


@given(vendor=st.sampled_from(VENDORS), cuts=st.lists(st.integers(min_value=0), max_size=60))
def test_any_chunking_gives_the_same_events(vendor: str, cuts: list[int]) -> None:
    """However the body's bytes are split, the Pi events are the same."""
    rec = recording(vendor)
    body = rec.body
    points = sorted({c % (len(body) + 1) for c in cuts})
    bounds = [0, *points, len(body)]
    pieces = [body[a:b] for a, b in itertools.pairwise(bounds)]
    assert comparable(replay(rec, pieces)) == comparable(replay(rec))


# -- garbage ----------------------------------------------------------------------------------


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(value, dict):
        for k, v in value.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += _paths(v, (*prefix, i))
    return out


def _replace(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    head, rest = path[0], path[1:]
    if isinstance(value, dict):
        return {**value, head: _replace(value[head], rest, new)}
    copy = list(value)
    copy[head] = _replace(copy[head], rest, new)
    return copy


@st.composite
def mangled(draw: st.DrawFn, vendor: str) -> list[tuple[str, str]]:
    """Draw the vendor's recorded events, each kept, dropped, repeated, mutated or replaced."""
    out: list[tuple[str, str]] = []
    for event, data in frames(short(vendor).body):
        action = draw(st.sampled_from(["keep", "keep", "keep", "drop", "twice", "mutate", "text"]))
        if action == "drop":
            continue
        if action == "text":
            out.append((event, draw(st.text(max_size=30))))
            continue
        if action == "mutate":
            try:
                value = json.loads(data)
            except ValueError:
                value = data
            path = draw(st.sampled_from(_paths(value)))
            data = json.dumps(_replace(value, path, draw(json_values)))
        out.append((event, data))
        if action == "twice":
            out.append((event, data))
        if draw(st.integers(0, 9)) == 0:
            out.append(
                (draw(st.sampled_from(["", event, "error", "ping"])), json.dumps(draw(json_values)))
            )
    return out


def run_parser(rec: Recording, events: list[tuple[str, str]]) -> list[AssistantMessageEvent]:
    """Drive a parser as the transport does, letting only ProviderError end it early."""
    parser = rec.parser()
    out: list[AssistantMessageEvent] = [parser.start()]
    try:
        for event, data in events:
            out += parser.feed(event, data)
            if parser.ended:
                break
        out += parser.finish()
    except ProviderError as exc:
        out += parser.fail(exc, aborted=False)
    return out


def assert_valid_pi_stream(events: list[AssistantMessageEvent]) -> None:
    """One terminal event, last; every event (its partial too) survives Pi's wire codec."""
    terminal = [e for e in events if isinstance(e, DoneEvent | ErrorEvent)]
    assert terminal == [events[-1]]
    for event in events:
        wire = to_wire(event)
        json.dumps(wire, allow_nan=True)
        assert comparable([from_wire(AssistantMessageEvent, wire)]) == comparable([event])
    last = events[-1]
    if isinstance(last, ErrorEvent):
        assert last.error.stop_reason == "error"
        assert last.error.error_message
    else:
        assert isinstance(last, DoneEvent)
        assert last.message.stop_reason in ("stop", "length", "toolUse")


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), vendor=st.sampled_from(VENDORS))
def test_garbage_gives_only_pi_events_and_provider_errors(data: st.DataObject, vendor: str) -> None:
    """Mutated, dropped, repeated and invented events never raise anything but ProviderError."""
    events = data.draw(mangled(vendor))
    assert_valid_pi_stream(run_parser(short(vendor), events))


@given(
    vendor=st.sampled_from(VENDORS),
    events=st.lists(
        st.tuples(st.sampled_from(["", "message", "error", "content_block_delta"]), st.text()),
        max_size=8,
    ),
)
def test_arbitrary_text_events(vendor: str, events: list[tuple[str, str]]) -> None:
    """Events whose data is any text at all."""
    assert_valid_pi_stream(run_parser(short(vendor), events))


@pytest.mark.parametrize("vendor", VENDORS)
@pytest.mark.parametrize(
    "data",
    [
        "[" * 100_000,
        '{"a":' * 50_000,
        '{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta",'
        '"partial_json":"' + "[" * 100_000 + '"}}',
        "9" * 10_000,
        "\x00\ud800",
    ],
)
def test_deeply_nested_and_odd_json(vendor: str, data: str) -> None:
    """Nesting too deep for Python's decoder, huge numbers, NULs: a ProviderError at most."""
    good = frames(recording(vendor).body)
    for at in (0, 3, len(good) - 1):
        name = good[at][0]
        assert_valid_pi_stream(run_parser(recording(vendor), [*good[:at], (name, data)]))


# -- the decoders -----------------------------------------------------------------------------


def test_sse_decoder_fields_comments_and_line_endings() -> None:
    """Names, multi-line data, comments, CRLF/CR/LF, and an unfinished last event dropped."""
    body = b'event: a\ndata: {"x": "\xc3\xbc"}\n\n: keep-alive\r\ndata: 1\r\ndata: 2\r\n\r'
    body += b"\nevent: ping\n\nid: 7\nretry: 10\ndata:no-space\n\rdata: unfinished\n"
    decoder = SseDecoder()
    assert [*decoder.feed(body), *decoder.close()] == [
        ("a", '{"x": "ü"}'),
        ("", "1\n2"),
        ("ping", ""),
        ("", "no-space"),
    ]


@given(st.lists(st.binary(max_size=64), max_size=20))
def test_sse_decoder_takes_any_bytes(pieces: list[bytes]) -> None:
    """Arbitrary bytes decode (invalid UTF-8 as U+FFFD) without raising."""
    decoder = SseDecoder()
    for piece in pieces:
        for event, data in decoder.feed(piece):
            assert isinstance(event, str)
            assert isinstance(data, str)
    decoder.close()


@pytest.mark.parametrize("newline", [b"", b"\n"])
def test_sse_decoder_bounds_an_event(newline: bytes) -> None:
    """One line, or one event of many data lines, over the bound is a ProviderError."""
    decoder = SseDecoder(max_chars=100)
    decoder.feed(b"data: " + b"x" * 60 + newline)
    with pytest.raises(ProviderError, match="Stream event too large"):
        decoder.feed(b"data: " + b"y" * 60 + newline)


def test_ndjson_decoder() -> None:
    """Each non-blank line is one unnamed event; a last line without newline counts."""
    decoder = NdjsonDecoder()
    assert decoder.feed(b'{"a":1}\r\n\n  \n{"b"') == [("", '{"a":1}')]
    assert decoder.feed(b":2}\n{") == [("", '{"b":2}')]
    assert decoder.close() == [("", "{")]
