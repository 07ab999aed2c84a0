"""What a run produces: each completed turn (for the stop hook) and the run's outcome."""

from __future__ import annotations

from typing import Generic, final

from attrs import frozen
from typing_extensions import TypeVar

from mule._fields_repr import fields_repr
from mule.effects._identity import MuleIdentity
from mule.effects._lifecycle import RunStatus
from mule.effects._limits import LimitName
from mule.pi import ZERO_USAGE, AssistantMessage, Message, ToolResultMessage, Usage, text_of

OutputT = TypeVar("OutputT", default=None)
"""The type of a run's structured output (`None` when it has none)."""


@final
@frozen
class MuleCompletedTurn:
    """Facts from a completed turn, handed to the stop hook.

    Attributes:
        message: The turn's final assistant message.
        tool_results: Its tool result messages, in source order.
        context: The whole context after the turn (input and new messages).
        new_messages: The messages the run added so far.

    """

    message: AssistantMessage
    tool_results: tuple[ToolResultMessage, ...]
    context: tuple[Message, ...]
    new_messages: tuple[Message, ...]

    __repr__ = fields_repr


@final
@frozen(kw_only=True)
class MuleRunOutcome(Generic[OutputT]):
    """The honest terminal result of one run.

    To continue the conversation, send `all_messages` plus the next user message:
    `messages` holds only what this run added (Pi's `agent_end` semantics), so sending it
    alone drops the conversation's start.

    Attributes:
        status: `"completed"`, or `"cancelled"` when the run was aborted (failures are no
            outcome: `MuleRunFailed` / `Failure(MuleError)`).
        run: The run's identity, the root of every event's causal chain.
        terminal: The identity of the run's one `run_end` event.
        message: The run's last assistant message (for a cancelled run, a stand-in with
            `stop_reason="aborted"` when the run had none).
        messages: Only the messages this run added, in order (Pi's `agent_end` messages):
            assistant messages, tool results, and steering or follow-up messages.
        all_messages: The whole conversation: the input `messages` followed by the new
            ones, the context to continue from. Empty in an outcome decoded from a record
            written before this field existed.
        usage: The run's total tokens and cost over every model attempt, retried and
            failed attempts included (`message.usage` is the last response's only).
        limit: The `RunLimits` bound that stopped the run (`"max_turns"`,
            `"max_output_tokens"` or `"max_cost_usd"`), or None. None as well when a limit
            was reached on the turn that delivered the structured output: the run ended by
            its output.
        output: The decoded structured output when the input had an `output_type` (typed:
            `MuleRunOutcome[Point]` for `output_type=Point`), else None. With
            `output_type=str`, the final text (`text`) of a completed run.

    """

    status: RunStatus
    run: MuleIdentity
    terminal: MuleIdentity
    message: AssistantMessage
    messages: tuple[Message, ...]
    all_messages: tuple[Message, ...] = ()
    usage: Usage = ZERO_USAGE
    limit: LimitName | None = None
    output: OutputT = None  # type: ignore[assignment]  # None unless output_type was set

    @property
    def text(self) -> str:
        """The text of the run's last assistant message (its text blocks joined; may be "")."""
        return text_of(self.message)

    __repr__ = fields_repr


__all__ = ["MuleCompletedTurn", "MuleRunOutcome"]
