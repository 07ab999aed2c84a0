"""Model registry: pi-ai's built-in catalogue and Pi's `models.json` custom providers.

>>> get_model("anthropic", "claude-sonnet-4-5").api
'anthropic-messages'
>>> "google" in get_providers()
True
"""

from __future__ import annotations

from mule.pi._model import Model
from mule.pi.models._catalogue import builtin_models, catalogue_source
from mule.pi.models._config_values import (
    default_agent_dir,
    default_models_json_path,
    resolve_config_value,
)
from mule.pi.models._custom import (
    DEFAULT_CONTEXT_WINDOW,
    DEFAULT_MAX_TOKENS,
    CustomConfig,
    ModelsJsonError,
    ProviderRequestConfig,
)
from mule.pi.models._models_json import parse_models_config
from mule.pi.models._registry import (
    Registry,
    RequestAuth,
    clamp_thinking_level,
    get_supported_thinking_levels,
    load_models_json,
    models_are_equal,
)


def get_model(provider: str, model_id: str) -> Model | None:
    """Return a built-in model by provider and id, or None."""
    for model in builtin_models().get(provider, ()):
        if model.id == model_id:
            return model
    return None


def get_models(provider: str) -> tuple[Model, ...]:
    """Return a provider's built-in models, in pi-ai's order (empty if unknown)."""
    return builtin_models().get(provider, ())


def custom_model(
    model_id: str,
    base_url: str,
    *,
    provider: str = "local",
    api: str = "openai-completions",
    name: str | None = None,
) -> Model:
    """Return a model served at `base_url` that the catalogue does not list.

    The default is an OpenAI-compatible server speaking chat completions (Ollama, llama.cpp,
    vLLM, LM Studio...), as `mule run --base-url` assumes; `api` picks another wire API
    (`anthropic-messages`, `google-generative-ai`, `openai-responses`). Its key is
    `StreamOptions(api_key=...)`, else for a provider Pi does not know `$MULE_API_KEY`, else
    none (`mule.pi.providers.custom_api_key`).

    >>> m = custom_model("llama3.2", "http://127.0.0.1:11434/v1/")
    >>> (m.provider, m.api, m.base_url)
    ('local', 'openai-completions', 'http://127.0.0.1:11434/v1')
    """
    return Model(
        id=model_id,
        name=name or model_id,
        api=api,
        provider=provider,
        base_url=base_url.rstrip("/"),
        context_window=DEFAULT_CONTEXT_WINDOW,
        max_tokens=DEFAULT_MAX_TOKENS,
    )


def get_providers() -> tuple[str, ...]:
    """Return the providers of the built-in catalogue."""
    return tuple(builtin_models())


__all__ = [
    "DEFAULT_CONTEXT_WINDOW",
    "DEFAULT_MAX_TOKENS",
    "CustomConfig",
    "ModelsJsonError",
    "ProviderRequestConfig",
    "Registry",
    "RequestAuth",
    "catalogue_source",
    "clamp_thinking_level",
    "custom_model",
    "default_agent_dir",
    "default_models_json_path",
    "get_model",
    "get_models",
    "get_providers",
    "get_supported_thinking_levels",
    "load_models_json",
    "models_are_equal",
    "parse_models_config",
    "resolve_config_value",
]

# Last, once every exported name is bound: public names read this face as their module.
from mule._publish import publish as _publish  # noqa: E402 (after every name is bound)

_publish(__name__, globals(), __all__)
