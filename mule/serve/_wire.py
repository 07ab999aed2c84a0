"""The server's JSON: bridge events as frames, compact streaming deltas and snapshots."""

from __future__ import annotations

from typing import Any, Final, final

from mule.effects import MULE_CODEC, MessageUpdate, ToolExecutionUpdate, update_to_wire
from mule.pi import stringify
from mule.pirc import (
    AgentEnd,
    AgentSettled,
    AutoRetryEnd,
    AutoRetryStart,
    BashExecutionUpdate,
    BridgeEvent,
    CompactionEnd,
    CompactionStart,
    EntryAppended,
    ExtensionError,
    ExtensionUIRequest,
    JobResult,
    OtherPiEvent,
    QueueUpdate,
    SummarizationRetryAttemptStart,
    SummarizationRetryFinished,
    SummarizationRetryScheduled,
)

# What a WebSocket client sees: text, thinking and tool streaming, the run's lifecycle, retries
# and compaction, and extension UI. `agent_end` (its messages are the job result),
# `agent_settled` (the job's end, sent as the run's `run_end`), `queue_update`, pi's session
# events (`entry_appended`, `bash_execution_update`, `summarization_retry_*`), `model_prompt`
# and unknown pi events stay on the server.
FORWARDED_TYPES: Final[frozenset[str]] = frozenset(
    {
        "run_start",
        "run_end",
        "turn_start",
        "turn_end",
        "message_start",
        "message_update",
        "message_end",
        "tool_execution_start",
        "tool_execution_update",
        "tool_execution_end",
        "auto_retry_start",
        "auto_retry_end",
        "compaction_start",
        "compaction_end",
        "extension_ui_request",
        "extension_error",
    }
)

# mule's codec, plus the bridge's pass-through events and job results. Their optionals are
# written as null; a UI request also says whether pi waits for an answer, a result its final
# message and text.
_CODEC = MULE_CODEC.extend(
    (JobResult,),
    tagged={
        "type": (
            AgentEnd,
            AgentSettled,
            EntryAppended,
            BashExecutionUpdate,
            SummarizationRetryScheduled,
            SummarizationRetryAttemptStart,
            SummarizationRetryFinished,
            AutoRetryStart,
            AutoRetryEnd,
            CompactionStart,
            CompactionEnd,
            QueueUpdate,
            ExtensionError,
            ExtensionUIRequest,
            OtherPiEvent,
        )
    },
    nulls=True,
    properties={ExtensionUIRequest: ("expects_answer",), JobResult: ("message", "text")},
)
_to_wire = _CODEC.to_wire


def bridge_event_to_wire(event: BridgeEvent) -> dict[str, Any]:
    """Return the JSON form of any bridge event: mule's full form, else camelCase fields.

    `message_update` gets mule's full form here (with the response so far); the server streams
    `mule.effects.update_to_wire` instead.
    """
    out: dict[str, Any] = _to_wire(event)
    return out


def result_to_wire(result: JobResult) -> dict[str, Any]:
    """Return a job result: outcome, attempts, error, the last messages, final message, text."""
    out: dict[str, Any] = _to_wire(result)
    return out


@final
class Frame:
    """One server → client message, encoded once and shared by every subscriber.

    `key` groups frames that supersede each other under pressure: the message id of a
    `message_update`, the tool call id of a `tool_execution_update`; None for lifecycle frames,
    which are never dropped.
    """

    __slots__ = ("_text", "event", "is_snapshot", "job", "key", "kind", "seq", "size")

    def __init__(
        self,
        job: str,
        seq: int,
        kind: str,
        text: str | None,
        key: str | None = None,
        event: MessageUpdate | None = None,
        is_snapshot: bool = False,
    ) -> None:
        self.job = job
        self.seq = seq
        self.kind = kind
        self._text = text
        self.key = key
        self.event = event
        self.is_snapshot = is_snapshot
        # A snapshot is encoded only when sent: under pressure each newer one replaces the last.
        self.size = len(text) if text is not None else 0

    @property
    def text(self) -> str:
        """The frame's JSON (a snapshot is encoded on first read)."""
        if self._text is None:
            assert self.event is not None
            self._text = stringify(
                envelope(self.job, self.seq, update_to_wire(self.event, snapshot=True))
            )
        return self._text

    @property
    def droppable(self) -> bool:
        """Whether a newer frame with the same key makes this one redundant."""
        return self.key is not None

    @property
    def cumulative(self) -> bool:
        """Whether this frame alone carries its key's whole state (tool update or snapshot)."""
        return self.event is None or self.is_snapshot

    def snapshot(self) -> Frame:
        """Return this `message_update` as a snapshot (same seq, plus `value`); else itself."""
        if self.cumulative:
            return self
        snap = Frame(self.job, self.seq, self.kind, None, self.key, self.event, is_snapshot=True)
        snap.size = self.size  # an estimate until it is encoded
        return snap

    def __repr__(self) -> str:
        return f"Frame(job={self.job!r}, seq={self.seq}, kind={self.kind!r}, key={self.key!r})"


def envelope(job: str, seq: int, event: dict[str, Any]) -> dict[str, Any]:
    """Wrap an event's JSON for the socket: `{"type":"event","job","seq","event"}`."""
    return {"type": "event", "job": job, "seq": seq, "event": event}


def message_key(job: str, message: str) -> str:
    """Return the coalescing key of a message's updates (identities are per job)."""
    return f"{job}/m/{message}"


def tool_key(job: str, tool_call: str) -> str:
    """Return the coalescing key of a tool call's progress updates."""
    return f"{job}/t/{tool_call}"


def encode_event(job: str, seq: int, event: BridgeEvent) -> Frame:
    """Encode a bridge event as a frame (compact for `message_update`)."""
    if isinstance(event, MessageUpdate):
        text = stringify(envelope(job, seq, update_to_wire(event)))
        return Frame(
            job, seq, event.type, text, key=message_key(job, event.message.value), event=event
        )
    text = stringify(envelope(job, seq, bridge_event_to_wire(event)))
    if isinstance(event, ToolExecutionUpdate):
        return Frame(job, seq, event.type, text, key=tool_key(job, event.tool_call.value))
    return Frame(job, seq, event.type, text)


def control(job: str | None, seq: int, kind: str, **fields: Any) -> Frame:
    """Return a server frame that is not a bridge event (`job_end`, `ui_resolved`, ...)."""
    body: dict[str, Any] = {"type": kind}
    if job is not None:
        body["job"] = job
    body["seq"] = seq
    body.update(fields)
    return Frame(job or "", seq, kind, stringify(body))


__all__ = [
    "FORWARDED_TYPES",
    "Frame",
    "bridge_event_to_wire",
    "control",
    "encode_event",
    "envelope",
    "message_key",
    "result_to_wire",
    "tool_key",
]
