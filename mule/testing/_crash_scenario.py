"""The crash matrix's child side: the scenario's model, tools and turns, the points it announces.

See `mule.testing.crash`. Tools append `<call id> <pid>` to a side-effect file with fsync, so the
parent can count what really ran.
"""

from __future__ import annotations

import importlib
import inspect
import json
import os
import socket
import time
import traceback
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
from attrs import define, field

import mule.promise as promise
from mule.effects import MessageUpdate, MuleEvent, MuleToolExecutionPart, MuleToolResult
from mule.journal import TranscriptOwner
from mule.pi import (
    AbortSignal,
    AssistantMessage,
    AssistantMessageEventStream,
    Message,
    Model,
    RetryPolicy,
    StreamOptions,
    TextContent,
    Tool,
    ToolCall,
    ToolResultMessage,
    TranscriptContext,
    to_wire,
)
from mule.pi.scripted import Call, Reply, Text, error_reply, reply, scripted_stream

MODEL = Model(id="crash-1", name="Crash", api="scripted-api", provider="scripted", base_url="")
SYSTEM = "You are being crashed on purpose."
PROMPT = "Do the chores."
TURNS: tuple[Reply, ...] = (
    reply(
        Text.of("Let me look around first.", 3),
        Call("r1", "read", {"path": "a.txt"}),
        Call("w1", "write", {"text": "one"}),
        Call("w2", "write", {"text": "two"}),
    ),
    reply(
        Text.of("Now the log.", 2),
        Call("l1", "log", {"line": "hello"}),
        Call("r2", "read", {"path": "b.txt"}),
    ),
    reply(Text.of("All done.", 3)),
)
RETRIED_TURN = 1  # the first attempt of this turn fails (once per process) and is retried
RETRY = RetryPolicy(enabled=True, max_retries=3, base_delay_ms=1.0)
UNSAFE = frozenset({"write", "log"})
FINAL_TEXT = "All done."

Point = Callable[[str, object], None]


def no_point(name: str, data: object) -> None:
    """Announce nothing (a run outside the lab)."""
    return None


@define
class ScenarioModel:
    """The scenario's stream function: the reply is chosen by the transcript, not by a counter.

    Attributes:
        failed: The turns whose first attempt this process has already failed (so the
            retried turn fails once per process).

    """

    failed: set[int] = field(factory=set)

    def __call__(
        self, model: Model, context: TranscriptContext, options: StreamOptions | None = None
    ) -> AssistantMessageEventStream:
        """Stream the reply for the turn the context is at."""
        turn = sum(1 for m in context.messages if type(m) is AssistantMessage)
        script = TURNS[min(turn, len(TURNS) - 1)]
        if turn == RETRIED_TURN and turn not in self.failed:
            self.failed.add(turn)
            script = error_reply(
                "503 Service Unavailable", start=True, blocks=(Text.of("I will wr", 2),)
            )
        signal = options.signal if options is not None else None
        return scripted_stream(script, model, signal, int(time.time() * 1000))


def _append_effect(path: Path, line: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())
        os.fsync(fd)
    finally:
        os.close(fd)


def scenario_tools(effects: Path, point: Point = no_point) -> list[promise.MuleTool]:
    """Return the scenario's tools; each execution appends `<call id> <pid>` to `effects`."""

    def make(name: str, replay: str, mode: str | None) -> promise.MuleTool:
        async def prepare(call: ToolCall, signal: AbortSignal) -> promise.MuleToolPreparation:
            async def execute(s: AbortSignal) -> AsyncIterator[MuleToolExecutionPart]:
                point(f"exec-before:{call.id}", None)
                _append_effect(effects, f"{call.id} {os.getpid()}\n")
                point(f"exec-after:{call.id}", None)
                text = f"{name}:{call.id}:{os.getpid()}"
                yield MuleToolExecutionPart("result", MuleToolResult(content=(TextContent(text),)))

            return promise.MuleToolPrepared(execute)

        return promise.MuleTool(
            descriptor=Tool(name, f"the {name} tool", {"type": "object"}),
            prepare=prepare,
            replay=replay,  # type: ignore[arg-type]
            execution_mode=mode,  # type: ignore[arg-type]
        )

    return [
        make("read", "safe", None),
        make("write", "unsafe", None),
        make("log", "unsafe", "sequential"),
    ]


def announcing(
    listener: Callable[[MuleEvent, AbortSignal], object], point: Point
) -> Callable[[MuleEvent, AbortSignal], Awaitable[None]]:
    """Wrap an owner's listener: announce `before:X` and `after:X` around each checkpoint event.

    X is `RS`, `XS:<id>`, `XE:<id>`, `ME:<id>` (a tool result), `ME:a<k>` (the k-th assistant
    attempt of this run), `TE:<k>`, `RE`; `stream:<k>` follows the first delta of attempt k.
    The `after:` points of message_end and tool_execution_end carry what was committed.
    """
    attempts = 0
    turns = 0
    streaming: set[str] = set()

    async def listen(event: MuleEvent, sig: AbortSignal) -> None:
        nonlocal attempts, turns
        kind = event.type
        name: str | None = None
        data: object = None
        if kind == "run_start":
            name = "RS"
        elif kind == "tool_execution_start":
            name = f"XS:{event.call.id}"  # type: ignore[union-attr]
        elif kind == "tool_execution_end":
            name = f"XE:{event.call.id}"  # type: ignore[union-attr]
            data = text_of_result(event.result)  # type: ignore[union-attr]
        elif kind == "message_end":
            value: Message = event.value  # type: ignore[union-attr]
            if type(value) is ToolResultMessage:
                name = f"ME:{value.tool_call_id}"
            elif type(value) is AssistantMessage:
                attempts += 1
                name = f"ME:a{attempts}"
            data = to_wire(value)
        elif kind == "turn_end":
            turns += 1
            name = f"TE:{turns}"
        elif kind == "run_end":
            name = "RE"
        if name is not None:
            point(f"before:{name}", None)
        pending = listener(event, sig)
        if pending is not None and inspect.isawaitable(pending):  # durable once awaited
            await pending
        if name is not None:
            point(f"after:{name}", data)
        elif type(event) is MessageUpdate and event.message.value not in streaming:
            streaming.add(event.message.value)
            point(f"stream:{attempts + 1}", None)

    return listen


def text_of_result(m: Message | MuleToolResult) -> str:
    """Return the text of a message or a tool result."""
    content = m.content
    if isinstance(content, str):
        return content
    return "".join(b.text for b in content if type(b) is TextContent)


def load_factory(spec: str) -> Callable[[str], TranscriptOwner]:
    """Import `"package.module:callable"`: the owner factory, called with a store path."""
    module, _, attr = spec.partition(":")
    factory: Callable[[str], TranscriptOwner] = getattr(importlib.import_module(module), attr)
    return factory


async def run_scenario(
    owner: TranscriptOwner, run_id: str, effects: Path, point: Point = no_point
) -> promise.MuleRunInput:
    """Recover `run_id` from `owner` and run the scenario to its end (used by the child)."""
    messages, resume = owner.recover(run_id)
    tools = scenario_tools(effects, point)
    backoffs = 0

    def retry_after(message: AssistantMessage) -> None:
        nonlocal backoffs
        backoffs += 1
        point(f"backoff:{backoffs}", None)

    inp = promise.MuleRunInput(
        model=MODEL,
        system_prompt=SYSTEM,
        messages=messages,
        resume=resume,
        stream=ScenarioModel(),
        tools=tools,
        retry=RETRY,
        retry_after_ms=retry_after,
    )
    await promise.run(inp, announcing(owner.listener(run_id), point))
    return inp


def close_owner(owner: object) -> None:
    """Close an owner if it has a `close` method."""
    close = getattr(owner, "close", None)
    if close is not None:
        close()


def child_main(factory: str, request: dict[str, Any]) -> None:
    """Run one crash child (after the zygote forked): connect, recover, run, report."""
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.connect(request["socket"])
    out = conn.makefile("wb")
    answers = conn.makefile("rb")

    def send(msg: dict[str, Any]) -> None:
        out.write(json.dumps(msg).encode() + b"\n")
        out.flush()

    def point(name: str, data: object) -> None:
        send({"point": name, "data": data})
        if answers.readline().strip() != b"go":
            os._exit(3)  # the parent went away

    send({"pid": os.getpid()})
    try:
        owner = load_factory(factory)(request["store"])
        anyio.run(
            run_scenario,
            owner,
            request["run_id"],
            Path(request["effects"]),
            point,
            backend=request["backend"],
        )
        close_owner(owner)
        send({"done": True})
    except BaseException:  # report anything, then leave without running atexit hooks
        send({"error": traceback.format_exc()})
    out.close()
    conn.close()


__all__ = [
    "FINAL_TEXT",
    "MODEL",
    "PROMPT",
    "RETRIED_TURN",
    "RETRY",
    "SYSTEM",
    "TURNS",
    "UNSAFE",
    "Point",
    "ScenarioModel",
    "announcing",
    "child_main",
    "close_owner",
    "load_factory",
    "no_point",
    "run_scenario",
    "scenario_tools",
    "text_of_result",
]
