"""Run settings, run input (core form), completed turns, resume and the outcome."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeAlias, final

from attrs import frozen
from returns.result import Result

from mule._abort import AbortSignal
from mule.effects._errors import MuleError
from mule.effects._events import MuleEvent, RunStatus
from mule.effects._identity import MuleIdentity
from mule.effects._tools import ExecutionMode, MuleTool, MuleToolCheckpoint
from mule.pi._context import Context, StreamOptions
from mule.pi._messages import AssistantMessage, Message, ToolResultMessage
from mule.pi._model import Model
from mule.pi._retry import RetryPolicy
from mule.pi._stream import AssistantMessageEventStream

MuleStreamFunction: TypeAlias = Callable[
    [Model, Context, StreamOptions],
    AssistantMessageEventStream | Awaitable[AssistantMessageEventStream],
]


@final
@frozen
class MuleCompletedTurn:
    """Facts from a completed turn, handed to the stop hook."""

    message: AssistantMessage
    tool_results: tuple[ToolResultMessage, ...]
    context: tuple[Message, ...]
    new_messages: tuple[Message, ...]


@final
@frozen
class MuleResume:
    """A completed assistant turn recovered by the transcript owner, before its next model call."""

    message: AssistantMessage
    tools: tuple[MuleToolCheckpoint, ...] = ()


@frozen(kw_only=True)
class MuleRunSettings:
    """Run inputs shared by the Result (effects) and the promise roots."""

    model: Model
    system_prompt: str
    messages: tuple[Message, ...]
    stream: MuleStreamFunction | None = None
    resume: MuleResume | None = None
    stream_options: StreamOptions | None = None
    model_stream_idle_timeout_ms: float | None = None
    tool_execution: ExecutionMode = "parallel"
    retry: RetryPolicy | None = None
    retry_after_ms: Callable[[AssistantMessage], float | None] | None = None


Listener: TypeAlias = Callable[[MuleEvent, AbortSignal], Awaitable[Result[None, MuleError]]]


@final
@frozen(kw_only=True)
class MuleRunInput(MuleRunSettings):
    """Everything one run needs, with Result-returning callbacks (the core's form)."""

    tools: tuple[MuleTool, ...] = ()
    resolve_api_key: (
        Callable[[str, AbortSignal], Awaitable[Result[str | None, MuleError]]] | None
    ) = None
    get_steering_messages: (
        Callable[[AbortSignal], Awaitable[Result[tuple[Message, ...], MuleError]]] | None
    ) = None
    get_follow_up_messages: (
        Callable[[AbortSignal], Awaitable[Result[tuple[Message, ...], MuleError]]] | None
    ) = None
    should_stop_after_turn: (
        Callable[[MuleCompletedTurn, AbortSignal], Awaitable[Result[bool, MuleError]]] | None
    ) = None


@final
@frozen(kw_only=True)
class MuleRunOutcome:
    """The honest terminal result of one run."""

    status: RunStatus
    run: MuleIdentity
    terminal: MuleIdentity
    message: AssistantMessage
    messages: tuple[Message, ...]


__all__ = [
    "Listener",
    "MuleCompletedTurn",
    "MuleResume",
    "MuleRunInput",
    "MuleRunOutcome",
    "MuleRunSettings",
    "MuleStreamFunction",
]
