"""Pi's model descriptor and thinking levels."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal, TypeAlias, final

from attrs import field, frozen

from mule._fields_repr import fields_repr
from mule.pi._json import JsonObject, JsonValue  # noqa: F401 (resolves the recursive alias)

ThinkingLevel: TypeAlias = Literal["minimal", "low", "medium", "high", "xhigh", "max"]
ModelThinkingLevel: TypeAlias = Literal["off", "minimal", "low", "medium", "high", "xhigh", "max"]
InputKind: TypeAlias = Literal["text", "image"]


@final
@frozen
class ModelCostTier:
    """Prices in USD per million tokens that apply above a prompt size.

    Attributes:
        input: Per million input tokens.
        output: Per million output tokens.
        cache_read: Per million cache-read tokens.
        cache_write: Per million cache-write tokens.
        input_tokens_above: The tier applies when input, cache-read and cache-write tokens
            together exceed this.

    """

    input: float
    output: float
    cache_read: float
    cache_write: float
    input_tokens_above: int

    __repr__ = fields_repr


@final
@frozen
class ModelCost:
    """Prices in USD per million tokens.

    Attributes:
        input: Per million input tokens.
        output: Per million output tokens.
        cache_read: Per million cache-read tokens.
        cache_write: Per million cache-write tokens.
        tiers: Higher prices for long prompts; the tier with the highest threshold below
            the prompt's size applies.

    """

    input: float = 0.0
    output: float = 0.0
    cache_read: float = 0.0
    cache_write: float = 0.0
    tiers: tuple[ModelCostTier, ...] | None = None

    __repr__ = fields_repr


@final
@frozen
class Model:
    """A model descriptor: which wire protocol, where, and what it costs.

    Attributes:
        id: The provider's model id.
        name: A display name.
        api: The wire API (`openai-completions`, `openai-responses`, `anthropic-messages`,
            `google-generative-ai`, or one you registered).
        provider: The provider, which names the API key's environment variable.
        base_url: The API's base URL.
        reasoning: Whether the model reasons (thinking levels apply).
        input: What it accepts: `"text"`, and `"image"` for vision models.
        cost: Its prices (zero: runs cost 0).
        context_window: Its context window in tokens (0: unknown).
        max_tokens: Its output cap in tokens (0: unknown).
        thinking_level_map: Pi's thinking levels mapped to the provider's, where they
            differ.
        headers: Extra HTTP headers for every request.
        compat: Per-host switches of OpenAI-compatible servers (Pi's `compat`).
        prompt_cache: The prompt cache's lifetimes in seconds per retention tier (`short`,
            `long`), when known.
        input_limits: The provider's input limits (`maxRequestBytes`, image limits).
        type: `"chat"` when the catalogue says so (a model without a type is a chat model).
        extras: Keys of Pi's model that mule has no field for (`samplingParams`, a gateway's
            `providers`...), in their order, so a model writes back as Pi wrote it.

    """

    id: str
    name: str
    api: str
    provider: str
    base_url: str
    reasoning: bool = False
    input: tuple[InputKind, ...] = ("text",)
    cost: ModelCost = field(factory=ModelCost)
    context_window: int = 0
    max_tokens: int = 0
    thinking_level_map: Mapping[str, str | None] | None = None
    headers: Mapping[str, str] | None = None
    compat: JsonObject | None = None
    prompt_cache: JsonObject | None = None
    input_limits: JsonObject | None = None
    type: Literal["chat"] | None = None
    extras: JsonObject | None = field(default=None, kw_only=True)

    __repr__ = fields_repr


__all__ = [
    "InputKind",
    "Model",
    "ModelCost",
    "ModelCostTier",
    "ModelThinkingLevel",
    "ThinkingLevel",
]
