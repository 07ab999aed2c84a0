"""Pi's `streamSimple`: a registry of providers by `model.api`, and the simple-API defaults.

Built-in providers are registered lazily (by module path), so `import mule.pi` never needs httpx.
A provider function receives the simple options and resolves them with the helpers here: the API
key (`resolve_api_key`, raising at once when there is none), `max_tokens`
(`build_base_options`), and the reasoning level (`clamp_thinking_level`, thinking budgets).
"""

from __future__ import annotations

import importlib
import os
import time
from collections.abc import Callable, Mapping
from typing import Final, final

from attrs import evolve

from mule.pi._context import CacheRetention, Context, StreamOptions, ThinkingBudgets
from mule.pi._event_stream import AssistantMessageEventStream
from mule.pi._json import JsonValue
from mule.pi._messages import AssistantMessage, Diagnostic
from mule.pi._model import Model, ModelThinkingLevel, ThinkingLevel
from mule.pi._transcript import TranscriptContext
from mule.pi.providers._env import ENV_API_KEYS, env_api_key

ProviderFn = Callable[
    [Model, Context | TranscriptContext, StreamOptions], AssistantMessageEventStream
]
"""A provider's simple stream function: `(model, context, options) -> stream`."""


@final
class ProviderSetupError(Exception):
    """A setup problem raised before any stream exists: no API key, or no provider for the api."""


_registry: dict[str, ProviderFn] = {}
_lazy: dict[str, str] = {
    "anthropic-messages": "mule.pi.providers._anthropic:stream_simple_anthropic",
    "google-generative-ai": "mule.pi.providers._google:stream_simple_google",
    "openai-completions": "mule.pi.providers._openai_completions:stream_simple_openai_completions",
    "openai-responses": "mule.pi.providers._openai_responses:stream_simple_openai_responses",
}


def register_provider(api: str, fn: ProviderFn) -> None:
    """Make `stream_simple` send models whose `api` is `api` to `fn` (replacing any other)."""
    _registry[api] = fn
    _lazy.pop(api, None)


def register_lazy_provider(api: str, target: str) -> None:
    """Register a provider by `"module:function"`, imported on first use."""
    _registry.pop(api, None)
    _lazy[api] = target


def unregister_provider(api: str) -> None:
    """Forget the provider for `api` (built-in or not)."""
    _registry.pop(api, None)
    _lazy.pop(api, None)


def registered_apis() -> tuple[str, ...]:
    """Return the apis with a provider, sorted."""
    return tuple(sorted({*_registry, *_lazy}))


def get_provider(api: str) -> ProviderFn:
    """Return the provider for `api`, importing a lazily registered one."""
    fn = _registry.get(api)
    if fn is not None:
        return fn
    target = _lazy.get(api)
    if target is None:
        raise ProviderSetupError(f"No API provider registered for api: {api}")
    module_name, _, attr = target.partition(":")
    loaded: ProviderFn = getattr(importlib.import_module(module_name), attr)
    _registry[api] = loaded
    del _lazy[api]
    return loaded


def stream_simple(
    model: Model, context: Context | TranscriptContext, options: StreamOptions | None = None
) -> AssistantMessageEventStream:
    """Stream one model response through the provider registered for `model.api`.

    Setup problems (no provider, no API key) raise here; every later failure arrives as the
    stream's terminal `error` event.
    """
    return get_provider(model.api)(model, context, options or StreamOptions())


async def complete_simple(
    model: Model, context: Context | TranscriptContext, options: StreamOptions | None = None
) -> AssistantMessage:
    """Run `stream_simple` to the end and return the final message (Pi's `completeSimple`)."""
    return await stream_simple(model, context, options).result()


# -- simple-API defaults ---------------------------------------------------------------------


CUSTOM_KEY_ENV: Final = "MULE_API_KEY"
"""Where the key of a provider Pi does not know (a local or self-hosted server) is read from."""
NO_KEY: Final = "none"
"""Sent to such a server when `MULE_API_KEY` is unset: most local servers need no key."""


def custom_api_key(provider: str, environ: Mapping[str, str] | None = None) -> str | None:
    """Return the key of a provider Pi does not know: `$MULE_API_KEY`, else `"none"`.

    A provider Pi knows (one with a key variable, or in the built-in catalogue) has no
    custom key (None): its own variable or an explicit key is needed. mule's addition to
    Pi, where a provider without a key fails; the `mule` CLI does the same for `--base-url`.

    >>> custom_api_key("local", {"MULE_API_KEY": "sk-local"}), custom_api_key("local", {})
    ('sk-local', 'none')
    >>> custom_api_key("openai", {"MULE_API_KEY": "sk-local"}) is None
    True
    """
    if provider in ENV_API_KEYS:
        return None
    from mule.pi.models import get_providers  # the catalogue: only when no key was found

    if provider in get_providers():
        return None
    env = os.environ if environ is None else environ
    return env.get(CUSTOM_KEY_ENV) or NO_KEY


def resolve_api_key(model: Model, options: StreamOptions) -> str:
    """Return `options.api_key`, else the provider's environment variable; raise if neither.

    A provider Pi does not know (a local or self-hosted server) falls back to
    `custom_api_key`: `$MULE_API_KEY`, else no key (`"none"` is sent).
    """
    key = options.api_key or env_api_key(model.provider) or custom_api_key(model.provider)
    if not key:
        raise ProviderSetupError(
            f"No API key for provider: {model.provider} (pass StreamOptions(api_key=...) or set"
            " its environment variable)"
        )
    return key


def simple_options(
    model: Model, options: StreamOptions | None, context: Context | TranscriptContext | None = None
) -> StreamOptions:
    """Resolve the key (raising at once without one), then apply Pi's simple defaults."""
    opts = options or StreamOptions()
    return build_base_options(model, opts, resolve_api_key(model, opts), context)


def simple_options_with_effort(
    model: Model, options: StreamOptions | None, context: Context | TranscriptContext | None = None
) -> tuple[StreamOptions, ThinkingLevel | None]:
    """Return `simple_options` and the clamped reasoning level (for effort-based providers)."""
    base = simple_options(model, options, context)
    return base, reasoning_effort(model, base)


def build_base_options(
    model: Model,
    options: StreamOptions,
    api_key: str,
    context: Context | TranscriptContext | None = None,
) -> StreamOptions:
    """Apply Pi 1.6.0's simple defaults: the resolved key, and `max_tokens` fitted.

    `max_tokens` is the option, else the model's cap, fitted into the context window left after
    `context`'s estimated size.
    """
    from mule.pi.providers._estimate import clamp_max_tokens_to_context

    wanted = options.max_tokens if options.max_tokens is not None else model.max_tokens
    max_tokens: int | None = None
    if wanted > 0:  # mule's 0 is an unknown cap: none is sent (every Pi model has one)
        max_tokens = clamp_max_tokens_to_context(model, context or Context(()), wanted)
    return evolve(options, max_tokens=max_tokens, api_key=api_key or options.api_key)


def resolve_cache_retention(retention: CacheRetention | None) -> CacheRetention:
    """Return the cache retention: the option, else "long" if PI_CACHE_RETENTION says so."""
    if retention:
        return retention
    return "long" if os.environ.get("PI_CACHE_RETENTION") == "long" else "short"


def compat_flag(model: Model, key: str, default: bool = True) -> bool:
    """Return a boolean switch from `model.compat` (camelCase key), else `default`."""
    value = (model.compat or {}).get(key)
    return value if isinstance(value, bool) else default


_LEVELS: Final[tuple[ModelThinkingLevel, ...]] = (
    "off",
    "minimal",
    "low",
    "medium",
    "high",
    "xhigh",
    "max",
)


def supported_thinking_levels(model: Model) -> tuple[ModelThinkingLevel, ...]:
    """Return the levels `model` supports ("off" only without reasoning).

    "xhigh" and "max" only when the model's thinking map names them.
    """
    if not model.reasoning:
        return ("off",)
    table = model.thinking_level_map or {}
    out: list[ModelThinkingLevel] = []
    for level in _LEVELS:
        if level in table and table[level] is None:
            continue
        if level in ("xhigh", "max") and level not in table:
            continue
        out.append(level)
    return tuple(out)


def clamp_thinking_level(model: Model, level: ModelThinkingLevel) -> ModelThinkingLevel:
    """Return `level` if supported, else the nearest higher, else the nearest lower, else "off".

    >>> m = Model("m", "m", "openai-completions", "openai", "https://x", reasoning=True)
    >>> clamp_thinking_level(m, "xhigh")
    'high'
    """
    available = supported_thinking_levels(model)
    if level in available:
        return level
    if level not in _LEVELS:
        return available[0] if available else "off"
    i = _LEVELS.index(level)
    for candidate in (*_LEVELS[i:], *reversed(_LEVELS[:i])):
        if candidate in available:
            return candidate
    return available[0] if available else "off"


def reasoning_effort(model: Model, options: StreamOptions) -> ThinkingLevel | None:
    """Return the clamped reasoning level to request, or None for "off"/unset."""
    if options.reasoning is None:
        return None
    level = clamp_thinking_level(model, options.reasoning)
    return None if level == "off" else level


DEFAULT_THINKING_BUDGETS: Final[dict[str, int]] = {
    "minimal": 1024,
    "low": 2048,
    "medium": 8192,
    "high": 16384,
}
MIN_OUTPUT_TOKENS: Final = 1024


def thinking_budget(level: ThinkingLevel, budgets: ThinkingBudgets | None = None) -> int:
    """Return the token budget for a level ("xhigh" and "max" count as "high")."""
    key = "high" if level in ("xhigh", "max") else level
    custom = getattr(budgets, key) if budgets is not None else None
    return DEFAULT_THINKING_BUDGETS[key] if custom is None else int(custom)


def adjust_max_tokens_for_thinking(
    base_max_tokens: int,
    model_max_tokens: int,
    level: ThinkingLevel,
    budgets: ThinkingBudgets | None = None,
) -> tuple[int, int]:
    """Return (max_tokens, thinking_budget) for token-budget providers, as Pi computes them.

    >>> adjust_max_tokens_for_thinking(32000, 64000, "medium")
    (40192, 8192)
    """
    budget = thinking_budget(level, budgets)
    max_tokens = min(base_max_tokens + budget, model_max_tokens)
    if max_tokens <= budget:
        budget = max(0, max_tokens - MIN_OUTPUT_TOKENS)
    return max_tokens, budget


# -- server-requested waits -------------------------------------------------------------------

HTTP_ERROR_DIAGNOSTIC: Final = "http_error"


def http_error_diagnostic(status: int, retry_after: float | None) -> Diagnostic:
    """Record an HTTP error's status and the wait (ms) the server asked for, if any."""
    details: dict[str, JsonValue] = {"status": status}
    if retry_after is not None:
        details["retryAfterMs"] = retry_after
    return Diagnostic(
        type=HTTP_ERROR_DIAGNOSTIC, timestamp=int(time.time() * 1000), details=details
    )


def retry_after_ms(message: AssistantMessage) -> float | None:
    """Return the wait (ms) the server asked for when this message failed, if it said.

    Fits the loop's `retry_after_ms` setting.

    >>> from mule.pi._messages import ZERO_USAGE
    >>> d = http_error_diagnostic(429, 1500.0)
    >>> m = AssistantMessage((), "a", "p", "m", ZERO_USAGE, "error", 0, diagnostics=(d,))
    >>> retry_after_ms(m)
    1500.0
    """
    for diag in reversed(message.diagnostics or ()):
        if diag.type != HTTP_ERROR_DIAGNOSTIC or diag.details is None:
            continue
        value = diag.details.get("retryAfterMs")
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
    return None


__all__ = [
    "DEFAULT_THINKING_BUDGETS",
    "HTTP_ERROR_DIAGNOSTIC",
    "ProviderFn",
    "ProviderSetupError",
    "adjust_max_tokens_for_thinking",
    "build_base_options",
    "clamp_thinking_level",
    "compat_flag",
    "complete_simple",
    "get_provider",
    "http_error_diagnostic",
    "reasoning_effort",
    "register_lazy_provider",
    "register_provider",
    "registered_apis",
    "resolve_api_key",
    "resolve_cache_retention",
    "retry_after_ms",
    "simple_options",
    "simple_options_with_effort",
    "stream_simple",
    "supported_thinking_levels",
    "thinking_budget",
    "unregister_provider",
]
