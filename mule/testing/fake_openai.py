"""A scriptable fake of OpenAI's streaming APIs on 127.0.0.1: real HTTP/1.1, real SSE.

It serves `POST .../chat/completions` and `POST .../responses` (any prefix, so a base URL of
`http://127.0.0.1:<port>/v1` works for mule and for the `pi` CLI alike) from a FIFO queue of
scripted responses, and records every request it receives.

Run it
    * in-process, from sync or async code: `with FakeOpenAI() as fake: fake.base_url` (the
      server runs its own event loop in a background thread; `fake.push(...)` scripts it,
      `fake.requests` shows what arrived);
    * as a process: `python -m mule.testing.fake_openai --port 0 --script script.json`, which
      prints `listening on http://127.0.0.1:<port>/v1` and serves until killed.

Control endpoints (for a server in another process): `POST /__fake/script` appends the
responses in its JSON body (a script, see below), `GET /__fake/requests` returns the recorded
requests, `POST /__fake/reset` clears both.

Script format (JSON): either a list of responses or `{"responses": [...], "default": <response>}`;
`default` answers when the queue is empty (otherwise a 500 error says the script ran out).
A response is an object:
    `status`      HTTP status (default 200)
    `headers`     extra response headers, e.g. `{"retry-after": "2"}`
    `body`        for a plain (non-SSE) response: a JSON value or a string, sent with
                  Content-Length; used when `events` is absent (error responses)
    `events`      the SSE stream: each item is a JSON object sent as `data: <json>` (with an
                  `event: <type>` line first when `named` is true), or `{"raw": "..."}` written
                  verbatim (malformed chunks, comments, hand-made frames)
    `named`       write `event:` lines from each object's "type" (the Responses API does)
    `then`        after the events: "done" (send `data: [DONE]`, end the body; the default for
                  chat completions), "end" (end the body with nothing more; the default for
                  named streams), "disconnect" (close the socket mid-body), or "stall" (send
                  nothing more until the client goes away)
    `chunk_size`  split the SSE body into HTTP chunks of this many bytes (fragmentation);
                  or `chunks`: an explicit list of byte counts, repeated cyclically
    `delay_ms`    pause before each event
    `head_delay_ms` pause before sending the status line (to exercise request timeouts)
The builders below (`chat_text`, `chat_tool_calls`, `chat_error`, `responses_text`, ...) write
these objects with the chunk shapes OpenAI documents.

Recorded requests are dicts: `method`, `path`, `headers` (lower-cased names), `body` (parsed JSON
or text) and `outcome` ("completed", "disconnected", "client_gone" after a stall, "error").
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import threading
from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, final

import anyio
import anyio.from_thread
import h11
from anyio.abc import SocketStream, TaskStatus

Script = list[dict[str, Any]]

# -- builders: chat completions --------------------------------------------------------------


def _split(text: str, pieces: int) -> list[str]:
    if pieces <= 1 or len(text) <= 1:
        return [text]
    size = max(1, -(-len(text) // pieces))
    return [text[i : i + size] for i in range(0, len(text), size)]


def _chunk(
    cid: str, model: str, delta: Mapping[str, Any], finish: str | None = None, **extra: Any
) -> dict[str, Any]:
    return {
        "id": cid,
        "object": "chat.completion.chunk",
        "created": 1_700_000_000,
        "model": model,
        "system_fingerprint": "fp_fake",
        "choices": [{"index": 0, "delta": dict(delta), "logprobs": None, "finish_reason": finish}],
        **extra,
    }


def chat_usage(
    prompt: int = 10, completion: int = 5, cached: int = 0, reasoning: int = 0
) -> dict[str, Any]:
    """Return a Chat Completions usage object."""
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": cached, "audio_tokens": 0},
        "completion_tokens_details": {
            "reasoning_tokens": reasoning,
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        },
    }


def tool_call(call_id: str, name: str, arguments: Any, pieces: int = 1) -> dict[str, Any]:
    """Describe one streamed tool call; `arguments` (a JSON value or raw string) in `pieces`."""
    raw = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {"id": call_id, "name": name, "fragments": _split(raw, pieces)}


def chat_stream(
    *,
    text: str | None = None,
    pieces: int = 1,
    reasoning: str | None = None,
    reasoning_field: str = "reasoning_content",
    calls: Sequence[Mapping[str, Any]] = (),
    interleave: bool = False,
    finish_reason: str | None = None,
    usage: Mapping[str, Any] | None = None,
    model: str = "gpt-fake",
    cid: str = "chatcmpl-fake",
    then: str = "done",
    **options: Any,
) -> dict[str, Any]:
    """Build a scripted Chat Completions stream (reasoning, text, tool calls, finish, usage).

    With `interleave`, the tool calls' argument fragments alternate between calls (parallel
    calls streamed by index). `usage` arrives in its own final chunk with empty `choices`, as
    with `stream_options.include_usage`; `options` are extra response keys (`chunk_size`, ...).
    """
    events: list[dict[str, Any]] = []
    u: dict[str, Any] = {"usage": None} if usage is not None else {}
    events.append(_chunk(cid, model, {"role": "assistant", "content": "", "refusal": None}, **u))
    if reasoning is not None:
        for part in _split(reasoning, pieces):
            events.append(_chunk(cid, model, {reasoning_field: part}, **u))
    if text is not None:
        for part in _split(text, pieces):
            events.append(_chunk(cid, model, {"content": part}, **u))
    heads = [
        {
            "index": i,
            "id": c["id"],
            "type": "function",
            "function": {"name": c["name"], "arguments": ""},
        }
        for i, c in enumerate(calls)
    ]
    frags = [
        [{"index": i, "function": {"arguments": f}} for f in c["fragments"]]
        for i, c in enumerate(calls)
    ]
    if interleave:
        for h in heads:
            events.append(_chunk(cid, model, {"tool_calls": [h]}, **u))
        for k in range(max((len(f) for f in frags), default=0)):
            for f in frags:
                if k < len(f):
                    events.append(_chunk(cid, model, {"tool_calls": [f[k]]}, **u))
    else:
        for h, f in zip(heads, frags, strict=True):
            events.append(_chunk(cid, model, {"tool_calls": [h]}, **u))
            events.extend(_chunk(cid, model, {"tool_calls": [x]}, **u) for x in f)
    finish = finish_reason or ("tool_calls" if calls else "stop")
    events.append(_chunk(cid, model, {}, finish, **u))
    if usage is not None:
        events.append(
            {
                "id": cid,
                "object": "chat.completion.chunk",
                "created": 1_700_000_000,
                "model": model,
                "system_fingerprint": "fp_fake",
                "choices": [],
                "usage": dict(usage),
            }
        )
    return {"events": events, "then": then, **options}


def chat_text(text: str, pieces: int = 1, **kwargs: Any) -> dict[str, Any]:
    """Build a plain text Chat Completions stream."""
    return chat_stream(text=text, pieces=pieces, **kwargs)


def openai_error(
    status: int,
    message: str,
    *,
    type: str = "invalid_request_error",
    code: str | None = None,
    headers: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Build an HTTP error response with OpenAI's JSON error body."""
    body = {"error": {"message": message, "type": type, "param": None, "code": code}}
    return {"status": status, "headers": dict(headers or {}), "body": body}


# -- builders: Responses API -----------------------------------------------------------------


def responses_usage(
    input_tokens: int = 10, output_tokens: int = 5, cached: int = 0, reasoning: int = 0
) -> dict[str, Any]:
    """Return a Responses API usage object."""
    return {
        "input_tokens": input_tokens,
        "input_tokens_details": {"cached_tokens": cached},
        "output_tokens": output_tokens,
        "output_tokens_details": {"reasoning_tokens": reasoning},
        "total_tokens": input_tokens + output_tokens,
    }


def function_call_item(
    call_id: str, item_id: str, name: str, arguments: Any, pieces: int = 1
) -> dict[str, Any]:
    """Describe one streamed Responses function call."""
    raw = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {"call_id": call_id, "id": item_id, "name": name, "fragments": _split(raw, pieces)}


def responses_stream(
    *,
    text: str | None = None,
    pieces: int = 1,
    summary: Sequence[str] = (),
    encrypted: str | None = None,
    calls: Sequence[Mapping[str, Any]] = (),
    status: str = "completed",
    usage: Mapping[str, Any] | None = None,
    model: str = "gpt-fake",
    rid: str = "resp_fake",
    message_id: str = "msg_fake",
    phase: str | None = None,
    terminal: bool = True,
    **options: Any,
) -> dict[str, Any]:
    """Build a scripted Responses API stream: reasoning summary, message, function calls.

    `terminal=False` leaves out `response.completed` (a stream cut short).
    """
    seq = iter(range(1_000_000))
    events: list[dict[str, Any]] = []
    output: list[dict[str, Any]] = []

    def ev(kind: str, **fields: Any) -> None:
        events.append({"type": kind, "sequence_number": next(seq), **fields})

    base = {"id": rid, "object": "response", "created_at": 1_700_000_000, "model": model}
    ev("response.created", response={**base, "status": "in_progress", "output": [], "usage": None})
    ev(
        "response.in_progress",
        response={**base, "status": "in_progress", "output": [], "usage": None},
    )
    index = 0
    if summary or encrypted is not None:
        rs_id = "rs_fake"
        ev(
            "response.output_item.added",
            output_index=index,
            item={"id": rs_id, "type": "reasoning", "summary": []},
        )
        done_parts = []
        for k, part in enumerate(summary):
            ev(
                "response.reasoning_summary_part.added",
                item_id=rs_id,
                output_index=index,
                summary_index=k,
                part={"type": "summary_text", "text": ""},
            )
            for d in _split(part, pieces):
                ev(
                    "response.reasoning_summary_text.delta",
                    item_id=rs_id,
                    output_index=index,
                    summary_index=k,
                    delta=d,
                )
            ev(
                "response.reasoning_summary_text.done",
                item_id=rs_id,
                output_index=index,
                summary_index=k,
                text=part,
            )
            ev(
                "response.reasoning_summary_part.done",
                item_id=rs_id,
                output_index=index,
                summary_index=k,
                part={"type": "summary_text", "text": part},
            )
            done_parts.append({"type": "summary_text", "text": part})
        item: dict[str, Any] = {"id": rs_id, "type": "reasoning", "summary": done_parts}
        if encrypted is not None:
            item["encrypted_content"] = encrypted
        ev("response.output_item.done", output_index=index, item=item)
        output.append(item)
        index += 1
    if text is not None:
        msg: dict[str, Any] = {
            "id": message_id,
            "type": "message",
            "status": "in_progress",
            "content": [],
            "role": "assistant",
        }
        if phase is not None:
            msg["phase"] = phase
        ev("response.output_item.added", output_index=index, item=msg)
        empty = {"type": "output_text", "annotations": [], "logprobs": [], "text": ""}
        ev(
            "response.content_part.added",
            item_id=message_id,
            output_index=index,
            content_index=0,
            part=empty,
        )
        for d in _split(text, pieces):
            ev(
                "response.output_text.delta",
                item_id=message_id,
                output_index=index,
                content_index=0,
                delta=d,
                logprobs=[],
            )
        full = {**empty, "text": text}
        ev(
            "response.output_text.done",
            item_id=message_id,
            output_index=index,
            content_index=0,
            text=text,
            logprobs=[],
        )
        ev(
            "response.content_part.done",
            item_id=message_id,
            output_index=index,
            content_index=0,
            part=full,
        )
        done_msg = {**msg, "status": "completed", "content": [full]}
        ev("response.output_item.done", output_index=index, item=done_msg)
        output.append(done_msg)
        index += 1
    for call in calls:
        added = {
            "id": call["id"],
            "type": "function_call",
            "status": "in_progress",
            "arguments": "",
            "call_id": call["call_id"],
            "name": call["name"],
        }
        ev("response.output_item.added", output_index=index, item=added)
        for d in call["fragments"]:
            ev(
                "response.function_call_arguments.delta",
                item_id=call["id"],
                output_index=index,
                delta=d,
            )
        args = "".join(call["fragments"])
        ev(
            "response.function_call_arguments.done",
            item_id=call["id"],
            output_index=index,
            arguments=args,
        )
        done_call = {**added, "status": "completed", "arguments": args}
        ev("response.output_item.done", output_index=index, item=done_call)
        output.append(done_call)
        index += 1
    if terminal:
        final = {
            **base,
            "status": status,
            "output": output,
            "usage": dict(usage) if usage else None,
        }
        kind = "response.incomplete" if status == "incomplete" else "response.completed"
        if status == "failed":
            kind = "response.failed"
        ev(kind, response=final)
    return {"events": events, "named": True, "then": "end", **options}


def responses_text(text: str, pieces: int = 1, **kwargs: Any) -> dict[str, Any]:
    """Build a plain text Responses API stream."""
    return responses_stream(text=text, pieces=pieces, **kwargs)


# -- the server ------------------------------------------------------------------------------


def _sse_body(response: Mapping[str, Any]) -> Iterator[bytes]:
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
    """The fake server; a context manager (sync or async) that runs it in a background thread."""

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
                request = await self._read_request(conn, stream)
                if request is None:
                    return
                keep = await self._respond(conn, stream, *request)
                if not keep or conn.our_state is not h11.DONE or conn.their_state is not h11.DONE:
                    return
                try:
                    conn.start_next_cycle()
                except h11.LocalProtocolError:
                    return

    async def _read_request(
        self, conn: h11.Connection, stream: SocketStream
    ) -> tuple[h11.Request, bytes] | None:
        request: h11.Request | None = None
        body = bytearray()
        while True:
            try:
                event = conn.next_event()
            except h11.RemoteProtocolError:
                return None
            if event is h11.NEED_DATA:
                try:
                    data = await stream.receive(65536)
                except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError):
                    data = b""
                conn.receive_data(data)
                if not data and request is None:
                    return None
                continue
            if isinstance(event, h11.Request):
                request = event
            elif isinstance(event, h11.Data):
                body += event.data
            elif isinstance(event, h11.EndOfMessage):
                assert request is not None
                return request, bytes(body)
            elif isinstance(event, h11.ConnectionClosed):
                return None

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
        frames = list(_sse_body(response))
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


def main(argv: Sequence[str] | None = None) -> None:
    """Run the fake server as a process until it is killed."""
    parser = argparse.ArgumentParser(prog="python -m mule.testing.fake_openai")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--script", help="a JSON script file (see the module docstring)")
    args = parser.parse_args(argv)
    responses: Script = []
    default = None
    if args.script:
        with open(args.script, encoding="utf-8") as f:
            responses, default = parse_script(json.load(f))
    fake = FakeOpenAI(responses, port=args.port, default=default)

    async def run() -> None:
        async with anyio.create_task_group() as tg:
            await tg.start(fake.serve)
            print(f"listening on {fake.base_url}", flush=True)

    with contextlib.suppress(KeyboardInterrupt):
        anyio.run(run)


if __name__ == "__main__":
    main(sys.argv[1:])
