"""The fake OpenAI server: scripted responses over real HTTP/1.1 and SSE (see `fake_openai`)."""

from __future__ import annotations

import contextlib
import json
import threading
from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, final

import anyio
import anyio.from_thread
from anyio.abc import SocketStream, TaskStatus

from mule.pi import needs_extra
from mule.testing._http import read_request

with needs_extra("testing", "mule.testing's fake servers"):
    import h11

Script = list[dict[str, Any]]
"""A list of scripted responses (see `mule.testing.fake_openai` for their keys)."""


def sse_body(response: Mapping[str, Any]) -> Iterator[bytes]:
    """Yield the SSE frames of a scripted response, one per event."""
    named = bool(response.get("named"))
    for item in response.get("events", ()):
        if isinstance(item, Mapping) and set(item) == {"raw"}:
            yield str(item["raw"]).encode()
            continue
        data = json.dumps(item, separators=(",", ":"))
        head = f"event: {item['type']}\n" if named and isinstance(item, Mapping) else ""
        yield f"{head}data: {data}\n\n".encode()


def _fragment(data: bytes, response: Mapping[str, Any]) -> list[bytes]:
    sizes: list[int]
    if response.get("chunks"):
        sizes = [max(1, int(n)) for n in response["chunks"]]
    elif response.get("chunk_size"):
        sizes = [max(1, int(response["chunk_size"]))]
    else:
        return [data]
    out, i, k = [], 0, 0
    while i < len(data):
        n = sizes[k % len(sizes)]
        out.append(data[i : i + n])
        i, k = i + n, k + 1
    return out


def _is_api_path(path: str) -> bool:
    return path.endswith("/chat/completions") or path.endswith("/responses")


@final
class FakeOpenAI:
    """The fake server; a context manager (sync or async) that runs it in a background thread.

    Attributes:
        port: The port the server listens on once started (0 before).

    """

    def __init__(
        self, script: Script | None = None, *, port: int = 0, default: dict[str, Any] | None = None
    ) -> None:
        self._lock = threading.Lock()
        self._queue: deque[dict[str, Any]] = deque(script or ())
        self._default = default
        self._requests: list[dict[str, Any]] = []
        self._requested_port = port
        self.port = 0
        self._stack: contextlib.ExitStack | None = None
        self._portal: anyio.from_thread.BlockingPortal | None = None
        self._scope: anyio.CancelScope | None = None

    # -- scripting ------------------------------------------------------------------------
    @property
    def base_url(self) -> str:
        """The OpenAI-style base URL, `http://127.0.0.1:<port>/v1`."""
        return f"http://127.0.0.1:{self.port}/v1"

    def push(self, *responses: dict[str, Any]) -> None:
        """Queue responses, answered in order."""
        with self._lock:
            self._queue.extend(responses)

    def set_default(self, response: dict[str, Any] | None) -> None:
        """Answer with `response` whenever the queue is empty."""
        with self._lock:
            self._default = response

    @property
    def requests(self) -> list[dict[str, Any]]:
        """The requests received so far (copies)."""
        with self._lock:
            return [dict(r) for r in self._requests]

    @property
    def pending(self) -> int:
        """How many scripted responses are still queued."""
        with self._lock:
            return len(self._queue)

    def reset(self) -> None:
        """Clear the queue, the default and the recorded requests."""
        with self._lock:
            self._queue.clear()
            self._requests.clear()
            self._default = None

    # -- lifecycle ------------------------------------------------------------------------
    def start(self) -> FakeOpenAI:
        """Start serving in a background thread; returns once the port is bound."""
        if self._stack is not None:
            return self
        stack = contextlib.ExitStack()
        self._portal = stack.enter_context(anyio.from_thread.start_blocking_portal())
        self._stack = stack
        try:
            self._portal.start_task(self._serve)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Stop the server and its thread."""
        stack, self._stack = self._stack, None
        if stack is None:
            return
        if self._portal is not None and self._scope is not None:
            with contextlib.suppress(Exception):
                self._portal.call(self._scope.cancel)
        self._portal = None
        stack.close()

    def __enter__(self) -> FakeOpenAI:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    async def __aenter__(self) -> FakeOpenAI:
        return await anyio.to_thread.run_sync(self.start)

    async def __aexit__(self, *exc: object) -> None:
        await anyio.to_thread.run_sync(self.stop)

    async def serve(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Serve in the current event loop until cancelled; use with `TaskGroup.start`."""
        await self._serve(task_status=task_status)

    async def _serve(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        listener = await anyio.create_tcp_listener(
            local_host="127.0.0.1", local_port=self._requested_port
        )
        self.port = listener.extra(anyio.abc.SocketAttribute.local_port)
        with anyio.CancelScope() as scope:
            self._scope = scope
            task_status.started()
            async with listener:
                await listener.serve(self._handle)

    # -- HTTP -----------------------------------------------------------------------------
    async def _handle(self, stream: SocketStream) -> None:
        conn = h11.Connection(h11.SERVER)
        async with stream:
            while True:
                request = await read_request(conn, stream)
                if request is None:
                    return
                keep = await self._respond(conn, stream, *request)
                if not keep or conn.our_state is not h11.DONE or conn.their_state is not h11.DONE:
                    return
                try:
                    conn.start_next_cycle()
                except h11.LocalProtocolError:
                    return

    async def _send(self, conn: h11.Connection, stream: SocketStream, event: Any) -> bool:
        data = conn.send(event)
        if data:
            try:
                await stream.send(data)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                return False
        return True

    async def _respond(
        self, conn: h11.Connection, stream: SocketStream, request: h11.Request, raw: bytes
    ) -> bool:
        method = request.method.decode()
        target = request.target.decode()
        path = target.split("?", 1)[0]
        headers = {k.decode().lower(): v.decode() for k, v in request.headers}
        body: Any
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode("utf-8", "replace")
        if path.startswith("/__fake/"):
            return await self._control(conn, stream, method, path, body)
        if method != "POST" or not _is_api_path(path):
            return await self._plain(
                conn,
                stream,
                404,
                {"error": {"message": f"fake: no route {method} {path}", "type": "not_found"}},
            )
        record: dict[str, Any] = {
            "method": method,
            "path": path,
            "headers": headers,
            "body": body,
            "outcome": "completed",
        }
        with self._lock:
            self._requests.append(record)
            response = self._queue.popleft() if self._queue else self._default
        if response is None:
            record["outcome"] = "error"
            return await self._plain(
                conn,
                stream,
                500,
                {
                    "error": {
                        "message": "fake_openai: the script has no response left",
                        "type": "server_error",
                    }
                },
            )
        if response.get("head_delay_ms"):
            await anyio.sleep(float(response["head_delay_ms"]) / 1000)
        status = int(response.get("status", 200))
        extra = [(str(k), str(v)) for k, v in (response.get("headers") or {}).items()]
        if "events" not in response:
            return await self._plain(conn, stream, status, response.get("body"), extra)
        head = [
            ("content-type", "text/event-stream; charset=utf-8"),
            ("cache-control", "no-cache"),
            *extra,
        ]
        if not await self._send(conn, stream, h11.Response(status_code=status, headers=head)):
            record["outcome"] = "client_gone"
            return False
        delay = float(response.get("delay_ms") or 0) / 1000
        then = response.get("then") or ("end" if response.get("named") else "done")
        frames = list(sse_body(response))
        if then == "done":
            frames.append(b"data: [DONE]\n\n")
        if delay:
            pieces = [p for frame in frames for p in _fragment(frame, response)]
            paced = True
        else:
            pieces = _fragment(b"".join(frames), response)
            paced = False
        for piece in pieces:
            if paced:
                await anyio.sleep(delay)
            if not await self._send(conn, stream, h11.Data(data=piece)):
                record["outcome"] = "client_gone"
                return False
        if then == "disconnect":
            record["outcome"] = "disconnected"
            return False
        if then == "stall":
            await self._wait_for_close(stream)
            record["outcome"] = "client_gone"
            return False
        return await self._send(conn, stream, h11.EndOfMessage())

    async def _wait_for_close(self, stream: SocketStream) -> None:
        while True:
            try:
                await stream.receive(65536)
            except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError):
                return

    async def _plain(
        self,
        conn: h11.Connection,
        stream: SocketStream,
        status: int,
        body: Any,
        extra: Sequence[tuple[str, str]] = (),
    ) -> bool:
        if isinstance(body, str):
            data, ctype = body.encode(), "text/plain; charset=utf-8"
        else:
            data, ctype = json.dumps(body).encode(), "application/json"
        head = [("content-type", ctype), ("content-length", str(len(data))), *extra]
        return (
            await self._send(conn, stream, h11.Response(status_code=status, headers=head))
            and await self._send(conn, stream, h11.Data(data=data))
            and await self._send(conn, stream, h11.EndOfMessage())
        )

    async def _control(
        self, conn: h11.Connection, stream: SocketStream, method: str, path: str, body: Any
    ) -> bool:
        if path == "/__fake/requests":
            return await self._plain(conn, stream, 200, self.requests)
        if path == "/__fake/reset" and method == "POST":
            self.reset()
            return await self._plain(conn, stream, 200, {"ok": True})
        if path == "/__fake/script" and method == "POST":
            responses, default = parse_script(body)
            self.push(*responses)
            if default is not None:
                self.set_default(default)
            return await self._plain(conn, stream, 200, {"ok": True, "pending": self.pending})
        return await self._plain(
            conn, stream, 404, {"error": {"message": f"fake: no route {path}"}}
        )


def parse_script(value: Any) -> tuple[Script, dict[str, Any] | None]:
    """Read a script: a list of responses, or `{"responses": [...], "default": {...}}`."""
    if isinstance(value, list):
        return [dict(r) for r in value], None
    if isinstance(value, dict):
        default = value.get("default")
        return [dict(r) for r in value.get("responses", [])], dict(default) if default else None
    raise ValueError("a script is a list of responses or an object with 'responses'")


__all__ = ["FakeOpenAI", "Script", "parse_script"]
