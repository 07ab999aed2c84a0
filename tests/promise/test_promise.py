"""The promise facade: adaptation once at entry, Python-idiomatic failure and cancellation."""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Callable
from contextlib import aclosing
from typing import Annotated, Any, Literal

import anyio
import anyio.lowlevel
import pytest
from returns.result import Failure, Result, Success

import mule
from mule.effects import (
    MuleError,
    MuleEvent,
    Ports,
    PreparePort,
    ToolExecution,
    ToolExecutionStart,
    event_to_wire,
)
from mule.effects import MulePortsInput as CoreInput
from mule.effects import MuleToolDeclaration as CoreTool
from mule.effects import MuleToolPrepared as CorePrepared
from mule.effects import run as run_core
from mule.pi import (
    AbortController,
    AbortError,
    AbortSignal,
    AssistantMessage,
    DoneEvent,
    JsonObject,
    Model,
    TextContent,
    Tool,
    ToolCall,
    UserMessage,
)
from mule.pi.scripted import Call, Reply, ScriptedModel, Text, error_reply, reply
from mule.promise import (
    MuleRunFailed,
    MuleRunInput,
    MuleTool,
    MuleToolExecutionPart,
    MuleToolPreparation,
    MuleToolPrepared,
    MuleToolResult,
    schema_for,
    tool,
)

pytestmark = pytest.mark.anyio
MODEL = Model(id="m", name="M", api="scripted", provider="p", base_url="")
ECHO = Tool("echo", "echo", {"type": "object", "properties": {"x": {"type": "number"}}})


def _fixed_clock() -> int:
    return 1000


def _inp(replies: list[Reply], **kw: Any) -> MuleRunInput:
    return MuleRunInput(
        model=MODEL,
        system_prompt="sys",
        messages=(UserMessage("hi", 1),),
        stream=ScriptedModel(replies, clock=_fixed_clock),
        **kw,
    )


class _Order:
    """Makes parallel tools deterministic: c2 starts only after c1's end was emitted."""

    def __init__(self) -> None:
        self.c1_done = anyio.Event()

    def seen(self, event: MuleEvent) -> None:
        if event.type == "tool_execution_end" and event.call.id == "c1":
            self.c1_done.set()

    async def parts(self, call: ToolCall) -> AsyncGenerator[MuleToolExecutionPart, None]:
        if call.id == "c2":
            await self.c1_done.wait()
        yield MuleToolExecutionPart("update", MuleToolResult(content=(TextContent("..."),)))
        text = f"echo {call.arguments.get('x')}"
        yield MuleToolExecutionPart("result", MuleToolResult(content=(TextContent(text),)))


def _echo_tool(order: _Order) -> MuleTool:
    gate = order

    async def prepare(call: ToolCall, signal: AbortSignal) -> MuleToolPreparation:
        async def execute(signal: AbortSignal) -> AsyncIterator[MuleToolExecutionPart]:
            async with aclosing(gate.parts(call)) as parts:
                async for part in parts:
                    yield part

        return MuleToolPrepared(execute)

    return MuleTool(descriptor=ECHO, prepare=prepare)


def _core_echo_prepare(order: _Order) -> PreparePort:
    async def prepare(
        call: ToolCall, signal: AbortSignal
    ) -> Result[CorePrepared[ToolExecution], MuleError]:
        async def execute(
            signal: AbortSignal,
        ) -> AsyncIterator[Result[MuleToolExecutionPart, MuleError]]:
            async with aclosing(order.parts(call)) as parts:
                async for part in parts:
                    yield Success(part)

        return Success(CorePrepared(execute))

    return prepare


def _script() -> list[Reply]:
    return [
        reply(Text.of("looking", 3), Call("c1", "echo", {"x": 1}), Call("c2", "echo", {"x": "2"})),
        reply(Text.of("done", 2)),
    ]


def _normal(event: MuleEvent) -> Any:
    """Return an event's JSON without wall-clock times (timestamps, durations: run to run)."""

    def strip(v: Any) -> Any:
        if isinstance(v, dict):
            return {k: strip(x) for k, x in v.items() if k not in ("timestamp", "durationMs")}
        if isinstance(v, list):
            return [strip(x) for x in v]
        return v

    return strip(event_to_wire(event))


async def test_both_roots_give_identical_events_and_outcomes() -> None:
    """The promise facade and the Result root emit the same events and outcome."""
    promise_events: list[MuleEvent] = []
    first = _Order()

    def record(e: MuleEvent, s: AbortSignal) -> None:
        promise_events.append(e)
        first.seen(e)

    out = await mule.run(_inp(_script(), tools=[_echo_tool(first)]), record)
    core_events: list[MuleEvent] = []
    second = _Order()

    async def listener(e: MuleEvent, s: AbortSignal) -> Result[None, MuleError]:
        core_events.append(e)
        second.seen(e)
        return Success(None)

    core = CoreInput(
        model=MODEL,
        system_prompt="sys",
        messages=(UserMessage("hi", 1),),
        stream=ScriptedModel(_script(), clock=_fixed_clock),
        tools=(CoreTool(descriptor=ECHO),),
        ports=Ports(emit=listener, prepare_tool=_core_echo_prepare(second)),
    )
    res = await run_core(core)
    assert isinstance(res, Success)
    assert [_normal(e) for e in promise_events] == [_normal(e) for e in core_events]
    assert out.status == res.unwrap().status == "completed"
    assert len(out.messages) == len(res.unwrap().messages) == 4


async def test_sync_and_async_listeners_see_the_same_events() -> None:
    """A plain function and a coroutine function are both accepted as listeners."""
    sync_seen: list[str] = []
    async_seen: list[str] = []
    first, second = _Order(), _Order()

    def slistener(event: MuleEvent, signal: AbortSignal) -> None:
        sync_seen.append(event.type)
        first.seen(event)

    async def alistener(event: MuleEvent, signal: AbortSignal) -> None:
        await anyio.lowlevel.checkpoint()
        async_seen.append(event.type)
        second.seen(event)

    await mule.run(_inp(_script(), tools=[_echo_tool(first)]), slistener)
    await mule.run(_inp(_script(), tools=[_echo_tool(second)]), alistener)
    assert sync_seen == async_seen
    assert sync_seen[0] == "run_start"
    assert sync_seen[-1] == "run_end"


async def test_listener_that_raises_fails_the_run_without_run_end() -> None:
    """A raising listener ends the run with MuleError(listener) and no run_end."""
    seen: list[str] = []
    boom = RuntimeError("listener broke")

    def listener(event: MuleEvent, signal: AbortSignal) -> None:
        seen.append(event.type)
        if event.type == "turn_start":
            raise boom

    model = ScriptedModel(_script(), clock=_fixed_clock)
    inp = MuleRunInput(
        model=MODEL, system_prompt="s", messages=(UserMessage("hi", 1),), stream=model
    )
    with pytest.raises(MuleRunFailed) as caught:
        await mule.run(inp, listener)
    assert caught.value.phase == "listener"
    assert caught.value.cause is boom
    assert caught.value.__cause__ is boom
    assert seen == ["run_start", "turn_start"]
    assert model.calls == []  # no model call after the listener failed


async def test_listener_that_raises_on_run_end() -> None:
    """Even a raise during run_end is a listener failure."""

    def listener(event: MuleEvent, signal: AbortSignal) -> None:
        if event.type == "run_end":
            raise ValueError("late")

    with pytest.raises(MuleRunFailed) as caught:
        await mule.run(_inp([reply("ok")]), listener)
    assert caught.value.phase == "listener"


async def test_abort_mid_stream_raises_the_reason_after_run_end_cancelled() -> None:
    """Aborting the signal mid-stream emits only run_end(cancelled) and raises AbortError."""
    controller = AbortController()
    seen: list[MuleEvent] = []

    def listener(event: MuleEvent, signal: AbortSignal) -> None:
        seen.append(event)
        if event.type == "message_update" and not controller.signal.aborted:
            controller.abort("user pressed stop")

    with pytest.raises(AbortError) as caught:
        await mule.run(_inp([reply(Text.of("x" * 40, 20))]), listener, controller.signal)
    assert caught.value.reason == "user pressed stop"
    first_update = next(i for i, e in enumerate(seen) if e.type == "message_update")
    assert [e.type for e in seen[first_update + 1 :]] == ["run_end"]
    end = seen[-1]
    assert end.type == "run_end"
    assert end.outcome == "cancelled"


async def test_abort_with_an_exception_reason_raises_that_exception() -> None:
    """An exception reason is raised as is."""
    controller = AbortController()
    reason = KeyError("stop")

    def listener(event: MuleEvent, signal: AbortSignal) -> None:
        if event.type == "message_update":
            controller.abort(reason)

    with pytest.raises(KeyError) as caught:
        await mule.run(_inp([reply(Text.of("abc", 3))]), listener, controller.signal)
    assert caught.value is reason


async def test_abort_during_tools_aborts_the_tool_signal() -> None:
    """A running tool sees the run's signal abort, and the run raises the reason."""
    controller = AbortController()
    tool_saw_abort = anyio.Event()

    async def prepare(call: ToolCall, signal: AbortSignal) -> MuleToolPreparation:
        async def execute(signal: AbortSignal) -> AsyncIterator[MuleToolExecutionPart]:
            controller.abort("stop the tool")
            await signal.wait()
            tool_saw_abort.set()
            yield MuleToolExecutionPart("result", MuleToolResult(content=(TextContent("x"),)))

        return MuleToolPrepared(execute)

    inp = _inp(
        [reply(Call("c1", "echo", {"x": 1}))], tools=[MuleTool(descriptor=ECHO, prepare=prepare)]
    )
    with pytest.raises(AbortError):
        await mule.run(inp, None, controller.signal)
    assert tool_saw_abort.is_set()


async def test_already_aborted_signal_raises_at_once_with_no_events() -> None:
    """A signal aborted before the call raises at once and emits nothing."""
    seen: list[MuleEvent] = []
    model = ScriptedModel([reply("never")])
    inp = MuleRunInput(
        model=MODEL, system_prompt="s", messages=(UserMessage("hi", 1),), stream=model
    )
    with pytest.raises(AbortError):
        await mule.run(inp, lambda e, s: seen.append(e), AbortSignal.abort("early"))
    assert seen == []
    assert model.calls == []


async def test_task_cancellation_emits_run_end_cancelled_and_reraises() -> None:
    """Cancelling the calling task emits run_end(cancelled), then the backend's cancellation."""
    seen: list[MuleEvent] = []
    signals: list[AbortSignal] = []

    def listener(event: MuleEvent, signal: AbortSignal) -> None:
        seen.append(event)
        signals.append(signal)

    with anyio.move_on_after(0.05) as scope:
        await mule.run(_inp([reply(Text.of("abc", 3), stall_after=3)]), listener)
    assert scope.cancelled_caught
    assert seen[-1].type == "run_end"
    assert seen[-1].outcome == "cancelled"
    assert [e.type for e in seen].count("run_end") == 1
    assert signals[-1].aborted  # the listener's signal is already aborted at run_end(cancelled)


async def test_model_failure_raises_with_the_error_message_as_cause() -> None:
    """A provider error after retries raises MuleRunFailed(model) carrying the message."""
    with pytest.raises(MuleRunFailed) as caught:
        await mule.run(_inp([error_reply("429 Too Many Requests")]))
    assert caught.value.phase == "model"
    assert "429" in caught.value.error.message
    assert isinstance(caught.value.cause, AssistantMessage)
    assert caught.value.cause.stop_reason == "error"


async def test_prepare_raising_is_a_tool_failure() -> None:
    """A raising prepare fails the run in the tool phase, with the exception as cause."""
    boom = OSError("disk on fire")

    async def prepare(call: ToolCall, signal: AbortSignal) -> MuleToolPreparation:
        raise boom

    inp = _inp(
        [reply(Call("c1", "echo", {"x": 1}))], tools=[MuleTool(descriptor=ECHO, prepare=prepare)]
    )
    with pytest.raises(MuleRunFailed) as caught:
        await mule.run(inp)
    assert caught.value.phase == "tool"
    assert caught.value.cause is boom


async def test_hooks_that_raise_are_control_or_model_errors() -> None:
    """Steering raising is a control error; resolve_api_key raising is a model error."""

    async def steering(signal: AbortSignal) -> list[UserMessage]:
        raise RuntimeError("queue down")

    async def key(provider: str, signal: AbortSignal) -> str | None:
        raise RuntimeError("vault down")

    with pytest.raises(MuleRunFailed) as caught:
        await mule.run(_inp([reply("x")], get_steering_messages=steering))
    assert caught.value.phase == "control"
    with pytest.raises(MuleRunFailed) as caught:
        await mule.run(_inp([reply("x")], resolve_api_key=key))
    assert caught.value.phase == "model"


async def test_input_errors_are_control_failures_with_no_events() -> None:
    """Empty messages fail before run_start."""
    seen: list[MuleEvent] = []
    inp = MuleRunInput(model=MODEL, system_prompt="s", messages=(), stream=ScriptedModel([]))
    with pytest.raises(MuleRunFailed) as caught:
        await mule.run(inp, lambda e, s: seen.append(e))
    assert caught.value.phase == "control"
    assert "no messages" in caught.value.error.message
    assert seen == []


# -- function tools ---------------------------------------------------------------------------


async def test_function_tool_decodes_validated_arguments() -> None:
    """A typed function becomes a tool: its schema from the signature, args coerced and decoded."""
    got: list[Any] = []

    @tool
    def add(a: int, b: Annotated[int, "the second addend"] = 2) -> int:
        """Add two integers.

        More text for the model.
        """
        got.append((a, b))
        return a + b

    assert add.descriptor.description == "Add two integers.\n\nMore text for the model."
    assert add.descriptor.parameters == {
        "type": "object",
        "properties": {
            "a": {"type": "integer"},
            "b": {"type": "integer", "default": 2, "description": "the second addend"},
        },
        "required": ["a"],
    }
    out = await mule.run(_inp([reply(Call("c1", "add", {"a": "40"})), reply("ok")], tools=[add]))
    assert got == [(40, 2)]
    result = out.messages[1]
    assert result.role == "toolResult"
    assert result.content == (TextContent("42"),)
    assert result.details == 42


async def test_function_tool_exception_is_a_failure_unless_opted_in() -> None:
    """A raising function fails the run; with errors_as_results it is an is_error result."""

    @tool
    async def fragile(path: str) -> str:
        """Read something fragile."""
        raise FileNotFoundError(path)

    @tool(errors_as_results=True, name="tolerant")
    async def tolerant(path: str) -> str:
        """Read something, reporting failures to the model."""
        raise FileNotFoundError(path)

    with pytest.raises(MuleRunFailed) as caught:
        await mule.run(_inp([reply(Call("c1", "fragile", {"path": "/x"}))], tools=[fragile]))
    assert caught.value.phase == "tool"
    assert isinstance(caught.value.cause, FileNotFoundError)
    out = await mule.run(
        _inp([reply(Call("c1", "tolerant", {"path": "/x"})), reply("ok")], tools=[tolerant])
    )
    result = out.messages[1]
    assert result.role == "toolResult"
    assert result.is_error
    assert "FileNotFoundError" in result.content[0].text  # type: ignore[union-attr]


async def test_function_tool_gets_the_signal_and_bad_args_are_rejected() -> None:
    """An AbortSignal parameter is injected; arguments failing the schema never reach the body."""
    signals: list[AbortSignal] = []

    @tool
    async def watch(mode: Literal["fast", "slow"], signal: AbortSignal) -> str:
        """Watch something."""
        signals.append(signal)
        return mode

    assert watch.descriptor.parameters["properties"] == {
        "mode": {"enum": ["fast", "slow"], "type": "string"}
    }
    out = await mule.run(
        _inp(
            [
                reply(Call("c1", "watch", {"mode": "fast"}), Call("c2", "watch", {"mode": "x"})),
                reply("ok"),
            ],
            tools=[watch],
        )
    )
    assert len(signals) == 1
    bad = out.messages[2]
    assert bad.role == "toolResult"
    assert bad.is_error
    assert bad.content[0].text.startswith('Validation failed for tool "watch"')  # type: ignore[union-attr]


def test_schema_for_common_annotations() -> None:
    """Optional, lists, mappings and tuples map to JSON schema."""
    assert schema_for(int | None) == {"anyOf": [{"type": "integer"}, {"type": "null"}]}
    assert schema_for(list[str]) == {"type": "array", "items": {"type": "string"}}
    assert schema_for(dict[str, float]) == {
        "type": "object",
        "additionalProperties": {"type": "number"},
    }
    assert schema_for(tuple[int, str])["prefixItems"] == [{"type": "integer"}, {"type": "string"}]


# -- AbortSignal ------------------------------------------------------------------------------


def _aborted(signal: AbortSignal) -> bool:
    """Read `aborted` without letting mypy narrow it across an abort."""
    return signal.aborted


async def test_abort_signal_api() -> None:
    """Listeners, wait, throw_if_aborted, any and timeout behave like the web platform's."""
    a, b = AbortController(), AbortController()
    heard: list[object] = []

    def hear(s: AbortSignal) -> None:
        heard.append(s.reason)

    def never(s: AbortSignal) -> None:
        heard.append("removed listener ran")

    a.signal.add_listener(hear)
    a.signal.add_listener(never)
    a.signal.remove_listener(never)
    both = AbortSignal.any([a.signal, b.signal])
    assert not _aborted(both)
    a.signal.throw_if_aborted()
    a.abort("first")
    assert heard == ["first"]
    assert _aborted(both)
    assert both.reason == "first"
    await both.wait()
    with pytest.raises(AbortError):
        a.signal.throw_if_aborted()
    timed = AbortSignal.timeout(20)
    assert not _aborted(timed)
    with anyio.fail_after(2):
        await timed.wait()
    assert isinstance(timed.reason, TimeoutError)
    combined = AbortSignal.any([AbortController().signal, AbortSignal.timeout(10)])
    with anyio.fail_after(2):
        await combined.wait()
    assert isinstance(combined.reason, TimeoutError)


async def test_timeout_signal_cancels_a_run() -> None:
    """AbortSignal.timeout cancels a stalled run; the run raises the TimeoutError reason."""
    with pytest.raises(TimeoutError):
        await mule.run(
            _inp([reply(Text.of("abc", 3), stall_after=2)]), None, AbortSignal.timeout(30)
        )


def test_result_listener_failure_is_a_value_in_the_core() -> None:
    """A Result listener's Failure ends the core run as Failure(listener), with no exception."""

    async def main() -> Result[Any, MuleError]:
        async def listener(e: MuleEvent, s: AbortSignal) -> Result[None, MuleError]:
            return (
                Failure(MuleError("listener", "nope")) if e.type == "turn_start" else Success(None)
            )

        core = CoreInput(
            model=MODEL,
            system_prompt="s",
            messages=(UserMessage("hi", 1),),
            stream=ScriptedModel([reply("x")]),
            ports=Ports(emit=listener),
        )
        return await run_core(core)

    res = anyio.run(main)
    assert isinstance(res, Failure)
    assert res.failure() == MuleError("listener", "nope")


_unused: Callable[..., Any] = Text


async def test_prepare_receives_the_gates_coerced_arguments() -> None:
    """The run's gate validates once: prepare gets its coerced values, the events the raw call."""
    seen: list[ToolCall] = []
    schema: JsonObject = {
        "type": "object",
        "properties": {"n": {"type": "number"}, "on": {"type": "boolean"}},
    }

    async def prepare(call: ToolCall, signal: AbortSignal) -> MuleToolPreparation:
        seen.append(call)

        async def execute(signal: AbortSignal) -> AsyncIterator[MuleToolExecutionPart]:
            yield MuleToolExecutionPart("result", MuleToolResult(content=(TextContent("ok"),)))

        return MuleToolPrepared(execute)

    probe = MuleTool(descriptor=Tool("probe", "probe", schema), prepare=prepare)
    starts: list[ToolExecutionStart] = []
    script = [reply(Call("c1", "probe", {"n": "0x10", "on": "true"})), reply("done")]
    await mule.run(
        _inp(script, tools=[probe]),
        lambda e, s: starts.append(e) if isinstance(e, ToolExecutionStart) else None,
    )
    assert [c.arguments for c in seen] == [{"n": 16, "on": True}]
    assert [c.id for c in seen] == ["c1"]
    assert [e.call.arguments for e in starts] == [{"n": "0x10", "on": "true"}]


async def test_function_tool_decodes_the_gates_coerced_arguments() -> None:
    """`@mule.tool` decodes the gate's values: "0x10" arrives as 16 (raw, it is no float)."""
    got: list[object] = []

    @mule.tool
    def double(n: float) -> float:
        """Double n."""
        got.append(n)
        return 2 * n

    out = await mule.run(
        _inp([reply(Call("c1", "double", {"n": "0x10"})), reply("done")], tools=[double])
    )
    assert got == [16]
    assert out.status == "completed"


async def test_an_exception_inside_the_loops_step_ends_the_run_typed_with_one_run_end() -> None:
    """Whatever raises inside the pure step (here: a usage no sum can add) fails the run typed.

    A hand-written stream may push anything; the step must not let an exception out of the run
    (a raw ExceptionGroup with no run_end, before): `MuleRunFailed(control)`, one run_end.
    """
    events: list[MuleEvent] = []

    def stream(model: Model, context: Any, options: Any) -> Any:
        async def events_of() -> AsyncIterator[object]:
            broken = AssistantMessage(
                content=(TextContent("hi"),),
                api=MODEL.api,
                provider=MODEL.provider,
                model=MODEL.id,
                usage=None,  # type: ignore[arg-type]  # what an untyped stream can push
                stop_reason="stop",
                timestamp=1,
            )
            yield DoneEvent(reason="stop", message=broken)

        return events_of()

    inp = MuleRunInput(
        model=MODEL, system_prompt="sys", messages=(UserMessage("hi", 1),), stream=stream
    )
    with pytest.raises(MuleRunFailed) as caught:
        await mule.run(inp, lambda e, s: events.append(e))
    assert caught.value.phase == "control"
    assert "DoneEvent" in caught.value.error.message
    assert isinstance(caught.value.cause, AttributeError)
    ends = [e for e in events if e.type == "run_end"]
    assert len(ends) == 1
    assert ends[0].outcome == "failed"
    assert events[-1] is ends[0]
