"""A finished run leaves no reference cycles: its objects go when the last reference does.

With the collector off, a few runs of each shape are made; a collection afterwards must find
nothing of mule's unreachable (the collector's own count may include other code's garbage,
so the found objects are filtered to mule's: instances of mule's classes and frames of its
code). The shapes: `mule.run` and `mule.effects.run`, with no tools, tools side by side,
tools one at a time, a tool or listener that fails, a run aborted by its signal, and a run
given a timeout signal; on asyncio and trio.
"""

from __future__ import annotations

import gc
import types
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from returns.result import Failure, Result, Success

import mule
import mule.effects as fx
from mule.pi import (
    AbortController,
    AbortSignal,
    JsonObject,
    Model,
    TextContent,
    Tool,
    ToolCall,
    UserMessage,
)
from mule.pi.scripted import Call, Reply, ScriptedModel, Text, reply

pytestmark = pytest.mark.anyio

MODEL = Model(id="m", name="m", api="scripted", provider="scripted", base_url="")
MULE_DIR = str(Path(mule.__file__).parent)
SCHEMA: JsonObject = {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}
SHAPES = (
    "no tools",
    "parallel tools",
    "sequential tools",
    "tool raises",
    "listener raises",
    "aborted",
    "timeout signal",
)


@mule.tool
def echo(x: int) -> str:
    """Echo the number."""
    return str(x)


@mule.tool
def boom(x: int) -> str:
    """Fail."""
    raise ValueError(f"boom {x}")


def _model(shape: str) -> ScriptedModel:
    replies = []
    if shape in ("parallel tools", "sequential tools", "tool raises", "timeout signal"):
        name = "boom" if shape == "tool raises" else "echo"
        replies.append(
            reply(Text.of("calling ", 2), Call("c0", name, {"x": 0}), Call("c1", "echo", {"x": 1}))
        )
    if shape == "aborted":
        replies.append(Reply(blocks=(Text(("a", "b")),), stall_after=3))
    else:
        replies.append(reply(Text.of("done", 2)))
    return ScriptedModel(replies)


def _signal(shape: str) -> tuple[AbortController | None, AbortSignal | None]:
    if shape == "timeout signal":
        return None, AbortSignal.timeout(60_000)
    if shape == "aborted":
        controller = AbortController()
        return controller, controller.signal
    return None, None


async def _promise_run(shape: str) -> None:
    controller, signal = _signal(shape)

    def listener(event: mule.MuleEvent, signal: AbortSignal) -> None:
        if controller is not None and event.type == "message_update":
            controller.abort("enough")
        if shape == "listener raises" and event.type == "turn_start":
            raise RuntimeError("listener")

    inp = mule.MuleRunInput(
        model=MODEL,
        system_prompt="s",
        messages=(UserMessage("go"),),
        stream=_model(shape),
        tools=[echo, boom],
        tool_execution="sequential" if shape == "sequential tools" else "parallel",
    )
    try:
        await mule.run(inp, listener, signal)
    except (mule.MuleRunFailed, mule.pi.AbortError):
        assert shape in ("tool raises", "listener raises", "aborted")
    else:
        assert shape not in ("tool raises", "listener raises", "aborted")


def _prepare() -> fx.PreparePort:
    async def prepare(
        call: ToolCall, signal: AbortSignal
    ) -> Result[fx.MuleCallPreparation, fx.MuleError]:
        async def execute(
            signal: AbortSignal,
        ) -> AsyncIterator[Result[fx.MuleToolExecutionPart, fx.MuleError]]:
            if call.name == "boom":
                raise ValueError("boom")
            result = fx.MuleToolResult(content=(TextContent(str(call.arguments["x"])),))
            yield Success(fx.MuleToolExecutionPart("result", result))

        return Success(fx.MuleToolPrepared(execute))

    return prepare


async def _effects_run(shape: str) -> None:
    controller, signal = _signal(shape)

    async def emit(event: fx.MuleEvent, signal: AbortSignal) -> Result[None, fx.MuleError]:
        if controller is not None and event.type == "message_update":
            controller.abort("enough")
        if shape == "listener raises" and event.type == "turn_start":
            raise RuntimeError("listener")
        return Success(None)

    declarations = tuple(
        fx.MuleToolDeclaration(descriptor=Tool(name, name, SCHEMA)) for name in ("echo", "boom")
    )
    inp = fx.MulePortsInput(
        model=MODEL,
        system_prompt="s",
        messages=(UserMessage("go"),),
        stream=_model(shape),
        tools=declarations,
        tool_execution="sequential" if shape == "sequential tools" else "parallel",
        ports=fx.Ports(emit=emit, prepare_tool=_prepare()),
    )
    result = await fx.run(inp, signal)
    assert isinstance(result, Failure) == (shape in ("tool raises", "listener raises"))


def _of_mule(obj: object) -> bool:
    if isinstance(obj, types.FrameType):
        return obj.f_code.co_filename.startswith(MULE_DIR)
    return type(obj).__module__.startswith("mule.")


async def _garbage_of(run: Callable[[], Awaitable[None]], runs: int = 4) -> list[str]:
    """Return what of mule's `runs` runs left to the collector (described), after a warm-up."""
    await run()  # first-run work (caches, compiled validators) is not a run's garbage
    gc.collect()
    enabled = gc.isenabled()
    gc.disable()
    try:
        for _ in range(runs):
            await run()
        gc.set_debug(gc.DEBUG_SAVEALL)  # keep what the collection finds, to name it
        gc.collect()
        found: list[Any] = [o for o in gc.garbage if _of_mule(o)]
        return sorted({f"{type(o).__qualname__} {getattr(o, 'f_code', '')}" for o in found})
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        if enabled:
            gc.enable()


@pytest.mark.parametrize("shape", SHAPES)
async def test_a_finished_promise_run_leaves_no_cycles(shape: str) -> None:
    """`mule.run`: nothing of mule's is unreachable but uncollected after a run ends."""
    assert await _garbage_of(lambda: _promise_run(shape)) == []


@pytest.mark.parametrize("shape", SHAPES)
async def test_a_finished_effects_run_leaves_no_cycles(shape: str) -> None:
    """`mule.effects.run`: the same, for the Result root."""
    assert await _garbage_of(lambda: _effects_run(shape)) == []
