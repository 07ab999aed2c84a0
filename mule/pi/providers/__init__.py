"""Real model providers behind Pi's `streamSimple`, dispatched on `model.api`.

One skeleton for every vendor:
- `StreamParser` (`_parser`): the I/O-free base of every vendor's parser, decoded stream events
  in and Pi's events out, with the shared finish, stop-reason tables and token counts;
  `ProviderError` is the one failure it raises;
- `SseDecoder` / `NdjsonDecoder` (`_frames`): incremental, bounded body decoders;
- `provider_stream` / `HttpRequest` (`_transport`): the HTTP half (request, retries,
  Retry-After, timeouts, aborts, status errors), running a vendor's request and parser as one
  stream;
- one module per vendor, its request building and its parser (`AnthropicParser`,
  `GoogleParser`, `CompletionsParser` with `_openai_compat`'s per-host switches,
  `ResponsesParser`);
- `_simple` (the registry and simple-API defaults), `_transform` (transcript rewriting), `_env`.

What every provider produces is what pi-ai 1.6.0's do: partial messages are `"pending"` until
the provider says why it stopped; the final message keeps the provider's own reason
(`raw_stop_reason`, kept too when it maps to no Pi reason, which fails the response) and how long
the response took (`duration_ms`); usage carries `reasoning` (and Anthropic's `cache_write_1h`),
priced by `calculate_cost` (`total_from_provider=False`, or True with OpenRouter's billed
total); a failed request's error quotes the body's error object (`400: {"message": ...}`); a
finished tool call whose arguments are no JSON object has empty arguments and an
`arguments_error`; and a request is retried only when `max_retries` asks (none by default).

Importing this package does not import httpx: the transport and the built-in providers load on
first use (the names that need them are resolved lazily).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from mule.pi.providers._env import ENV_API_KEYS, env_api_key
from mule.pi.providers._frames import NdjsonDecoder, SseDecoder
from mule.pi.providers._parser import ProviderError, StreamAborted, StreamParser
from mule.pi.providers._simple import (
    CUSTOM_KEY_ENV,
    NO_KEY,
    ProviderFn,
    ProviderSetupError,
    clamp_thinking_level,
    complete_simple,
    custom_api_key,
    get_provider,
    register_lazy_provider,
    register_provider,
    registered_apis,
    retry_after_ms,
    stream_simple,
    supported_thinking_levels,
    unregister_provider,
)
from mule.pi.providers._transform import transform_messages

if TYPE_CHECKING:
    from mule.pi.providers._anthropic import AnthropicParser
    from mule.pi.providers._google import GoogleParser
    from mule.pi.providers._openai_completions import CompletionsParser
    from mule.pi.providers._openai_responses import ResponsesParser
    from mule.pi.providers._transport import HttpRequest, provider_stream

_LAZY = {
    "AnthropicParser": "mule.pi.providers._anthropic",
    "CompletionsParser": "mule.pi.providers._openai_completions",
    "GoogleParser": "mule.pi.providers._google",
    "HttpRequest": "mule.pi.providers._transport",
    "ResponsesParser": "mule.pi.providers._openai_responses",
    "provider_stream": "mule.pi.providers._transport",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    _publish(__name__, globals(), (name,))
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


__all__ = [
    "CUSTOM_KEY_ENV",
    "ENV_API_KEYS",
    "NO_KEY",
    "AnthropicParser",
    "CompletionsParser",
    "GoogleParser",
    "HttpRequest",
    "NdjsonDecoder",
    "ProviderError",
    "ProviderFn",
    "ProviderSetupError",
    "ResponsesParser",
    "SseDecoder",
    "StreamAborted",
    "StreamParser",
    "clamp_thinking_level",
    "complete_simple",
    "custom_api_key",
    "env_api_key",
    "get_provider",
    "provider_stream",
    "register_lazy_provider",
    "register_provider",
    "registered_apis",
    "retry_after_ms",
    "stream_simple",
    "supported_thinking_levels",
    "transform_messages",
    "unregister_provider",
]

# Last, once every exported name is bound: public names read this face as their module.
from mule._publish import publish as _publish  # noqa: E402 (after every name is bound)

_publish(__name__, globals(), __all__)
