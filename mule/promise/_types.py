"""The promise facade's own input types: plain async callbacks instead of Result-returning ones."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import ClassVar, Literal, TypeAlias, final

from attrs import frozen

from mule.effects import (
    ExecutionMode,
    MuleCompletedTurn,
    MuleEvent,
    MuleRunSettings,
    MuleToolExecutionPart,
    MuleToolRejection,
    OutputT,
    Replay,
)
from mule.pi import AbortSignal, Message, Tool, ToolCall


@final
@frozen
class MuleToolPrepared:
    """A decoded and authorised call, with its executor (an async iterator of parts).

    Attributes:
        execute: Runs the call under a signal, yielding execution parts (an async iterator).

    """

    execute: Callable[[AbortSignal], AsyncIterator[MuleToolExecutionPart]]
    status: ClassVar[Literal["prepared"]] = "prepared"


MuleToolPreparation: TypeAlias = MuleToolPrepared | MuleToolRejection


@final
@frozen(kw_only=True)
class MuleTool:
    """A Pi tool declaration paired with its async preparation door.

    Attributes:
        descriptor: Pi's tool descriptor: name, description, JSON schema of the arguments.
        prepare: Decodes and authorises one call: `MuleToolPrepared` or `MuleToolRejection`.
        replay: Whether a durable run may run it again after a crash.
        execution_mode: Force `"sequential"` or `"parallel"` for this tool (None: the run's
            mode).

    """

    descriptor: Tool
    prepare: Callable[[ToolCall, AbortSignal], Awaitable[MuleToolPreparation]]
    replay: Replay = "unsafe"
    execution_mode: ExecutionMode | None = None


MulePromiseListener: TypeAlias = Callable[[MuleEvent, AbortSignal], Awaitable[None] | None]


@final
@frozen(kw_only=True)
class MuleRunInput(MuleRunSettings[OutputT]):
    """Everything one run needs, with plain async callbacks.

    Attributes:
        tools: The tools the model may call (`@mule.tool`, `mule.tools`, MCP...).
        resolve_api_key: Returns the API key for a provider before each model call.
        get_steering_messages: Pi's steering poll (messages injected before the next model
            call).
        get_follow_up_messages: Pi's follow-up poll (messages that start another turn).
        should_stop_after_turn: The retained stop hook: asked after each completed turn's tool
            results, before its `turn_end` (where Pi 1.6.0 calls finishTurn); True ends the
            run. Not asked for an error or aborted turn (the run fails there).

    """

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
