"""The promise facade's own input types: plain async callbacks instead of Result-returning ones."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import ClassVar, Literal, TypeAlias, final

from attrs import frozen

from mule.effects import MuleCompletedTurn, MuleRunSettings
from mule.effects._events import MuleEvent
from mule.effects._tools import ExecutionMode, MuleToolExecutionPart, MuleToolRejection, Replay
from mule.pi import AbortSignal
from mule.pi._content import ToolCall
from mule.pi._context import Tool
from mule.pi._messages import Message


@final
@frozen
class MuleToolPrepared:
    """A decoded and authorised call, with its executor (an async iterator of parts)."""

    execute: Callable[[AbortSignal], AsyncIterator[MuleToolExecutionPart]]
    status: ClassVar[Literal["prepared"]] = "prepared"


MuleToolPreparation: TypeAlias = MuleToolPrepared | MuleToolRejection


@final
@frozen(kw_only=True)
class MuleTool:
    """A Pi tool declaration paired with its async preparation door."""

    descriptor: Tool
    prepare: Callable[[ToolCall, AbortSignal], Awaitable[MuleToolPreparation]]
    replay: Replay = "unsafe"
    execution_mode: ExecutionMode | None = None


MulePromiseListener: TypeAlias = Callable[[MuleEvent, AbortSignal], Awaitable[None] | None]


@final
@frozen(kw_only=True)
class MuleRunInput(MuleRunSettings):
    """Everything one run needs, with plain async callbacks."""

    tools: Sequence[MuleTool] = ()
    resolve_api_key: Callable[[str, AbortSignal], Awaitable[str | None]] | None = None
    get_steering_messages: Callable[[AbortSignal], Awaitable[Sequence[Message]]] | None = None
    get_follow_up_messages: Callable[[AbortSignal], Awaitable[Sequence[Message]]] | None = None
    should_stop_after_turn: Callable[[MuleCompletedTurn, AbortSignal], Awaitable[bool]] | None = (
        None
    )


__all__ = [
    "MulePromiseListener",
    "MuleRunInput",
    "MuleTool",
    "MuleToolPreparation",
    "MuleToolPrepared",
]
