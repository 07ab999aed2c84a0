"""Pi's messages, usage and stop reasons."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import ClassVar, Literal, TypeAlias, final

from attrs import field, frozen

from mule._fields_repr import fields_repr
from mule.pi._content import AssistantContent, TextContent, UserContent
from mule.pi._json import JsonObject, JsonValue
from mule.pi._model import ModelThinkingLevel
from mule.pi._tool import Tool, ToolReference

StopReason: TypeAlias = Literal["pending", "stop", "length", "toolUse", "error", "aborted"]
"""`"pending"` marks a partial message (the response so far); a final one has another reason."""
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
    """Cost in USD of one response, per token class.

    Attributes:
        input: USD for input tokens.
        output: USD for output tokens.
        cache_read: USD for cache reads.
        cache_write: USD for cache writes.
        total: The sum, or the provider's billed cost when it reports one.
        total_from_provider: True when `total` is the provider's billed cost, False when it
            is the catalogue estimate (`calculate_cost` writes False); None (absent) also
            means an estimate.

    """

    input: float = 0.0
    output: float = 0.0
    cache_read: float = 0.0
    cache_write: float = 0.0
    total: float = 0.0
    total_from_provider: bool | None = None

    __repr__ = fields_repr


@final
@frozen
class Usage:
    """Token counts reported by the provider, with their cost.

    Attributes:
        input: Input (prompt) tokens, cache excluded.
        output: Output tokens, reasoning included.
        cache_read: Tokens read from the prompt cache.
        cache_write: Tokens written to the prompt cache.
        total_tokens: All of them.
        cost: What they cost, from the model's prices.
        cache_write_1h: The part of `cache_write` written with one-hour retention (only
            Anthropic reports the split).
        reasoning: The reasoning tokens, a part of `output`, when the provider reports them.

    """

    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0
    total_tokens: int = 0
    cost: UsageCost = field(factory=UsageCost)
    cache_write_1h: int | None = None
    reasoning: int | None = None
    # Where Pi's providers put them: OpenAI and Google write `reasoning` before the total;
    # only Anthropic reports one-hour writes, adding `cacheWrite1h` to its usage after `cost`.
    __wire_order__ = (
        "input",
        "output",
        "cache_read",
        "cache_write",
        "reasoning",
        "total_tokens",
        "cost",
        "cache_write_1h",
    )

    __repr__ = fields_repr


ZERO_USAGE = Usage()


@final
@frozen
class DiagnosticError:
    """The error part of a diagnostic: a thrown value, formatted.

    Attributes:
        message: The error's message.
        name: Its class name, if known.
        stack: Its stack trace, if any.
        code: Its code (a string or a number), if any.

    """

    message: str
    name: str | None = None
    stack: str | None = None
    code: str | int | None = None

    __repr__ = fields_repr


@final
@frozen
class Diagnostic:
    """A provider diagnostic attached to an assistant message.

    Attributes:
        type: What kind of diagnostic (e.g. an HTTP error).
        timestamp: When, in milliseconds since the epoch.
        error: The error it reports, if any.
        details: Free JSON details.

    """

    type: str
    timestamp: int
    error: DiagnosticError | None = None
    details: JsonObject | None = None

    __repr__ = fields_repr


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

    __repr__ = fields_repr


@final
@frozen
class AssistantMessage:
    """A model response, complete or failed (then `error_message` says why).

    Attributes:
        content: Text, thinking and tool-call blocks, in order.
        api: The wire API that produced it (`openai-completions`, `anthropic-messages`...).
        provider: The provider (`openai`, `anthropic`...).
        model: The model id.
        usage: This response's tokens and cost.
        stop_reason: `"stop"`, `"length"`, `"toolUse"`, `"error"` or `"aborted"`;
            `"pending"` while it streams (a partial message).
        timestamp: When it was created, in milliseconds since the epoch.
        response_id: The provider's response id, if it sent one.
        response_model: The model the provider says answered, if it differs or says so.
        diagnostics: Provider diagnostics (HTTP errors of retried requests...).
        error_message: Why it failed, for `"error"` and `"aborted"`.
        provider_thinking_level: The provider's own effort level used for this response,
            when the provider was sent one.
        thinking_level: The thinking level the loop asked for (`"off"` when none); absent
            outside a loop.
        raw_stop_reason: The provider's stop reason as it sent it (`"end_turn"`,
            `"length"`...), kept when it maps to a Pi reason and when it maps to none.
        duration_ms: Milliseconds from the request's start to the response's end (a
            monotonic clock), set on the final message.

    """

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
    provider_thinking_level: str | None = None
    thinking_level: ModelThinkingLevel | None = None
    raw_stop_reason: str | None = None
    duration_ms: int | None = None
    role: ClassVar[Literal["assistant"]] = "assistant"
    # Pi's key order as its providers build the object: the stream sets `durationMs` on the
    # final message, then the loop adds `thinkingLevel`.
    __wire_order__ = (
        "content",
        "api",
        "provider",
        "model",
        "usage",
        "stop_reason",
        "timestamp",
        "response_id",
        "response_model",
        "provider_thinking_level",
        "diagnostics",
        "raw_stop_reason",
        "error_message",
        "duration_ms",
        "thinking_level",
    )

    __repr__ = fields_repr


@final
@frozen
class ToolResultMessage:
    """The correlated result of one tool call, as the model will see it.

    Attributes:
        tool_call_id: The id of the call it answers.
        tool_name: The tool's name.
        content: What the model sees: text and image blocks.
        is_error: Whether it reports an error.
        timestamp: When it was created, in milliseconds since the epoch.
        details: Free JSON for hosts and UIs (not sent to the model).
        usage: Tokens the tool spent itself, if any.
        duration_ms: Milliseconds the tool's execution took (a monotonic clock); None when
            the tool did not run.

    """

    tool_call_id: str
    tool_name: str
    content: tuple[UserContent, ...]
    is_error: bool
    timestamp: int
    details: JsonValue = None
    usage: Usage | None = None
    duration_ms: int | None = None
    role: ClassVar[Literal["toolResult"]] = "toolResult"
    # Pi's key order (pi-agent-core's createToolResultMessage).
    __wire_order__ = (
        "tool_call_id",
        "tool_name",
        "content",
        "details",
        "usage",
        "is_error",
        "duration_ms",
        "timestamp",
    )

    __repr__ = fields_repr


@final
@frozen
class SystemMessage:
    """Instructions and tool declarations in the transcript (Pi 1.6.0's `role: "system"`).

    The leading one holds the base prompt and the tools; a later one adds instructions,
    patches named sections, or changes the tool set. Replaying them in order gives the
    current prompt and tools (`get_current_system_prompt`, `get_current_tools`).

    Attributes:
        content: Instruction text (on the leading message: the base prompt).
        timestamp: When it was written, in milliseconds since the epoch (0 for the initial one).
        sections: Named prompt sections rendered after `content`; later messages replace one
            by name, and `null` removes it.
        tools_added: Complete declarations of tools available from this point.
        tools_removed: Tools no longer available from this point.
        role: Always `"system"` (the wire tag).

    """

    content: str | tuple[TextContent, ...]
    timestamp: int = field(factory=now_ms, metadata={WIRE_REQUIRED: True})
    sections: Mapping[str, str | None] | None = None
    tools_added: tuple[Tool, ...] | None = None
    tools_removed: tuple[ToolReference, ...] | None = None
    role: ClassVar[Literal["system"]] = "system"
    # The agent loop's key order (its tool-change step adds the tool fields after the rest):
    # every system message pi prints; only pi-ai's createInitialSystemMessage puts them first.
    __wire_order__ = ("content", "sections", "timestamp", "tools_added", "tools_removed")

    __repr__ = fields_repr


Message: TypeAlias = SystemMessage | UserMessage | AssistantMessage | ToolResultMessage


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
    "SystemMessage",
    "ToolResultMessage",
    "Usage",
    "UsageCost",
    "UserMessage",
    "text_of",
]
