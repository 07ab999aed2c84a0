"""Structured output, Pi's way: a terminating `final_result` tool whose schema is the type's.

`with_output(input, listener)` returns the input with that tool (and a follow-up that asks for
it when the model answers in text), the listener that counts invalid outputs, and the box
the decoded value lands in. Invalid output goes back to the model as the tool's error result;
more than `output_retries` of them fail the run with `MuleError(tool)`.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Sequence
from typing import Any, Final, NoReturn, cast, final

from attrs import evolve

from mule.effects import (
    MuleCompletedTurn,
    MuleError,
    MuleEvent,
    MuleRunFailed,
    MuleRunOutcome,
    MuleToolExecutionPart,
    MuleToolRejection,
    OutputT,
)
from mule.effects import MuleToolResult as ToolResult
from mule.pi import AbortSignal, Message, TextContent, Tool, ToolCall, UserMessage
from mule.promise._tool_types import decode, schema_for
from mule.promise._types import MulePromiseListener, MuleRunInput, MuleTool, MuleToolPrepared

OUTPUT_TOOL: Final = "final_result"
"""The name of the output tool the model calls with its final answer."""

_WRAPPED: Final = "response"
_ASK: Final = (
    f"Your answer must be given by calling the {OUTPUT_TOOL} tool. Call it now with your final"
    " answer."
)


@final
class OutputBox:
    """Where the decoded output lands, and how many invalid outputs the model sent."""

    __slots__ = ("asked", "failures", "has_value", "retries", "value", "why")

    def __init__(self, retries: int) -> None:
        self.retries = retries
        self.failures = 0
        self.asked = 0
        self.has_value = False
        self.value: object = None
        self.why = ""


def _schema(output_type: Any) -> tuple[dict[str, Any], bool]:
    """Return the tool's parameters schema, and whether the value is wrapped in `response`."""
    schema = schema_for(output_type)
    if schema.get("type") == "object" and "properties" in schema:
        return schema, False
    return {"type": "object", "properties": {_WRAPPED: schema}, "required": [_WRAPPED]}, True


def output_tool(output_type: Any, box: OutputBox) -> MuleTool:
    """Return the `final_result` tool for `output_type`, filling `box` when the output decodes."""
    parameters, wrapped = _schema(output_type)
    descriptor = Tool(
        OUTPUT_TOOL,
        "Return the final answer. Call this once you have it; its arguments are the answer.",
        parameters,
    )

    async def prepare(call: ToolCall, signal: AbortSignal) -> MuleToolPrepared | MuleToolRejection:
        raw: Any = call.arguments.get(_WRAPPED) if wrapped else dict(call.arguments)
        try:
            value = decode(raw, output_type)
        except Exception as exc:
            return MuleToolRejection(f"Invalid output for {OUTPUT_TOOL}: {exc}")

        async def execute(_: AbortSignal) -> AsyncIterator[MuleToolExecutionPart]:
            box.value = value
            box.has_value = True
            yield MuleToolExecutionPart(
                "result",
                ToolResult(content=(TextContent("Final result processed."),), terminate=True),
            )

        return MuleToolPrepared(execute)

    return MuleTool(descriptor=descriptor, prepare=prepare, replay="safe")


def with_output(
    inp: MuleRunInput[Any], listener: MulePromiseListener | None
) -> tuple[MuleRunInput[Any], MulePromiseListener | None, OutputBox | None]:
    """Return the run's input and listener with structured output wired in (or unchanged)."""
    output_type = inp.output_type
    if output_type is None:
        return inp, listener, None
    box = OutputBox(inp.output_retries)
    user_follow_up = inp.get_follow_up_messages
    inner = listener

    async def follow_up(signal: AbortSignal) -> Sequence[Message]:
        if user_follow_up is not None:
            messages = await user_follow_up(signal)
            if messages:
                return messages
        if box.has_value:
            return ()
        # The model answered without the tool: ask for it, counted as an invalid output.
        box.asked += 1
        _count(box, "the model answered without calling " + OUTPUT_TOOL)
        return (UserMessage(_ASK),)

    async def counting(event: MuleEvent, signal: AbortSignal) -> None:
        if (
            event.type == "tool_execution_end"
            and event.call.name == OUTPUT_TOOL
            and event.result.is_error
        ):
            # Counted only: a raising listener would fail the run unseen by the host's
            # listener; the stop hook after this turn fails it when there were too many.
            box.failures += 1
            box.why = "".join(getattr(b, "text", "") for b in event.result.content)
        if inner is not None:
            answer = inner(event, signal)
            if answer is not None and inspect.isawaitable(answer):
                await answer

    user_stop = inp.should_stop_after_turn

    async def stop(turn: MuleCompletedTurn, signal: AbortSignal) -> bool:
        if box.failures > box.retries:
            _exhausted(box)
        return False if user_stop is None else await user_stop(turn, signal)

    tools = (*inp.tools, output_tool(output_type, box))
    full = evolve(inp, tools=tools, get_follow_up_messages=follow_up, should_stop_after_turn=stop)
    return full, counting, box


def attach_output(outcome: MuleRunOutcome[Any], box: OutputBox | None) -> MuleRunOutcome[OutputT]:
    """Return the outcome with the decoded output (unchanged without structured output)."""
    if box is None or not box.has_value:
        return cast(MuleRunOutcome[OutputT], outcome)
    return cast(MuleRunOutcome[OutputT], evolve(outcome, output=box.value))


def _count(box: OutputBox, why: str) -> None:
    box.failures += 1
    box.why = why
    if box.failures > box.retries:
        _exhausted(box)


def _exhausted(box: OutputBox) -> NoReturn:
    raise MuleRunFailed(
        MuleError(
            "tool",
            f"no valid output after {box.failures} attempts"
            f" (output_retries={box.retries}): {box.why}",
        )
    )


__all__ = ["OUTPUT_TOOL", "OutputBox", "attach_output", "output_tool", "with_output"]
