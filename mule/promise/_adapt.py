"""Adapts plain async callbacks, once, into the core's Result-returning forms."""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any, TypeVar, cast

from attrs import fields
from returns.result import Failure, Result, Success

import mule.effects as core
from mule.effects._errors import MuleError, MulePhase, error_from
from mule.effects._events import MuleEvent
from mule.effects._tools import (
    MuleTool as CoreTool,
)
from mule.effects._tools import (
    MuleToolExecutionPart,
    MuleToolPreparation,
    MuleToolRejection,
)
from mule.effects._tools import (
    MuleToolPrepared as CorePrepared,
)
from mule.pi import AbortSignal
from mule.pi._content import ToolCall
from mule.pi._messages import Message
from mule.promise._failed import MuleRunFailed
from mule.promise._types import MulePromiseListener, MuleRunInput, MuleTool, MuleToolPrepared

T = TypeVar("T")
_OK: Result[None, MuleError] = Success(None)


def _error(phase: MulePhase, what: str, exc: BaseException) -> Failure[MuleError]:
    if isinstance(exc, MuleRunFailed):  # the callback chose its error: keep it exactly
        return Failure(exc.error)
    return Failure(error_from(phase, f"{what} raised", exc))


def adapt_listener(
    listener: MulePromiseListener | None,
) -> core.Listener | None:
    """Return the listener as a Result-returning coroutine function (sync or async accepted)."""
    if listener is None:
        return None
    call = listener
    if inspect.iscoroutinefunction(call):

        async def adapted_async(event: MuleEvent, signal: AbortSignal) -> Result[None, MuleError]:
            try:
                await call(event, signal)
            except Exception as exc:
                return _error("listener", "the listener", exc)
            return _OK

        return adapted_async

    async def adapted(event: MuleEvent, signal: AbortSignal) -> Result[None, MuleError]:
        try:
            answer = call(event, signal)
            if answer is not None and inspect.isawaitable(answer):
                await answer
        except Exception as exc:
            return _error("listener", "the listener", exc)
        return _OK

    return adapted


def _hook(
    fn: Callable[..., Awaitable[Any]] | None,
    phase: MulePhase,
    what: str,
    convert: Callable[[Any], T],
) -> Callable[..., Awaitable[Result[T, MuleError]]] | None:
    if fn is None:
        return None
    hook = fn

    async def adapted(*args: Any) -> Result[T, MuleError]:
        try:
            value = await hook(*args)
        except Exception as exc:
            return _error(phase, what, exc)
        try:
            return Success(convert(value))
        except Exception as exc:
            return _error(phase, f"{what}'s answer", exc)

    return adapted


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


def adapt_tool(tool: MuleTool) -> CoreTool:
    """Return the core form of a promise tool: prepare and execute become Result-returning."""
    prepare = tool.prepare
    name = tool.descriptor.name

    async def adapted_prepare(
        call: ToolCall, signal: AbortSignal
    ) -> Result[MuleToolPreparation, MuleError]:
        try:
            prep = cast(object, await prepare(call, signal))
        except Exception as exc:
            return _error("tool", f"prepare of tool {name}", exc)
        if isinstance(prep, MuleToolRejection):
            return Success(prep)
        if isinstance(prep, MuleToolPrepared):
            return Success(CorePrepared(_adapt_execute(prep.execute, name)))
        # Untyped callers can return anything.
        return Failure(
            MuleError("tool", f"prepare of tool {name} returned {type(prep).__name__}", prep)
        )

    return CoreTool(
        descriptor=tool.descriptor,
        prepare=adapted_prepare,
        replay=tool.replay,
        execution_mode=tool.execution_mode,
    )


def _adapt_execute(
    execute: Callable[[AbortSignal], AsyncIterator[MuleToolExecutionPart]], name: str
) -> Callable[[AbortSignal], AsyncIterator[Result[MuleToolExecutionPart, MuleError]]]:
    async def adapted(
        signal: AbortSignal,
    ) -> AsyncIterator[Result[MuleToolExecutionPart, MuleError]]:
        try:
            parts = execute(signal)
        except Exception as exc:
            yield _error("tool", f"execute of tool {name}", exc)
            return
        try:
            while True:
                try:
                    part = await parts.__anext__()
                except StopAsyncIteration:
                    return
                except Exception as exc:
                    yield _error("tool", f"execute of tool {name}", exc)
                    return
                yield Success(part)
        finally:
            aclose = getattr(parts, "aclose", None)
            if aclose is not None:
                await aclose()

    return adapted


def adapt_input(inp: MuleRunInput) -> core.MuleRunInput:
    """Return the core's input: the same settings, callbacks adapted once."""
    settings = {a.name: getattr(inp, a.name) for a in fields(core.MuleRunSettings)}
    return core.MuleRunInput(
        **settings,
        tools=tuple(adapt_tool(t) for t in inp.tools),
        resolve_api_key=_hook(inp.resolve_api_key, "model", "resolve_api_key", _key),
        get_steering_messages=_hook(
            inp.get_steering_messages, "control", "get_steering_messages", _messages
        ),
        get_follow_up_messages=_hook(
            inp.get_follow_up_messages, "control", "get_follow_up_messages", _messages
        ),
        should_stop_after_turn=_hook(
            inp.should_stop_after_turn, "control", "should_stop_after_turn", _stop
        ),
    )


__all__ = ["adapt_input", "adapt_listener", "adapt_tool"]
