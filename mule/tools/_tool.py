"""How a coding tool is made: an async body wrapped as a `MuleTool`, and the results it returns.

A body receives the call's arguments and the run's abort signal and returns a `MuleToolResult`;
whatever it raises becomes an `is_error` result the model can read, never a crash of the run.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Mapping

import anyio.to_thread

from mule.effects import Replay
from mule.pi import (
    AbortSignal,
    JsonObject,
    JsonValue,
    TextContent,
    Tool,
    ToolCall,
)
from mule.promise import (
    MuleTool,
    MuleToolExecutionPart,
    MuleToolPreparation,
    MuleToolPrepared,
    MuleToolRejection,
    MuleToolResult,
)

ToolBody = Callable[[dict[str, JsonValue], AbortSignal], Awaitable[MuleToolResult]]
"""A tool's work: the call's arguments and the run's abort signal in, its result out."""
Authorize = Callable[[dict[str, JsonValue]], Awaitable[str | None]]
"""Decides before a call runs whether it may: None lets it, a string refuses it with that text."""


def make_tool(
    name: str,
    description: str,
    parameters: JsonObject,
    body: ToolBody,
    *,
    replay: Replay,
    authorize: Authorize | None = None,
) -> MuleTool:
    """Wrap an async tool body as a `MuleTool`; raised exceptions become `is_error` results.

    `authorize` runs in `prepare`; a returned string rejects the call with that text.
    """
    descriptor = Tool(name, description, parameters)

    async def prepare(call: ToolCall, _signal: AbortSignal) -> MuleToolPreparation:
        args = dict(call.arguments)  # validated and coerced by the run's gate before prepare
        if authorize is not None:
            refusal = await authorize(args)
            if refusal is not None:
                return MuleToolRejection(refusal)

        async def execute(signal: AbortSignal) -> AsyncIterator[MuleToolExecutionPart]:
            try:
                result = await body(args, signal)
            except Exception as exc:  # the model sees what went wrong; the run goes on
                text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
                result = error_result(text)
            yield MuleToolExecutionPart("result", result)

        return MuleToolPrepared(execute)

    return MuleTool(descriptor=descriptor, prepare=prepare, replay=replay)


def in_thread(
    work: Callable[[dict[str, JsonValue], AbortSignal], MuleToolResult],
    *,
    abandon_on_cancel: bool = False,
) -> ToolBody:
    """Return a body that runs blocking file-system `work` in a worker thread."""

    async def body(args: dict[str, JsonValue], signal: AbortSignal) -> MuleToolResult:
        return await anyio.to_thread.run_sync(
            lambda: work(args, signal), abandon_on_cancel=abandon_on_cancel
        )

    return body


def text_result(text: str, *, error: bool = False, details: JsonValue = None) -> MuleToolResult:
    """Return a tool result holding one text block."""
    return MuleToolResult(content=(TextContent(text),), is_error=error, details=details)


def error_result(text: str) -> MuleToolResult:
    """Return an `is_error` result holding `text`, what the model reads about a failure."""
    return text_result(text, error=True)


def int_arg(args: Mapping[str, JsonValue], key: str, default: int) -> int:
    """Return an integer argument (a JSON number, truncated), or `default` when absent."""
    value = args.get(key)
    if isinstance(value, int | float) and not isinstance(value, bool):
        return int(value)
    return default


def str_arg(args: Mapping[str, JsonValue], key: str, default: str) -> str:
    """Return a string argument, or `default` when absent."""
    value = args.get(key)
    return value if isinstance(value, str) else default


def bool_arg(args: Mapping[str, JsonValue], key: str) -> bool:
    """Return whether a boolean argument is true."""
    return args.get(key) is True


def clip_line(line: str, limit: int) -> str:
    """Return `line`, cut at `limit` characters with a note saying so."""
    if len(line) <= limit:
        return line
    return f"{line[:limit]}… [line cut at {limit} of {len(line)} characters]"


__all__ = [
    "Authorize",
    "ToolBody",
    "bool_arg",
    "clip_line",
    "error_result",
    "in_thread",
    "int_arg",
    "make_tool",
    "str_arg",
    "text_result",
]
