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
    """The honest terminal result of one run."""

    status: RunStatus
    run: MuleIdentity
    terminal: MuleIdentity
    message: AssistantMessage
    messages: tuple[Message, ...]


__all__ = ["MuleCompletedTurn", "MuleRunOutcome"]
