"""Pi's `models.json` read and checked: custom providers and models, overrides, Pi's messages.

The file format, defaults and checks follow pi-coding-agent's model registry, so a user's Pi
configuration works unchanged. Parsing is pure; the values it returns are in `_custom`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from attrs import frozen

from mule.pi._json import JsonObject, loads
from mule.pi._model import InputKind, Model, ModelCost
from mule.pi.models._custom import (
    DEFAULT_CONTEXT_WINDOW,
    DEFAULT_MAX_TOKENS,
    CustomConfig,
    ModelOverride,
    ModelsJsonError,
    ProviderOverride,
    ProviderRequestConfig,
    merge_compat,
)

_THINKING_KEYS: Final = ("off", "minimal", "low", "medium", "high", "xhigh")
_INPUT_KINDS: Final = ("text", "image")


class _Fault(Exception):
    def __init__(self, where: str | None, detail: str) -> None:
        super().__init__(detail)
        self.where = where
        self.detail = detail


# -- JSON with comments ---------------------------------------------------------------------
_STRING_OR_COMMENT = re.compile(r'"(?:\\.|[^"\\])*"|//[^\n]*')
_STRING_OR_TRAILING_COMMA = re.compile(r'"(?:\\.|[^"\\])*"|,(\s*[}\]])')


def strip_json_comments(text: str) -> str:
    """Drop `//` line comments and trailing commas, leaving string literals alone (as Pi does)."""
    text = _STRING_OR_COMMENT.sub(lambda m: m[0] if m[0].startswith('"') else "", text)
    return _STRING_OR_TRAILING_COMMA.sub(lambda m: m[1] if m[1] is not None else m[0], text)


# -- schema checks --------------------------------------------------------------------------
def _join(where: str, key: str | int) -> str:
    return f"{where}.{key}" if where else str(key)


def _object(value: object, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _Fault(where or "root", "expected an object")
    return value


def _string(obj: dict[str, Any], key: str, where: str) -> str | None:
    value = obj.get(key)
    if value is None and key not in obj:
        return None
    if not isinstance(value, str) or not value:
        raise _Fault(_join(where, key), "expected a non-empty string")
    return value


def _bool(obj: dict[str, Any], key: str, where: str) -> bool | None:
    if key not in obj:
        return None
    value = obj[key]
    if not isinstance(value, bool):
        raise _Fault(_join(where, key), "expected a boolean")
    return value


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _number(obj: dict[str, Any], key: str, where: str) -> float | None:
    if key not in obj:
        return None
    value = obj[key]
    if not _is_number(value):
        raise _Fault(_join(where, key), "expected a number")
    return float(value)


def _count(obj: dict[str, Any], key: str, where: str) -> int | None:
    value = _number(obj, key, where)
    return None if value is None else int(value)


def _string_map(obj: dict[str, Any], key: str, where: str) -> dict[str, str] | None:
    if key not in obj:
        return None
    here = _join(where, key)
    mapping = _object(obj[key], here)
    for name, value in mapping.items():
        if not isinstance(value, str):
            raise _Fault(_join(here, name), "expected a string")
    return dict(mapping)


def _thinking_map(obj: dict[str, Any], where: str) -> dict[str, str | None] | None:
    if "thinkingLevelMap" not in obj:
        return None
    here = _join(where, "thinkingLevelMap")
    mapping = _object(obj["thinkingLevelMap"], here)
    out: dict[str, str | None] = {}
    for level in _THINKING_KEYS:
        if level in mapping:
            value = mapping[level]
            if value is not None and not isinstance(value, str):
                raise _Fault(_join(here, level), "expected a string or null")
            out[level] = value
    return out


def _inputs(obj: dict[str, Any], where: str) -> tuple[InputKind, ...] | None:
    if "input" not in obj:
        return None
    here = _join(where, "input")
    value = obj["input"]
    if not isinstance(value, list):
        raise _Fault(here, "expected an array")
    for i, kind in enumerate(value):
        if kind not in _INPUT_KINDS:
            raise _Fault(_join(here, i), 'expected "text" or "image"')
    return tuple(value)


def _cost(obj: dict[str, Any], where: str, *, partial: bool) -> dict[str, float] | None:
    if "cost" not in obj:
        return None
    here = _join(where, "cost")
    cost = _object(obj["cost"], here)
    out: dict[str, float] = {}
    for key in ("input", "output", "cacheRead", "cacheWrite"):
        if key not in cost:
            if partial:
                continue
            raise _Fault(_join(here, key), "required number is missing")
        value = _number(cost, key, here)
        assert value is not None
        out[key] = value
    return out


def _compat(obj: dict[str, Any], where: str) -> JsonObject | None:
    # Pi's compat schema is a union of open objects: any object passes the shape check.
    if "compat" not in obj:
        return None
    return _object(obj["compat"], _join(where, "compat"))


@frozen
class _ModelDef:
    id: str
    name: str | None
    api: str | None
    base_url: str | None
    reasoning: bool | None
    thinking_level_map: dict[str, str | None] | None
    input: tuple[InputKind, ...] | None
    cost: dict[str, float] | None
    context_window: int | None
    max_tokens: int | None
    headers: dict[str, str] | None
    compat: JsonObject | None


def _model_def(value: object, where: str) -> _ModelDef:
    obj = _object(value, where)
    model_id = _string(obj, "id", where)
    if model_id is None:
        raise _Fault(_join(where, "id"), "required string is missing")
    return _ModelDef(
        id=model_id,
        name=_string(obj, "name", where),
        api=_string(obj, "api", where),
        base_url=_string(obj, "baseUrl", where),
        reasoning=_bool(obj, "reasoning", where),
        thinking_level_map=_thinking_map(obj, where),
        input=_inputs(obj, where),
        cost=_cost(obj, where, partial=False),
        context_window=_count(obj, "contextWindow", where),
        max_tokens=_count(obj, "maxTokens", where),
        headers=_string_map(obj, "headers", where),
        compat=_compat(obj, where),
    )


def _override(value: object, where: str) -> tuple[ModelOverride, dict[str, str] | None]:
    obj = _object(value, where)
    override = ModelOverride(
        name=_string(obj, "name", where),
        reasoning=_bool(obj, "reasoning", where),
        thinking_level_map=_thinking_map(obj, where),
        input=_inputs(obj, where),
        cost=_cost(obj, where, partial=True),
        context_window=_count(obj, "contextWindow", where),
        max_tokens=_count(obj, "maxTokens", where),
        compat=_compat(obj, where),
    )
    return override, _string_map(obj, "headers", where)


@frozen
class _ProviderDef:
    name: str
    base_url: str | None
    api_key: str | None
    api: str | None
    headers: dict[str, str] | None
    compat: JsonObject | None
    auth_header: bool | None
    models: tuple[_ModelDef, ...]
    overrides: dict[str, tuple[ModelOverride, dict[str, str] | None]]


def _provider_def(name: str, value: object, where: str) -> _ProviderDef:
    obj = _object(value, where)
    _string(obj, "name", where)  # a display name; checked, not used
    models: tuple[_ModelDef, ...] = ()
    if "models" in obj:
        here = _join(where, "models")
        if not isinstance(obj["models"], list):
            raise _Fault(here, "expected an array")
        models = tuple(_model_def(m, _join(here, i)) for i, m in enumerate(obj["models"]))
    overrides: dict[str, tuple[ModelOverride, dict[str, str] | None]] = {}
    if "modelOverrides" in obj:
        here = _join(where, "modelOverrides")
        for model_id, raw in _object(obj["modelOverrides"], here).items():
            overrides[model_id] = _override(raw, _join(here, model_id))
    return _ProviderDef(
        name=name,
        base_url=_string(obj, "baseUrl", where),
        api_key=_string(obj, "apiKey", where),
        api=_string(obj, "api", where),
        headers=_string_map(obj, "headers", where),
        compat=_compat(obj, where),
        auth_header=_bool(obj, "authHeader", where),
        models=models,
        overrides=overrides,
    )


def _check_provider(provider: _ProviderDef, builtin: Mapping[str, tuple[Model, ...]]) -> None:
    """Pi's semantic checks, with Pi's messages."""
    name = provider.name
    where = f"providers.{name}"
    is_builtin = name in builtin
    if not provider.models:
        if not (provider.base_url or provider.headers or provider.compat or provider.overrides):
            raise _Fault(
                where,
                f'Provider {name}: must specify "baseUrl", "headers", "compat", '
                '"modelOverrides", or "models".',
            )
    elif not is_builtin:
        if not provider.base_url:
            raise _Fault(
                where, f'Provider {name}: "baseUrl" is required when defining custom models.'
            )
        if not provider.api_key:
            raise _Fault(
                where, f'Provider {name}: "apiKey" is required when defining custom models.'
            )
    for i, model in enumerate(provider.models):
        here = f"{where}.models.{i}"
        if not provider.api and not model.api and not is_builtin:
            raise _Fault(
                here,
                f'Provider {name}, model {model.id}: no "api" specified. '
                "Set at provider or model level.",
            )
        if model.context_window is not None and model.context_window <= 0:
            raise _Fault(
                f"{here}.contextWindow", f"Provider {name}, model {model.id}: invalid contextWindow"
            )
        if model.max_tokens is not None and model.max_tokens <= 0:
            raise _Fault(
                f"{here}.maxTokens", f"Provider {name}, model {model.id}: invalid maxTokens"
            )


def _cost_of(cost: Mapping[str, float] | None) -> ModelCost:
    if cost is None:
        return ModelCost()
    return ModelCost(cost["input"], cost["output"], cost["cacheRead"], cost["cacheWrite"])


def _endpoint_defaults(
    provider: _ProviderDef, builtin: Mapping[str, tuple[Model, ...]]
) -> tuple[str | None, str | None]:
    """Return a built-in provider's api and base URL, from its first model (as Pi does)."""
    first = builtin.get(provider.name, ())
    return (first[0].api, first[0].base_url) if first else (None, None)


def _build_models(
    providers: tuple[_ProviderDef, ...], builtin: Mapping[str, tuple[Model, ...]]
) -> tuple[Model, ...]:
    models: list[Model] = []
    for provider in providers:
        default_api, default_base = _endpoint_defaults(provider, builtin)
        for d in provider.models:
            api = d.api or provider.api or default_api
            base_url = d.base_url or provider.base_url or default_base
            if not api or not base_url:
                continue  # Pi skips such a model silently
            models.append(
                Model(
                    id=d.id,
                    name=d.name if d.name is not None else d.id,
                    api=api,
                    provider=provider.name,
                    base_url=base_url,
                    reasoning=bool(d.reasoning),
                    input=d.input if d.input is not None else ("text",),
                    cost=_cost_of(d.cost),
                    context_window=(
                        d.context_window if d.context_window is not None else DEFAULT_CONTEXT_WINDOW
                    ),
                    max_tokens=d.max_tokens if d.max_tokens is not None else DEFAULT_MAX_TOKENS,
                    thinking_level_map=d.thinking_level_map,
                    # Request headers are resolved per request (they may name env vars or
                    # commands), so they stay out of the model, as in Pi.
                    headers=None,
                    compat=merge_compat(provider.compat, d.compat),
                )
            )
    return tuple(models)


def parse_models_config(
    data: object, builtin: Mapping[str, tuple[Model, ...]], file: str = "<models.json>"
) -> CustomConfig:
    """Check a decoded `models.json` document and return what it contributes."""
    try:
        root = _object(data, "")
        if "providers" not in root:
            raise _Fault("providers", "required property is missing")
        raw_providers = _object(root["providers"], "providers")
        providers = tuple(
            _provider_def(name, raw, f"providers.{name}") for name, raw in raw_providers.items()
        )
        for provider in providers:
            _check_provider(provider, builtin)
    except _Fault as fault:
        raise ModelsJsonError(file, fault.where, fault.detail) from None
    overrides: dict[str, ProviderOverride] = {}
    model_overrides: dict[str, dict[str, ModelOverride]] = {}
    request_configs: dict[str, ProviderRequestConfig] = {}
    model_headers: dict[tuple[str, str], Mapping[str, str]] = {}
    for p in providers:
        if p.base_url or p.compat:
            overrides[p.name] = ProviderOverride(p.base_url, p.compat)
        if p.api_key or p.headers or p.auth_header:
            request_configs[p.name] = ProviderRequestConfig(
                p.api_key, p.headers, bool(p.auth_header)
            )
        if p.overrides:
            model_overrides[p.name] = {k: v[0] for k, v in p.overrides.items()}
            for model_id, (_, headers) in p.overrides.items():
                if headers:
                    model_headers[p.name, model_id] = headers
        api, base_url = _endpoint_defaults(p, builtin)
        for d in p.models:
            if not (d.api or p.api or api) or not (d.base_url or p.base_url or base_url):
                continue  # skipped models leave headers alone, as in Pi
            # A later definition of the same model replaces the headers of an earlier one.
            if d.headers:
                model_headers[p.name, d.id] = d.headers
            else:
                model_headers.pop((p.name, d.id), None)
    return CustomConfig(
        models=_build_models(providers, builtin),
        overrides=overrides,
        model_overrides=model_overrides,
        request_configs=request_configs,
        model_headers=model_headers,
    )


def read_models_json(
    path: str | os.PathLike[str], builtin: Mapping[str, tuple[Model, ...]]
) -> CustomConfig:
    """Read and check a `models.json` file; a missing file contributes nothing."""
    file = os.fspath(path)
    if not Path(file).exists():
        return CustomConfig()
    try:
        text = Path(file).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ModelsJsonError(file, None, f"Failed to load models.json: {exc}") from exc
    try:
        data = loads(strip_json_comments(text))  # bounded: depth and number size
    except ValueError as exc:
        raise ModelsJsonError(file, None, f"Failed to parse models.json: {exc}") from exc
    return parse_models_config(data, builtin, file)


__all__ = ["parse_models_config", "read_models_json", "strip_json_comments"]
