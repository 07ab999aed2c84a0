"""Real model providers behind Pi's `streamSimple`, dispatched on `model.api`.

One skeleton for every vendor:
- `_parser`: the I/O-free `StreamParser` base (decoded events in, Pi's events out), the shared
  finish, stop-reason tables, token counts and `ProviderError`;
- `_frames`: the incremental, bounded SSE and NDJSON decoders;
- `_transport`: the HTTP half (request, retries, Retry-After, timeouts, aborts, errors), and
  `provider_stream`, which runs a vendor's request and parser as one stream;
- one module per vendor, its request building and its parser: `_anthropic`, `_google`,
  `_openai_completions` (+ `_openai_compat`, the per-host switches), `_openai_responses`;
- `_simple` (the registry and simple-API defaults), `_transform` (transcript rewriting), `_env`.

Importing this package does not import httpx: built-in providers load on first use.
"""

from mule.pi.providers._env import ENV_API_KEYS, env_api_key
from mule.pi.providers._simple import (
    ProviderFn,
    ProviderSetupError,
    clamp_thinking_level,
    complete_simple,
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

__all__ = [
    "ENV_API_KEYS",
    "ProviderFn",
    "ProviderSetupError",
    "clamp_thinking_level",
    "complete_simple",
    "env_api_key",
    "get_provider",
    "register_lazy_provider",
    "register_provider",
    "registered_apis",
    "retry_after_ms",
    "stream_simple",
    "supported_thinking_levels",
    "transform_messages",
    "unregister_provider",
]
