"""Resume: a completed assistant turn recovered by whoever owns the transcript."""

from __future__ import annotations

from typing import final

from attrs import frozen

from mule._fields_repr import fields_repr
from mule.effects._tools import MuleToolCheckpoint
from mule.pi import AssistantMessage


@final
@frozen
class MuleResume:
    """A completed assistant turn recovered by the transcript owner, before its next model call.

    Attributes:
        message: The recovered assistant message, whose tool calls are resumed.
        tools: One checkpoint per call of that message (pending, started or completed).

    """

    message: AssistantMessage
    tools: tuple[MuleToolCheckpoint, ...] = ()

    __repr__ = fields_repr


__all__ = ["MuleResume"]
