"""A real uvicorn server for `mule.serve` tests, in a thread on 127.0.0.1, and its clients.

The server is bound and configured by the private rules `mule.serve._app.bind_socket` and
`mule.serve._app.uvicorn_config`, as `mule serve` does.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import uvicorn
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect

from mule.serve import ServerConfig, create_app
from mule.serve._app import bind_socket, uvicorn_config

TOKEN = "test-token-0123456789abcdef"
Frame = dict[str, Any]


class ServerThread:
    """`create_app(config)` served by uvicorn (asyncio) in a daemon thread."""

    def __init__(self, config: ServerConfig) -> None:
        self.config = config
        self.sock = bind_socket("127.0.0.1", 0)
        self.port: int = self.sock.getsockname()[1]
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.ws_url = f"ws://127.0.0.1:{self.port}/ws"
        self.app = create_app(config)
        uv = uvicorn_config(self.app, log_level="warning")  # the settings `mule serve` uses
        self.server = uvicorn.Server(uv)
        self.thread = threading.Thread(target=self.server.run, args=([self.sock],), daemon=True)

    def start(self) -> ServerThread:
        """Start serving; return once uvicorn accepts connections."""
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        """Shut down (the lifespan cancels and reaps every job) and join the thread."""
        self.server.should_exit = True
        self.thread.join(timeout=60)
        self.sock.close()
        assert not self.thread.is_alive(), "uvicorn did not stop"

    def http(self, token: str | None = TOKEN) -> httpx.Client:
        """Return an HTTP client with the bearer token (none if `token` is None)."""
        headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
        return httpx.Client(base_url=self.base_url, headers=headers, timeout=30)

    def ws(
        self,
        *,
        query_token: str | None = None,
        rcvbuf: int | None = None,
        compression: str | None = "deflate",
    ) -> ClientConnection:
        """Open a WebSocket (use `with`); `rcvbuf` shrinks the client's receive buffer first."""
        url = self.ws_url + (f"?token={query_token}" if query_token is not None else "")
        sock = None
        if rcvbuf is not None:
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
            sock.connect(("127.0.0.1", self.port))
        return connect(url, sock=sock, open_timeout=10, max_size=None, compression=compression)


@contextmanager
def running(config: ServerConfig) -> Iterator[ServerThread]:
    """Serve `config` for the duration of the block."""
    server = ServerThread(config).start()
    try:
        yield server
    finally:
        server.stop()


@contextmanager
def authed_ws(server: ServerThread, **kw: Any) -> Iterator[ClientConnection]:
    """Open a WebSocket, authenticate with a first message and wait for `ready`."""
    with server.ws(**kw) as ws:
        ws.send(json.dumps({"type": "auth", "token": TOKEN}))
        first = recv(ws)
        assert first["type"] == "ready", first
        yield ws


def recv(ws: ClientConnection, timeout: float = 30, jobs: bool = False) -> Frame:
    """Receive one JSON frame; the pushed job lists (`jobs` frames) are skipped unless `jobs`."""
    deadline = time.monotonic() + timeout
    while True:
        data = ws.recv(timeout=max(0.0, deadline - time.monotonic()))
        assert isinstance(data, str)
        frame: Frame = json.loads(data)
        if jobs or frame.get("type") != "jobs":
            return frame


def recv_until(
    ws: ClientConnection, done: Callable[[Frame], bool], timeout: float = 60, jobs: bool = False
) -> list[Frame]:
    """Receive frames until `done(frame)`; return them all (the last one included)."""
    deadline = time.monotonic() + timeout
    frames: list[Frame] = []
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"no matching frame; last: {frames[-3:]}")
        frames.append(recv(ws, left, jobs))
        if done(frames[-1]):
            return frames


def drain_until_closed(ws: ClientConnection, timeout: float = 60) -> tuple[list[Frame], Any]:
    """Read until the server closes; return the frames and the `ConnectionClosed` error."""
    deadline = time.monotonic() + timeout
    frames: list[Frame] = []
    while time.monotonic() < deadline:
        try:
            frames.append(recv(ws, deadline - time.monotonic()))
        except ConnectionClosed as exc:
            return frames, exc
    raise TimeoutError(f"the server did not close the socket ({len(frames)} frames)")


def is_job_end(frame: Frame) -> bool:
    """Whether this is the job's final frame."""
    return frame.get("type") == "job_end"


def events(frames: list[Frame]) -> list[Frame]:
    """Return the bridge events among frames."""
    return [f["event"] for f in frames if f.get("type") == "event"]


class TextView:
    """A client's reconstruction of assistant text from deltas and snapshots (as the page does)."""

    def __init__(self) -> None:
        self.messages: dict[str, dict[int, str]] = {}
        self.final: dict[str, str] = {}

    def apply(self, ev: Frame) -> None:
        """Apply one event."""
        kind = ev["type"]
        if kind == "message_update":
            mid = ev["message"]["value"]
            blocks = self.messages.setdefault(mid, {})
            if "value" in ev:
                blocks.clear()
                for i, c in enumerate(ev["value"]["content"]):
                    if c["type"] == "text":
                        blocks[i] = c["text"]
                return
            e = ev["event"]
            if e["type"] == "text_start":
                blocks[e["contentIndex"]] = ""
            elif e["type"] == "text_delta":
                blocks[e["contentIndex"]] = blocks.get(e["contentIndex"], "") + e["delta"]
        elif kind == "message_end" and ev["value"]["role"] == "assistant":
            mid = ev["message"]["value"]
            self.final[mid] = "".join(
                c["text"] for c in ev["value"]["content"] if c["type"] == "text"
            )

    def streamed(self, mid: str) -> str:
        """Return the text streamed for a message so far."""
        blocks = self.messages.get(mid, {})
        return "".join(blocks[i] for i in sorted(blocks))


__all__ = [
    "TOKEN",
    "ServerThread",
    "TextView",
    "authed_ws",
    "drain_until_closed",
    "events",
    "is_job_end",
    "recv",
    "recv_until",
    "running",
]
