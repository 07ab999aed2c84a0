"""mule's side of the true-floor benchmark: a provider-shaped model stream, tools, listeners.

The model stream is built the way mule's providers build theirs: a `PartialBuilder` that every
event snapshots, Pi's events in Pi's order (start, text_start, deltas, toolcall_start/delta,
then the ends in content order and done; the final tool-call arguments parsed from their raw
JSON), behind a guard that turns a failure into an `error` event, in a pull-mode
`AssistantMessageEventStream`. It yields to the event loop with the same primitive as the floor.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Literal

import anyio
from returns.result import Result, Success

import mule
import mule.effects as fx
from bench._workload import Record, Turn, echo_text
from mule.pi import (
    AbortSignal,
    AssistantMessage,
    AssistantMessageEvent,
    AssistantMessageEventStream,
    DoneEvent,
    ErrorEvent,
    Model,
    PartialBuilder,
    StartEvent,
    StreamOptions,
    TextContent,
    TextDeltaEvent,
    TextEndEvent,
    TextStartEvent,
    Tool,
    ToolCall,
    ToolCallDeltaEvent,
    ToolCallEndEvent,
    ToolCallStartEvent,
    TranscriptContext,
    UserMessage,
    text_of,
)

MODEL = Model(id="bench", name="bench", api="bench", provider="bench", base_url="")
PROMPT = (UserMessage("go", 0),)
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"x": {"type": "integer"}},
    "required": ["x"],
}
YieldNow = Callable[[], Awaitable[None]]


async def _produce(
    turn: Turn, raw: dict[str, str], b: PartialBuilder, yield_now: YieldNow
) -> AsyncIterator[AssistantMessageEvent]:
    """Yield what a provider's parser yields for `turn`, one network read before each item."""
    yield StartEvent(partial=b.snapshot())
    text: int | None = None
    for delta in turn.deltas:
        await yield_now()
        if text is None:
            text = b.open_text()
            yield TextStartEvent(content_index=text, partial=b.snapshot())
        b.append(text, delta)
        yield TextDeltaEvent(text, delta, b.snapshot())  # positional, as the providers' parser
    for call_id, name, _ in turn.calls:
        await yield_now()
        i = b.open_tool_call(call_id, name)
        yield ToolCallStartEvent(content_index=i, partial=b.snapshot())
        fragment = raw[call_id]
        b.append(i, fragment)
        yield ToolCallDeltaEvent(content_index=i, delta=fragment, partial=b.snapshot())
    for i in range(len(b)):  # the finish: close each block in content order
        if b.kind(i) == "text":
            yield TextEndEvent(content_index=i, content=b.text(i), partial=b.snapshot())
        else:
            call = b.close_tool_call(i)  # parsed from the raw fragments, as providers do
            yield ToolCallEndEvent(content_index=i, tool_call=call, partial=b.snapshot())
    reason: Literal["toolUse", "stop"] = "toolUse" if turn.calls else "stop"
    yield DoneEvent(reason=reason, message=b.message(reason))


async def _guard(
    b: PartialBuilder, inner: AsyncIterator[AssistantMessageEvent]
) -> AsyncIterator[AssistantMessageEvent]:
    """Pass `inner` on as the providers' guard does: a failure becomes an `error` event."""
    try:
        try:
            async for event in inner:
                yield event
        except Exception as exc:
            yield ErrorEvent(reason="error", error=b.message("error", error_message=str(exc)))
    finally:
        with anyio.CancelScope(shield=True):
            aclose = getattr(inner, "aclose", None)
            if aclose is not None:
                await aclose()


def raw_arguments(script: tuple[Turn, ...]) -> dict[str, str]:
    """Return each call's arguments as the raw JSON a provider receives over the wire."""
    return {c: json.dumps(args, separators=(",", ":")) for t in script for c, _, args in t.calls}


def _assistants(context: TranscriptContext) -> int:
    n = 0
    for m in context.messages:
        if type(m) is AssistantMessage:
            n += 1
    return n


def stream_for(
    script: tuple[Turn, ...], yield_now: YieldNow
) -> Callable[[Model, TranscriptContext, StreamOptions], AssistantMessageEventStream]:
    """Return a stream function answering turn n (n assistant messages so far) from `script`.

    The turn is chosen from the context, not a counter, so a replayed run (DBOS) gets the same.
    """
    raw = raw_arguments(script)

    def stream(
        model: Model, context: TranscriptContext, options: StreamOptions | None = None
    ) -> AssistantMessageEventStream:
        b = PartialBuilder(
            api=model.api,
            provider=model.provider,
            model=model.id,
            timestamp=int(time.time() * 1000),
        )
        return AssistantMessageEventStream.from_source(
            _guard(b, _produce(script[_assistants(context)], raw, b, yield_now))
        )

    return stream


# -- the tools ---------------------------------------------------------------------------------


@mule.tool
async def echo(x: int) -> str:
    """Echo the number."""
    return echo_text({"x": x})


def _core_echo() -> fx.PreparePort:
    """Return the same tool's prepare port in the core's Result form (the gate validated)."""

    async def prepare(
        call: ToolCall, signal: AbortSignal
    ) -> Result[fx.MuleCallPreparation, fx.MuleError]:
        text = echo_text(call.arguments)

        async def execute(
            signal: AbortSignal,
        ) -> AsyncIterator[Result[fx.MuleToolExecutionPart, fx.MuleError]]:
            result = fx.MuleToolResult(content=(TextContent(text),))
            yield Success(fx.MuleToolExecutionPart("result", result))

        return Success(fx.MuleToolPrepared(execute))

    return prepare


CORE_ECHO = fx.MuleToolDeclaration(descriptor=Tool("echo", "Echo the number.", SCHEMA))
CORE_ECHO_PREPARE = _core_echo()

# -- the listeners -----------------------------------------------------------------------------


def listener_for(rec: Record) -> Callable[[fx.MuleEvent, AbortSignal], None]:
    """Return a plain listener recording the deltas, calls and results it sees into `rec`."""
    deltas, calls, results = rec.deltas.append, rec.calls.append, rec.results.append
    update, start, end = fx.MessageUpdate, fx.ToolExecutionStart, fx.ToolExecutionEnd

    def listener(event: fx.MuleEvent, signal: AbortSignal) -> None:
        kind = type(event)
        if kind is update:
            e = event.event  # type: ignore[union-attr]
            if type(e) is TextDeltaEvent:
                deltas(e.delta)
        elif kind is start:
            c = event.call  # type: ignore[union-attr]
            calls((c.id, c.name, c.arguments))
        elif kind is end:
            block = event.result.content[0]  # type: ignore[union-attr]
            results((event.call.id, block.text))  # type: ignore[union-attr]

    return listener


_OK: Result[None, fx.MuleError] = Success(None)


def core_listener_for(
    rec: Record,
) -> Callable[[fx.MuleEvent, AbortSignal], Awaitable[Result[None, fx.MuleError]]]:
    """Return the same recorder in the core's form (async, Result-returning)."""
    record = listener_for(rec)

    async def listener(event: fx.MuleEvent, signal: AbortSignal) -> Result[None, fx.MuleError]:
        record(event, signal)
        return _OK

    return listener


# -- the runs ----------------------------------------------------------------------------------


def _final_text(message: AssistantMessage) -> str:
    return text_of(message)


async def run_promise(script: tuple[Turn, ...], yield_now: YieldNow) -> Record:
    """One run through `mule.run` (the promise facade)."""
    rec = Record()
    inp = mule.MuleRunInput(
        model=MODEL,
        system_prompt="bench",
        messages=PROMPT,
        stream=stream_for(script, yield_now),
        tools=(echo,),
    )
    outcome = await mule.run(inp, listener_for(rec))
    rec.final_text = _final_text(outcome.message)
    return rec


async def run_effects(script: tuple[Turn, ...], yield_now: YieldNow) -> Record:
    """One run through `mule.effects.run` (the Result root)."""
    rec = Record()
    inp = fx.MulePortsInput(
        model=MODEL,
        system_prompt="bench",
        messages=PROMPT,
        stream=stream_for(script, yield_now),
        tools=(CORE_ECHO,),
        ports=fx.Ports(emit=core_listener_for(rec), prepare_tool=CORE_ECHO_PREPARE),
    )
    result = await fx.run(inp)
    if not isinstance(result, Success):
        raise AssertionError(f"mule.effects.run failed: {result}")
    rec.final_text = _final_text(result.unwrap().message)
    return rec


__all__ = [
    "CORE_ECHO",
    "MODEL",
    "core_listener_for",
    "echo",
    "listener_for",
    "raw_arguments",
    "run_effects",
    "run_promise",
    "stream_for",
]
