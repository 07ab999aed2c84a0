"""Pi's model descriptor and thinking levels."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal, TypeAlias, final

from attrs import field, frozen

from mule.pi._json import JsonObject, JsonValue  # noqa: F401 (resolves the recursive alias)

ThinkingLevel: TypeAlias = Literal["minimal", "low", "medium", "high", "xhigh"]
ModelThinkingLevel: TypeAlias = Literal["off", "minimal", "low", "medium", "high", "xhigh"]
InputKind: TypeAlias = Literal["text", "image"]


@final
@frozen
class ModelCost:
    """Prices in USD per million tokens."""

    input: float = 0.0
    output: float = 0.0
    cache_read: float = 0.0
    cache_write: float = 0.0


@final
@frozen
class Model:
    """A model descriptor: which wire protocol, where, and what it costs."""

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


__all__ = ["InputKind", "Model", "ModelCost", "ModelThinkingLevel", "ThinkingLevel"]
