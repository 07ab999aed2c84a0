"""A scripted model (like pi-ai's faux provider): exact Pi event sequences for tests and demos."""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Sequence
from contextlib import aclosing
from typing import Literal, TypeAlias, final

import anyio
from attrs import define, field, frozen

from mule.pi._abort import AbortSignal
from mule.pi._assistant_events import (
    AssistantMessageEvent,
    DoneEvent,
    ErrorEvent,
    StartEvent,
    TextDeltaEvent,
    TextEndEvent,
    TextStartEvent,
    ThinkingDeltaEvent,
    ThinkingEndEvent,
    ThinkingStartEvent,
    ToolCallDeltaEvent,
    ToolCallEndEvent,
    ToolCallStartEvent,
)
from mule.pi._context import StreamOptions
from mule.pi._event_stream import AssistantMessageEventStream
from mule.pi._json import JsonObject, JsonValue  # noqa: F401 (resolves the recursive alias)
from mule.pi._messages import ZERO_USAGE, StopReason, Usage, now_ms
from mule.pi._model import Model
from mule.pi._partial import PartialBuilder
from mule.pi._transcript import TranscriptContext


@final
@frozen
class Text:
    """A scripted text block, streamed as the given deltas.

    Attributes:
        deltas: The text's pieces, one `text_delta` event each.
        signature: The block's `text_signature` (opaque provider replay data), if any.

    """

    deltas: tuple[str, ...]
    signature: str | None = None

    @classmethod
    def of(cls, text: str, pieces: int = 1, signature: str | None = None) -> Text:
        """Split `text` into `pieces` roughly equal deltas."""
        return cls(_split(text, pieces), signature)


@final
@frozen
class Thinking:
    """A scripted thinking block; a redacted one streams no deltas.

    Attributes:
        deltas: The thinking text's pieces, one `thinking_delta` event each.
        signature: The block's `thinking_signature`, if any.
        redacted: A redacted block: its text reads "[Reasoning redacted]" and no deltas
            stream.

    """

    deltas: tuple[str, ...]
    signature: str | None = None
    redacted: bool | None = None

    @classmethod
    def of(cls, text: str, pieces: int = 1, signature: str | None = None) -> Thinking:
        """Split `text` into `pieces` roughly equal deltas."""
        return cls(_split(text, pieces), signature)


@final
@frozen
class Call:
    """A scripted tool call; its JSON arguments stream in `pieces` raw fragments.

    Attributes:
        id: The tool call's id.
        name: The tool's name.
        arguments: The call's arguments (a JSON object).
        pieces: How many `toolcall_delta` fragments the arguments' JSON streams in.
        thought_signature: The call's `thought_signature` (Google's replay data), if any.

    """

    id: str
    name: str
    arguments: JsonObject = field(factory=dict)
    pieces: int = 1
    thought_signature: str | None = None


Block: TypeAlias = Text | Thinking | Call


@final
@frozen(kw_only=True)
class Reply:
    """One scripted model response.

    `stop_reason` defaults to "toolUse" when there are calls, else "stop". A failing reply
    ("error"/"aborted") streams its blocks after `start` (unless `start=False`) and ends with an
    `error` event. `stall_after=n` stops after n events until the attempt is aborted;
    `raises` makes the stream function raise; `no_terminal` ends without done/error;
    `delay_ms` sleeps before each event.

    Attributes:
        blocks: The content blocks, streamed in order.
        stop_reason: How the reply ends; None: "toolUse" with calls, else "stop".
        error_message: A failing reply's error text (default "scripted failure").
        start: Whether the stream opens with a `start` event.
        usage: The token usage the reply reports.
        response_id: The vendor's response id the message carries, if any.
        delay_ms: Milliseconds slept before each event (the attempt's abort ends the sleep).
        stall_after: Stop after this many events until the attempt is aborted; None: never.
        raises: An exception the stream function raises instead of streaming.
        no_terminal: End the stream without a `done` or `error` event.
        trailing: Events streamed after the terminal one (a misbehaving provider).
        before_start: Events streamed before `start` (a misbehaving provider).

    """

    blocks: tuple[Block, ...] = ()
    stop_reason: StopReason | None = None
    error_message: str | None = None
    start: bool = True
    usage: Usage = ZERO_USAGE
    response_id: str | None = None
    delay_ms: float = 0.0
    stall_after: int | None = None
    raises: Exception | None = None
    no_terminal: bool = False
    trailing: tuple[AssistantMessageEvent, ...] = ()
    before_start: tuple[Literal["text_delta"], ...] = ()


def reply(*blocks: Block | str, **kwargs: object) -> Reply:
    """Build a reply; plain strings become single-delta text blocks."""
    built = tuple(Text((b,)) if isinstance(b, str) else b for b in blocks)
    return Reply(blocks=built, **kwargs)  # type: ignore[arg-type]


def error_reply(message: str, *, start: bool = False, **kwargs: object) -> Reply:
    """Build a failed reply (an `error` event, with no `start` unless asked)."""
    return Reply(stop_reason="error", error_message=message, start=start, **kwargs)  # type: ignore[arg-type]


def _split(text: str, pieces: int) -> tuple[str, ...]:
    if pieces <= 1 or len(text) <= 1:
        return (text,)
    size = max(1, -(-len(text) // pieces))
    return tuple(text[i : i + size] for i in range(0, len(text), size))


@define
class ScriptedModel:
    """A stream function that replays scripted replies in order and records every call.

    Attributes:
        replies: The replies still to play, in order; each call takes the first.
        calls: Every call made, as (model, context, options).
        clock: The timestamp source of each reply's messages, in ms since the epoch.

    """

    replies: list[Reply]
    calls: list[tuple[Model, TranscriptContext, StreamOptions]] = field(factory=list)
    clock: Callable[[], int] = now_ms

    def __call__(
        self, model: Model, context: TranscriptContext, options: StreamOptions | None = None
    ) -> AssistantMessageEventStream:
        """Start the next scripted reply as a stream."""
        opts = options or StreamOptions()
        self.calls.append((model, context, opts))
        if not self.replies:
            raise RuntimeError("ScriptedModel has no more replies")
        script = self.replies.pop(0)
        if script.raises is not None:
            raise script.raises
        return AssistantMessageEventStream.from_source(
            _play(script, model, opts.signal, self.clock())
        )


def scripted_stream(
    script: Reply, model: Model, signal: AbortSignal | None = None, timestamp: int = 0
) -> AssistantMessageEventStream:
    """Return the stream of one scripted reply."""
    return AssistantMessageEventStream.from_source(_play(script, model, signal, timestamp))


async def _play(
    script: Reply, model: Model, signal: AbortSignal | None, timestamp: int
) -> AsyncIterator[AssistantMessageEvent]:
    b = PartialBuilder(api=model.api, provider=model.provider, model=model.id, timestamp=timestamp)
    if script.response_id is not None:
        b.set_response(response_id=script.response_id)
    emitted = 0
    gate = _Gate(signal)

    async def pace() -> bool:
        """Wait before the next event; False once the attempt is aborted."""
        nonlocal emitted
        if script.stall_after is not None and emitted >= script.stall_after:
            await gate.wait(None)
        elif script.delay_ms > 0:
            await gate.wait(script.delay_ms / 1000)
        emitted += 1
        return not gate.aborted

    def aborted() -> ErrorEvent:
        return ErrorEvent(
            reason="aborted", error=b.message("aborted", error_message="Request was aborted")
        )

    has_calls = any(isinstance(x, Call) for x in script.blocks)
    stop: StopReason = script.stop_reason or ("toolUse" if has_calls else "stop")
    failing = stop in ("error", "aborted")
    b.set_usage(script.usage)
    for _ in script.before_start:
        if not await pace():
            yield aborted()
            return
        yield TextDeltaEvent(content_index=0, delta="early", partial=b.snapshot())
    if script.start:
        if not await pace():
            yield aborted()
            return
        yield StartEvent(partial=b.snapshot())
        for block in script.blocks:
            # Closed explicitly: a consumer that stops early must not leave it to the GC.
            async with aclosing(_play_block(block, b, pace)) as events:
                async for ev in events:
                    if ev is None:
                        yield aborted()
                        return
                    yield ev
    if script.no_terminal:
        return
    if not await pace():
        yield aborted()
        return
    if failing:
        reason: Literal["error", "aborted"] = "aborted" if stop == "aborted" else "error"
        msg = b.message(reason, error_message=script.error_message or "scripted failure")
        yield ErrorEvent(reason=reason, error=msg)
    else:
        yield DoneEvent(reason=stop, message=b.message(stop))  # type: ignore[arg-type]
    for extra in script.trailing:
        yield extra


async def _play_block(
    block: Block, b: PartialBuilder, ok: Callable[[], Awaitable[bool]]
) -> AsyncGenerator[AssistantMessageEvent | None, None]:
    if isinstance(block, Text):
        i = b.open_text()
        if not await ok():
            yield None
            return
        yield TextStartEvent(content_index=i, partial=b.snapshot())
        for d in block.deltas:
            if not await ok():
                yield None
                return
            b.append(i, d)
            yield TextDeltaEvent(content_index=i, delta=d, partial=b.snapshot())
        if block.signature is not None:
            b.set_signature(i, block.signature)
        if not await ok():
            yield None
            return
        yield TextEndEvent(content_index=i, content=b.text(i), partial=b.snapshot())
    elif isinstance(block, Thinking):
        i = b.open_thinking(signature=None, redacted=block.redacted)
        if not await ok():
            yield None
            return
        yield ThinkingStartEvent(content_index=i, partial=b.snapshot())
        if block.redacted:
            b.replace_text(i, "[Reasoning redacted]")
        else:
            for d in block.deltas:
                if not await ok():
                    yield None
                    return
                b.append(i, d)
                yield ThinkingDeltaEvent(content_index=i, delta=d, partial=b.snapshot())
        if block.signature is not None:
            b.set_signature(i, block.signature)
        if not await ok():
            yield None
            return
        yield ThinkingEndEvent(content_index=i, content=b.text(i), partial=b.snapshot())
    else:
        i = b.open_tool_call(block.id, block.name, block.thought_signature)
        if not await ok():
            yield None
            return
        yield ToolCallStartEvent(content_index=i, partial=b.snapshot())
        for d in _split(json.dumps(block.arguments, separators=(",", ":")), block.pieces):
            if not await ok():
                yield None
                return
            b.append(i, d)
            yield ToolCallDeltaEvent(content_index=i, delta=d, partial=b.snapshot())
        call = b.close_tool_call(i, block.arguments)
        if not await ok():
            yield None
            return
        yield ToolCallEndEvent(content_index=i, tool_call=call, partial=b.snapshot())


class _Gate:
    """Sleeps that end early when the attempt's signal aborts."""

    def __init__(self, signal: AbortSignal | None) -> None:
        self._signal = signal

    @property
    def aborted(self) -> bool:
        return self._signal is not None and self._signal.aborted

    async def wait(self, seconds: float | None) -> None:
        if self.aborted:
            return
        if self._signal is None:
            if seconds is None:
                await anyio.sleep_forever()
            else:
                await anyio.sleep(seconds)
            return
        with anyio.move_on_after(seconds if seconds is not None else float("inf")):
            await self._signal.wait()


def replies(items: Sequence[Reply | str]) -> list[Reply]:
    """Normalise a script: strings become one-block text replies."""
    return [reply(x) if isinstance(x, str) else x for x in items]


__all__ = [
    "Block",
    "Call",
    "Reply",
    "ScriptedModel",
    "Text",
    "Thinking",
    "error_reply",
    "replies",
    "reply",
    "scripted_stream",
]
