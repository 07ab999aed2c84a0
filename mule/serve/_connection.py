"""The `/ws` endpoint: Origin and token checks, then one connection's subscriptions and answers.

A connection acts for one principal (`mule.serve._auth`): it sees, subscribes to and answers
only that principal's jobs, and answers a job's dialog only while subscribed to the job. The
principal's job list is pushed as a `jobs` frame after `ready` and whenever it changes (no
polling). Bad frames (not JSON, too deep, binary, unknown) get an `error` frame; they never
close the socket.
"""

from __future__ import annotations

import contextlib
import logging
from typing import TYPE_CHECKING, Any, Final, final

import anyio
from starlette.websockets import WebSocket, WebSocketDisconnect, WebSocketState

from mule.pi import stringify
from mule.pirc import BridgeError
from mule.serve._auth import QUERY_TOKEN_KEY, ClientJsonError, Principals, client_json, origin_ok
from mule.serve._wire import Frame
from mule.serve._ws import CLOSE_TOO_SLOW, CLOSE_UNAUTHORIZED, ClientQueue

if TYPE_CHECKING:
    from mule.serve._app import ServerConfig
    from mule.serve._jobs import JobManager, ServerJob

log = logging.getLogger("mule.serve")

JOBS_KEY: Final = "~jobs"
CLOSE_POLICY: Final = 1008  # before accept: the handshake is refused with HTTP 403


def reply(kind: str, **fields: Any) -> Frame:
    """Return a server frame that belongs to no job (acks, errors)."""
    return Frame("", -1, kind, stringify({"type": kind, **fields}))


@final
class Connection:
    """One authenticated socket: its principal, queue, subscriptions and sender task."""

    def __init__(
        self, ws: WebSocket, manager: JobManager, config: ServerConfig, principal: str
    ) -> None:
        self.ws = ws
        self.manager = manager
        self.config = config
        self.principal = principal
        self.queue = ClientQueue(config.client_queue, config.client_queue_bytes, self._overflowed)
        self.jobs: dict[str, ServerJob] = {}
        self._send_scope = anyio.CancelScope()

    def _overflowed(self, reason: str) -> None:
        log.warning("disconnecting a WebSocket client: %s", reason)
        for job in self.jobs.values():
            job.detach(self.queue)
            job.slow_disconnects += 1
        self.jobs.clear()
        self._send_scope.cancel()  # the sender may be stuck in a send to a client that never reads

    def push_jobs(self) -> None:
        """Queue this principal's job list (the newest replaces any not yet sent)."""
        jobs = [j.summary() for j in self.manager.jobs(self.principal)]
        text = stringify({"type": "jobs", "jobs": jobs})
        self.queue.offer_latest(Frame("", -1, "jobs", text, key=JOBS_KEY))

    async def run(self) -> None:
        """Serve the socket until the client leaves, is cut off, or the server stops."""
        self.push_jobs()
        self.manager.watch(self.push_jobs)
        try:
            await self._run()
        finally:
            self.manager.unwatch(self.push_jobs)

    async def _run(self) -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._send_loop, tg.cancel_scope)
            try:
                await self._receive_loop()
            finally:
                for job in self.jobs.values():
                    job.detach(self.queue)
                self.jobs.clear()
                if self.queue.overflow is None:
                    tg.cancel_scope.cancel()

    async def _send_loop(self, connection: anyio.CancelScope) -> None:
        with self._send_scope:
            try:
                while (frame := await self.queue.next()) is not None:
                    await self.ws.send_text(frame.text)
                    self.queue.stats.sent += 1
            except (WebSocketDisconnect, OSError, RuntimeError):
                connection.cancel()  # the client is gone
                return
        reason = self.queue.overflow
        if reason is not None:
            # The close frame waits behind what the client has not read yet; give it time.
            with anyio.move_on_after(self.config.close_timeout), contextlib.suppress(Exception):
                await self.ws.close(CLOSE_TOO_SLOW, reason[:120])
        connection.cancel()

    def _error(self, error: str, **fields: Any) -> None:
        self.queue.push_front([reply("error", error=error, **fields)])

    async def _receive_loop(self) -> None:
        while True:
            try:
                message = await self.ws.receive()
            except (WebSocketDisconnect, RuntimeError):
                return
            if message["type"] == "websocket.disconnect":
                return
            text = message.get("text")
            if text is None:
                self._error("binary frames are not accepted: send JSON text")
                continue
            try:
                msg = client_json(text)
            except ClientJsonError as exc:
                self._error(str(exc))
                continue
            if not isinstance(msg, dict):
                self._error("expected a JSON object")
                continue
            await self._handle(msg)

    async def _handle(self, msg: dict[str, Any]) -> None:
        kind = msg.get("type")
        job_id = msg.get("job")
        if kind == "ping":
            self.queue.push_front([reply("pong")])
            return
        if kind not in ("subscribe", "unsubscribe", "ui_response"):
            self._error(f"unknown message type {str(kind)[:100]!r}")
            return
        job = self.manager.get(job_id, self.principal) if isinstance(job_id, str) else None
        if job is None:  # unknown, or another principal's: the same answer
            self._error(f"no job {str(job_id)[:100]!r}", request=kind)
            return
        if kind == "subscribe":
            # Subscribing again restarts the stream with a fresh replay (a client resync).
            job.detach(self.queue)
            self.queue.discard_job(job.id)
            self.jobs[job.id] = job
            frames = job.attach(self.queue, replay=msg.get("replay", True) is not False)
            ack = reply("subscribed", job=job.id, status=job.status, replayed=len(frames))
            self.queue.push_front([ack, *frames])
            return
        if kind == "unsubscribe":
            if self.jobs.pop(job.id, None) is not None:
                job.detach(self.queue)
                self.queue.discard_job(job.id)
            self.queue.push_front([reply("unsubscribed", job=job.id)])
            return
        request_id = msg.get("id")
        try:
            if job.id not in self.jobs:
                raise ValueError(f"subscribe to {job.id} before answering its dialogs")
            if not isinstance(request_id, str):
                raise ValueError("ui_response needs a string id")
            await self.manager.answer_ui(
                job,
                request_id,
                value=msg.get("value"),
                confirmed=msg.get("confirmed"),
                cancelled=msg.get("cancelled") is True,
            )
        except (ValueError, BridgeError) as exc:
            shown = request_id if isinstance(request_id, str) else None
            self._error(str(exc), request=kind, job=job.id, id=shown)


async def _authenticate(ws: WebSocket, config: ServerConfig, who: Principals) -> str | None:
    """Accept a `?token=` (taken out of the URL by the middleware) or a first auth message."""
    query = ws.scope.get(QUERY_TOKEN_KEY)
    if query is not None:
        return who.who(query)
    with anyio.move_on_after(config.auth_timeout):
        try:
            message = await ws.receive()
            text = message.get("text")
            msg = client_json(text) if isinstance(text, str) else None
        except (ValueError, WebSocketDisconnect, RuntimeError):
            return None
        if isinstance(msg, dict) and msg.get("type") == "auth":
            return who.who(msg.get("token"))
    return None


async def websocket_endpoint(
    ws: WebSocket, manager: JobManager, config: ServerConfig, principals: Principals
) -> None:
    """Serve one `/ws` client until it leaves, is too slow, or the server stops."""
    if not origin_ok(
        ws.headers.get("origin"), ws.headers.get("host"), config.host, config.allowed_origins
    ):
        log.warning("refused a WebSocket from origin %r", ws.headers.get("origin", "")[:200])
        await ws.close(CLOSE_POLICY, "origin not allowed")  # before accept: HTTP 403
        return
    await ws.accept()
    principal = await _authenticate(ws, config, principals)
    if principal is None:
        if ws.client_state == WebSocketState.CONNECTED:
            with contextlib.suppress(Exception):
                await ws.close(CLOSE_UNAUTHORIZED, "unauthorized")
        return
    conn = Connection(ws, manager, config, principal)
    conn.queue.push_front([reply("ready", client=principal)])
    await conn.run()


__all__ = ["CLOSE_POLICY", "Connection", "reply", "websocket_endpoint"]
