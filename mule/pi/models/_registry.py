"""A model registry: the built-in catalogue merged with a user's `models.json`."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import final

from attrs import evolve, frozen
from returns.result import Failure, Result, Success

from mule.pi._model import Model, ModelThinkingLevel
from mule.pi.models._catalogue import builtin_models
from mule.pi.models._config_values import (
    default_models_json_path,
    resolve_config_value,
    resolve_config_value_or_raise,
    resolve_headers,
)
from mule.pi.models._custom import (
    CustomConfig,
    ProviderRequestConfig,
    apply_override,
    merge_compat,
)
from mule.pi.models._models_json import read_models_json
from mule.pi.providers import clamp_thinking_level as _clamp
from mule.pi.providers import supported_thinking_levels


@final
@frozen
class RequestAuth:
    """The API key and extra headers `models.json` sets for requests to one model.

    Attributes:
        api_key: The resolved API key; None: `models.json` gives none (the provider's
            environment fallback applies).
        headers: The resolved extra headers (model, provider, then per-model settings, and
            `Authorization` when `authHeader` is set); None when there are none.

    """

    api_key: str | None = None
    headers: Mapping[str, str] | None = None


@final
@frozen
class Registry:
    """Models by provider and id, with the request settings of custom providers.

    Attributes:
        models: Every model: the built-in ones (overrides applied) in catalogue order, then
            the custom ones.
        request_configs: How to authenticate requests, by provider (from `models.json`).
        model_headers: Extra request headers of single models, by (provider, model id),
            values unresolved.

    """

    models: tuple[Model, ...]
    request_configs: Mapping[str, ProviderRequestConfig] = {}
    model_headers: Mapping[tuple[str, str], Mapping[str, str]] = {}

    @classmethod
    def builtin(cls) -> Registry:
        """Return a registry of the built-in catalogue only."""
        return cls(tuple(m for models in builtin_models().values() for m in models))

    @classmethod
    def from_config(cls, custom: CustomConfig) -> Registry:
        """Apply a `models.json` configuration to the built-in catalogue (custom models win)."""
        merged: list[Model] = []
        for provider, models in builtin_models().items():
            override = custom.overrides.get(provider)
            per_model = custom.model_overrides.get(provider, {})
            for model in models:
                if override is not None:
                    model = evolve(
                        model,
                        base_url=override.base_url or model.base_url,
                        compat=merge_compat(model.compat, override.compat),
                    )
                if model.id in per_model:
                    model = apply_override(model, per_model[model.id])
                merged.append(model)
        index = {(m.provider, m.id): i for i, m in enumerate(merged)}
        for model in custom.models:
            key = (model.provider, model.id)
            if key in index:
                merged[index[key]] = model
            else:
                index[key] = len(merged)
                merged.append(model)
        return cls(tuple(merged), custom.request_configs, custom.model_headers)

    def get_model(self, provider: str, model_id: str) -> Model | None:
        """Return the model with this provider and id, or None."""
        for model in self.models:
            if model.provider == provider and model.id == model_id:
                return model
        return None

    def get_models(self, provider: str) -> tuple[Model, ...]:
        """Return a provider's models, in registry order."""
        return tuple(m for m in self.models if m.provider == provider)

    def get_providers(self) -> tuple[str, ...]:
        """Return every provider that has a model, in order of first appearance."""
        return tuple(dict.fromkeys(m.provider for m in self.models))

    def api_key(self, provider: str, environ: Mapping[str, str] | None = None) -> str | None:
        """Resolve the `apiKey` that `models.json` gives a provider (None if it gives none).

        Environment fallbacks by provider (OPENAI_API_KEY, ...) are the providers' business.
        """
        config = self.request_configs.get(provider)
        if config is None or not config.api_key:
            return None
        return resolve_config_value(config.api_key, environ)

    def request_auth(
        self, model: Model, environ: Mapping[str, str] | None = None
    ) -> Result[RequestAuth, str]:
        """Resolve a model's API key and headers as Pi does before each request.

        Headers merge model, provider, then per-model settings; `authHeader` adds a bearer
        Authorization header. A value that cannot be resolved is a `Failure` with Pi's text.
        """
        config = self.request_configs.get(model.provider)
        try:
            api_key = (
                resolve_config_value_or_raise(
                    config.api_key, f'API key for provider "{model.provider}"', environ
                )
                if config is not None and config.api_key
                else None
            )
            provider_headers = resolve_headers(
                config.headers if config else None, f'provider "{model.provider}"', environ
            )
            model_headers = resolve_headers(
                self.model_headers.get((model.provider, model.id)),
                f'model "{model.provider}/{model.id}"',
                environ,
            )
        except ValueError as exc:
            return Failure(str(exc))
        headers: dict[str, str] = {
            **(model.headers or {}),
            **(provider_headers or {}),
            **(model_headers or {}),
        }
        if config is not None and config.auth_header:
            if not api_key:
                return Failure(f'No API key found for "{model.provider}"')
            headers["Authorization"] = f"Bearer {api_key}"
        return Success(RequestAuth(api_key, headers or None))


def load_models_json(path: str | os.PathLike[str] | None = None) -> Registry:
    """Return the built-in models merged with a Pi `models.json` (Pi's default path if None).

    A missing file gives the built-in catalogue; a bad one raises `ModelsJsonError`.
    """
    file = default_models_json_path() if path is None else path
    return Registry.from_config(read_models_json(file, builtin_models()))


def get_supported_thinking_levels(model: Model) -> tuple[ModelThinkingLevel, ...]:
    """Return the thinking levels a model supports ("xhigh" only when its map names it)."""
    return supported_thinking_levels(model)


def clamp_thinking_level(model: Model, level: ModelThinkingLevel) -> ModelThinkingLevel:
    """Return `level` if supported, else the nearest higher one, else the nearest lower one."""
    return _clamp(model, level)


def models_are_equal(a: Model | None, b: Model | None) -> bool:
    """Return whether two models have the same id and provider (False if either is None)."""
    return a is not None and b is not None and a.id == b.id and a.provider == b.provider


__all__ = [
    "Registry",
    "RequestAuth",
    "clamp_thinking_level",
    "get_supported_thinking_levels",
    "load_models_json",
    "models_are_equal",
]
