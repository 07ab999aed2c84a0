"""Resolving `--model provider/id [--base-url URL]` against the registry, and `mule models`."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import final

from attrs import evolve, frozen
from returns.result import Failure, Result, Success
from rich.console import Console

from mule.cli._columns import columns
from mule.pi import Model
from mule.pi.models import (
    DEFAULT_CONTEXT_WINDOW,
    DEFAULT_MAX_TOKENS,
    ModelsJsonError,
    Registry,
    default_models_json_path,
    load_models_json,
)
from mule.pi.providers import ENV_API_KEYS, env_api_key

CUSTOM_API = "openai-completions"
"""The wire protocol assumed for an unknown provider with `--base-url` (Ollama, llama.cpp, vLLM)."""
CUSTOM_KEY_ENV = "MULE_API_KEY"
"""Where a custom server's API key is read from when the provider has no key variable of its own."""
NO_KEY = "none"
"""Sent to custom servers that need no key (most local ones); the providers insist on some key."""


@final
@frozen
class ResolvedModel:
    """The model to call, with the request settings `models.json` gives it."""

    model: Model
    api_key: str | None
    headers: Mapping[str, str] | None
    custom: bool


def load_registry(environ: Mapping[str, str] | None = None) -> Result[Registry, str]:
    """Return the built-in catalogue merged with Pi's `models.json` (a missing file is fine)."""
    try:
        return Success(load_models_json(default_models_json_path(environ)))
    except ModelsJsonError as exc:
        return Failure(f"cannot load models.json: {exc}")


def split_spec(spec: str) -> tuple[str | None, str]:
    """Split `provider/id` at the first slash (ids may hold slashes); no slash = id only.

    >>> split_spec("openrouter/anthropic/claude-sonnet-4")
    ('openrouter', 'anthropic/claude-sonnet-4')
    >>> split_spec("gpt-4o")
    (None, 'gpt-4o')
    """
    provider, sep, model_id = spec.partition("/")
    return (provider, model_id) if sep else (None, spec)


def _custom_model(provider: str, model_id: str, base_url: str) -> Model:
    return Model(
        id=model_id,
        name=model_id,
        api=CUSTOM_API,
        provider=provider,
        base_url=base_url.rstrip("/"),
        context_window=DEFAULT_CONTEXT_WINDOW,
        max_tokens=DEFAULT_MAX_TOKENS,
    )


def resolve_model(
    registry: Registry,
    spec: str,
    base_url: str | None = None,
    environ: Mapping[str, str] | None = None,
    *,
    api: str | None = None,
) -> Result[ResolvedModel, str]:
    """Find `spec` in the registry; `--base-url` overrides its endpoint or defines a custom model.

    An unknown provider with a base URL is an OpenAI-compatible server (`openai-completions`);
    `api` (`--api`) chooses the wire API instead, for any model.
    """
    env = os.environ if environ is None else environ
    provider, model_id = split_spec(spec)
    if not model_id:
        return Failure(f"bad model {spec!r}: expected provider/id")
    if provider is None:
        found = [m for m in registry.models if m.id == model_id]
        if len(found) > 1:
            names = ", ".join(f"{m.provider}/{m.id}" for m in found[:6])
            return Failure(f"model {model_id!r} is ambiguous; name its provider: {names}")
        if not found:
            return Failure(f"unknown model {model_id!r}; use provider/id (see `mule models`)")
        provider = found[0].provider
    model = registry.get_model(provider, model_id)
    custom = False
    if model is None:
        if base_url is not None:
            known = registry.get_models(provider)
            template = known[0] if known else None
            # A known provider keeps its wire protocol; an unknown one is OpenAI-compatible.
            model = _custom_model(provider, model_id, base_url)
            if template is not None:
                model = evolve(model, api=template.api)
            custom = template is None
        elif provider in registry.get_providers():
            return Failure(
                f"provider {provider!r} has no model {model_id!r} "
                f"(see `mule models --provider {provider}`)"
            )
        else:
            return Failure(
                f"unknown provider {provider!r}; pass --base-url for an OpenAI-compatible "
                "server, or see `mule models`"
            )
    elif base_url is not None:
        model = evolve(model, base_url=base_url.rstrip("/"))
    if api is not None:
        model = evolve(model, api=api)
    auth = registry.request_auth(model, env)
    if isinstance(auth, Failure):
        return Failure(auth.failure())
    api_key = auth.unwrap().api_key
    if custom and not api_key:
        api_key = env_api_key(provider, env) or env.get(CUSTOM_KEY_ENV) or NO_KEY
    return Success(ResolvedModel(model, api_key, auth.unwrap().headers, custom))


def missing_key(resolved: ResolvedModel, environ: Mapping[str, str] | None = None) -> str | None:
    """Return a message naming the variables to set when no API key can be found, else None."""
    if resolved.api_key or env_api_key(resolved.model.provider, environ):
        return None
    names = ENV_API_KEYS.get(resolved.model.provider, ())
    where = " or ".join(names) if names else f"an apiKey for it in {default_models_json_path()}"
    return f"no API key for provider {resolved.model.provider!r}: set {where}"


def human_tokens(n: int) -> str:
    """Return a token count as people say it: powers of two in K/M of 1024, others as Pi does.

    >>> [human_tokens(n) for n in (4095, 8192, 131072, 200000, 1047576, 1048576, 2000000)]
    ['4.1K', '8K', '128K', '200K', '1.0M', '1M', '2M']
    """
    if n >= 1024 and n % 1024 == 0:
        k = n // 1024
        return f"{k // 1024}M" if k >= 1024 and k % 1024 == 0 else f"{k}K"
    for unit, size in (("M", 1_000_000), ("K", 1000)):
        if n >= size:
            value = n / size
            return f"{value:.0f}{unit}" if value == int(value) else f"{value:.1f}{unit}"
    return str(n)


def _price(x: float) -> str:
    return f"{x:g}" if x else "-"


def _flags(m: Model) -> list[str]:
    return [
        human_tokens(m.context_window),
        human_tokens(m.max_tokens),
        "yes" if m.reasoning else "",
        "yes" if "image" in m.input else "",
        _price(m.cost.input),
        _price(m.cost.output),
    ]


_FLAG_HEADER = ["context", "max out", "thinking", "images", "$ in", "$ out"]
_FLAG_RIGHT = [True, True, False, False, True, True]


def models_lines(
    registry: Registry,
    provider: str | None = None,
    width: int | None = None,
    environ: Mapping[str, str] | None = None,
) -> list[str]:
    """Return `mule models`' lines: per provider on a terminal of `width`, else one per model.

    Costs are USD per million tokens. Piped (`width` None), each line starts with the
    `provider/id` that `--model` takes, followed by the api and whether a key is set.
    """
    keyed: dict[str, bool] = {}
    groups: dict[str, list[Model]] = {}
    for m in registry.models:
        if provider is not None and m.provider != provider:
            continue
        if m.provider not in keyed:
            has = env_api_key(m.provider, environ) or registry.api_key(m.provider)
            keyed[m.provider] = bool(has)
        groups.setdefault(m.provider, []).append(m)
    if width is None:
        rows = [
            [f"{m.provider}/{m.id}", m.api, *_flags(m), "set" if keyed[m.provider] else "-"]
            for ms in groups.values()
            for m in ms
        ]
        header = ["provider/id", "api", *_FLAG_HEADER, "key"]
        return columns(header, rows, right=[False, False, *_FLAG_RIGHT, False])
    lines: list[str] = []
    for name, ms in groups.items():
        apis = ", ".join(dict.fromkeys(m.api for m in ms))
        key = "key set" if keyed[name] else "no key"
        lines.append(f"{name} · {apis} · {key}")
        rows = [[m.id, *_flags(m)] for m in ms]
        lines.extend(
            "  " + line
            for line in columns(
                ["id", *_FLAG_HEADER], rows, width=width - 2, right=[False, *_FLAG_RIGHT]
            )
        )
        lines.append("")
    return lines


def print_models(console: Console, registry: Registry, provider: str | None) -> int:
    """Print `mule models`; return the exit code (2 for an unknown provider)."""
    if provider is not None and provider not in registry.get_providers():
        known = ", ".join(registry.get_providers())
        console.print(f"[red]unknown provider {provider!r}[/]; known: {known}")
        return 2
    width = console.width if console.is_terminal else None
    lines = models_lines(registry, provider, width)
    count = sum(1 for m in registry.models if provider is None or m.provider == provider)
    out = console.file
    out.write("\n".join(lines).rstrip("\n") + "\n")
    out.write(f"{count} models; $ in / $ out: USD per million tokens\n")
    out.flush()
    return 0


__all__ = [
    "CUSTOM_API",
    "ResolvedModel",
    "human_tokens",
    "load_registry",
    "missing_key",
    "models_lines",
    "print_models",
    "resolve_model",
    "split_spec",
]
