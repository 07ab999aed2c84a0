"""An MCP tool as a `MuleTool`: its descriptor, its executor (progress, cancel) and its result."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Callable, Coroutine, Mapping
from typing import Any, Protocol, TypeAlias, final

import anyio
import mcp_types
from attrs import frozen
from mcp.shared.dispatcher import ProgressFnT
from mcp.shared.exceptions import MCPError

from mule.effects import Replay
from mule.mcp._errors import MCPServerError, as_run_failure
from mule.pi import ImageContent, JsonObject, JsonValue, TextContent, Tool, ToolCall
from mule.promise import (
    AbortController,
    AbortSignal,
    MuleTool,
    MuleToolExecutionPart,
    MuleToolPreparation,
    MuleToolPrepared,
    MuleToolResult,
)

ProgressSink: TypeAlias = ProgressFnT
_PROGRESS_BUFFER = 64  # progress is lossy by nature: past this many unread, newer ones are dropped
MAX_RESULT_CHARS = 100_000
"""The default bound on what one MCP tool result puts into the conversation (in characters)."""


class _Server(Protocol):
    @property
    def name(self) -> str: ...

    async def call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any],
        signal: AbortSignal | None = None,
        progress: ProgressSink | None = None,
    ) -> mcp_types.CallToolResult: ...

    def spawn(self, fn: Callable[[], Coroutine[Any, Any, None]]) -> None: ...


@final
@frozen
class _Progress:
    progress: float
    total: float | None
    message: str | None


def mule_tool(
    server: _Server,
    tool: mcp_types.Tool,
    name: str,
    replay: Replay,
    max_result_chars: int = MAX_RESULT_CHARS,
) -> MuleTool:
    """Return `tool` of `server` as a `MuleTool` called `name` (mule's gate validates arguments)."""
    descriptor = Tool(name, tool.description or "", tool.input_schema)
    remote = tool.name

    async def prepare(call: ToolCall, signal: AbortSignal) -> MuleToolPreparation:
        arguments = call.arguments

        def execute(run_signal: AbortSignal) -> AsyncIterator[MuleToolExecutionPart]:
            return _execute(server, remote, arguments, run_signal, max_result_chars)

        return MuleToolPrepared(execute)

    return MuleTool(descriptor=descriptor, prepare=prepare, replay=replay)


async def _execute(
    server: _Server, remote: str, arguments: JsonObject, signal: AbortSignal, limit: int
) -> AsyncIterator[MuleToolExecutionPart]:
    # The call runs in the server's task group and reports through a stream, so this generator
    # never yields inside a cancel scope; closing it early (an aborted run) cancels the call.
    send, recv = anyio.create_memory_object_stream[object](_PROGRESS_BUFFER)
    own = AbortController()

    def forward(source: AbortSignal) -> None:
        own.abort(source.reason)

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        with contextlib.suppress(
            anyio.WouldBlock, anyio.BrokenResourceError, anyio.ClosedResourceError
        ):
            send.send_nowait(_Progress(progress, total, message))

    async def call() -> None:
        try:
            item: object
            try:
                item = await server.call_tool(remote, arguments, own.signal, on_progress)
            except Exception as exc:
                item = exc
            # A closed executor (an aborted run) waits for no answer.
            with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
                await send.send(item)
        finally:
            send.close()

    signal.add_listener(forward)
    try:
        server.spawn(call)
    except MCPServerError as exc:
        signal.remove_listener(forward)
        send.close()
        recv.close()
        raise as_run_failure(exc) from exc
    try:
        async with recv:
            async for item in recv:
                if type(item) is _Progress:
                    yield MuleToolExecutionPart("update", _progress_result(item))
                elif isinstance(item, mcp_types.CallToolResult):
                    yield MuleToolExecutionPart("result", tool_result(item, max_chars=limit))
                    return
                elif isinstance(item, MCPError):  # the server answered with a JSON-RPC error
                    yield MuleToolExecutionPart("result", _error_result(item))
                    return
                elif isinstance(item, MCPServerError):
                    raise as_run_failure(item) from item
                else:
                    assert isinstance(item, BaseException)
                    raise item
        raise as_run_failure(MCPServerError(server.name, f"was closed during tools/call {remote}"))
    finally:
        signal.remove_listener(forward)
        own.abort("the tool's executor was closed")  # a no-op once the call has answered


def _progress_result(p: _Progress) -> MuleToolResult:
    if p.message:
        text = p.message
    elif p.total is not None:
        text = f"{p.progress:g}/{p.total:g}"
    else:
        text = f"{p.progress:g}"
    details: JsonObject = {"progress": p.progress, "total": p.total, "message": p.message}
    return MuleToolResult(content=(TextContent(text),), details=details)


def _error_result(exc: MCPError) -> MuleToolResult:
    details: dict[str, JsonValue] = {"code": exc.code, "message": exc.message}
    if exc.data is not None:
        details["data"] = _json(exc.data)
    text = f"MCP error {exc.code}: {exc.message}"
    return MuleToolResult(content=(TextContent(text),), is_error=True, details=details)


def tool_result(
    result: mcp_types.CallToolResult, *, max_chars: int | None = MAX_RESULT_CHARS
) -> MuleToolResult:
    """Map an MCP tool result to mule's: content blocks to Pi content, structured to details.

    What the model sees is bounded by `max_chars` (None: unbounded): text past it is cut and
    images that do not fit are left out, and a closing text block says so, with the sizes.
    `structuredContent` larger than the bound is left out of `details` the same way.
    """
    structured = _json(result.structured_content)
    content = tuple(_block(b) for b in result.content)
    if not content:
        text = "" if structured is None else json.dumps(structured, ensure_ascii=False)
        content = (TextContent(text),)
    if max_chars is not None:
        content, structured = _bounded(content, structured, max_chars)
    return MuleToolResult(content=content, is_error=result.is_error, details=structured)


def _size(block: TextContent | ImageContent) -> int:
    return len(block.text) if type(block) is TextContent else len(block.data)


def _bounded(
    content: tuple[TextContent | ImageContent, ...], structured: JsonValue, limit: int
) -> tuple[tuple[TextContent | ImageContent, ...], JsonValue]:
    """Return the content cut to `limit` characters (plus a notice), and the details kept."""
    total = sum(_size(b) for b in content)
    if structured is not None and len(json.dumps(structured, ensure_ascii=False)) > limit:
        structured = {"mule": f"structuredContent left out: larger than {limit:,} characters"}
    if total <= limit:
        return content, structured
    kept: list[TextContent | ImageContent] = []
    room = limit
    dropped_images = 0
    for block in content:
        if type(block) is TextContent:
            if room > 0:
                kept.append(TextContent(block.text[:room]))
                room -= min(room, len(block.text))
        elif _size(block) <= room:
            kept.append(block)
            room -= _size(block)
        else:
            dropped_images += 1
    images = f" and {dropped_images} image(s) left out" if dropped_images else ""
    notice = (
        f"[mule: this MCP tool result was truncated: it had {total:,} characters; the first "
        f"{limit - room:,} are shown{images} (the server's max_result_chars is {limit:,})]"
    )
    return (*kept, TextContent(notice)), structured


def _block(block: mcp_types.ContentBlock) -> TextContent | ImageContent:
    match block:
        case mcp_types.TextContent():
            return TextContent(block.text)
        case mcp_types.ImageContent():
            return ImageContent(block.data, block.mime_type)
        case mcp_types.AudioContent():
            return TextContent(f"[audio ({block.mime_type}) omitted: Pi content has no audio]")
        case mcp_types.ResourceLink():
            about = f": {block.description}" if block.description else ""
            return TextContent(f"[resource {block.name} at {block.uri}{about}]")
        case mcp_types.EmbeddedResource():
            res = block.resource
            if isinstance(res, mcp_types.TextResourceContents):
                return TextContent(res.text)
            mime = res.mime_type or "application/octet-stream"
            if mime.startswith("image/"):
                return ImageContent(res.blob, mime)
            return TextContent(f"[resource {res.uri} ({mime}) omitted: binary]")
    raise AssertionError(f"unknown MCP content block {block!r}")


def _json(value: object) -> JsonValue:
    """Return a wire value as plain JSON (pydantic may hand back its own containers)."""
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return json.loads(json.dumps(value, default=str))  # type: ignore[no-any-return]


__all__ = ["MAX_RESULT_CHARS", "ProgressSink", "mule_tool", "tool_result"]
