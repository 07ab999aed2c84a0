"""Real model providers behind Pi's `streamSimple`, dispatched on `model.api`.

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
