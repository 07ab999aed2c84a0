"""Pi's per-host switches for Chat Completions servers (`OpenAICompletionsCompat`).

Pi infers them from the provider name and the base URL (`detect_compat`); a model's `compat`
object (camelCase keys) overrides any of them (`get_compat`). The request builder in
`_openai_completions` reads them; nothing else does.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal, final

from attrs import frozen

from mule.pi._json import JsonObject
from mule.pi._model import Model

ThinkingFormat = Literal["openai", "openrouter", "deepseek", "zai", "qwen", "qwen-chat-template"]


@final
@frozen(kw_only=True)
class CompletionsCompat:
    """Pi's per-host switches for Chat Completions servers (`OpenAICompletionsCompat`)."""

    supports_store: bool = True
    supports_developer_role: bool = True
    supports_reasoning_effort: bool = True
    supports_usage_in_streaming: bool = True
    max_tokens_field: Literal["max_completion_tokens", "max_tokens"] = "max_completion_tokens"
    requires_tool_result_name: bool = False
    requires_assistant_after_tool_result: bool = False
    requires_thinking_as_text: bool = False
    requires_reasoning_content_on_assistant_messages: bool = False
    thinking_format: str = "openai"
    open_router_routing: JsonObject | None = None
    vercel_gateway_routing: JsonObject | None = None
    zai_tool_stream: bool = False
    supports_strict_mode: bool = False
    cache_control_format: str | None = None
    send_session_affinity_headers: bool = False
    session_affinity_format: str = "openai"
    supports_long_cache_retention: bool = True


def detect_compat(model: Model) -> CompletionsCompat:
    """Return the compat switches Pi 1.6.0 infers from the provider name and base URL."""
    provider, url = model.provider, model.base_url
    is_zai = provider in ("zai", "zai-coding-cn") or "api.z.ai" in url or "open.bigmodel.cn" in url
    is_together = provider == "together" or "api.together.ai" in url or "api.together.xyz" in url
    is_moonshot = provider in ("moonshotai", "moonshotai-cn") or "api.moonshot." in url
    is_openrouter = provider == "openrouter" or "openrouter.ai" in url
    is_cf_workers = provider == "cloudflare-workers-ai" or "api.cloudflare.com" in url
    is_cf_gateway = provider == "cloudflare-ai-gateway" or "gateway.ai.cloudflare.com" in url
    is_nvidia = provider == "nvidia" or "integrate.api.nvidia.com" in url
    is_ant_ling = provider == "ant-ling" or "api.ant-ling.com" in url
    is_cerebras = provider == "cerebras" or "cerebras.ai" in url
    is_deepseek = provider == "deepseek" or "deepseek.com" in url.lower()
    is_grok = provider == "xai" or "api.x.ai" in url
    non_standard = (
        is_nvidia
        or is_cerebras
        or is_grok
        or is_together
        or "chutes.ai" in url
        or is_deepseek
        or is_zai
        or is_moonshot
        or provider == "opencode"
        or "opencode.ai" in url
        or is_cf_workers
        or is_cf_gateway
        or is_ant_ling
    )
    use_max_tokens = (
        "chutes.ai" in url
        or is_deepseek
        or is_moonshot
        or is_cf_gateway
        or is_together
        or is_nvidia
        or is_ant_ling
        or is_zai
    )
    # The developer role is OpenAI's; other hosts' chat templates often reject it.
    is_openai = provider == "openai" or "api.openai.com" in url
    if is_deepseek:
        thinking_format = "deepseek"
    elif is_zai:
        thinking_format = "zai"
    elif is_openrouter:
        thinking_format = "openrouter"
    else:  # Pi's "together" and "ant-ling" formats are not in mule: they get OpenAI's
        thinking_format = "openai"
    return CompletionsCompat(
        supports_store=not non_standard,
        supports_developer_role=is_openai,
        supports_reasoning_effort=not (
            is_grok
            or is_zai
            or is_moonshot
            or is_together
            or is_cf_gateway
            or is_nvidia
            or is_ant_ling
        ),
        max_tokens_field="max_tokens" if use_max_tokens else "max_completion_tokens",
        requires_reasoning_content_on_assistant_messages=is_deepseek,
        thinking_format=thinking_format,
        # OpenAI compatibility alone does not imply strict JSON-schema tool support.
        supports_strict_mode=False,
        cache_control_format=(
            "anthropic" if provider == "openrouter" and model.id.startswith("anthropic/") else None
        ),
        send_session_affinity_headers=is_openrouter,
        session_affinity_format="openrouter" if is_openrouter else "openai",
        supports_long_cache_retention=not (
            is_together or is_cf_workers or is_cf_gateway or is_nvidia or is_ant_ling
        ),
    )


def _flag(compat: JsonObject, key: str, default: bool) -> bool:
    value = compat.get(key)
    return value if isinstance(value, bool) else default


def _obj(compat: JsonObject, key: str, default: JsonObject | None) -> JsonObject | None:
    value = compat.get(key)
    return value if isinstance(value, Mapping) else default


def get_compat(model: Model) -> CompletionsCompat:
    """Return the detected switches with `model.compat` (camelCase keys) laid over them."""
    d = detect_compat(model)
    c = model.compat
    if not c:
        return d
    field = c.get("maxTokensField")
    thinking = c.get("thinkingFormat")
    cache_format = c.get("cacheControlFormat")
    return CompletionsCompat(
        supports_store=_flag(c, "supportsStore", d.supports_store),
        supports_developer_role=_flag(c, "supportsDeveloperRole", d.supports_developer_role),
        supports_reasoning_effort=_flag(c, "supportsReasoningEffort", d.supports_reasoning_effort),
        supports_usage_in_streaming=_flag(
            c, "supportsUsageInStreaming", d.supports_usage_in_streaming
        ),
        max_tokens_field=(
            field if field in ("max_tokens", "max_completion_tokens") else d.max_tokens_field
        ),
        requires_tool_result_name=_flag(c, "requiresToolResultName", d.requires_tool_result_name),
        requires_assistant_after_tool_result=_flag(
            c, "requiresAssistantAfterToolResult", d.requires_assistant_after_tool_result
        ),
        requires_thinking_as_text=_flag(c, "requiresThinkingAsText", d.requires_thinking_as_text),
        requires_reasoning_content_on_assistant_messages=_flag(
            c,
            "requiresReasoningContentOnAssistantMessages",
            d.requires_reasoning_content_on_assistant_messages,
        ),
        thinking_format=thinking if isinstance(thinking, str) else d.thinking_format,
        open_router_routing=_obj(c, "openRouterRouting", None),
        vercel_gateway_routing=_obj(c, "vercelGatewayRouting", d.vercel_gateway_routing),
        zai_tool_stream=_flag(c, "zaiToolStream", d.zai_tool_stream),
        supports_strict_mode=_flag(c, "supportsStrictMode", d.supports_strict_mode),
        cache_control_format=(
            cache_format if isinstance(cache_format, str) else d.cache_control_format
        ),
        send_session_affinity_headers=_flag(
            c, "sendSessionAffinityHeaders", d.send_session_affinity_headers
        ),
        session_affinity_format=(
            affinity
            if isinstance(affinity := c.get("sessionAffinityFormat"), str)
            else d.session_affinity_format
        ),
        supports_long_cache_retention=_flag(
            c, "supportsLongCacheRetention", d.supports_long_cache_retention
        ),
    )


__all__ = ["CompletionsCompat", "ThinkingFormat", "detect_compat", "get_compat"]
