"""The shared transport on its own: framings, bounds and content types, over real HTTP.

Tests the private rules `mule.pi.providers._parser.decode_object` and the event bound as the
transport reads it, `mule.pi.providers._transport.MAX_EVENT_CHARS`.
"""

from __future__ import annotations

import json
import weakref
from typing import Any

import anyio
import pytest

from mule.pi import (
    AssistantMessageEvent,
    DoneEvent,
    ErrorEvent,
    Model,
    StreamOptions,
)
from mule.pi.providers import HttpRequest, StreamParser, _transport, provider_stream
from mule.pi.providers._parser import decode_object
from mule.testing.fake_anthropic import Pause, Reply, Step, serve_script

pytestmark = pytest.mark.anyio

MODEL = Model("toy", "toy", "toy-ndjson", "toy", "http://unused")


class ToyParser(StreamParser):
    """Lines of {"text": ...}, then {"done": true}: one text block."""

    __slots__ = ("block",)
    vendor = "toy"

    def __init__(self, model: Model) -> None:
        super().__init__(model)
        self.block: int | None = None

    def _on_event(self, event: str, data: str) -> None:
        line = decode_object(data)
        if line.get("done"):
            self.ended = True
        elif isinstance(line.get("text"), str):
            if self.block is None:
                self.block = self._open_text()
            self._delta(self.block, line["text"])

    def _on_end(self) -> None:
        if self.block is not None:
            self._end(self.block)
        self._done("stop")


async def _run(reply: Reply, framing: Any = "sse") -> list[AssistantMessageEvent]:
    async with serve_script(reply) as server:
        request = HttpRequest(server.url + "/toy", {}, {"q": 1})
        stream = provider_stream(
            MODEL,
            StreamOptions(max_retries=0),
            ToyParser(MODEL),
            lambda: request,
            framing=framing,
        )
        return [event async for event in stream]


def _lines(*objs: object, end: bytes = b"\n") -> tuple[bytes, ...]:
    return tuple(json.dumps(o).encode() + end for o in objs)


async def test_ndjson_framing() -> None:
    """NDJSON bodies: each line one event, CRLF too, a [done] line stops the reading."""
    body = (*_lines({"text": "Hel"}, end=b"\r\n"), b"\n", *_lines({"text": "lo"}, {"done": 1}))
    reply = Reply(200, (("content-type", "application/x-ndjson"),), (*body, b"never read\n"))
    events = await _run(reply, framing="ndjson")
    assert [e.type for e in events] == [
        "start",
        "text_start",
        "text_delta",
        "text_delta",
        "text_end",
        "done",
    ]
    last = events[-1]
    assert isinstance(last, DoneEvent)
    assert last.message.content[0].text == "Hello"  # type: ignore[union-attr]


async def test_sse_body_needs_an_event_stream_content_type() -> None:
    """A 200 answer that is not an event stream fails after start, naming what came."""
    reply = Reply(200, (("content-type", "text/html"),), (b"<html>hi</html>",))
    events = await _run(reply)
    assert [e.type for e in events] == ["start", "error"]
    last = events[-1]
    assert isinstance(last, ErrorEvent)
    assert last.error.error_message == (
        "Expected a text/event-stream response, got content-type 'text/html'"
    )


async def test_an_oversized_event_fails_the_stream(monkeypatch: pytest.MonkeyPatch) -> None:
    """An event over the decoder's bound ends the stream with a typed error, content kept."""
    monkeypatch.setattr(_transport, "MAX_EVENT_CHARS", 1000)
    steps = (b'data: {"text": "kept"}\n\n', b"data: " + b"x" * 600, b"y" * 600)
    events = await _run(Reply(200, (("content-type", "text/event-stream"),), steps))
    last = events[-1]
    assert isinstance(last, ErrorEvent)
    assert last.error.error_message == "Stream event too large (over 1000 characters)"
    assert last.error.content[0].text == "kept"  # type: ignore[union-attr]


async def test_request_builder_failure_is_an_error_event() -> None:
    """A vendor request that cannot be built is the stream's lone error event."""

    def broken() -> HttpRequest:
        raise ValueError("no such model")

    stream = provider_stream(MODEL, StreamOptions(), ToyParser(MODEL), broken)
    events = [event async for event in stream]
    assert [e.type for e in events] == ["error"]
    assert isinstance(events[0], ErrorEvent)
    assert events[0].error.error_message == "no such model"


async def test_one_network_read_is_one_batch() -> None:
    """The events a read's frames make go to the stream together; the terminal comes alone."""
    body = (b"".join(_lines({"text": "a"}, {"text": "b"}, {"text": "c"})), *_lines({"done": 1}))
    reply = Reply(200, (("content-type", "application/x-ndjson"),), body)
    async with serve_script(reply) as server:
        request = HttpRequest(server.url + "/toy", {}, {"q": 1})
        stream = provider_stream(
            MODEL, StreamOptions(max_retries=0), ToyParser(MODEL), lambda: request, framing="ndjson"
        )
        batches = []
        while batch := await stream.next_batch():
            batches.append([e.type for e in batch])
    assert batches[0] == ["start"]
    assert ["text_start", "text_delta", "text_delta", "text_delta"] in batches
    assert batches[-1] == ["done"]
    assert [t for b in batches for t in b] == [
        "start",
        "text_start",
        "text_delta",
        "text_delta",
        "text_delta",
        "text_end",
        "done",
    ]


async def test_a_reads_events_are_let_go_while_the_next_read_waits() -> None:
    """A batch handed on is not held by the transport while it waits for the next read.

    (Held, each read's events of many runs in flight would outlive the collector's young
    generations.) The read of "a" and "b" is taken, its events watched by weak references;
    while the next read waits out the server's pause, none of them may be alive.
    """
    lines = b"".join(_lines({"text": "a"}, {"text": "b"}))
    body: tuple[Step, ...] = (lines, Pause(600), *_lines({"done": 1}))
    reply = Reply(200, (("content-type", "application/x-ndjson"),), body)
    async with serve_script(reply) as server:
        request = HttpRequest(server.url + "/toy", {}, {"q": 1})
        stream = provider_stream(
            MODEL, StreamOptions(max_retries=0), ToyParser(MODEL), lambda: request, framing="ndjson"
        )
        refs: list[weakref.ref[AssistantMessageEvent]] = []
        while not refs:
            batch = await stream.next_batch()
            if any(e.type == "text_delta" for e in batch):
                refs = [weakref.ref(e) for e in batch]
            del batch
        rest: list[str] = []

        async def read_on() -> None:
            while batch := await stream.next_batch():
                rest.extend(e.type for e in batch)

        async with anyio.create_task_group() as tg:
            tg.start_soon(read_on)
            await anyio.sleep(0.2)  # the next read is waiting out the pause
            alive = [e.type for r in refs if (e := r()) is not None]
    assert alive == []
    assert rest == ["text_end", "done"]  # (the pause was still on when they were checked)
