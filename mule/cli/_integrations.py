"""`mule run --mcp/--mcp-url` (MCP servers' tools) and `--otel` (OTLP traces and metrics)."""

from __future__ import annotations

import shlex
from collections.abc import Callable, Sequence
from contextlib import AsyncExitStack

from returns.result import Failure, Result, Success

from mule.journal import Journal
from mule.pi import Message
from mule.promise import MulePromiseListener, MuleTool

TRACE_KEY = "otel.traceparent"


async def mcp_tools(
    stack: AsyncExitStack,
    commands: Sequence[str],
    urls: Sequence[str],
    builtin: Sequence[MuleTool],
) -> Result[tuple[MuleTool, ...], str]:
    """Open every MCP server on `stack` and return their tools, or why that is not possible."""
    if not commands and not urls:
        return Success(())
    try:
        from mule.mcp import MCPServer, MCPServerError
    except ImportError as exc:
        return Failure(f"--mcp needs the MCP SDK: pip install 'mule[mcp]' ({exc})")
    servers: list[MCPServer] = []
    for command in commands:
        argv = shlex.split(command)
        if not argv:
            return Failure("--mcp needs a command, e.g. --mcp 'python my_server.py'")
        servers.append(MCPServer.stdio(argv[0], argv[1:]))
    servers.extend(MCPServer.http(url) for url in urls)
    owners = {t.descriptor.name: "the built-in tools" for t in builtin}
    out: list[MuleTool] = []
    for server in servers:
        try:
            await stack.enter_async_context(server)
            tools = await server.tools()
        except MCPServerError as exc:
            return Failure(str(exc))
        for tool in tools:
            name = tool.descriptor.name
            if name in owners:
                return Failure(
                    f"two tools are called {name!r}: MCP server {server.name!r} and "
                    f"{owners[name]} (leave one out with --tools, or drop a server)"
                )
            owners[name] = f"MCP server {server.name!r}"
            out.append(tool)
    return Success(tuple(out))


async def otel_tracing(
    stack: AsyncExitStack,
    *,
    journal: Journal | None,
    run_id: str | None,
    resuming: bool,
    messages: Sequence[Message],
) -> Result[Callable[[MulePromiseListener], MulePromiseListener], str]:
    """Set up OTLP export (flushed when `stack` closes); return what wraps a listener in tracing.

    With a journal, the run's trace context is kept with the run, and a resumed run links to
    the trace of the run it continues.
    """
    try:
        from mule.otel import OtlpSetupError, link_to, otlp_export, traced
    except ImportError as exc:
        return Failure(f"--otel needs OpenTelemetry: pip install 'mule[otel-export]' ({exc})")
    try:
        export = otlp_export()
    except OtlpSetupError as exc:
        return Failure(str(exc))

    async def flush() -> None:
        import anyio.to_thread

        await anyio.to_thread.run_sync(export.shutdown)

    stack.push_async_callback(flush)
    continues: str | None = None
    keep = None
    if journal is not None and run_id is not None:
        if resuming:
            continues = journal.meta(run_id).get(TRACE_KEY)
            if continues is not None:
                try:
                    link_to(continues)
                except ValueError:
                    continues = None  # a damaged value: trace the run, without the link
        recorded = journal

        def keep_trace(parent: str) -> None:
            recorded.set_meta(run_id, TRACE_KEY, parent)

        keep = keep_trace

    def wrap(listener: MulePromiseListener) -> MulePromiseListener:
        return traced(
            listener,
            tracer_provider=export.tracer_provider,
            meter_provider=export.meter_provider,
            conversation_id=run_id,
            messages=messages,
            continues=continues,
            on_run_start=keep,
        )

    return Success(wrap)


__all__ = ["mcp_tools", "otel_tracing"]
