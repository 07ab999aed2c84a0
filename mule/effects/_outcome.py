"""What a run produces: each completed turn (for the stop hook) and the run's outcome."""

from __future__ import annotations

from typing import final

from attrs import frozen

from mule.effects._events import RunStatus
from mule.effects._identity import MuleIdentity
from mule.pi._messages import AssistantMessage, Message, ToolResultMessage


@final
@frozen
class MuleCompletedTurn:
    """Facts from a completed turn, handed to the stop hook."""

    message: AssistantMessage
    tool_results: tuple[ToolResultMessage, ...]
    context: tuple[Message, ...]
    new_messages: tuple[Message, ...]


@final
@frozen(kw_only=True)
class MuleRunOutcome:
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

    """

    status: RunStatus
    run: MuleIdentity
    terminal: MuleIdentity
    message: AssistantMessage
    messages: tuple[Message, ...]
    all_messages: tuple[Message, ...] = ()


__all__ = ["MuleCompletedTurn", "MuleRunOutcome"]
