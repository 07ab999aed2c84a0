"""Tool declarations, preparations, execution parts and checkpoints (core, Result form)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import ClassVar, Generic, Literal, TypeAlias, TypeVar, final

from attrs import frozen
from returns.result import Result

from mule._fields_repr import fields_repr
from mule.effects._errors import MuleError
from mule.pi import (
    AbortSignal,
    ImageContent,
    JsonObject,
    JsonValue,
    TextContent,
    Tool,
    ToolCall,
    ToolResultMessage,
    Usage,
)

Replay: TypeAlias = Literal["safe", "unsafe"]
ExecutionMode: TypeAlias = Literal["parallel", "sequential"]


@final
@frozen(kw_only=True)
class MuleToolResult:
    """What a tool produced, before mule forms Pi's correlated result message.

    Attributes:
        content: What the model sees: text and image blocks.
        is_error: Whether the result is an error the model should see as one.
        details: Any JSON value for hosts and UIs (not sent to the model).
        structured_content: A machine-readable result matching the tool's `output_schema`,
            for programmatic callers (not sent to the model; kept on error results).
        usage: Tokens a tool spent itself (a sub-agent), if any.
        terminate: Ask the run to stop after this batch (when every result of the batch
            asks).

    """

    content: tuple[TextContent | ImageContent, ...]
    is_error: bool = False
    details: JsonValue = None
    structured_content: JsonValue = None
    usage: Usage | None = None
    terminate: bool | None = None

    __repr__ = fields_repr


@final
@frozen
class MuleToolExecutionPart:
    """Progress (`update`) or the final output (`result`) of one tool execution.

    Attributes:
        type: `"update"` (progress) or `"result"` (the final output).
        result: The partial or final result.

    """

    type: Literal["update", "result"]
    result: MuleToolResult

    __repr__ = fields_repr


ToolExecution: TypeAlias = AsyncIterator[Result[MuleToolExecutionPart, MuleError]]


_E = TypeVar("_E", covariant=True)


@final
@frozen
class MuleToolPrepared(Generic[_E]):
    """A decoded and authorised call with its executor (the seed's `status: "prepared"`).

    The core's ports give it a `ToolExecution` (`Result`s of execution parts); a promise-style
    tool (`mule.MuleTool`) an async iterator of plain parts.

    Attributes:
        execute: Runs the call under a signal, yielding its execution parts.

    """

    execute: Callable[[AbortSignal], _E]
    status: ClassVar[Literal["prepared"]] = "prepared"

    __repr__ = fields_repr


@final
@frozen
class MuleToolRejection:
    """A real parser or authorisation rejection produced before the tool executes.

    Attributes:
        message: The error text the model sees.
        terminate: Ask the run to stop after this batch.

    """

    message: str
    terminate: bool | None = None
    status: ClassVar[Literal["rejected"]] = "rejected"

    __repr__ = fields_repr


MuleCallPreparation: TypeAlias = MuleToolPrepared[ToolExecution] | MuleToolRejection


@final
@frozen(kw_only=True)
class MuleToolDeclaration:
    """What the core knows of a tool: its Pi descriptor, replay safety and execution mode.

    Its preparation door is the run's `Ports.prepare_tool`.

    Attributes:
        descriptor: Pi's tool descriptor: name, description, JSON schema of the arguments.
        replay: Whether a durable run may run it again after a crash.
        execution_mode: Force `"sequential"` or `"parallel"` for this tool (None: the run's
            mode).
        output_schema: The JSON Schema of the `structured_content` its successful results
            carry, if it declares one (not sent to the model).

    """

    descriptor: Tool
    replay: Replay = "unsafe"
    execution_mode: ExecutionMode | None = None
    output_schema: JsonObject | None = None

    __repr__ = fields_repr


@final
@frozen
class ToolPending:
    """Checkpoint: no `tool_execution_start` was recorded for the call.

    Attributes:
        call: The tool call.

    """

    call: ToolCall
    state: ClassVar[Literal["pending"]] = "pending"

    __repr__ = fields_repr


@final
@frozen
class ToolStarted:
    """Checkpoint: the call started (with this replay safety) but did not finish.

    Attributes:
        call: The tool call.
        replay: The replay safety it started with.

    """

    call: ToolCall
    replay: Replay
    state: ClassVar[Literal["started"]] = "started"

    __repr__ = fields_repr


@final
@frozen
class ToolCompleted:
    """Checkpoint: the call finished; `message` is set once its result message was committed.

    Attributes:
        call: The tool call.
        result: Its final result.
        message: The committed result message, once there is one.

    """

    call: ToolCall
    result: MuleToolResult
    message: ToolResultMessage | None = None
    state: ClassVar[Literal["completed"]] = "completed"

    __repr__ = fields_repr


MuleToolCheckpoint: TypeAlias = ToolPending | ToolStarted | ToolCompleted


__all__ = [
    "ExecutionMode",
    "MuleCallPreparation",
    "MuleToolCheckpoint",
    "MuleToolDeclaration",
    "MuleToolExecutionPart",
    "MuleToolPrepared",
    "MuleToolRejection",
    "MuleToolResult",
    "Replay",
    "ToolCompleted",
    "ToolExecution",
    "ToolPending",
    "ToolStarted",
]
