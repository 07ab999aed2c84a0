"""A streamed delta's objects are gone before the stream is read again.

The loop holds a read's events and their `message_update`s only while it hands them out: by the
time it asks the stream for the next event, nothing of the previous delta is alive (the stream
function below keeps none either). Held across that await, every delta of thousands of runs in
flight would outlive the collector's young generations and be traversed by its full collections.

Checked with weak references, taken by the listener, from inside the stream function as it is
asked for each next event: for `mule.effects.run` with an async and a synchronous emit port, and
for `mule.run` with a plain listener, on asyncio and trio.
"""

from __future__ import annotations

import weakref
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
from returns.result import Result, Success

import mule
import mule.effects as fx
from mule.pi import (
    AbortSignal,
    AssistantMessageEvent,
    AssistantMessageEventStream,
    DoneEvent,
    Model,
    PartialBuilder,
    StartEvent,
    StreamOptions,
    TextDeltaEvent,
    TextEndEvent,
    TextStartEvent,
    TranscriptContext,
    UserMessage,
)

pytestmark = pytest.mark.anyio

MODEL = Model(id="m", name="m", api="scripted", provider="scripted", base_url="")
DELTAS = 12


class Watch:
    """Weak references to what the listener saw of each delta, and what was alive too long.

    A timed run keeps a read's event until the next (its partial is what an idle timeout
    reports), so there only the updates are watched.
    """

    def __init__(self, *, events: bool = True) -> None:
        self.events = events
        self.seen: list[weakref.ref[object]] = []
        self.reads = 0
        self.alive: list[str] = []

    def saw(self, event: object) -> None:
        if type(event) is fx.MessageUpdate and type(event.event) is TextDeltaEvent:
            self.seen.append(weakref.ref(event))
            if self.events:
                self.seen.append(weakref.ref(event.event))

    def check(self) -> None:
        """Note what is still alive of the deltas seen (the stream calls this per read)."""
        self.reads += 1
        self.alive.extend(
            f"read {self.reads}: {type(obj).__name__}"
            for ref in self.seen
            if (obj := ref()) is not None
        )


def stream_for(
    watch: Watch,
) -> Callable[[Model, TranscriptContext, StreamOptions], AssistantMessageEventStream]:
    async def events(model: Model) -> AsyncIterator[AssistantMessageEvent]:
        b = PartialBuilder(api=model.api, provider=model.provider, model=model.id, timestamp=1)
        yield StartEvent(partial=b.snapshot())
        text = b.open_text()
        yield TextStartEvent(content_index=text, partial=b.snapshot())
        for i in range(DELTAS):
            watch.check()
            b.append(text, f"d{i} ")
            yield TextDeltaEvent(text, f"d{i} ", b.snapshot())  # (bound to no local here)
        watch.check()
        yield TextEndEvent(content_index=text, content=b.text(text), partial=b.snapshot())
        yield DoneEvent(reason="stop", message=b.message("stop"))

    def stream(
        model: Model, context: TranscriptContext, options: StreamOptions
    ) -> AssistantMessageEventStream:
        return AssistantMessageEventStream.from_source(events(model))

    return stream


def _inp(watch: Watch, ports: fx.Ports, idle_ms: float | None = None) -> fx.MulePortsInput:
    return fx.MulePortsInput(
        model=MODEL,
        model_stream_idle_timeout_ms=idle_ms,
        system_prompt="s",
        messages=(UserMessage("go"),),
        stream=stream_for(watch),
        ports=ports,
    )


def _assert_released(watch: Watch) -> None:
    assert len(watch.seen) == (2 if watch.events else 1) * DELTAS  # every delta was seen
    assert watch.reads == DELTAS + 1
    assert watch.alive == []


@pytest.mark.parametrize("idle_ms", [None, 60_000.0])
async def test_an_async_ports_deltas_are_gone_by_the_next_read(idle_ms: float | None) -> None:
    """`mule.effects.run`, an async emit port; untimed, and timed reads (an idle timeout)."""
    watch = Watch(events=idle_ms is None)

    async def emit(event: fx.MuleEvent, signal: AbortSignal) -> Result[None, fx.MuleError]:
        watch.saw(event)
        return Success(None)

    result = await fx.run(_inp(watch, fx.Ports(emit=emit), idle_ms))
    assert isinstance(result, Success)
    _assert_released(watch)


async def test_a_sync_ports_deltas_are_gone_by_the_next_read() -> None:
    """`mule.effects.run`, an emit port that answers at once."""
    watch = Watch()

    def emit(event: fx.MuleEvent, signal: AbortSignal) -> Result[None, fx.MuleError]:
        watch.saw(event)
        return Success(None)

    result = await fx.run(_inp(watch, fx.Ports(emit=emit)))
    assert isinstance(result, Success)
    _assert_released(watch)


@pytest.mark.parametrize("kind", ["plain", "async"])
async def test_a_promise_listeners_deltas_are_gone_by_the_next_read(kind: str) -> None:
    """`mule.run`, a plain and an async listener."""
    watch = Watch()

    def plain(event: mule.MuleEvent, signal: AbortSignal) -> None:
        watch.saw(event)

    async def later(event: mule.MuleEvent, signal: AbortSignal) -> None:
        watch.saw(event)

    listener: Callable[[Any, AbortSignal], Awaitable[None] | None] = (
        plain if kind == "plain" else later
    )
    inp = mule.MuleRunInput(
        model=MODEL, system_prompt="s", messages=(UserMessage("go"),), stream=stream_for(watch)
    )
    await mule.run(inp, listener)
    _assert_released(watch)
