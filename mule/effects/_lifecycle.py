"""The run's lifecycle events, emitted around Pi's values (which are never rewritten)."""

from __future__ import annotations

from typing import ClassVar, Literal, TypeAlias, final

from attrs import field, frozen

from mule._fields_repr import fields_repr
from mule.effects._identity import MuleIdentity
from mule.effects._tools import MuleToolResult, Replay
from mule.pi import (
    AssistantMessage,
    AssistantMessageEvent,
    Message,
    PartialSource,
    ToolCall,
    ToolResultMessage,
)

RunStatus: TypeAlias = Literal["completed", "cancelled", "failed"]


@final
@frozen(kw_only=True)
class RunStart:
    """The run started (Pi's `agent_start`).

    Attributes:
        run: The run's identity (the root of every causal chain).
        messages: The conversation the run starts from (its input `messages`), so a
            listener sees the first prompt whole (`mule.otel.traced`). Empty in a record
            written before this field existed, and for a run the pi bridge maps.

    """

    run: MuleIdentity
    messages: tuple[Message, ...] = ()
    type: ClassVar[Literal["run_start"]] = "run_start"

    __repr__ = fields_repr


@final
@frozen(kw_only=True)
class ModelPrompt:
    """The exact prompt of one model attempt (1-based), sent right after this event.

    Attributes:
        run: The run's identity (the root of every causal chain).
        turn: The turn's identity (caused by the run).
        attempt: The attempt's number within the turn, from 1 (a retry is 2, ...).
        system_prompt: The system prompt sent with this attempt.

    """

    run: MuleIdentity
    turn: MuleIdentity
    attempt: int
    system_prompt: str
    type: ClassVar[Literal["model_prompt"]] = "model_prompt"

    __repr__ = fields_repr


@final
@frozen(kw_only=True)
class TurnStart:
    """A turn started.

    Attributes:
        run: The run's identity (the root of every causal chain).
        turn: The turn's identity (caused by the run).

    """

    run: MuleIdentity
    turn: MuleIdentity
    type: ClassVar[Literal["turn_start"]] = "turn_start"

    __repr__ = fields_repr


@final
@frozen(kw_only=True)
class MessageStart:
    """A message started: injected, an assistant attempt, or a tool result.

    Attributes:
        run: The run's identity (the root of every causal chain).
        turn: The turn's identity (caused by the run).
        message: The message's identity (caused by the turn).
        value: The message: a user message injected by steering or follow-up, an assistant
            attempt's first snapshot, or a tool result.

    """

    run: MuleIdentity
    turn: MuleIdentity
    message: MuleIdentity
    value: Message
    type: ClassVar[Literal["message_start"]] = "message_start"

    __repr__ = fields_repr


@final
@frozen(eq=False, slots=False, init=False)  # per streamed delta: a dict class sets up faster
class MessageUpdate:
    """An assistant attempt streamed `event`; `value` is the response so far (a snapshot).

    Attributes:
        run: The run's identity (the root of every causal chain).
        turn: The turn's identity (caused by the run).
        message: The assistant message's identity.
        value: The response so far (a snapshot, materialised on first read).
        event: The Pi stream event that produced this update (`text_delta`,
            `toolcall_end`...).

    """

    run: MuleIdentity
    turn: MuleIdentity
    message: MuleIdentity
    _value: AssistantMessage | PartialSource = field(alias="value", repr=False)
    event: AssistantMessageEvent
    type: ClassVar[Literal["message_update"]] = "message_update"

    # Made per streamed delta, so written out (attrs' frozen `__init__` sets the same dict
    # entries, and fetches a bound `object.__setattr__` a dict class never calls); a test
    # checks it sets exactly the attrs fields.
    def __init__(
        self,
        run: MuleIdentity,
        turn: MuleIdentity,
        message: MuleIdentity,
        value: AssistantMessage | PartialSource,
        event: AssistantMessageEvent,
    ) -> None:
        d = self.__dict__
        d["run"] = run
        d["turn"] = turn
        d["message"] = message
        d["_value"] = value
        d["event"] = event

    @property
    def value(self) -> AssistantMessage:
        """The response so far, materialised on first read."""
        v = self._value
        return v if type(v) is AssistantMessage else v.materialize()

    def __eq__(self, other: object) -> bool:
        if type(other) is not MessageUpdate:
            return NotImplemented
        return (self.run, self.turn, self.message, self.event, self.value) == (
            other.run,
            other.turn,
            other.message,
            other.event,
            other.value,
        )

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (
            f"MessageUpdate(run={self.run!r}, turn={self.turn!r}, message={self.message!r}, "
            f"event={self.event!r})"
        )


@final
@frozen(kw_only=True)
class MessageEnd:
    """A message ended; for an assistant attempt, `value` is the final message.

    Attributes:
        run: The run's identity (the root of every causal chain).
        turn: The turn's identity (caused by the run).
        message: The message's identity.
        value: The message as it ended (an assistant attempt's final message, retried ones
            included).

    """

    run: MuleIdentity
    turn: MuleIdentity
    message: MuleIdentity
    value: Message
    type: ClassVar[Literal["message_end"]] = "message_end"

    __repr__ = fields_repr


@final
@frozen(kw_only=True)
class ToolExecutionStart:
    """A tool call starts (before lookup, schema gate and prepare); `replay` is its safety.

    Attributes:
        run: The run's identity (the root of every causal chain).
        turn: The turn's identity (caused by the run).
        tool_call: The call's identity (caused by its assistant message).
        call: The model's tool call: id, name and arguments.
        replay: Whether the tool may run again after a crash (`"safe"`) or not (`"unsafe"`).

    """

    run: MuleIdentity
    turn: MuleIdentity
    tool_call: MuleIdentity
    call: ToolCall
    replay: Replay
    type: ClassVar[Literal["tool_execution_start"]] = "tool_execution_start"

    __repr__ = fields_repr


@final
@frozen(kw_only=True)
class ToolExecutionUpdate:
    """A tool reported progress.

    Attributes:
        run: The run's identity (the root of every causal chain).
        turn: The turn's identity (caused by the run).
        tool_call: The call's identity (caused by its assistant message).
        call: The model's tool call: id, name and arguments.
        result: The progress the tool reported (a partial result).

    """

    run: MuleIdentity
    turn: MuleIdentity
    tool_call: MuleIdentity
    call: ToolCall
    result: MuleToolResult
    type: ClassVar[Literal["tool_execution_update"]] = "tool_execution_update"

    __repr__ = fields_repr


@final
@frozen(kw_only=True)
class ToolExecutionEnd:
    """A tool call finished with its final result (an error result included).

    Attributes:
        run: The run's identity (the root of every causal chain).
        turn: The turn's identity (caused by the run).
        tool_call: The call's identity (caused by its assistant message).
        call: The model's tool call: id, name and arguments.
        result: The final result, an error result included.
        duration_ms: Milliseconds the execution took (a monotonic clock); None when the
            tool did not run (a rejected, blocked or aborted call).

    """

    run: MuleIdentity
    turn: MuleIdentity
    tool_call: MuleIdentity
    call: ToolCall
    result: MuleToolResult
    duration_ms: int | None = None
    type: ClassVar[Literal["tool_execution_end"]] = "tool_execution_end"

    __repr__ = fields_repr


@final
@frozen(kw_only=True)
class TurnEnd:
    """A turn ended with its assistant message and tool results (source order).

    Attributes:
        run: The run's identity (the root of every causal chain).
        turn: The turn's identity (caused by the run).
        message: The turn's final assistant message.
        tool_results: The tool result messages, in the calls' source order.

    """

    run: MuleIdentity
    turn: MuleIdentity
    message: AssistantMessage
    tool_results: tuple[ToolResultMessage, ...]
    type: ClassVar[Literal["turn_end"]] = "turn_end"

    __repr__ = fields_repr


@final
@frozen(kw_only=True)
class RunEnd:
    """The run's one terminal event.

    Attributes:
        run: The run's identity (the root of every causal chain).
        terminal: This event's own identity (also `MuleRunOutcome.terminal`).
        outcome: `"completed"`, `"cancelled"` or `"failed"`.

    """

    run: MuleIdentity
    terminal: MuleIdentity
    outcome: RunStatus
    type: ClassVar[Literal["run_end"]] = "run_end"

    __repr__ = fields_repr


MuleEvent: TypeAlias = (
    RunStart
    | ModelPrompt
    | TurnStart
    | MessageStart
    | MessageUpdate
    | MessageEnd
    | ToolExecutionStart
    | ToolExecutionUpdate
    | ToolExecutionEnd
    | TurnEnd
    | RunEnd
)
EVENT_TYPES: dict[str, type[MuleEvent]] = {
    c.type: c
    for c in (
        RunStart,
        ModelPrompt,
        TurnStart,
        MessageStart,
        MessageUpdate,
        MessageEnd,
        ToolExecutionStart,
        ToolExecutionUpdate,
        ToolExecutionEnd,
        TurnEnd,
        RunEnd,
    )
}

__all__ = [
    "EVENT_TYPES",
    "MessageEnd",
    "MessageStart",
    "MessageUpdate",
    "ModelPrompt",
    "MuleEvent",
    "RunEnd",
    "RunStart",
    "RunStatus",
    "ToolExecutionEnd",
    "ToolExecutionStart",
    "ToolExecutionUpdate",
    "TurnEnd",
    "TurnStart",
]
