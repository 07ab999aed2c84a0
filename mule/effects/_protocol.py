"""The pure machine's vocabulary: facts it is told and commands it asks for."""

from __future__ import annotations

from typing import TypeAlias, final

from attrs import frozen
from returns.result import Failure, Result, Success

from mule._fields_repr import fields_repr
from mule.effects._errors import MuleError
from mule.effects._lifecycle import MuleEvent
from mule.effects._outcome import MuleCompletedTurn, MuleRunOutcome
from mule.effects._tools import MuleCallPreparation, MuleToolExecutionPart
from mule.pi import (
    AssistantMessage,
    AssistantMessageEvent,
    Message,
    StreamOptions,
    ToolCall,
    TranscriptContext,
)

# -- facts (past tense): what happened --------------------------------------------------------


@final
@frozen
class Began:
    """The run was asked to start, at `now_ms` (results a resume builds get that time)."""

    now_ms: int = 0

    __repr__ = fields_repr


@final
@frozen
class KeyResolved:
    """`resolve_api_key` answered (None or "" falls back to the stream options' key)."""

    key: str | None

    __repr__ = fields_repr


@final
@frozen
class StreamOpened:
    """The stream function returned a stream."""

    __repr__ = fields_repr


@final
@frozen
class StreamExhausted:
    """The model stream ended without a terminal event."""

    __repr__ = fields_repr


@final
@frozen
class StreamBatch:
    """The model stream's next events, in order: what one read of it produced (`next_batch`).

    One fact for a network read's events, so a burst of deltas costs the loop one await and
    one step; listeners still see one `message_update` per delta. A terminal event comes in a
    batch of its own (the stream's rule), and a batch is handled as its events one by one.
    """

    events: tuple[AssistantMessageEvent, ...]

    __repr__ = fields_repr


@final
@frozen
class StreamIdled:
    """No provider event arrived within the idle timeout; `last` is the last partial seen."""

    last: AssistantMessage | None
    now_ms: int

    __repr__ = fields_repr


@final
@frozen
class ToolPrepared:
    """A tool's `prepare` answered for call `index`."""

    index: int
    preparation: MuleCallPreparation
    now_ms: int

    __repr__ = fields_repr


@final
@frozen
class ToolPartArrived:
    """The executor of call `index` yielded a part."""

    index: int
    part: MuleToolExecutionPart
    now_ms: int

    __repr__ = fields_repr


@final
@frozen
class ToolExhausted:
    """The executor of call `index` ended without a result part."""

    index: int

    __repr__ = fields_repr


@final
@frozen
class MessagesAnswered:
    """A steering or follow-up poll answered."""

    messages: tuple[Message, ...]

    __repr__ = fields_repr


@final
@frozen
class StopAnswered:
    """The stop hook answered."""

    stop: bool

    __repr__ = fields_repr


@final
@frozen
class RetryAfterAnswered:
    """`retry_after_ms` answered for the failed attempt."""

    ms: float | None

    __repr__ = fields_repr


@final
@frozen
class Slept:
    """A requested sleep is over."""

    __repr__ = fields_repr


@final
@frozen
class WorkFailed:
    """A callback or the stream function failed with a typed error."""

    error: MuleError

    __repr__ = fields_repr


@final
@frozen
class CancelRequested:
    """The run was interrupted (its signal aborted, or its task was cancelled)."""

    reason: str
    now_ms: int

    __repr__ = fields_repr


@final
@frozen
class ListenerFailed:
    """The listener failed on an event."""

    error: MuleError

    __repr__ = fields_repr


StreamFact: TypeAlias = (
    StreamOpened | StreamBatch | AssistantMessageEvent | StreamExhausted | StreamIdled
)
"""What a model attempt reports while the run is `Streaming`."""

ToolFact: TypeAlias = ToolPrepared | ToolPartArrived | ToolExhausted
"""What a tool batch reports while the run is `RunningTools`."""

Fact: TypeAlias = (
    Began
    | KeyResolved
    | StreamFact
    | ToolFact
    | MessagesAnswered
    | StopAnswered
    | RetryAfterAnswered
    | Slept
    | WorkFailed
    | CancelRequested
    | ListenerFailed
)

# -- commands (imperative): what the interpreter should do ------------------------------------
# A MuleEvent in the command list means "emit this event" (no wrapper: the per-event path is hot).


@final
@frozen
class ResolveKey:
    """Call `resolve_api_key(provider)`; answer `KeyResolved` or `WorkFailed`."""

    provider: str

    __repr__ = fields_repr


@final
@frozen
class CallModel:
    """Call the stream function (with the attempt's signal); answer `StreamOpened`."""

    context: TranscriptContext
    options: StreamOptions

    __repr__ = fields_repr


@final
@frozen
class PullModel:
    """Pull the stream's next batch; answer `StreamBatch`, `StreamExhausted` or `StreamIdled`."""

    __repr__ = fields_repr


PULL_MODEL = PullModel()


@final
@frozen
class CloseModel:
    """Release the current model stream (no answer)."""

    __repr__ = fields_repr


CLOSE_MODEL = CloseModel()


@final
@frozen
class PrepareTool:
    """Call the tool's `prepare` for call `index`; answer `ToolPrepared` or `WorkFailed`."""

    index: int
    call: ToolCall

    __repr__ = fields_repr


@final
@frozen
class StartTools:
    """Start executing the prepared calls; each answers with its first `ToolPartArrived`."""

    indices: tuple[int, ...]

    __repr__ = fields_repr


@final
@frozen
class PullTool:
    """Pull the next part of call `index`'s executor."""

    index: int

    __repr__ = fields_repr


@final
@frozen
class CloseTool:
    """Close call `index`'s executor (its result arrived); no answer."""

    index: int

    __repr__ = fields_repr


@final
@frozen
class AskSteering:
    """Poll steering messages; answer `MessagesAnswered`."""

    __repr__ = fields_repr


@final
@frozen
class AskFollowUp:
    """Poll follow-up messages; answer `MessagesAnswered`."""

    __repr__ = fields_repr


@final
@frozen
class AskStop:
    """Ask the stop hook about a completed turn; answer `StopAnswered`."""

    turn: MuleCompletedTurn

    __repr__ = fields_repr


@final
@frozen
class AskRetryAfter:
    """Ask `retry_after_ms` about a failed attempt; answer `RetryAfterAnswered`."""

    message: AssistantMessage

    __repr__ = fields_repr


@final
@frozen
class Sleep:
    """Sleep `ms` milliseconds (cancellable); answer `Slept`."""

    ms: float

    __repr__ = fields_repr


@final
@frozen
class Finish:
    """The run is over: its one verdict, a completed or cancelled outcome or a typed failure."""

    result: Result[MuleRunOutcome, MuleError]

    @property
    def outcome(self) -> MuleRunOutcome | None:
        """The outcome of a completed or cancelled run, else None."""
        return self.result.unwrap() if isinstance(self.result, Success) else None

    @property
    def error(self) -> MuleError | None:
        """The failure of a failed run, else None."""
        return self.result.failure() if isinstance(self.result, Failure) else None

    __repr__ = fields_repr


ASK_STEERING = AskSteering()
ASK_FOLLOW_UP = AskFollowUp()

WorldCommand: TypeAlias = (
    ResolveKey
    | CallModel
    | CloseModel
    | PrepareTool
    | StartTools
    | PullTool
    | CloseTool
    | AskSteering
    | AskFollowUp
    | AskStop
    | AskRetryAfter
    | Sleep
)
"""The commands the interpreter performs on the world (events, pulls and `Finish` aside)."""

Command: TypeAlias = MuleEvent | PullModel | Finish | WorldCommand

__all__ = [
    "ASK_FOLLOW_UP",
    "ASK_STEERING",
    "CLOSE_MODEL",
    "PULL_MODEL",
    "AskFollowUp",
    "AskRetryAfter",
    "AskSteering",
    "AskStop",
    "Began",
    "CallModel",
    "CancelRequested",
    "CloseModel",
    "CloseTool",
    "Command",
    "Fact",
    "Finish",
    "KeyResolved",
    "ListenerFailed",
    "MessagesAnswered",
    "PrepareTool",
    "PullModel",
    "PullTool",
    "ResolveKey",
    "RetryAfterAnswered",
    "Sleep",
    "Slept",
    "StartTools",
    "StopAnswered",
    "StreamBatch",
    "StreamExhausted",
    "StreamFact",
    "StreamIdled",
    "StreamOpened",
    "ToolExhausted",
    "ToolFact",
    "ToolPartArrived",
    "ToolPrepared",
    "WorkFailed",
    "WorldCommand",
]
