"""Pi's tool descriptor, call context and stream options."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Literal, TypeAlias, final

from attrs import frozen

from mule._fields_repr import fields_repr
from mule.pi._abort import AbortSignal
from mule.pi._json import JsonObject, JsonValue
from mule.pi._messages import Message
from mule.pi._model import Model, ThinkingLevel
from mule.pi._tool import Tool, ToolReference

Transport: TypeAlias = Literal["sse", "websocket", "websocket-cached", "auto"]
CacheRetention: TypeAlias = Literal["none", "short", "long"]
PayloadHook: TypeAlias = Callable[[JsonValue, Model], Awaitable[JsonValue] | JsonValue]


@final
@frozen
class Context:
    """pi-ai's request shorthand: a system prompt and tools beside a transcript.

    `normalize_context` folds the prompt and the tools into a leading system message; the
    providers accept either this or the `TranscriptContext` a loop hands them.

    Attributes:
        messages: The transcript, oldest first.
        system_prompt: The system prompt, if any.
        tools: The tools the model may call, if any.

    """

    messages: tuple[Message, ...]
    system_prompt: str | None = None
    tools: tuple[Tool, ...] | None = None

    __repr__ = fields_repr


@final
@frozen
class ProviderResponse:
    """The HTTP status and headers of a provider response, before its body is read.

    Attributes:
        status: The HTTP status code.
        headers: The response headers (lower-case names).

    """

    status: int
    headers: Mapping[str, str]

    __repr__ = fields_repr


@final
@frozen
class ThinkingBudgets:
    """Token budgets per thinking level, for token-budget providers.

    Attributes:
        minimal: Tokens for the `minimal` level.
        low: Tokens for `low`.
        medium: Tokens for `medium`.
        high: Tokens for `high`.

    """

    minimal: int | None = None
    low: int | None = None
    medium: int | None = None
    high: int | None = None

    __repr__ = fields_repr


@final
@frozen(kw_only=True)
class StreamOptions:
    """Options for one model stream; `signal` aborts it (the loop sets it per attempt).

    Attributes:
        temperature: Sampling temperature (None: the provider's default).
        signal: Aborts the stream (the loop sets one per attempt).
        max_tokens: Cap on the response's output tokens.
        api_key: The key to send (None: the provider's environment variable).
        transport: `"sse"`, `"websocket"`, ... where a provider offers several.
        cache_retention: Prompt-cache retention: `"none"`, `"short"` or `"long"`.
        session_id: A session id for providers that cache per session.
        on_payload: Sees (and may replace) the request body before it is sent.
        on_response: Called with the HTTP status and headers before the body is read.
        headers: Extra HTTP headers.
        timeout_ms: The request timeout.
        max_retries: HTTP-level retries of the request (none by default, as in Pi 1.6.0).
        max_retry_delay_ms: The longest Retry-After the transport will wait.
        metadata: Provider metadata sent with the request (e.g. a user id).
        reasoning: The provider-independent thinking level (`"low"`, `"high"`...).
        thinking_budgets: Token budgets per thinking level, for token-budget providers.

    """

    temperature: float | None = None
    signal: AbortSignal | None = None
    max_tokens: int | None = None
    api_key: str | None = None
    transport: Transport | None = None
    cache_retention: CacheRetention | None = None
    session_id: str | None = None
    on_payload: PayloadHook | None = None
    on_response: Callable[[ProviderResponse, Model], Awaitable[None] | None] | None = None
    headers: Mapping[str, str] | None = None
    timeout_ms: int | None = None
    max_retries: int | None = None
    max_retry_delay_ms: int | None = None
    metadata: JsonObject | None = None
    # SimpleStreamOptions: the provider-independent reasoning knobs.
    reasoning: ThinkingLevel | None = None
    thinking_budgets: ThinkingBudgets | None = None

    __repr__ = fields_repr


# Pi splits these into two interfaces; one class with the reasoning knobs optional serves both.
SimpleStreamOptions: TypeAlias = StreamOptions

__all__ = [
    "CacheRetention",
    "Context",
    "PayloadHook",
    "ProviderResponse",
    "SimpleStreamOptions",
    "StreamOptions",
    "ThinkingBudgets",
    "Tool",
    "ToolReference",
    "Transport",
]
