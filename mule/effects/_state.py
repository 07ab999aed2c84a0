"""The run's immutable state: static configuration plus the phase the loop is in.

The phases and what moves the run between them (`step` in `_transition`; `expects(phase)`
states each phase's facts as code)::

    NotStarted --Began--> [steering?] Polling(steering) | ResolvingKey | Streaming
                          (a resume goes straight to RunningTools, or ends its turn)
    Polling     --MessagesAnswered--> ResolvingKey | Streaming   (a turn's attempt)
                                      Polling(steering_again)    (empty, more tool turns)
                                      Polling(follow_up) | Over  (nothing more to do)
    ResolvingKey --KeyResolved--> Streaming
    Streaming   --StreamOpened / start / block events--> Streaming
                --done|error, stopReason stop|length|toolUse--> RunningTools (tool calls)
                                                              | AwaitingStop | Polling | Over
                --error, retryable--> AwaitingRetryAfter | BackingOff
                --error|aborted, final / StreamExhausted--> Over (failed)
                --StreamIdled--> as an error terminal
    AwaitingRetryAfter --RetryAfterAnswered--> BackingOff
    BackingOff  --Slept--> ResolvingKey | Streaming              (the next attempt)
    RunningTools --ToolPrepared / ToolPartArrived--> RunningTools
                 --the batch's last result--> AwaitingStop | Polling | ResolvingKey
                                              | Streaming | Over (turn end)
                 --ToolExhausted--> Over (failed)
    AwaitingStop --StopAnswered--> (turn_end) Over (stop) | as after the turn end
    any phase   --CancelRequested--> Over (cancelled) ; --WorkFailed--> Over (failed)
                --ListenerFailed--> Over (the listener's error, no run_end)
    Over        nothing more (a cancel decided before run_end went out still wins)

Every move into `Over` but a listener failure emits the run's one `run_end`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal, TypeAlias, final

from attrs import frozen

from mule._record import Record
from mule.effects._identity import MuleIdentity
from mule.effects._limits import LimitName, RunLimits
from mule.effects._resume import MuleResume
from mule.effects._tools import MuleToolDeclaration, MuleToolResult
from mule.pi import (
    ZERO_USAGE,
    AssistantMessage,
    Message,
    Model,
    RetryPolicy,
    StreamOptions,
    Tool,
    ToolCall,
    ToolResultMessage,
    ToolValidator,
    Usage,
)


@final
class RunConfig(Record):
    """What does not change during a run."""

    run: MuleIdentity
    model: Model
    system_prompt: str
    stream_options: StreamOptions
    tools: Mapping[str, MuleToolDeclaration]
    # Each tool's argument gate, compiled once when the input was checked.
    validators: Mapping[str, ToolValidator]
    descriptors: tuple[Tool, ...] | None
    sequential: bool
    retry: RetryPolicy | None
    resume: MuleResume | None
    has_key_hook: bool
    has_steering: bool
    has_follow_up: bool
    has_stop: bool
    has_retry_after: bool
    idle_timeout_ms: float | None
    limits: RunLimits | None = None


@final
class NotStarted(Record):
    """Before `Began`."""


@final
class Polling(Record):
    """Waiting for a steering or follow-up poll.

    `steering_again` is Pi 1.6.0's second steering poll before the next turn, asked when the
    poll after a turn was empty and the tool batch asked for another turn.
    """

    kind: Literal["steering", "steering_again", "follow_up"]


@final
class ResolvingKey(Record):
    """Waiting for `resolve_api_key` before attempt `attempt`."""

    attempt: int


@final
class Streaming(Record):
    """Model attempt `attempt` is open (`started` once its `start` event arrived)."""

    attempt: int
    turn: MuleIdentity
    message: MuleIdentity
    started: bool


@final
class AwaitingRetryAfter(Record):
    """Waiting for `retry_after_ms` before backing off from attempt `attempt`."""

    attempt: int
    backoff_ms: float


@final
class BackingOff(Record):
    """Sleeping before attempt `attempt + 1`."""

    attempt: int


@final
class Batch(Record):
    """One assistant message's tool calls, from the first start to the last result message."""

    message: AssistantMessage
    calls: tuple[ToolCall, ...]
    ids: tuple[MuleIdentity, ...]
    # Which calls run (resume may settle some from checkpoints); in source order.
    todo: tuple[int, ...]
    results: tuple[MuleToolResult | None, ...]
    # Result messages built so far; on resume, committed ones are reused verbatim.
    messages: tuple[ToolResultMessage | None, ...]
    sequential: bool
    # Parallel: position in `todo` of the prepare pass; sequential: the call index.
    cursor: int
    prepared: tuple[int, ...]
    running: int
    # Pi 1.6.0's durationMs: when the running calls started (one at a time when sequential,
    # together when parallel), and each settled call's execution time (None: it never ran).
    started_ms: int = 0
    durations: tuple[int | None, ...] = ()


@final
class RunningTools(Record):
    """A tool batch is in progress."""

    batch: Batch


@final
class AwaitingStop(Record):
    """Waiting for the stop hook, before the turn's `turn_end` (where Pi calls finishTurn).

    `more` says whether the tool batch asked for another turn; `message` and `results` are
    the turn's, for its `turn_end`.
    """

    more: bool
    message: AssistantMessage
    results: tuple[ToolResultMessage, ...]


@final
class Over(Record):
    """The run finished; nothing more may happen."""


Phase: TypeAlias = (
    NotStarted
    | Polling
    | ResolvingKey
    | Streaming
    | AwaitingRetryAfter
    | BackingOff
    | RunningTools
    | AwaitingStop
    | Over
)


@final
@frozen
class RunState:
    """The whole state of one run between two facts."""

    cfg: RunConfig
    phase: Phase
    next_id: int = 1
    clock: int = 0
    context: tuple[Message, ...] = ()
    new: tuple[Message, ...] = ()
    turn: MuleIdentity | None = None
    first_turn: bool = True
    more: bool = False
    last_assistant: AssistantMessage | None = None
    usage: Usage = ZERO_USAGE  # every attempt's, retried and failed ones included
    turns: int = 0
    limit: LimitName | None = None
    # 1 when the run opened `context` with the initial system message it made itself (not in
    # the input, so not in `all_messages`), else 0.
    lead: int = 0


__all__ = [
    "AwaitingRetryAfter",
    "AwaitingStop",
    "BackingOff",
    "Batch",
    "NotStarted",
    "Over",
    "Phase",
    "Polling",
    "ResolvingKey",
    "RunConfig",
    "RunState",
    "RunningTools",
    "Streaming",
]
