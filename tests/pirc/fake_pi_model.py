#!/usr/bin/env python3
"""A concurrent model of `pi --mode rpc`'s job lifecycle, for the bridge's race tests.

Like pi (agent-session.js, rpc-mode.js): commands are read while a run streams; `prompt` is
answered just before its run's `agent_start` (or at once when queued, or rejected while
streaming without `streamingBehavior`); `abort` is answered after the aborted run's
`agent_end`; `steer`/`follow_up` queue messages that a run takes between turns (kept for the
next run when none is streaming); `auto_retry_start` follows a failed attempt's `agent_end`
synchronously, and the backoff is not streaming; `abort_retry` ends it with "Retry cancelled".

A prompt's text picks its fate: `retry<N>` fails N attempts before succeeding, `fail` fails
every attempt (3 retries), `slow` streams for about 0.6 s; anything else completes. Every
assistant text is `done:<text>`.
Timing is jittered by `FAKE_PI_SEED`, so event bursts land at arbitrary points between the
bridge's commands.

`FAKE_PI_PROTOCOL=1.6` speaks pi 1.6.0's protocol instead: updates carry only the delta and the
usage, the assistant's `message_start` is `pending`, `agent_end` has `willRetry`, answers carry
a `disposition`, the run is streaming from its start to its `agent_settled` (the backoff
included), messages queued too late for its last turn start another attempt before it settles,
and `abort` is answered after `agent_settled`.
"""

from __future__ import annotations

import asyncio  # noqa: TID251 (a separate process standing in for node's event loop)
import contextlib
import json
import os
import random
import re
import sys
from typing import Any

RNG = random.Random(int(os.environ.get("FAKE_PI_SEED", "0")))
V16 = os.environ.get("FAKE_PI_PROTOCOL") == "1.6"
MAX_RETRIES = 3


def out(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def respond(cid: Any, command: str, ok: bool = True, **kw: Any) -> None:
    r: dict[str, Any] = {"type": "response", "command": command, "success": ok}
    if cid is not None:
        r["id"] = cid
    r.update(kw)
    out(r)


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "text", "text": text}], "timestamp": 1}


def respond_with(cid: Any, command: str, disposition: str) -> None:
    """Answer a message pi took (1.6.0 says what it did with it)."""
    if V16:
        respond(cid, command, data={"disposition": disposition})
    else:
        respond(cid, command)


USAGE = {
    "input": 1,
    "output": 1,
    "cacheRead": 0,
    "cacheWrite": 0,
    "totalTokens": 2,
    "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0},
}


def assistant(text: str, stop: str = "stop", error: str | None = None) -> dict[str, Any]:
    msg: dict[str, Any] = {
        "role": "assistant",
        "content": [{"type": "text", "text": text}] if text else [],
        "api": "openai-completions",
        "provider": "local",
        "model": "fake",
        "usage": {
            "input": 1,
            "output": 1,
            "cacheRead": 0,
            "cacheWrite": 0,
            "totalTokens": 2,
            "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0},
        },
        "stopReason": stop,
        "timestamp": 1,
    }
    if error is not None:
        msg["errorMessage"] = error
    return msg


async def jitter() -> None:
    await asyncio.sleep(RNG.choice((0, 0, 0.001, 0.003, 0.01)))


class Pi:
    def __init__(self) -> None:
        self.streaming = False
        self.run_task: asyncio.Task[None] | None = None
        self.retry_wait: asyncio.Future[bool] | None = None  # set during a retry backoff
        self.steering: list[str] = []
        self.follow_ups: list[str] = []
        self.in_attempt = False  # between agent_start and agent_end
        self.aborted = False  # the run was aborted (1.6.0: agent_settled says so)
        self.cancel_told = False  # 1.6.0's abort_retry wrote the backoff's end already

    def queue_update(self) -> None:
        out({"type": "queue_update", "steering": self.steering, "followUp": self.follow_ups})

    async def attempt(
        self, texts: list[str], fails: bool, retries_left: bool = False
    ) -> list[dict[str, Any]]:
        """One agent_start..agent_end; returns its messages (the last one says how it ended)."""
        self.streaming = True
        out({"type": "agent_start"})
        self.in_attempt = True
        messages: list[dict[str, Any]] = []
        pending = list(texts)
        try:
            while pending:
                out({"type": "turn_start"})
                for t in pending:
                    u = user(t)
                    out({"type": "message_start", "message": u})
                    out({"type": "message_end", "message": u})
                    messages.append(u)
                last = pending[-1]
                pending = []
                out(
                    {
                        "type": "message_start",
                        "message": assistant("", "pending" if V16 else "stop"),
                    }
                )
                for _ in range(60 if "slow" in last else RNG.randint(0, 3)):
                    await (asyncio.sleep(0.01) if "slow" in last else jitter())
                    msg = assistant("done:" + last)
                    if V16:
                        delta = {"type": "text_delta", "contentIndex": 0, "delta": "."}
                        out(
                            {
                                "type": "message_update",
                                "usage": USAGE,
                                "assistantMessageEvent": delta,
                            }
                        )
                        continue
                    out(
                        {
                            "type": "message_update",
                            "message": msg,
                            "assistantMessageEvent": {
                                "type": "text_delta",
                                "contentIndex": 0,
                                "delta": ".",
                                "partial": msg,
                            },
                        }
                    )
                await jitter()
                if fails:
                    msg = assistant("", "error", "503 overloaded")
                else:
                    msg = assistant("done:" + last)
                out({"type": "message_end", "message": msg})
                out({"type": "turn_end", "message": msg, "toolResults": []})
                messages.append(msg)
                if fails:
                    break
                if self.steering:
                    pending, self.steering = self.steering[:1], self.steering[1:]
                elif self.follow_ups:
                    pending, self.follow_ups = self.follow_ups[:1], self.follow_ups[1:]
                if pending:
                    self.queue_update()
        except asyncio.CancelledError:
            messages.append(assistant("", "aborted", "Request was aborted"))
            self.in_attempt = False
            self.streaming = V16  # 1.6.0: streaming until agent_settled
            self.end(messages, will_retry=False)
            raise
        self.in_attempt = False
        self.streaming = V16
        self.end(messages, will_retry=fails and retries_left)
        return messages

    def end(self, messages: list[dict[str, Any]], will_retry: bool) -> None:
        end: dict[str, Any] = {"type": "agent_end", "messages": messages}
        if V16:
            end["willRetry"] = will_retry
        out(end)

    async def run(self, text: str) -> None:
        self.aborted = False
        try:
            await self.attempts(text)
            while V16 and not self.aborted:
                # pi's before-settle boundary (extension hooks) takes a moment; then it runs
                # what was queued meanwhile, or settles
                await asyncio.sleep(RNG.choice((0.005, 0.01)))
                if not (self.steering or self.follow_ups) or self.aborted:
                    break
                queue = self.steering if self.steering else self.follow_ups
                texts, queue[:] = queue[:1], queue[1:]
                self.queue_update()
                await self.attempt(texts, False)
        finally:
            if V16:
                self.streaming = False
                out({"type": "agent_settled", "aborted": self.aborted})

    async def attempts(self, text: str) -> None:
        m = re.search(r"retry(\d)", text)
        failures = int(m.group(1)) if m else (99 if "fail" in text else 0)
        attempt = 0
        while True:
            await self.attempt([text], attempt < failures, attempt < MAX_RETRIES)
            while V16 and attempt >= failures and (self.steering or self.follow_ups):
                # 1.6.0 runs what was queued too late for the last turn before it settles
                queue = self.steering if self.steering else self.follow_ups
                texts, queue[:] = queue[:1], queue[1:]
                self.queue_update()
                await self.attempt(texts, False)
            if attempt >= failures:
                return
            attempt += 1
            if attempt > MAX_RETRIES:
                out(
                    {
                        "type": "auto_retry_end",
                        "success": False,
                        "attempt": attempt - 1,
                        "finalError": "503 overloaded",
                    }
                )
                return
            out(
                {
                    "type": "auto_retry_start",
                    "attempt": attempt,
                    "maxAttempts": MAX_RETRIES,
                    "delayMs": 5,
                    "errorMessage": "503 overloaded",
                }
            )
            wait = self.retry_wait = asyncio.get_running_loop().create_future()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(wait), RNG.choice((0.002, 0.01, 0.03)))
            self.retry_wait = None
            if wait.done() and self.cancel_told:
                self.cancel_told = False
                return
            if wait.done():  # abort_retry / abort during the backoff
                out(
                    {
                        "type": "auto_retry_end",
                        "success": False,
                        "attempt": attempt,
                        "finalError": "Retry cancelled",
                    }
                )
                return
            if attempt >= failures:
                # the retry will succeed: pi announces it before the final agent_end; this
                # model announces it at the attempt's start (still before that agent_end)
                out({"type": "auto_retry_end", "success": True, "attempt": attempt})

    def start(self, text: str) -> None:
        self.streaming = True  # like Agent.prompt: streaming before its first await
        self.run_task = asyncio.ensure_future(self.run(text))

    @property
    def busy(self) -> bool:
        return self.run_task is not None and not self.run_task.done()

    async def handle(self, cmd: dict[str, Any]) -> None:
        kind, cid = cmd.get("type"), cmd.get("id")
        if kind == "prompt":
            text, behavior = cmd.get("message", ""), cmd.get("streamingBehavior")
            await jitter()  # preflight
            if self.streaming:
                if behavior is None:
                    respond(cid, "prompt", False, error="Agent is already processing.")
                    return
                (self.follow_ups if behavior == "followUp" else self.steering).append(text)
                self.queue_update()
                respond_with(cid, "prompt", "queued")
                return
            if self.busy:  # a retry backoff: pi would start a second run; the bridge must not ask
                respond(cid, "prompt", False, error="fake: prompt during a retry backoff")
                return
            respond_with(cid, "prompt", "started")
            self.start(text)
        elif kind in ("steer", "follow_up"):
            (self.steering if kind == "steer" else self.follow_ups).append(cmd.get("message", ""))
            self.queue_update()
            respond_with(cid, kind, "queued")
        elif kind == "abort":
            if self.busy:
                self.aborted = True
            if self.retry_wait is not None and not self.retry_wait.done():
                self.retry_wait.set_result(True)
            # pi's run emits agent_start before anything can abort it: one loop turn for that
            while self.streaming and not self.in_attempt:  # noqa: ASYNC110
                await asyncio.sleep(0)
            if self.run_task is not None and self.in_attempt:
                self.run_task.cancel()
            if self.run_task is not None:
                with contextlib.suppress(asyncio.CancelledError):
                    await self.run_task
            respond(cid, "abort")
        elif kind == "abort_retry":
            if self.retry_wait is not None and not self.retry_wait.done():
                self.retry_wait.set_result(True)
                if V16:  # pi 1.6.0 writes the backoff's end, then the answer, then settles
                    self.cancel_told = True
                    out(
                        {
                            "type": "auto_retry_end",
                            "success": False,
                            "attempt": 1,
                            "finalError": "Retry cancelled",
                        }
                    )
            respond(cid, "abort_retry")
        elif kind == "get_state":
            respond(cid, "get_state", data={"isStreaming": self.streaming})
        else:
            respond(None, str(kind), False, error=f"Unknown command: {kind}")


async def main() -> None:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=1 << 24)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    pi = Pi()
    tasks: set[asyncio.Task[None]] = set()
    while line := await reader.readline():
        task = asyncio.ensure_future(pi.handle(json.loads(line)))  # like pi: not awaited in turn
        tasks.add(task)
        task.add_done_callback(tasks.discard)
        await asyncio.sleep(0)


if __name__ == "__main__":
    asyncio.run(main())
