"""A scriptable fake of Anthropic's Messages API on 127.0.0.1, speaking real HTTP and real SSE.

`serve_script(...)` runs a tiny HTTP/1.1 server in the caller's task group (asyncio or trio):
each request pops the next scripted `Reply`, whose body is sent as chunked transfer encoding
one step at a time, so a test can pause, stall, or drop the connection mid-body (a dropped
connection leaves the chunked body incomplete, which clients see as a broken stream). Requests
are recorded with their headers and JSON body.

The event builders (`message_start`, `text_block`, `thinking_block`, ...) write the SSE frames
Anthropic documents for `POST /v1/messages` with `"stream": true`. The server core is shared
with `mule.testing.fake_google`.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import asynccontextmanager
from typing import Any, TypeAlias, final

import anyio
from anyio.abc import SocketStream
from attrs import define, field, frozen

from mule.pi import needs_extra
from mule.testing._http import read_request

with needs_extra("testing", "mule.testing's fake servers"):
    import h11

# -- the scripted server ---------------------------------------------------------------------


@final
@frozen
class Pause:
    """Wait this long before sending the next body step.

    Attributes:
        ms: The wait, in milliseconds.

    """

    ms: float


@final
@frozen
class Stall:
    """Send nothing more until the client goes away (or the server shuts down)."""


@final
@frozen
class Drop:
    """Close the connection at once, leaving the chunked body unfinished."""


Step: TypeAlias = bytes | Pause | Stall | Drop


@final
@frozen
class Reply:
    """One scripted HTTP response: a status, headers, and a body sent step by step.

    Attributes:
        status: The HTTP status code.
        headers: The response headers as (name, value) pairs, in order (chunked transfer
            encoding and `connection: close` are added).
        steps: The body: each `bytes` step is sent as one chunk; `Pause`, `Stall` and
            `Drop` pace or break it.

    """

    status: int = 200
    headers: tuple[tuple[str, str], ...] = (("content-type", "text/event-stream"),)
    steps: tuple[Step, ...] = ()


@final
@frozen
class Recorded:
    """A request the fake received.

    Attributes:
        method: The HTTP method (`"POST"`).
        target: The request target: the path with its query string.
        headers: The request headers, names lower-cased.
        body: The raw request body.

    """

    method: str
    target: str
    headers: dict[str, str]
    body: bytes

    @property
    def path(self) -> str:
        """The target without its query string."""
        return self.target.split("?", 1)[0]

    @property
    def query(self) -> str:
        """The query string (without "?"), or ""."""
        return self.target.partition("?")[2]

    def json(self) -> Any:
        """Decode the request body as JSON."""
        return json.loads(self.body)


_REASONS = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    429: "Too Many Requests",
    500: "Internal Server Error",
    503: "Service Unavailable",
    529: "Overloaded",
}


@define
class FakeServer:
    """A running fake: its base URL, the replies still queued, and the requests seen.

    Attributes:
        url: The server's base URL (`http://127.0.0.1:<port>`).
        replies: The replies still queued; each request takes the first (a 404 when none
            is left).
        requests: Every request received, in order.
        connections_closed: Connections that have ended, whichever side closed them.

    """

    url: str
    replies: deque[Reply] = field(factory=deque)
    requests: list[Recorded] = field(factory=list)
    connections_closed: int = 0

    def push(self, *replies: Reply) -> None:
        """Queue replies for the next requests, in order."""
        self.replies.extend(replies)

    async def _handle(self, stream: SocketStream) -> None:
        try:
            async with stream:
                request = await _read_request(stream)
                if request is None:
                    return
                self.requests.append(request)
                reply = (
                    self.replies.popleft()
                    if self.replies
                    else Reply(404, (("content-type", "text/plain"),), (b"no scripted reply",))
                )
                await _send_reply(stream, reply)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, anyio.EndOfStream):
            pass  # the client went away: that is what some tests are about
        finally:
            self.connections_closed += 1


async def _read_request(stream: SocketStream) -> Recorded | None:
    got = await read_request(h11.Connection(h11.SERVER), stream)
    if got is None:
        return None
    head, body = got
    headers = {k.decode().lower(): v.decode() for k, v in head.headers}
    return Recorded(head.method.decode(), head.target.decode(), headers, body)


async def _send_reply(stream: SocketStream, reply: Reply) -> None:
    reason = _REASONS.get(reply.status, "Status")
    lines = [f"HTTP/1.1 {reply.status} {reason}"]
    lines += [f"{name}: {value}" for name, value in reply.headers]
    lines += ["transfer-encoding: chunked", "connection: close", "", ""]
    await stream.send("\r\n".join(lines).encode())
    for step in reply.steps:
        if isinstance(step, Pause):
            await anyio.sleep(step.ms / 1000)
        elif isinstance(step, Stall):
            await anyio.sleep_forever()
        elif isinstance(step, Drop):
            return
        elif step:
            await stream.send(b"%x\r\n%s\r\n" % (len(step), step))
    await stream.send(b"0\r\n\r\n")


@asynccontextmanager
async def serve_script(*replies: Reply) -> AsyncIterator[FakeServer]:
    """Run a fake server on 127.0.0.1 for the block; it answers `replies` in turn."""
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
    port = listener.extra(anyio.abc.SocketAttribute.local_port)
    server = FakeServer(f"http://127.0.0.1:{port}", deque(replies))
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(listener.serve, server._handle)
            try:
                yield server
            finally:
                tg.cancel_scope.cancel()
    finally:
        await listener.aclose()


# -- Anthropic SSE frames ----------------------------------------------------------------------

Event: TypeAlias = tuple[str, Any]  # (SSE event name, JSON payload)


def frame(name: str, data: Any) -> bytes:
    """Encode one SSE event as Anthropic sends it: an `event:` line and a `data:` line."""
    payload = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
    return f"event: {name}\ndata: {payload}\n\n".encode()


def message_start(
    *,
    message_id: str = "msg_01XFDUDYJgAACzvnptvVoYEL",
    model: str = "claude-sonnet-4-5",
    input_tokens: int = 0,
    output_tokens: int = 1,
    cache_read: int | None = None,
    cache_creation: int | None = None,
) -> Event:
    """Build the first event: the message shell with its id, model and input usage."""
    usage: dict[str, Any] = {"input_tokens": input_tokens, "output_tokens": output_tokens}
    if cache_read is not None:
        usage["cache_read_input_tokens"] = cache_read
    if cache_creation is not None:
        usage["cache_creation_input_tokens"] = cache_creation
    return (
        "message_start",
        {
            "type": "message_start",
            "message": {
                "id": message_id,
                "type": "message",
                "role": "assistant",
                "model": model,
                "content": [],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": usage,
            },
        },
    )


def block_start(index: int, block: dict[str, Any]) -> Event:
    """Open content block `index`."""
    return (
        "content_block_start",
        {"type": "content_block_start", "index": index, "content_block": block},
    )


def block_delta(index: int, delta: dict[str, Any]) -> Event:
    """Build a delta for content block `index`."""
    return ("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta})


def block_stop(index: int) -> Event:
    """Close content block `index`."""
    return ("content_block_stop", {"type": "content_block_stop", "index": index})


def text_block(index: int, *deltas: str) -> list[Event]:
    """Build a whole text block streamed as `deltas`."""
    return [
        block_start(index, {"type": "text", "text": ""}),
        *(block_delta(index, {"type": "text_delta", "text": d}) for d in deltas),
        block_stop(index),
    ]


def thinking_block(index: int, *deltas: str, signature: str | None = None) -> list[Event]:
    """Build a thinking block; its signature comes as a `signature_delta` before the stop."""
    events = [
        block_start(index, {"type": "thinking", "thinking": "", "signature": ""}),
        *(block_delta(index, {"type": "thinking_delta", "thinking": d}) for d in deltas),
    ]
    if signature is not None:
        events.append(block_delta(index, {"type": "signature_delta", "signature": signature}))
    events.append(block_stop(index))
    return events


def redacted_thinking_block(index: int, data: str) -> list[Event]:
    """Build a redacted thinking block: the encrypted payload comes whole, with no deltas."""
    return [block_start(index, {"type": "redacted_thinking", "data": data}), block_stop(index)]


def tool_block(index: int, call_id: str, name: str, *fragments: str) -> list[Event]:
    """Build a tool_use block whose input JSON streams as `input_json_delta` fragments."""
    return [
        block_start(index, {"type": "tool_use", "id": call_id, "name": name, "input": {}}),
        *(block_delta(index, {"type": "input_json_delta", "partial_json": f}) for f in fragments),
        block_stop(index),
    ]


def message_delta(
    stop_reason: str | None = "end_turn",
    *,
    output_tokens: int = 0,
    input_tokens: int | None = None,
    cache_read: int | None = None,
    cache_creation: int | None = None,
) -> Event:
    """Build the message-level delta: the stop reason and cumulative usage."""
    usage: dict[str, Any] = {"output_tokens": output_tokens}
    if input_tokens is not None:
        usage["input_tokens"] = input_tokens
    if cache_read is not None:
        usage["cache_read_input_tokens"] = cache_read
    if cache_creation is not None:
        usage["cache_creation_input_tokens"] = cache_creation
    return (
        "message_delta",
        {
            "type": "message_delta",
            "delta": {"stop_reason": stop_reason, "stop_sequence": None},
            "usage": usage,
        },
    )


def message_stop() -> Event:
    """Build the last event of a complete message."""
    return ("message_stop", {"type": "message_stop"})


def ping() -> Event:
    """Build a keep-alive event."""
    return ("ping", {"type": "ping"})


def stream_error(kind: str = "overloaded_error", message: str = "Overloaded") -> Event:
    """Build an error delivered inside an open stream."""
    return ("error", {"type": "error", "error": {"type": kind, "message": message}})


def sse_reply(events: Iterable[Event | Step], *, headers: Sequence[tuple[str, str]] = ()) -> Reply:
    """Build a 200 event-stream reply; events are framed, control steps (Pause...) kept."""
    steps: list[Step] = []
    for item in events:
        if isinstance(item, tuple):
            steps.append(frame(*item))
        else:
            steps.append(item)
    return Reply(
        200,
        (("content-type", "text/event-stream"), ("request-id", "req_fake"), *headers),
        tuple(steps),
    )


def message(
    *blocks: list[Event],
    stop_reason: str = "end_turn",
    input_tokens: int = 10,
    output_tokens: int = 5,
    cache_read: int | None = None,
    cache_creation: int | None = None,
    model: str = "claude-sonnet-4-5",
) -> list[Event]:
    """Build a complete, well-formed message stream around the given blocks."""
    return [
        message_start(
            model=model,
            input_tokens=input_tokens,
            cache_read=cache_read,
            cache_creation=cache_creation,
        ),
        ping(),
        *(event for block in blocks for event in block),
        message_delta(stop_reason, output_tokens=output_tokens),
        message_stop(),
    ]


_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}


def error_reply(status: int, message: str, *, headers: Sequence[tuple[str, str]] = ()) -> Reply:
    """Build a JSON error response shaped like Anthropic's (`{"type": "error", ...}`)."""
    body = {
        "type": "error",
        "error": {"type": _ERROR_TYPES.get(status, "api_error"), "message": message},
    }
    return Reply(
        status,
        (("content-type", "application/json"), ("request-id", "req_fake"), *headers),
        (json.dumps(body).encode(),),
    )


__all__ = [
    "Drop",
    "Event",
    "FakeServer",
    "Pause",
    "Recorded",
    "Reply",
    "Stall",
    "Step",
    "block_delta",
    "block_start",
    "block_stop",
    "error_reply",
    "frame",
    "message",
    "message_delta",
    "message_start",
    "message_stop",
    "ping",
    "redacted_thinking_block",
    "serve_script",
    "sse_reply",
    "stream_error",
    "text_block",
    "thinking_block",
    "tool_block",
]
