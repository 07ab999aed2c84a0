"""Structured output, Pi's way: a terminating `final_result` tool whose schema is the type's.

`with_output(input)` returns the core input with that tool declared, its preparation
answered here, a follow-up that asks for the tool when the model answers in text, an emit
port that counts invalid outputs, and the box the decoded value lands in. Both roots get it
through `mule.effects.run` (the promise root's input adapts to this one). Invalid output goes
back to the model as the tool's error result; more than `output_retries` of them fail the
run with `MuleError(tool)`.
"""

from __future__ import annotations

from typing import Any, Final, cast, final

from attrs import evolve
from returns.result import Failure, Result, Success

from mule.effects._errors import MuleError
from mule.effects._inputs import MulePortsInput
from mule.effects._lifecycle import MuleEvent
from mule.effects._outcome import MuleCompletedTurn, MuleRunOutcome, OutputT
from mule.effects._ports import Ports, emit_to
from mule.effects._tool_types import ToolSignatureError, decode, schema_for
from mule.effects._tools import (
    MuleCallPreparation,
    MuleToolDeclaration,
    MuleToolExecutionPart,
    MuleToolPrepared,
    MuleToolRejection,
    MuleToolResult,
    ToolExecution,
)
from mule.pi import (
    AbortSignal,
    Message,
    TextContent,
    Tool,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)

OUTPUT_TOOL: Final = "final_result"
"""The name of the output tool the model calls with its final answer."""

_WRAPPED: Final = "response"
_ASK: Final = (
    f"Your answer must be given by calling the {OUTPUT_TOOL} tool. Call it now with your final"
    " answer."
)
_OK: Result[None, MuleError] = Success(None)
_DONE: Final = MuleToolExecutionPart(
    "result", MuleToolResult(content=(TextContent("Final result processed."),), terminate=True)
)


@final
class OutputBox:
    """Where the decoded output lands, and how many invalid outputs the model sent."""

    __slots__ = ("failures", "has_value", "retries", "text", "value", "why")

    def __init__(self, retries: int, *, text: bool = False) -> None:
        self.retries = retries
        self.text = text  # output_type=str: the final text, no output tool
        self.failures = 0
        self.has_value = False
        self.value: object = None
        self.why = ""

    def exhausted(self) -> bool:
        """Whether the model sent more invalid outputs than `retries` allows."""
        return self.failures > self.retries

    def error(self) -> MuleError:
        """Return the run's failure once exhausted."""
        return MuleError(
            "tool",
            f"no valid output after {self.failures} attempts"
            f" (output_retries={self.retries}): {self.why}",
        )


def _schema(output_type: Any) -> tuple[dict[str, Any], bool]:
    """Return the tool's parameters schema, and whether the value is wrapped in `response`."""
    schema = schema_for(output_type)
    if schema.get("type") == "object" and "properties" in schema:
        return schema, False
    return {"type": "object", "properties": {_WRAPPED: schema}, "required": [_WRAPPED]}, True


def output_tool(output_type: Any) -> tuple[Tool, bool]:
    """Return the `final_result` descriptor for `output_type`, and whether it wraps the value."""
    parameters, wrapped = _schema(output_type)
    descriptor = Tool(
        OUTPUT_TOOL,
        "Return the final answer. Call this once you have it; its arguments are the answer.",
        parameters,
    )
    return descriptor, wrapped


def _ports(ports: Ports, output_type: Any, wrapped: bool, box: OutputBox) -> Ports:
    inner_prepare = ports.prepare_tool
    inner_follow_up = ports.follow_up
    inner_stop = ports.should_stop
    inner_emit = ports.emit

    async def prepare(
        call: ToolCall, signal: AbortSignal
    ) -> Result[MuleCallPreparation, MuleError]:
        if call.name != OUTPUT_TOOL:
            if inner_prepare is None:  # unreachable: the core only prepares declared tools
                return Success(MuleToolRejection(f"Tool {call.name} not found"))
            return await inner_prepare(call, signal)
        raw: Any = call.arguments.get(_WRAPPED) if wrapped else dict(call.arguments)
        try:
            value = decode(raw, output_type)
        except Exception as exc:
            return Success(MuleToolRejection(f"Invalid output for {OUTPUT_TOOL}: {exc}"))

        async def execute(_: AbortSignal) -> ToolExecution:
            box.value = value
            box.has_value = True
            yield Success(_DONE)

        return Success(MuleToolPrepared(execute))

    async def follow_up(signal: AbortSignal) -> Result[tuple[Message, ...], MuleError]:
        if inner_follow_up is not None:
            got = await inner_follow_up(signal)
            if isinstance(got, Failure) or got.unwrap():
                return got
        if box.has_value:
            return Success(())
        # The model answered without the tool: ask for it, counted as an invalid output.
        box.failures += 1
        box.why = "the model answered without calling " + OUTPUT_TOOL
        if box.exhausted():
            return Failure(box.error())
        return Success((UserMessage(_ASK),))

    async def emit(event: MuleEvent, signal: AbortSignal) -> Result[None, MuleError]:
        if (
            event.type == "tool_execution_end"
            and event.call.name == OUTPUT_TOOL
            and event.result.is_error
        ):
            # Counted only: the stop port after this turn fails the run when there were too
            # many (the host's listener sees this event first, as any other).
            box.failures += 1
            box.why = "".join(getattr(b, "text", "") for b in event.result.content)
        return _OK if inner_emit is None else await emit_to(inner_emit, event, signal)

    async def stop(turn: MuleCompletedTurn, signal: AbortSignal) -> Result[bool, MuleError]:
        if box.exhausted():
            return Failure(box.error())
        return Success(False) if inner_stop is None else await inner_stop(turn, signal)

    return evolve(ports, prepare_tool=prepare, follow_up=follow_up, emit=emit, should_stop=stop)


def with_output(
    inp: MulePortsInput[Any],
) -> Result[tuple[MulePortsInput[Any], OutputBox | None], MuleError]:
    """Return the run's input with structured output wired in (unchanged without it).

    `str` needs no tool: the output is the model's final text. A type with no JSON schema,
    or a bad `output_retries`, is a control error.
    """
    output_type = inp.output_type
    if output_type is None:
        return Success((inp, None))
    if output_type is str:  # the answer as text: the model's final message, no output tool
        return Success((inp, OutputBox(0, text=True)))
    retries = inp.output_retries
    if type(retries) is not int or retries < 0:
        return Failure(MuleError("control", f"output_retries must be an int >= 0, got {retries!r}"))
    try:
        descriptor, wrapped = output_tool(output_type)
    except ToolSignatureError as exc:
        return Failure(MuleError("control", f"output_type {output_type!r}: {exc}", exc))
    box = OutputBox(retries)
    tools = (*inp.tools, MuleToolDeclaration(descriptor=descriptor, replay="safe"))
    return Success(
        (evolve(inp, tools=tools, ports=_ports(inp.ports, output_type, wrapped, box)), box)
    )


def _answered_last(outcome: MuleRunOutcome[Any]) -> bool:
    """Whether the run's last assistant message called the output tool and it succeeded."""
    calls = {
        block.id
        for block in outcome.message.content
        if isinstance(block, ToolCall) and block.name == OUTPUT_TOOL
    }
    return bool(calls) and any(
        isinstance(m, ToolResultMessage) and m.tool_call_id in calls and not m.is_error
        for m in outcome.all_messages or outcome.messages
    )


def attach_output(outcome: MuleRunOutcome[Any], box: OutputBox | None) -> MuleRunOutcome[OutputT]:
    """Return the outcome with the decoded output (unchanged without structured output).

    With `output_type=str` the output is the final assistant message's text (`outcome.text`)
    when the run completed.

    A limit reached on the turn that delivered the output did not stop the run short of its
    answer: the run ended by its output, so `limit` is None. The core stops at a limit
    before it asks the steering and follow-up ports, so only the output knows this.
    """
    if box is not None and box.text:
        text = outcome.text if outcome.status == "completed" else None
        return cast(MuleRunOutcome[OutputT], evolve(outcome, output=text))
    if box is None or not box.has_value:
        return cast(MuleRunOutcome[OutputT], outcome)
    limit = None if outcome.limit is not None and _answered_last(outcome) else outcome.limit
    return cast(MuleRunOutcome[OutputT], evolve(outcome, output=box.value, limit=limit))


__all__ = ["OUTPUT_TOOL", "OutputBox", "attach_output", "output_tool", "with_output"]
