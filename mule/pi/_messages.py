"""Pi's messages, usage and stop reasons."""

from __future__ import annotations

import time
from typing import ClassVar, Literal, TypeAlias, final

from attrs import field, frozen

from mule.pi._content import AssistantContent, TextContent, UserContent
from mule.pi._json import JsonObject, JsonValue

StopReason: TypeAlias = Literal["stop", "length", "toolUse", "error", "aborted"]
SUCCESS_STOP_REASONS: frozenset[str] = frozenset({"stop", "length", "toolUse"})
FAILURE_STOP_REASONS: frozenset[str] = frozenset({"error", "aborted"})

WIRE_REQUIRED = "mule.pi.wire_required"
"""attrs metadata key: a field with a Python default that the wire still requires."""


def now_ms() -> int:
    """Return the current time in milliseconds since the epoch (Pi's `Date.now()`)."""
    return int(time.time() * 1000)


@final
@frozen
class UsageCost:
    """Cost in USD of one response, per token class."""

    input: float = 0.0
    output: float = 0.0
    cache_read: float = 0.0
    cache_write: float = 0.0
    total: float = 0.0


@final
@frozen
class Usage:
    """Token counts reported by the provider, with their cost."""

    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0
    total_tokens: int = 0
    cost: UsageCost = field(factory=UsageCost)


ZERO_USAGE = Usage()


@final
@frozen
class DiagnosticError:
    """The error part of a diagnostic: a thrown value, formatted."""

    message: str
    name: str | None = None
    stack: str | None = None
    code: str | int | None = None


@final
@frozen
class Diagnostic:
    """A provider diagnostic attached to an assistant message."""

    type: str
    timestamp: int
    error: DiagnosticError | None = None
    details: JsonObject | None = None


@final
@frozen
class UserMessage:
    """A user message: `UserMessage("Hello")`, stamped now, or with an explicit timestamp.

    Attributes:
        content: The text, or a tuple of text and image blocks.
        timestamp: When it was written, in milliseconds since the epoch; defaults to now.
            Decoding still requires it: Pi's wire always carries one.
        role: Always `"user"` (the wire tag).

    """

    content: str | tuple[UserContent, ...]
    timestamp: int = field(factory=now_ms, metadata={WIRE_REQUIRED: True})
    role: ClassVar[Literal["user"]] = "user"


@final
@frozen
class AssistantMessage:
    """A model response, complete or failed (then `error_message` says why)."""

    content: tuple[AssistantContent, ...]
    api: str
    provider: str
    model: str
    usage: Usage
    stop_reason: StopReason
    timestamp: int
    # Pi's key order: a provider sets `responseId` from the first chunk, `responseModel` after.
    response_id: str | None = None
    response_model: str | None = None
    diagnostics: tuple[Diagnostic, ...] | None = None
    error_message: str | None = None
    role: ClassVar[Literal["assistant"]] = "assistant"


@final
@frozen
class ToolResultMessage:
    """The correlated result of one tool call, as the model will see it."""

    tool_call_id: str
    tool_name: str
    content: tuple[UserContent, ...]
    is_error: bool
    timestamp: int
    details: JsonValue = None
    usage: Usage | None = None
    role: ClassVar[Literal["toolResult"]] = "toolResult"


Message: TypeAlias = UserMessage | AssistantMessage | ToolResultMessage


def text_of(message: AssistantMessage | ToolResultMessage | UserMessage) -> str:
    """Return the concatenated text blocks of a message."""
    content = message.content
    if isinstance(content, str):
        return content
    return "".join(b.text for b in content if isinstance(b, TextContent))


__all__ = [
    "FAILURE_STOP_REASONS",
    "SUCCESS_STOP_REASONS",
    "ZERO_USAGE",
    "AssistantMessage",
    "Diagnostic",
    "DiagnosticError",
    "Message",
    "StopReason",
    "ToolResultMessage",
    "Usage",
    "UsageCost",
    "UserMessage",
    "text_of",
]
