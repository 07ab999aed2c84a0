"""`MCPServer`: one MCP session (stdio subprocess or streamable HTTP) owned by a background task.

The SDK's transports run their own task groups: a transport that crashes (an HTTP server that
vanished mid-response) raises out of the client's context and would cancel whoever entered it.
So a private task owns the session, catches its end, and turns it into one `MCPServerError` that
every pending and later request of this server reports; requests run in their own cancel scopes
so a death, a garbage line or a closing server cancels them at once instead of leaving a wait.
"""

from __future__ import annotations

import functools
import math
import os
import shlex
import tempfile
import warnings
from collections.abc import Awaitable, Callable, Collection, Coroutine, Mapping, Sequence
from contextlib import AsyncExitStack
from pathlib import Path
from typing import IO, Any, Protocol, TypeVar, final
from urllib.parse import urlsplit

import anyio
import anyio.abc
import httpx2
import mcp_types
from mcp import Client, StdioServerParameters, stdio_client
from mcp.client import IncomingMessage, Transport
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError

from mule.effects import Replay
from mule.mcp._errors import MCPServerError, MCPToolSkipped
from mule.mcp._tools import MAX_RESULT_CHARS, ProgressSink, mule_tool
from mule.promise import AbortSignal, MuleTool

T = TypeVar("T")
_STDERR_TAIL = 4096
_CLOSE_TIMEOUT_S = 10.0
_PAGE_CAP = 100  # a server whose tools/list never stops paginating cannot hang `tools()`
MAX_TOOLS = 256
"""The default bound on how many tools one MCP server may list."""
_CLIENT = mcp_types.Implementation(name="mule", version="0")


class _Endpoint(Protocol):
    label: str

    def open(self, stack: AsyncExitStack) -> Awaitable[Transport]: ...

    def stderr(self) -> str: ...

    def close(self) -> None: ...


@final
class _Stdio:
    """A subprocess speaking MCP on stdin/stdout; its stderr goes to a file kept for errors."""

    def __init__(self, params: StdioServerParameters) -> None:
        self.params = params
        self.label = shlex.join([Path(params.command).name, *params.args])
        self._errlog: IO[str] | None = None

    async def open(self, stack: AsyncExitStack) -> Transport:
        # Kept open past the session (until `close`): a failure may be read after the exit.
        errlog = tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace")  # noqa: SIM115
        self._errlog = errlog
        return stdio_client(self.params, errlog=errlog)

    def close(self) -> None:
        if self._errlog is not None:
            self._errlog.close()

    def stderr(self) -> str:
        errlog = self._errlog
        if errlog is None or errlog.closed:
            return ""
        fd = errlog.fileno()
        size = os.fstat(fd).st_size
        start = max(0, size - _STDERR_TAIL)
        tail = os.pread(fd, size - start, start).decode("utf-8", "replace")
        if start:
            tail = tail.partition("\n")[2] or tail  # drop the cut first line
        return tail.rstrip()


@final
class _Http:
    """A streamable-HTTP endpoint; headers (credentials, usually) stay out of every message."""

    def __init__(self, url: str, headers: Mapping[str, str] | None, connect_timeout: float) -> None:
        self.url = url
        self.headers = dict(headers or {})
        self.connect_timeout = connect_timeout
        parts = urlsplit(url)
        self.label = f"{parts.scheme}://{parts.hostname}{f':{parts.port}' if parts.port else ''}"
        self.label += parts.path

    async def open(self, stack: AsyncExitStack) -> Transport:
        timeout = httpx2.Timeout(self.connect_timeout, read=300.0)  # a response stream may idle
        http = await stack.enter_async_context(
            httpx2.AsyncClient(headers=self.headers, timeout=timeout)
        )
        return streamable_http_client(self.url, http_client=http)

    def stderr(self) -> str:
        return ""

    def close(self) -> None:
        return None


def _list_page(client: Client, cursor: str | None) -> Awaitable[mcp_types.ListToolsResult]:
    return client.list_tools(cursor=cursor)


def _count(name: str, value: int) -> int:
    if type(value) is not int or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return value


def _positive(name: str, value: float) -> float:
    if not (isinstance(value, int | float) and 0 < value < math.inf):  # type: ignore[redundant-expr]
        raise ValueError(f"{name} must be a positive, finite number of seconds, got {value!r}")
    return float(value)


def _short(exc: BaseException, limit: int = 300) -> str:
    text = str(exc) or type(exc).__name__
    text = text if len(text) <= limit else text[:limit] + "…"
    return f"{type(exc).__name__}: {text}" if str(exc) else text


def _leaf(exc: BaseException) -> BaseException:
    """Return the first real error inside (nested) exception groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


@final
class MCPServer:
    """An MCP server whose tools become `MuleTool`s.

    `async with server:` connects (spawns a stdio server, or opens an HTTP session) and closes;
    `await server.tools()` lists its tools. Every wait is bounded: connecting and listing by
    `connect_timeout`, each tool call by `call_timeout`. A server that dies, hangs, or sends
    something that is not MCP fails the call in progress (and every later one) with an
    `MCPServerError` naming it; inside a run that is a `MuleError(tool)`. What a server can put
    into a run is bounded too: listing more than `max_tools` tools is an `MCPServerError`, and a
    tool result longer than `max_result_chars` characters reaches the model cut, with a notice.

    >>> server = MCPServer.stdio("python", ["-m", "my_server"], name="files")
    >>> server.name
    'files'
    """

    def __init__(
        self,
        endpoint: _Endpoint,
        *,
        name: str | None,
        connect_timeout: float,
        call_timeout: float,
        max_result_chars: int = MAX_RESULT_CHARS,
        max_tools: int = MAX_TOOLS,
    ) -> None:
        self._endpoint = endpoint
        self._given_name = name
        self._connect_timeout = _positive("connect_timeout", connect_timeout)
        self._call_timeout = _positive("call_timeout", call_timeout)
        self._max_result_chars = _count("max_result_chars", max_result_chars)
        self._max_tools = _count("max_tools", max_tools)
        self._client: Client | None = None
        self._failure: MCPServerError | None = None
        self._closed = False
        self._entered = False
        self._stack: AsyncExitStack | None = None
        self._tg: anyio.abc.TaskGroup | None = None
        self._waits: set[anyio.CancelScope] = set()

    # Made on entry: anyio primitives need the running event loop.
    _owner: anyio.CancelScope
    _closing: anyio.Event
    _settled: anyio.Event  # connected, or the owner gave up
    _owner_done: anyio.Event

    @classmethod
    def stdio(
        cls,
        command: str,
        args: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
        *,
        name: str | None = None,
        connect_timeout: float = 30.0,
        call_timeout: float = 300.0,
        max_result_chars: int = MAX_RESULT_CHARS,
        max_tools: int = MAX_TOOLS,
    ) -> MCPServer:
        """Return a server run as a subprocess, speaking MCP over its stdin and stdout.

        The child gets only a minimal environment (PATH, HOME, USER, ...) plus `env`, so the
        host's secrets reach it only when you pass them. Its stderr is kept for error messages.
        """
        params = StdioServerParameters(
            command=command,
            args=list(args),
            env=dict(env) if env is not None else None,
            cwd=os.fspath(cwd) if cwd is not None else None,
        )
        return cls(
            _Stdio(params),
            name=name,
            connect_timeout=connect_timeout,
            call_timeout=call_timeout,
            max_result_chars=max_result_chars,
            max_tools=max_tools,
        )

    @classmethod
    def http(
        cls,
        url: str,
        headers: Mapping[str, str] | None = None,
        *,
        name: str | None = None,
        connect_timeout: float = 30.0,
        call_timeout: float = 300.0,
        max_result_chars: int = MAX_RESULT_CHARS,
        max_tools: int = MAX_TOOLS,
    ) -> MCPServer:
        """Return a server reached over MCP's streamable HTTP transport at `url`.

        `headers` (an `Authorization` header, say) go with every request and nowhere else.
        """
        endpoint = _Http(url, headers, _positive("connect_timeout", connect_timeout))
        return cls(
            endpoint,
            name=name,
            connect_timeout=connect_timeout,
            call_timeout=call_timeout,
            max_result_chars=max_result_chars,
            max_tools=max_tools,
        )

    @property
    def name(self) -> str:
        """The server's name in errors: the one given, else its own, else its command or URL."""
        if self._given_name is not None:
            return self._given_name
        client = self._client
        info = client.server_info if client is not None else None
        return info.name if info is not None and info.name else self._endpoint.label

    # -- lifecycle --------------------------------------------------------------------------

    async def __aenter__(self) -> MCPServer:
        if self._entered:
            raise RuntimeError(f"MCP server {self.name!r} was already opened; make a new one")
        self._entered = True
        self._owner = anyio.CancelScope()
        self._closing = anyio.Event()
        self._settled = anyio.Event()
        self._owner_done = anyio.Event()
        stack = AsyncExitStack()
        self._tg = await stack.enter_async_context(anyio.create_task_group())
        self._stack = stack
        self._tg.start_soon(self._own)
        try:
            with anyio.move_on_after(self._connect_timeout):
                await self._settled.wait()
        except BaseException:  # the host was cancelled while connecting: leave nothing behind
            await self._shutdown()
            raise
        if self._client is None or self._failure is not None:
            problem = f"did not finish connecting within {self._connect_timeout:g} s"
            if self._failure is not None:
                problem = self._failure.problem
            self._failure = self._failure or self._error(problem)
            await self._shutdown(keep_stderr=True)
            # The process has exited now: its stderr is complete.
            failure = self._error(problem)
            self._endpoint.close()
            raise failure
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._shutdown()

    async def _shutdown(self, *, keep_stderr: bool = False) -> None:
        if self._closed or not self._entered:
            return
        self._closed = True
        for scope in tuple(self._waits):
            scope.cancel()
        self._closing.set()
        if self._client is None:  # still connecting: nothing to close politely
            self._owner.cancel()
        with anyio.CancelScope(shield=True):
            with anyio.move_on_after(_CLOSE_TIMEOUT_S):
                await self._owner_done.wait()
            self._owner.cancel()  # a shutdown that overran its bound
        stack, self._stack = self._stack, None
        try:
            if stack is not None:
                await stack.aclose()  # the task group: its calls were cancelled above
        finally:
            if not keep_stderr:
                self._endpoint.close()

    async def _own(self) -> None:
        """Hold the session open until closing; record how it ended if it ended on its own."""
        ended: BaseException | None = None
        try:
            with self._owner:
                async with AsyncExitStack() as stack:
                    transport = await self._endpoint.open(stack)
                    client = Client(
                        transport,
                        message_handler=self._on_message,
                        client_info=_CLIENT,
                        cache=None,
                    )
                    self._client = await stack.enter_async_context(client)
                    self._settled.set()
                    await self._closing.wait()
        except Exception as exc:
            ended = exc
        finally:
            self._client = None
            if not self._closed and self._failure is None:
                what = "connecting" if not self._settled.is_set() else "the session"
                detail = f": {_short(_leaf(ended))}" if ended is not None else ""
                self._fail(self._error(f"ended {what}{detail}"))
            self._settled.set()
            self._owner_done.set()

    async def _on_message(self, message: IncomingMessage) -> None:
        if isinstance(message, Exception):  # the transport could not parse what the server sent
            self._fail(self._error(f"sent a message that is not MCP: {_short(message)}"))

    def _error(self, message: str) -> MCPServerError:
        return MCPServerError(self.name, message, stderr=self._endpoint.stderr())

    def _fail(self, failure: MCPServerError) -> None:
        """Mark the server failed: every wait on it stops now, and the session closes."""
        if self._failure is None:
            self._failure = failure
        for scope in tuple(self._waits):
            scope.cancel()
        self._settled.set()
        self._closing.set()
        if self._client is None:
            self._owner.cancel()

    def _usable(self, what: str) -> Client:
        if self._failure is not None:
            raise self._failure
        if self._client is None or self._closed:
            state = "is closed" if self._closed else "is not open (use `async with server:`)"
            raise MCPServerError(self.name, f"{state}: cannot {what}")
        return self._client

    async def _guarded(
        self,
        what: str,
        request: Callable[[Client], Awaitable[T]],
        limit_s: float | None,
        signal: AbortSignal | None = None,
    ) -> T:
        """Run one request; any way it can fail without an answer becomes `MCPServerError`."""
        client = self._usable(what)
        scope = anyio.CancelScope()

        def on_abort(_: AbortSignal) -> None:
            scope.cancel()

        self._waits.add(scope)
        if signal is not None:
            signal.add_listener(on_abort)
        try:
            with scope:
                if limit_s is None:
                    return await request(client)
                with anyio.fail_after(limit_s):
                    return await request(client)
        except TimeoutError as exc:
            raise self._error(f"did not answer {what} within {limit_s:g} s") from exc
        except MCPError as exc:
            if exc.code == mcp_types.REQUEST_TIMEOUT:
                raise self._error(f"did not answer {what} within {self._call_timeout:g} s") from exc
            if exc.code == mcp_types.CONNECTION_CLOSED:
                raise (
                    self._failure or self._error(f"closed the connection during {what}")
                ) from exc
            raise
        except ValidationError as exc:
            raise self._error(f"answered {what} with an invalid result: {_short(exc)}") from exc
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as exc:
            raise (self._failure or self._error(f"went away during {what}: {_short(exc)}")) from exc
        finally:
            self._waits.discard(scope)
            if signal is not None:
                signal.remove_listener(on_abort)
        # The scope was cancelled: by the run's abort, or because the server failed or closed.
        if self._failure is not None:
            raise self._failure
        if signal is not None and signal.aborted:
            signal.throw_if_aborted()
        raise MCPServerError(self.name, f"was closed during {what}")

    # -- tools ------------------------------------------------------------------------------

    async def tools(
        self,
        *,
        prefix: str = "",
        trust_annotations: bool = False,
        replay: Mapping[str, Replay] | None = None,
        taken: Collection[str] = (),
    ) -> tuple[MuleTool, ...]:
        """Return the server's tools as `MuleTool`s, named `prefix + name`.

        Replay is `unsafe` unless you say otherwise: `replay={"search": "safe"}` sets it per
        tool (by the server's name for it), and `trust_annotations=True` takes the server's
        `readOnlyHint` / `idempotentHint` as meaning `safe`. Those annotations are the
        server's claims, so trusting them is the host's decision.

        A tool whose name (with the prefix) is in `taken` (the host's own tools, or another
        server's) or was listed before by this server is skipped with an `MCPToolSkipped`
        warning, so one server cannot fail a run with a duplicate name. A server that lists
        more than `max_tools` tools raises `MCPServerError`.
        """
        listed: list[mcp_types.Tool] = []
        cursor: str | None = None
        for _ in range(_PAGE_CAP):
            page = await self._guarded(
                "tools/list",
                functools.partial(_list_page, cursor=cursor),
                self._connect_timeout,
            )
            listed.extend(page.tools)
            if len(listed) > self._max_tools:
                raise self._error(
                    f"listed more than {self._max_tools} tools (max_tools); "
                    "none of its tools were taken"
                )
            cursor = page.next_cursor
            if cursor is None:
                break
        names = {t.name for t in listed}
        unknown = sorted(set(replay or ()) - names)
        if unknown:
            raise ValueError(f"replay names tools that {self.name!r} does not have: {unknown}")
        used = set(taken)
        out = []
        for t in listed:
            name = prefix + t.name
            if name in used:
                warnings.warn(
                    MCPToolSkipped(
                        f"MCP server {self.name!r}: tool {name!r} skipped, the name is taken"
                    ),
                    stacklevel=2,
                )
                continue
            used.add(name)
            choice = (replay or {}).get(t.name)
            if choice is None:
                hints = t.annotations if trust_annotations else None
                safe = hints is not None and bool(hints.read_only_hint or hints.idempotent_hint)
                choice = "safe" if safe else "unsafe"
            out.append(mule_tool(self, t, name, choice, self._max_result_chars))
        return tuple(out)

    async def call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any],
        signal: AbortSignal | None = None,
        progress: ProgressSink | None = None,
    ) -> mcp_types.CallToolResult:
        """Call the server's tool `name`; the signal's abort sends MCP's cancellation.

        Raises `MCPServerError` when no answer can come (death, hang, garbage, closed), the
        SDK's `MCPError` when the server answered with a JSON-RPC error, and the abort
        reason when `signal` aborted the call.
        """
        what = f"tools/call {name}"
        return await self._guarded(
            what,
            lambda c: c.call_tool(
                name,
                dict(arguments),
                read_timeout_seconds=self._call_timeout,
                progress_callback=progress,
            ),
            None,  # the SDK times the call: on expiry it sends the cancellation itself
            signal,
        )

    def spawn(self, fn: Callable[[], Coroutine[Any, Any, None]]) -> None:
        """Run `fn` in this server's task group (it must not raise)."""
        if self._tg is None or self._closed:
            raise self._failure or MCPServerError(self.name, "is closed: cannot call a tool")
        self._tg.start_soon(fn)


async def all_tools(
    *servers: MCPServer, taken: Collection[str] = (), trust_annotations: bool = False
) -> tuple[MuleTool, ...]:
    """Return the tools of every server, in order; a name already taken is skipped.

    The first server (or the host's `taken` names) keeps a name; a later tool of the same name
    is skipped with an `MCPToolSkipped` warning, so two servers that list the same tool do
    not fail the run. Give servers a `prefix` (`server.tools(prefix=...)`) to keep both.
    """
    names = set(taken)
    out: list[MuleTool] = []
    for server in servers:
        tools = await server.tools(taken=names, trust_annotations=trust_annotations)
        names.update(t.descriptor.name for t in tools)
        out.extend(tools)
    return tuple(out)


__all__ = ["MAX_TOOLS", "MCPServer", "all_tools"]
