"""Pi's tool descriptor, call context and stream options."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Literal, TypeAlias, final

from attrs import frozen

from mule.pi._abort import AbortSignal
from mule.pi._json import JsonObject, JsonValue
from mule.pi._messages import Message
from mule.pi._model import Model, ThinkingLevel

Transport: TypeAlias = Literal["sse", "websocket", "websocket-cached", "auto"]
CacheRetention: TypeAlias = Literal["none", "short", "long"]
PayloadHook: TypeAlias = Callable[[JsonValue, Model], Awaitable[JsonValue] | JsonValue]


@final
@frozen
class Tool:
    """A tool the model may call; `parameters` is a JSON-Schema object."""

    name: str
    description: str
    parameters: JsonObject


@final
@frozen
class Context:
    """What one model call sees: the system prompt, the transcript and the tools."""

    messages: tuple[Message, ...]
    system_prompt: str | None = None
    tools: tuple[Tool, ...] | None = None


@final
@frozen
class ProviderResponse:
    """The HTTP status and headers of a provider response, before its body is read."""

    status: int
    headers: Mapping[str, str]


@final
@frozen
class ThinkingBudgets:
    """Token budgets per thinking level, for token-budget providers."""

    minimal: int | None = None
    low: int | None = None
    medium: int | None = None
    high: int | None = None


@final
@frozen(kw_only=True)
class StreamOptions:
    """Options for one model stream; `signal` aborts it (the loop sets it per attempt)."""

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
    "Transport",
]
