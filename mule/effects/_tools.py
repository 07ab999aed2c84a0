"""Tool declarations, preparations, execution parts and checkpoints (core, Result form)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import ClassVar, Literal, TypeAlias, final

from attrs import frozen
from returns.result import Result

from mule.effects._errors import MuleError
from mule.pi import AbortSignal
from mule.pi._content import ImageContent, TextContent, ToolCall
from mule.pi._context import Tool
from mule.pi._json import JsonObject, JsonValue  # noqa: F401 (resolves the recursive alias)
from mule.pi._messages import ToolResultMessage, Usage

Replay: TypeAlias = Literal["safe", "unsafe"]
ExecutionMode: TypeAlias = Literal["parallel", "sequential"]


@final
@frozen(kw_only=True)
class MuleToolResult:
    """What a tool produced, before mule forms Pi's correlated result message."""

    content: tuple[TextContent | ImageContent, ...]
    is_error: bool = False
    details: JsonValue = None
    usage: Usage | None = None
    terminate: bool | None = None


@final
@frozen
class MuleToolExecutionPart:
    """Progress (`update`) or the final output (`result`) of one tool execution."""

    type: Literal["update", "result"]
    result: MuleToolResult


ToolExecution: TypeAlias = AsyncIterator[Result[MuleToolExecutionPart, MuleError]]


@final
@frozen
class MulePreparedCall:
    """A decoded and authorised call, with its Result-yielding executor (the core's form)."""

    execute: Callable[[AbortSignal], ToolExecution]
    status: ClassVar[Literal["prepared"]] = "prepared"


@final
@frozen
class MuleToolRejection:
    """A real parser or authorisation rejection produced before the tool executes."""

    message: str
    terminate: bool | None = None
    status: ClassVar[Literal["rejected"]] = "rejected"


MuleCallPreparation: TypeAlias = MulePreparedCall | MuleToolRejection


@final
@frozen(kw_only=True)
class MuleToolDeclaration:
    """What the core knows of a tool: its Pi descriptor, replay safety and execution mode.

    Its preparation door is the run's `Ports.prepare_tool`.
    """

    descriptor: Tool
    replay: Replay = "unsafe"
    execution_mode: ExecutionMode | None = None


@final
@frozen
class ToolPending:
    """Checkpoint: no `tool_execution_start` was recorded for the call."""

    call: ToolCall
    state: ClassVar[Literal["pending"]] = "pending"


@final
@frozen
class ToolStarted:
    """Checkpoint: the call started (with this replay safety) but did not finish."""

    call: ToolCall
    replay: Replay
    state: ClassVar[Literal["started"]] = "started"


@final
@frozen
class ToolCompleted:
    """Checkpoint: the call finished; `message` is set once its result message was committed."""

    call: ToolCall
    result: MuleToolResult
    message: ToolResultMessage | None = None
    state: ClassVar[Literal["completed"]] = "completed"


MuleToolCheckpoint: TypeAlias = ToolPending | ToolStarted | ToolCompleted


__all__ = [
    "ExecutionMode",
    "MuleCallPreparation",
    "MulePreparedCall",
    "MuleToolCheckpoint",
    "MuleToolDeclaration",
    "MuleToolExecutionPart",
    "MuleToolRejection",
    "MuleToolResult",
    "Replay",
    "ToolCompleted",
    "ToolExecution",
    "ToolPending",
    "ToolStarted",
]
