"""pi-only events that pass through the bridge typed, next to mule's lifecycle events."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Literal, TypeAlias, final

from attrs import frozen

from mule.effects import MuleEvent, MuleIdentity, RunStatus
from mule.pi import AssistantMessage, Message

# pi messages that mule's model has no class for (custom, bashExecution, compactionSummary, ...)
# stay raw JSON objects.
PiMessage: TypeAlias = Message | Mapping[str, Any]


@final
@frozen(kw_only=True)
class AgentEnd:
    """pi's `agent_end`: one attempt of a run ended; more may follow (auto-retry).

    Attributes:
        run: The job's run identity; None for an event pi wrote outside any job.
        messages: The attempt's new messages, as pi sent them (unknown roles stay raw JSON).
        will_retry: Whether pi will retry the attempt (pi >= 0.81 says so; None: pi did not).

    """

    run: MuleIdentity | None
    messages: tuple[PiMessage, ...]
    will_retry: bool | None = None
    type: ClassVar[Literal["agent_end"]] = "agent_end"


@final
@frozen(kw_only=True)
class AgentSettled:
    """pi's `agent_settled` (pi >= 1.1): the prompt's run and everything after it are over.

    pi writes it once per run, after the last `agent_end` and any retry, compaction or queued
    message that follows; the session is idle from here on.

    Attributes:
        run: The job's run identity; None for an event pi wrote outside any job.
        aborted: Whether the run was aborted.

    """

    run: MuleIdentity | None
    aborted: bool
    type: ClassVar[Literal["agent_settled"]] = "agent_settled"


@final
@frozen(kw_only=True)
class EntryAppended:
    """pi appended an entry to its session (a context edit, a model change, ...).

    Attributes:
        run: The job's run identity; None for an event pi wrote outside any job.
        entry: The session entry as raw JSON (`type`, `id`, `parentId`, ...).

    """

    run: MuleIdentity | None
    entry: Mapping[str, Any]
    type: ClassVar[Literal["entry_appended"]] = "entry_appended"


@final
@frozen(kw_only=True)
class BashExecutionUpdate:
    """Output of a running `bash` command (stdout and stderr merged), as it arrives.

    Attributes:
        run: The job's run identity; None for an event pi wrote outside any job.
        id: The id of the `bash` command it belongs to, if pi names one.
        delta: The new output.

    """

    run: MuleIdentity | None
    id: str | None
    delta: str
    type: ClassVar[Literal["bash_execution_update"]] = "bash_execution_update"


@final
@frozen(kw_only=True)
class SummarizationRetryScheduled:
    """A summarisation request (compaction or branch summary) failed; pi retries it.

    Attributes:
        run: The job's run identity; None for an event pi wrote outside any job.
        attempt: The retry about to start, from 1.
        max_attempts: The most retries pi makes.
        delay_ms: How long pi waits first, in milliseconds.
        error_message: The failed request's error text.

    """

    run: MuleIdentity | None
    attempt: int
    max_attempts: int
    delay_ms: int
    error_message: str
    type: ClassVar[Literal["summarization_retry_scheduled"]] = "summarization_retry_scheduled"


@final
@frozen(kw_only=True)
class SummarizationRetryAttemptStart:
    """pi's retry of a summarisation request starts.

    Attributes:
        run: The job's run identity; None for an event pi wrote outside any job.
        source: What is being summarised: `"compaction"` or `"branchSummary"`.
        reason: A compaction's reason (`manual`, `threshold`, `overflow`); None otherwise.

    """

    run: MuleIdentity | None
    source: str
    reason: str | None = None
    type: ClassVar[Literal["summarization_retry_attempt_start"]] = (
        "summarization_retry_attempt_start"
    )


@final
@frozen(kw_only=True)
class SummarizationRetryFinished:
    """pi's retries of a summarisation request are over.

    Attributes:
        run: The job's run identity; None for an event pi wrote outside any job.

    """

    run: MuleIdentity | None
    type: ClassVar[Literal["summarization_retry_finished"]] = "summarization_retry_finished"


@final
@frozen(kw_only=True)
class AutoRetryStart:
    """pi will retry after `delay_ms` (attempt is 1-based).

    Attributes:
        run: The job's run identity; None for an event pi wrote outside any job.
        attempt: The retry about to start, from 1 (the first retry is 1).
        max_attempts: The most retries pi makes (its `retry.maxRetries` setting).
        delay_ms: How long pi waits before the retry, in milliseconds.
        error_message: The failed attempt's error text.

    """

    run: MuleIdentity | None
    attempt: int
    max_attempts: int
    delay_ms: int
    error_message: str
    type: ClassVar[Literal["auto_retry_start"]] = "auto_retry_start"


@final
@frozen(kw_only=True)
class AutoRetryEnd:
    """pi's retry sequence ended, successfully or not.

    Attributes:
        run: The job's run identity; None for an event pi wrote outside any job.
        success: Whether a retry succeeded.
        attempt: How many retries pi made.
        final_error: The last error when every retry failed; None on success.

    """

    run: MuleIdentity | None
    success: bool
    attempt: int
    final_error: str | None = None
    type: ClassVar[Literal["auto_retry_end"]] = "auto_retry_end"


@final
@frozen(kw_only=True)
class CompactionStart:
    """pi started compacting the session (`manual`, `threshold` or `overflow`).

    Attributes:
        run: The job's run identity; None for an event pi wrote outside any job.
        reason: Why: `"manual"`, `"threshold"` or `"overflow"`.

    """

    run: MuleIdentity | None
    reason: str
    type: ClassVar[Literal["compaction_start"]] = "compaction_start"


@final
@frozen(kw_only=True)
class CompactionEnd:
    """pi finished compacting; `will_retry` means a new agent run follows.

    Attributes:
        run: The job's run identity; None for an event pi wrote outside any job.
        reason: Why it compacted, as in `CompactionStart`.
        result: pi's compaction result (summary, token counts) as raw JSON; None if it did
            not finish.
        aborted: Whether the compaction was aborted.
        will_retry: Whether pi starts a new agent run after it (an overflow compaction).
        error_message: Why it failed, if it did.

    """

    run: MuleIdentity | None
    reason: str
    result: Mapping[str, Any] | None
    aborted: bool
    will_retry: bool
    error_message: str | None = None
    type: ClassVar[Literal["compaction_end"]] = "compaction_end"


@final
@frozen(kw_only=True)
class QueueUpdate:
    """A full snapshot of pi's steering and follow-up queues.

    Attributes:
        run: The job's run identity; None for an event pi wrote outside any job.
        steering: The queued steering messages' texts, oldest first.
        follow_up: The queued follow-up messages' texts, oldest first.

    """

    run: MuleIdentity | None
    steering: tuple[str, ...]
    follow_up: tuple[str, ...]
    type: ClassVar[Literal["queue_update"]] = "queue_update"


@final
@frozen(kw_only=True)
class ExtensionError:
    """An extension handler threw.

    Attributes:
        run: The job's run identity; None for an event pi wrote outside any job.
        extension_path: The path of the extension whose handler threw.
        event: The pi event the handler was handling.
        error: The error's text.

    """

    run: MuleIdentity | None
    extension_path: str
    event: str
    error: str
    type: ClassVar[Literal["extension_error"]] = "extension_error"


DIALOG_METHODS: frozenset[str] = frozenset({"select", "confirm", "input", "editor"})


@final
@frozen(kw_only=True)
class ExtensionUIRequest:
    """An extension asked the host for UI; dialogs (`expects_answer`) wait for `respond_ui`.

    Attributes:
        run: The job's run identity; None for an event pi wrote outside any job.
        id: The request's id, to pass to `Bridge.respond_ui` or `Bridge.cancel_ui`.
        method: The UI call: `select`, `confirm`, `input`, `editor` (dialogs) or a
            fire-and-forget one such as `notify`.
        data: The whole request as raw JSON (title, options, timeout, ...).

    """

    run: MuleIdentity | None
    id: str
    method: str
    data: Mapping[str, Any]
    type: ClassVar[Literal["extension_ui_request"]] = "extension_ui_request"

    @property
    def expects_answer(self) -> bool:
        """Whether pi waits for an `extension_ui_response` (select, confirm, input, editor)."""
        return self.method in DIALOG_METHODS

    @property
    def title(self) -> str | None:
        """The dialog's title, if any."""
        v = self.data.get("title")
        return v if isinstance(v, str) else None

    @property
    def options(self) -> tuple[str, ...]:
        """A select dialog's options."""
        v = self.data.get("options")
        return tuple(o for o in v if isinstance(o, str)) if isinstance(v, list) else ()

    @property
    def timeout_ms(self) -> float | None:
        """Pi's own dialog timeout, if the extension set one."""
        v = self.data.get("timeout")
        return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None


@final
@frozen(kw_only=True)
class OtherPiEvent:
    """An event (or message) mule has no class for, passed through raw.

    Attributes:
        run: The job's run identity; None for an event pi wrote outside any job.
        data: The event's JSON object as pi wrote it.

    """

    run: MuleIdentity | None
    data: Mapping[str, Any]
    type: ClassVar[Literal["pi_event"]] = "pi_event"


@final
@frozen(kw_only=True)
class JobResult:
    """How a prompt ended: the outcome and the messages of its LAST `agent_end`.

    Attributes:
        run: The job's run identity (the one its events carry).
        outcome: `"completed"`, `"failed"` or `"cancelled"`.
        messages: The final attempt's new messages (earlier attempts' are in their
            `AgentEnd` events).
        attempts: How many attempts (`agent_end`s) the job took: 1 plus pi's retries.
        error: Why it failed or was cancelled (pi's error text, or the bridge's); None when
            it completed.

    """

    run: MuleIdentity
    outcome: RunStatus
    messages: tuple[PiMessage, ...]
    attempts: int
    error: str | None = None

    @property
    def message(self) -> AssistantMessage | None:
        """The last assistant message of the final attempt."""
        for m in reversed(self.messages):
            if isinstance(m, AssistantMessage):
                return m
        return None

    @property
    def text(self) -> str:
        """The final assistant message's text ("" if none)."""
        from mule.pi import text_of

        m = self.message
        return text_of(m) if m is not None else ""


PassThroughEvent: TypeAlias = (
    AgentEnd
    | AgentSettled
    | EntryAppended
    | BashExecutionUpdate
    | SummarizationRetryScheduled
    | SummarizationRetryAttemptStart
    | SummarizationRetryFinished
    | AutoRetryStart
    | AutoRetryEnd
    | CompactionStart
    | CompactionEnd
    | QueueUpdate
    | ExtensionError
    | ExtensionUIRequest
    | OtherPiEvent
)
BridgeEvent: TypeAlias = MuleEvent | PassThroughEvent

__all__ = [
    "DIALOG_METHODS",
    "AgentEnd",
    "AgentSettled",
    "AutoRetryEnd",
    "AutoRetryStart",
    "BashExecutionUpdate",
    "BridgeEvent",
    "CompactionEnd",
    "CompactionStart",
    "EntryAppended",
    "ExtensionError",
    "ExtensionUIRequest",
    "JobResult",
    "OtherPiEvent",
    "PassThroughEvent",
    "PiMessage",
    "QueueUpdate",
    "SummarizationRetryAttemptStart",
    "SummarizationRetryFinished",
    "SummarizationRetryScheduled",
]
