"""Adapts the facade's plain callbacks, once, into the core's `Ports`.

The adapters only change shape (a plain answer becomes `Success`, a sync listener is awaited
the same way as an async one); an exception raised by a callback passes through them to the
interpreter, the one place where it becomes a `MuleError` (a raised `MuleRunFailed` keeps
exactly its error).
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any, TypeVar, cast

from attrs import fields
from returns.result import Result, Success

from mule.effects import (
    EmitPort,
    MuleCallPreparation,
    MuleError,
    MuleEvent,
    MulePortsInput,
    MuleRunSettings,
    MuleToolDeclaration,
    MuleToolExecutionPart,
    MuleToolPrepared,
    MuleToolRejection,
    OutputT,
    Ports,
    PreparePort,
)
from mule.pi import AbortSignal, Message, ToolCall
from mule.promise._types import (
    MulePromiseListener,
    MuleRunInput,
    MuleTool,
    check_listener,
)

T = TypeVar("T")
_OK: Result[None, MuleError] = Success(None)


def emit_port(listener: MulePromiseListener | None) -> EmitPort | None:
    """Return a plain listener (sync or async) as the core's emit port.

    A plain function's port answers at once (no coroutine per event), or, when the function
    returned an awaitable, answers with one that awaits it; a coroutine function's port is
    async. A listener that cannot be called as `listener(event, signal)` is a `TypeError`
    here, before any run starts (`check_listener`).
    """
    if listener is None:
        return None
    check_listener(listener)
    call = listener
    if inspect.iscoroutinefunction(call):

        async def emit_async(event: MuleEvent, signal: AbortSignal) -> Result[None, MuleError]:
            await call(event, signal)
            return _OK

        return emit_async

    def emit(
        event: MuleEvent, signal: AbortSignal
    ) -> Result[None, MuleError] | Awaitable[Result[None, MuleError]]:
        answer = call(event, signal)
        if answer is not None and inspect.isawaitable(answer):
            return _awaited(answer)
        return _OK

    return emit


async def _awaited(answer: Awaitable[object]) -> Result[None, MuleError]:
    await answer
    return _OK


def _hook(
    fn: Callable[..., Awaitable[Any]] | None, convert: Callable[[Any], T]
) -> Callable[..., Awaitable[Result[T, MuleError]]] | None:
    if fn is None:
        return None
    hook = fn

    async def port(*args: Any) -> Result[T, MuleError]:
        return Success(convert(await hook(*args)))

    return port


def _messages(value: Sequence[Message] | None) -> tuple[Message, ...]:
    return () if value is None else tuple(value)


def _key(value: str | None) -> str | None:
    if value is not None and not isinstance(value, str):
        raise TypeError(f"expected a string or None, got {type(value).__name__}")
    return value


def _stop(value: bool) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"expected a bool, got {type(value).__name__}")
    return value


def _prepare_port(tools: Sequence[MuleTool]) -> PreparePort | None:
    if not tools:
        return None
    by_name = {t.descriptor.name: t for t in tools}

    async def prepare(
        call: ToolCall, signal: AbortSignal
    ) -> Result[MuleCallPreparation, MuleError]:
        # The core only prepares calls of declared tools (unknown names are its own results).
        prep = cast(object, await by_name[call.name].prepare(call, signal))
        if type(prep) is MuleToolPrepared:
            return Success(MuleToolPrepared(_execution(prep.execute)))
        # A rejection as it is; anything else is the interpreter's to report.
        return Success(cast(MuleToolRejection, prep))

    return prepare


def _execution(
    execute: Callable[[AbortSignal], AsyncIterator[MuleToolExecutionPart]],
) -> Callable[[AbortSignal], AsyncIterator[Result[MuleToolExecutionPart, MuleError]]]:
    async def parts_of(
        signal: AbortSignal,
    ) -> AsyncIterator[Result[MuleToolExecutionPart, MuleError]]:
        parts = execute(signal)
        try:
            while True:
                try:
                    part = await parts.__anext__()
                except StopAsyncIteration:
                    return
                yield Success(part)
        finally:
            aclose = getattr(parts, "aclose", None)
            if aclose is not None:
                await aclose()

    return parts_of


def ports(input: MuleRunInput[Any], listener: MulePromiseListener | None = None) -> Ports:
    """Return the core's `Ports` for a facade input and listener (callbacks adapted once)."""
    return Ports(
        emit=emit_port(listener),
        resolve_key=_hook(input.resolve_api_key, _key),
        steering=_hook(input.get_steering_messages, _messages),
        follow_up=_hook(input.get_follow_up_messages, _messages),
        should_stop=_hook(input.should_stop_after_turn, _stop),
        prepare_tool=_prepare_port(input.tools),
    )


def core_input(
    input: MuleRunInput[OutputT], listener: MulePromiseListener | None = None
) -> MulePortsInput[OutputT]:
    """Return the core's input for a facade input: the same settings, declarations, `ports`.

    `mule.effects.run(core_input(input, listener), signal)` is the run `mule.run` makes, with
    the Result root's answer.
    """
    settings = {a.name: getattr(input, a.name) for a in fields(MuleRunSettings)}
    declarations = tuple(
        MuleToolDeclaration(
            descriptor=t.descriptor, replay=t.replay, execution_mode=t.execution_mode
        )
        for t in input.tools
    )
    return MulePortsInput(**settings, tools=declarations, ports=ports(input, listener))


__all__ = ["core_input", "emit_port", "ports"]
