"""The run's immutable state: static configuration plus the phase the loop is in.

Which facts each phase takes, and the handler of each, is one table: `RULES` in
`mule.effects._transition` (drawn, with where each phase moves, in docs/architecture.md's
phase table, which a test checks against it). Every move into `Over` but a listener failure
emits the run's one `run_end`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Literal, TypeAlias, final

from attrs import frozen

from mule._fields_repr import fields_repr
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
    SystemReplay,
    Tool,
    ToolCall,
    ToolResultMessage,
    Usage,
)

if TYPE_CHECKING:
    from mule.pi import ToolValidator  # loaded with the first run that has tools


@final
@frozen
class RunConfig:
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

    __repr__ = fields_repr


@final
@frozen
class NotStarted:
    """Before `Began`."""

    __repr__ = fields_repr


@final
@frozen
class Polling:
    """Waiting for a steering or follow-up poll.

    `steering_again` is Pi 1.6.0's second steering poll before the next turn, asked when the
    poll after a turn was empty and the tool batch asked for another turn.
    """

    kind: Literal["steering", "steering_again", "follow_up"]

    __repr__ = fields_repr


@final
@frozen
class ResolvingKey:
    """Waiting for `resolve_api_key` before attempt `attempt`."""

    attempt: int

    __repr__ = fields_repr


@final
@frozen
class Streaming:
    """Model attempt `attempt` is open (`started` once its `start` event arrived)."""

    attempt: int
    turn: MuleIdentity
    message: MuleIdentity
    started: bool

    __repr__ = fields_repr


@final
@frozen
class AwaitingRetryAfter:
    """Waiting for `retry_after_ms` before backing off from attempt `attempt`."""

    attempt: int
    backoff_ms: float

    __repr__ = fields_repr


@final
@frozen
class BackingOff:
    """Sleeping before attempt `attempt + 1`."""

    attempt: int

    __repr__ = fields_repr


@final
@frozen
class ToolBatch:
    """One assistant message's tool calls: what does not change while they run (made once)."""

    message: AssistantMessage
    calls: tuple[ToolCall, ...]
    ids: tuple[MuleIdentity, ...]
    # Which calls run (resume may settle some from checkpoints); in source order.
    todo: tuple[int, ...]
    sequential: bool

    __repr__ = fields_repr


@final
@frozen
class RunningTools:
    """A tool batch is in progress: the batch, and how far each of its calls has come.

    A step that moves the batch builds one `RunningTools` at its end (the batch's draft in
    `mule.effects._batch`), not a copy per change.
    """

    batch: ToolBatch
    results: tuple[MuleToolResult | None, ...]
    # Result messages built so far; on resume, committed ones are reused verbatim.
    messages: tuple[ToolResultMessage | None, ...]
    # Pi 1.6.0's durationMs: each settled call's execution time (None: it never ran).
    durations: tuple[int | None, ...]
    # Parallel: position in `todo` of the prepare pass; sequential: the call index.
    cursor: int
    prepared: tuple[int, ...]
    running: int
    # When the running calls started (one at a time when sequential, together when parallel).
    started_ms: int

    __repr__ = fields_repr


@final
@frozen
class AwaitingStop:
    """Waiting for the stop hook, before the turn's `turn_end` (where Pi calls finishTurn).

    `more` says whether the tool batch asked for another turn; `message` and `results` are
    the turn's, for its `turn_end`.
    """

    more: bool
    message: AssistantMessage
    results: tuple[ToolResultMessage, ...]

    __repr__ = fields_repr


@final
@frozen
class Over:
    """The run finished; nothing more may happen."""

    __repr__ = fields_repr


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


NOTHING_REPLAYED = SystemReplay()  # (immutable: one shared start)


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
    # What `context`'s system messages declare, replayed up to `replay.seen` (advanced where a
    # turn reads the tools or the prompt, so each message is replayed once per run).
    replay: SystemReplay = NOTHING_REPLAYED

    __repr__ = fields_repr


__all__ = [
    "AwaitingRetryAfter",
    "AwaitingStop",
    "BackingOff",
    "NotStarted",
    "Over",
    "Phase",
    "Polling",
    "ResolvingKey",
    "RunConfig",
    "RunState",
    "RunningTools",
    "Streaming",
    "ToolBatch",
]
