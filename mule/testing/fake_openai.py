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
from collections.abc import Sequence

import anyio

from mule.testing._openai_chat import chat_stream, chat_text, chat_usage, openai_error, tool_call
from mule.testing._openai_responses import (
    function_call_item,
    responses_stream,
    responses_text,
    responses_usage,
)
from mule.testing._openai_server import FakeOpenAI, Script, parse_script


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


__all__ = [
    "FakeOpenAI",
    "Script",
    "chat_stream",
    "chat_text",
    "chat_usage",
    "function_call_item",
    "main",
    "openai_error",
    "parse_script",
    "responses_stream",
    "responses_text",
    "responses_usage",
    "tool_call",
]
