"""The agents the DBOS tests run, registered by each worker (tests/dbos/worker.py).

`scenario` is the crash matrix's run (mule.testing.crash): streamed text and three parallel
calls, a retried attempt, a sequential batch, a final answer. Each tool appends
`<call id> <pid>` to `<pause dir>/<run id>.effects`. A test asks for a pause by writing
`<run id>.pause` (a point name): the first execution that reaches it writes `<run id>.paused`
(its pid) and blocks until it is killed.
"""

from __future__ import annotations

import os
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import anyio

import mule.promise as promise
from mule.pi import (
    AssistantMessageEvent,
    AssistantMessageEventStream,
    Message,
    Model,
    StreamOptions,
    TextContent,
    Tool,
    ToolCall,
    TranscriptContext,
)
from mule.testing.crash import MODEL, RETRY, SYSTEM, ScenarioModel, scenario_tools

Point = Callable[[str, object], None]


def pauser(pause_dir: Path, run_id: str) -> Point:
    """Return the point hook of one run: block forever at the requested point, once."""
    wanted = pause_dir / f"{run_id}.pause"
    paused = pause_dir / f"{run_id}.paused"

    def point(name: str, data: object) -> None:
        if not wanted.exists() or wanted.read_text().strip() != name:
            return
        try:
            fd = os.open(paused, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            return  # paused once already: this is the recovered execution
        os.write(fd, f"{os.getpid()} {name}".encode())
        os.fsync(fd)
        os.close(fd)
        time.sleep(3600)  # blocks the worker's loop too: it is about to be SIGKILLed

    return point


class PointedModel:
    """The scenario's model, announcing `stream:<k>` after the first delta of attempt k."""

    def __init__(self, point: Point) -> None:
        self.inner = ScenarioModel()
        self.point = point
        self.attempts = 0

    def __call__(
        self, model: Model, context: TranscriptContext, options: StreamOptions | None = None
    ) -> AssistantMessageEventStream:
        """Stream the scenario's reply, pausing mid stream when asked."""
        self.attempts += 1
        k = self.attempts
        inner = self.inner(model, context, options)

        async def source() -> AsyncIterator[AssistantMessageEvent]:
            n = 0
            async for event in inner:
                yield event
                n += 1
                if n == 2:
                    self.point(f"stream:{k}", None)

        return AssistantMessageEventStream.from_source(source())


def scenario(
    run_id: str, pause_dir: Path, *, sequential: bool = False
) -> Callable[[tuple[Message, ...]], promise.MuleRunInput]:
    """Return the scenario agent's factory for one run."""
    point = pauser(pause_dir, run_id)
    effects = pause_dir / f"{run_id}.effects"

    def build(messages: tuple[Message, ...]) -> promise.MuleRunInput:
        return promise.MuleRunInput(
            model=MODEL,
            system_prompt=SYSTEM,
            messages=messages,
            stream=PointedModel(point),
            tools=scenario_tools(effects, point),
            retry=RETRY,
            tool_execution="sequential" if sequential else "parallel",
        )

    return build


def slow_tool() -> promise.MuleTool:
    """Return a safe tool that waits until the run is cancelled."""

    async def prepare(call: ToolCall, signal: promise.AbortSignal) -> promise.MuleToolPreparation:
        async def execute(s: promise.AbortSignal) -> AsyncIterator[promise.MuleToolExecutionPart]:
            with anyio.move_on_after(60):
                await s.wait()
            yield promise.MuleToolExecutionPart(
                "result", promise.MuleToolResult(content=(TextContent("slept"),))
            )

        return promise.MuleToolPrepared(execute)

    return promise.MuleTool(
        descriptor=Tool("read", "waits", {"type": "object"}), prepare=prepare, replay="safe"
    )


def slow(messages: tuple[Message, ...]) -> promise.MuleRunInput:
    """Build the input of an agent whose first tool call waits for a cancel."""
    return promise.MuleRunInput(
        model=MODEL,
        system_prompt=SYSTEM,
        messages=messages,
        stream=ScenarioModel(failed={1}),
        tools=[slow_tool()],
    )


def in_process_input(
    messages: tuple[Message, ...], effects: Path, *, sequential: bool
) -> promise.MuleRunInput:
    """Return the scenario as an in-process `mule.run` input (no pauses)."""
    return promise.MuleRunInput(
        model=MODEL,
        system_prompt=SYSTEM,
        messages=messages,
        stream=ScenarioModel(),
        tools=scenario_tools(effects),
        retry=RETRY,
        tool_execution="sequential" if sequential else "parallel",
    )
