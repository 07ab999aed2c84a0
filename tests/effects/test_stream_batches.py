"""A read of several stream events is one fact: a batched run is the unbatched run, event for event.

The model stream hands the loop one batch per read (`AssistantMessageEventStream.from_batches`,
as the providers' transport does per network read). However the events are split into reads,
the listener must see the very events it sees when each read carries one event: one
`message_update` per delta, each with the partial as of its own delta, in the same order, and
the same outcome, also when the listener fails or the run is aborted between two deltas.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Sequence
from typing import Any, Literal

import anyio
import anyio.lowlevel
import pytest
from hypothesis import given
from hypothesis import strategies as st
from returns.result import Failure, Result, Success

import mule.effects as fx
from mule.pi import (
    AbortController,
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
    ThinkingDeltaEvent,
    ThinkingEndEvent,
    ThinkingStartEvent,
    TranscriptContext,
    UserMessage,
)

pytestmark = pytest.mark.anyio

MODEL = Model(id="m", name="m", api="scripted", provider="scripted", base_url="")
Stop = Literal["none", "abort", "fail"]


def reply(thinking: Sequence[str], text: Sequence[str]) -> list[AssistantMessageEvent]:
    """Return a provider's events for a reply: start, thinking, text, the ends, done."""
    b = PartialBuilder(api=MODEL.api, provider=MODEL.provider, model=MODEL.id, timestamp=1)
    out: list[AssistantMessageEvent] = [StartEvent(partial=b.snapshot())]
    if thinking:
        i = b.open_thinking()
        out.append(ThinkingStartEvent(content_index=i, partial=b.snapshot()))
        for d in thinking:
            b.append(i, d)
            out.append(ThinkingDeltaEvent(content_index=i, delta=d, partial=b.snapshot()))
        out.append(ThinkingEndEvent(content_index=i, content=b.text(i), partial=b.snapshot()))
    j = b.open_text()
    out.append(TextStartEvent(content_index=j, partial=b.snapshot()))
    for d in text:
        b.append(j, d)
        out.append(TextDeltaEvent(content_index=j, delta=d, partial=b.snapshot()))
    out.append(TextEndEvent(content_index=j, content=b.text(j), partial=b.snapshot()))
    out.append(DoneEvent(reason="stop", message=b.message("stop")))
    return out


@st.composite
def reads(draw: st.DrawFn, events: list[AssistantMessageEvent]) -> list[list[Any]]:
    """Cut the events into consecutive reads (an empty read too: a partial frame)."""
    cuts = sorted(draw(st.lists(st.integers(0, len(events)), max_size=len(events) + 2)))
    edges = [0, *cuts, len(events)]
    return [events[a:b] for a, b in itertools.pairwise(edges)]


async def _batches(batches: list[list[Any]]) -> AsyncIterator[list[Any]]:
    for batch in batches:
        await anyio.lowlevel.checkpoint()  # one network read
        yield batch


async def _singles(events: list[Any]) -> AsyncIterator[Any]:
    for event in events:
        await anyio.lowlevel.checkpoint()
        yield event


async def run(
    make: Any, stop: Stop, at: int, timed: bool
) -> tuple[list[fx.MuleEvent], str, tuple[object, ...]]:
    """Run one turn on the stream `make()`; stop (abort or fail) at the `at`-th update."""
    seen: list[fx.MuleEvent] = []
    controller = AbortController()
    updates = 0

    async def emit(event: fx.MuleEvent, signal: AbortSignal) -> Result[None, fx.MuleError]:
        nonlocal updates
        seen.append(event)
        if type(event) is fx.MessageUpdate:
            updates += 1
            if updates == at and stop == "abort":
                controller.abort("stop here")
            elif updates == at and stop == "fail":
                return Failure(fx.MuleError("listener", "stop here"))
        await anyio.lowlevel.checkpoint()  # back-pressure: the listener takes its time
        return Success(None)

    def stream(
        model: Model, context: TranscriptContext, options: StreamOptions
    ) -> AssistantMessageEventStream:
        return make()  # type: ignore[no-any-return]

    inp = fx.MulePortsInput(
        model=MODEL,
        system_prompt="s",
        messages=(UserMessage("go", 1),),
        stream=stream,
        ports=fx.Ports(emit=emit),
        model_stream_idle_timeout_ms=60_000 if timed else None,
    )
    with anyio.fail_after(10):
        result = await fx.run(inp, controller.signal)
    if isinstance(result, Success):
        outcome = result.unwrap()
        return seen, outcome.status, (outcome.messages, outcome.usage)
    return seen, "failed", (result.failure().message,)


def _key(event: fx.MuleEvent) -> object:
    """Return an event as compared: an update by its event and its materialised partial."""
    if type(event) is fx.MessageUpdate:
        return ("update", event.event, event.value)
    if type(event) is fx.RunEnd:
        return ("run_end", event.outcome)
    return event


@given(
    data=st.data(),
    thinking=st.lists(st.sampled_from(["a", "bc", ""]), max_size=4),
    text=st.lists(st.sampled_from(["x", "yz", "é"]), min_size=1, max_size=8),
    stop=st.sampled_from(["none", "abort", "fail"]),
    at=st.integers(1, 12),
    timed=st.booleans(),
)
async def test_any_split_into_reads_emits_what_one_event_a_read_emits(
    data: st.DataObject,
    thinking: list[str],
    text: list[str],
    stop: Stop,
    at: int,
    timed: bool,
) -> None:
    """Batched or not, the same events (each update's partial its own), the same outcome."""
    events = reply(thinking, text)
    batches = data.draw(reads(events))
    one_by_one = await run(
        lambda: AssistantMessageEventStream.from_source(_singles(events)), stop, at, timed
    )
    batched = await run(
        lambda: AssistantMessageEventStream.from_batches(_batches(batches)), stop, at, timed
    )
    assert [_key(e) for e in batched[0]] == [_key(e) for e in one_by_one[0]]
    assert batched[1:] == one_by_one[1:]
    updates = [e for e in batched[0] if type(e) is fx.MessageUpdate]
    assert [u.event for u in updates] == [e for e in events[1:-1]][: len(updates)]
    for update in updates:  # each partial as of its own delta
        assert update.value == update.event.partial  # type: ignore[union-attr]
    seen, status, _ = batched
    if stop != "none" and len(updates) >= at:  # stopped at once, between two deltas
        assert seen[-1] is updates[at - 1] if stop == "fail" else seen[-2] is updates[at - 1]
        assert status == ("failed" if stop == "fail" else "cancelled")
        if stop == "abort":
            assert _key(seen[-1]) == ("run_end", "cancelled")
