"""Rebuilding a run's transcript and resume point from its committed events (pure, no I/O).

A run may span several segments (the first attempt and each resumed one); identities are
run-local, so segments are matched through Pi's values: a resumed turn's calls by `call.id`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from attrs import define, field

from mule.effects import (
    MessageEnd,
    ModelPrompt,
    MuleEvent,
    MuleResume,
    MuleToolCheckpoint,
    MuleToolResult,
    Replay,
    RunEnd,
    RunStart,
    ToolCompleted,
    ToolExecutionEnd,
    ToolExecutionStart,
    ToolPending,
    ToolStarted,
    TurnEnd,
)
from mule.pi import (
    SUCCESS_STOP_REASONS,
    AssistantMessage,
    Message,
    ToolCall,
    ToolResultMessage,
)


@define
class _OpenTurn:
    """A committed assistant message whose turn has not ended, with its calls' checkpoints."""

    message: AssistantMessage
    index: int  # its position in the transcript
    calls: tuple[ToolCall, ...]
    started: dict[str, Replay] = field(factory=dict)
    results: dict[str, MuleToolResult] = field(factory=dict)
    committed: dict[str, ToolResultMessage] = field(factory=dict)

    def checkpoint(self, call: ToolCall) -> MuleToolCheckpoint:
        """Return the most advanced durable state of one call."""
        cid = call.id
        message = self.committed.get(cid)
        if message is not None:
            result = self.results.get(cid) or MuleToolResult(
                content=message.content,
                is_error=message.is_error,
                details=message.details,
                usage=message.usage,
            )
            return ToolCompleted(call, result, message)
        if cid in self.results:
            return ToolCompleted(call, self.results[cid])
        if cid in self.started:
            return ToolStarted(call, self.started[cid])
        return ToolPending(call)


@define
class Fold:
    """The durable state of a run, as of the last committed event.

    Attributes:
        transcript: The committed conversation: input messages and every committed message.
        open: The committed assistant message whose turn has not ended, with its calls'
            checkpoints (None between turns).
        tentative: A failed assistant attempt not yet known to be final (its `turn_end`) or
            superseded by a retry.
        status: `"running"`, or the outcome of the run's last `run_end`.

    """

    transcript: list[Message]
    open: _OpenTurn | None = None
    # A failed assistant attempt not yet known to be final (its turn_end) or superseded.
    tentative: AssistantMessage | None = None
    status: str = "running"

    def apply(self, event: MuleEvent) -> None:
        """Advance by one committed event."""
        kind = type(event)
        if kind is MessageEnd:
            self._message_end(event.value)  # type: ignore[union-attr]
        elif kind is ToolExecutionStart:
            assert isinstance(event, ToolExecutionStart)
            if self.open is not None:
                self.open.started[event.call.id] = event.replay
        elif kind is ToolExecutionEnd:
            assert isinstance(event, ToolExecutionEnd)
            if self.open is not None:
                self.open.results[event.call.id] = event.result
        elif kind is ModelPrompt:
            # A new attempt: a failed one before it in this turn was retried, not committed.
            self.tentative = None
        elif kind is TurnEnd:
            assert isinstance(event, TurnEnd)
            self._turn_end(event)
        elif kind is RunStart:
            self.tentative = None  # a segment ended mid-retry: the next run re-asks the model
            self.status = "running"
        elif kind is RunEnd:
            assert isinstance(event, RunEnd)
            self.status = event.outcome

    def _message_end(self, value: Message) -> None:
        if type(value) is AssistantMessage:
            if value.stop_reason in SUCCESS_STOP_REASONS:
                self.tentative = None
                calls = tuple(b for b in value.content if type(b) is ToolCall)
                self.open = _OpenTurn(value, len(self.transcript), calls)
                self.transcript.append(value)
            else:
                self.tentative = value
            return
        self.transcript.append(value)
        if type(value) is ToolResultMessage and self.open is not None:
            self.open.committed[value.tool_call_id] = value

    def _turn_end(self, event: TurnEnd) -> None:
        if self.tentative is not None:  # the final failed attempt: Pi keeps it
            self.transcript.append(self.tentative)
            self.tentative = None
            return
        turn = self.open
        if turn is None:
            return
        # Results were committed one by one (a resumed batch may interleave old and new
        # ones); the turn's own order is source order, as turn_end carries it.
        tail = self.transcript[turn.index + 1 :]
        by_id = {m.tool_call_id: m for m in tail if type(m) is ToolResultMessage}
        ordered = [by_id.get(r.tool_call_id, r) for r in event.tool_results]
        self.transcript[turn.index + 1 :] = ordered
        self.open = None

    def recover(self) -> tuple[tuple[Message, ...], MuleResume | None]:
        """Return the input that continues the run: messages, and the turn to resume if any."""
        turn = self.open
        if turn is not None:
            messages = tuple(self.transcript[: turn.index])
            return messages, MuleResume(turn.message, tuple(turn.checkpoint(c) for c in turn.calls))
        t = self.transcript
        if t and type(t[-1]) is AssistantMessage and t[-1].stop_reason in SUCCESS_STOP_REASONS:
            # Its turn ended but the run may not have: resuming it ends the turn again, without
            # a model call, and lets the loop decide (steering, follow-ups, completion).
            return tuple(t[:-1]), MuleResume(t[-1])
        return tuple(t), None


def fold(base: Sequence[Message], events: Iterable[MuleEvent]) -> Fold:
    """Fold a run's committed events, oldest first, over its starting transcript."""
    state = Fold(list(base))
    for event in events:
        state.apply(event)
    return state


__all__ = ["Fold", "fold"]
