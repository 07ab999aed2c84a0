"""What Pi's `models.json` contributes to a registry, and how its overrides change a model.

`_models_json` reads and checks the file into these values; `_config_values` resolves the API
keys and headers they name.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, final

from attrs import evolve, frozen

from mule.pi._json import JsonObject
from mule.pi._model import InputKind, Model, ModelCost

# Defaults Pi gives a custom model (chosen by Pi for local servers such as Ollama).
DEFAULT_CONTEXT_WINDOW: Final = 128000
DEFAULT_MAX_TOKENS: Final = 16384


@final
class ModelsJsonError(Exception):
    """A `models.json` file that cannot be used; `where` is the JSON path of the fault.

    Attributes:
        file: The `models.json` file's path.
        where: The JSON path of the fault (`providers.local.models.0.id`); None for the
            whole file.
        detail: What is wrong there.

    """

    def __init__(self, file: str, where: str | None, detail: str) -> None:
        located = f"{where}: {detail}" if where else detail
        super().__init__(f"{located} (file: {file})")
        self.file = file
        self.where = where
        self.detail = detail


@final
@frozen
class ProviderRequestConfig:
    """How to authenticate requests to one provider, as `models.json` configures it.

    Values are kept as written and resolved per request (`resolve_config_value`): `!cmd` runs
    a shell command, else the name of a set environment variable, else the literal.

    Attributes:
        api_key: The provider's `apiKey`, unresolved; None: the provider's own environment
            fallback (OPENAI_API_KEY, ...).
        headers: The provider's extra request headers, values unresolved.
        auth_header: `authHeader`: also send the key as `Authorization: Bearer <key>`.

    """

    api_key: str | None = None
    headers: Mapping[str, str] | None = None
    auth_header: bool = False


@final
@frozen
class ModelOverride:
    """Per-model changes to a built-in model; unset fields keep the built-in value.

    Attributes:
        name: The model's display name.
        reasoning: Whether the model reasons (thinks).
        thinking_level_map: Thinking levels mapped to the vendor's values (None: the level is
            unsupported), merged over the built-in map.
        input: The input kinds the model takes (`"text"`, `"image"`).
        cost: Prices in USD per million tokens by kind (`input`, `output`, `cacheRead`,
            `cacheWrite`), merged over the built-in cost.
        context_window: The context window, in tokens.
        max_tokens: The most output tokens per request.
        compat: Compatibility switches, merged over the built-in ones.

    """

    name: str | None = None
    reasoning: bool | None = None
    thinking_level_map: Mapping[str, str | None] | None = None
    input: tuple[InputKind, ...] | None = None
    cost: Mapping[str, float] | None = None
    context_window: int | None = None
    max_tokens: int | None = None
    compat: JsonObject | None = None


@final
@frozen
class ProviderOverride:
    """Provider-level changes applied to every built-in model of that provider.

    Attributes:
        base_url: The endpoint every model of the provider uses instead of its own.
        compat: Compatibility switches merged over each model's.

    """

    base_url: str | None = None
    compat: JsonObject | None = None


@final
@frozen
class CustomConfig:
    """What a `models.json` file contributes to a registry.

    Attributes:
        models: The custom models it defines (a custom provider's, or ones replacing a
            built-in model of the same provider and id).
        overrides: Provider-level changes to built-in providers, by provider.
        model_overrides: Per-model changes to built-in models, by provider then model id.
        request_configs: How to authenticate requests, by provider.
        model_headers: Extra request headers of single models, by (provider, model id),
            values unresolved.

    """

    models: tuple[Model, ...] = ()
    overrides: Mapping[str, ProviderOverride] = {}
    model_overrides: Mapping[str, Mapping[str, ModelOverride]] = {}
    request_configs: Mapping[str, ProviderRequestConfig] = {}
    model_headers: Mapping[tuple[str, str], Mapping[str, str]] = {}


def merge_compat(base: JsonObject | None, override: JsonObject | None) -> JsonObject | None:
    """Merge compat settings shallowly, and the two routing objects one level deeper (as Pi)."""
    if override is None:
        return base
    merged: dict[str, Any] = {**(base or {}), **override}
    for key in ("openRouterRouting", "vercelGatewayRouting"):
        inner_base = (base or {}).get(key)
        inner_over = override.get(key)
        if inner_base or inner_over:
            merged[key] = {
                **(inner_base if isinstance(inner_base, dict) else {}),
                **(inner_over if isinstance(inner_over, dict) else {}),
            }
    return merged


def apply_override(model: Model, override: ModelOverride) -> Model:
    """Apply a per-model override to a built-in model (cost and compat merged, not replaced)."""
    changes: dict[str, Any] = {}
    if override.name is not None:
        changes["name"] = override.name
    if override.reasoning is not None:
        changes["reasoning"] = override.reasoning
    if override.thinking_level_map is not None:
        changes["thinking_level_map"] = {
            **(model.thinking_level_map or {}),
            **override.thinking_level_map,
        }
    if override.input is not None:
        changes["input"] = override.input
    if override.context_window is not None:
        changes["context_window"] = override.context_window
    if override.max_tokens is not None:
        changes["max_tokens"] = override.max_tokens
    if override.cost is not None:
        c, o = model.cost, override.cost
        changes["cost"] = ModelCost(
            o.get("input", c.input),
            o.get("output", c.output),
            o.get("cacheRead", c.cache_read),
            o.get("cacheWrite", c.cache_write),
        )
    changes["compat"] = merge_compat(model.compat, override.compat)
    return evolve(model, **changes)


__all__ = [
    "DEFAULT_CONTEXT_WINDOW",
    "DEFAULT_MAX_TOKENS",
    "CustomConfig",
    "ModelOverride",
    "ModelsJsonError",
    "ProviderOverride",
    "ProviderRequestConfig",
    "apply_override",
    "merge_compat",
]
