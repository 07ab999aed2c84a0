"""The `openai-completions` provider: OpenAI Chat Completions and compatible servers, streamed.

Follows pi-ai's provider: per-host compat switches (auto-detected from the provider and base
URL, overridable through `model.compat`), Pi's message conversion, and the chunk-to-event
mapping (text, `reasoning_content`/`reasoning`/`reasoning_text` as thinking, tool calls streamed
by index, usage with cached tokens). Not ported: GitHub Copilot's dynamic headers and Cloudflare's
account-specific base URLs.

Mule differs from Pi in one place: a body that ends with neither a `finish_reason` nor `[DONE]`
is a failed ("ended without") response, not a silent success.

Over 500 lines on purpose: the skeleton keeps a vendor's request rules and its parser in one
module (the compat switches live in `_openai_compat`); Pi's message conversion, reasoning
formats and cache markers for these servers take about 330 of the 630 lines.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from functools import partial
from typing import Any, final

from attrs import evolve

from mule.pi._content import ImageContent, TextContent, ThinkingContent, ToolCall
from mule.pi._context import Context, StreamOptions, Tool
from mule.pi._event_stream import AssistantMessageEventStream
from mule.pi._json import JsonValue, loads, stringify
from mule.pi._messages import AssistantMessage, Message, StopReason, Usage
from mule.pi._model import Model, ThinkingLevel
from mule.pi._transcript import TranscriptContext, collapse_context
from mule.pi.providers._env import env_api_key
from mule.pi.providers._openai_compat import CompletionsCompat, get_compat
from mule.pi.providers._parser import (
    ProviderError,
    StreamParser,
    as_object,
    decode_object,
    priced_usage,
    str_or_none,
    token_count,
)
from mule.pi.providers._simple import (
    resolve_cache_retention,
    simple_options_with_effort,
)
from mule.pi.providers._transform import sanitize_surrogates, transform_messages
from mule.pi.providers._transport import (
    HttpRequest,
    format_provider_error,
    merge_headers,
    provider_stream,
)

_PROCESSED_TOOL_RESULTS = "I have processed the tool results."


# -- request ---------------------------------------------------------------------------------


def _normalize_tool_call_id(model: Model, call_id: str) -> str:
    if "|" in call_id:
        # Responses-API ids are "<call_id>|<item id>"; Chat Completions takes <= 40 plain chars.
        head = call_id.split("|", 1)[0]
        return "".join(ch if ch.isascii() and (ch.isalnum() or ch in "_-") else "_" for ch in head)[
            :40
        ]
    if model.provider == "openai" and len(call_id) > 40:
        return call_id[:40]
    return call_id


def convert_messages(
    model: Model, context: Context, compat: CompletionsCompat
) -> list[dict[str, Any]]:
    """Convert a context to Chat Completions `messages` exactly as Pi does."""
    out: list[dict[str, Any]] = []
    messages = transform_messages(
        context.messages, model, lambda i, _m, _s: _normalize_tool_call_id(model, i)
    )
    if context.system_prompt:
        role = "developer" if model.reasoning and compat.supports_developer_role else "system"
        out.append({"role": role, "content": sanitize_surrogates(context.system_prompt)})
    last_role: str | None = None
    i = 0
    while i < len(messages):
        msg = messages[i]
        if (
            compat.requires_assistant_after_tool_result
            and last_role == "toolResult"
            and msg.role == "user"
        ):
            out.append({"role": "assistant", "content": _PROCESSED_TOOL_RESULTS})
        if msg.role == "user":
            if isinstance(msg.content, str):
                out.append({"role": "user", "content": sanitize_surrogates(msg.content)})
            else:
                parts = [_user_part(block) for block in msg.content]
                if not parts:
                    i += 1
                    continue
                out.append({"role": "user", "content": parts})
        elif msg.role == "assistant":
            converted = _assistant(model, msg, compat)
            if converted is None:
                i += 1
                continue
            out.append(converted)
        else:
            j = i
            images: list[dict[str, Any]] = []
            while j < len(messages) and messages[j].role == "toolResult":
                result = messages[j]
                assert result.role == "toolResult"
                text = "\n".join(b.text for b in result.content if isinstance(b, TextContent))
                tool_msg: dict[str, Any] = {
                    "role": "tool",
                    "content": sanitize_surrogates(text if text else "(see attached image)"),
                    "tool_call_id": result.tool_call_id,
                }
                if compat.requires_tool_result_name and result.tool_name:
                    tool_msg["name"] = result.tool_name
                out.append(tool_msg)
                if "image" in model.input:
                    images.extend(
                        _image_part(b) for b in result.content if isinstance(b, ImageContent)
                    )
                j += 1
            i = j
            if images:
                if compat.requires_assistant_after_tool_result:
                    out.append({"role": "assistant", "content": _PROCESSED_TOOL_RESULTS})
                out.append(
                    {
                        "role": "user",
                        "content": [
                            {"type": "text", "text": "Attached image(s) from tool result:"},
                            *images,
                        ],
                    }
                )
                last_role = "user"
            else:
                last_role = "toolResult"
            continue
        last_role = msg.role
        i += 1
    return out


def _image_part(block: ImageContent) -> dict[str, Any]:
    return {
        "type": "image_url",
        "image_url": {"url": f"data:{block.mime_type};base64,{block.data}"},
    }


def _user_part(block: TextContent | ImageContent) -> dict[str, Any]:
    if isinstance(block, TextContent):
        return {"type": "text", "text": sanitize_surrogates(block.text)}
    return _image_part(block)


def _assistant(
    model: Model, msg: AssistantMessage, compat: CompletionsCompat
) -> dict[str, Any] | None:
    out: dict[str, Any] = {
        "role": "assistant",
        "content": "" if compat.requires_assistant_after_tool_result else None,
    }
    text_parts = [
        {"type": "text", "text": sanitize_surrogates(b.text)}
        for b in msg.content
        if isinstance(b, TextContent) and b.text.strip()
    ]
    text = "".join(p["text"] for p in text_parts)
    thinking = [b for b in msg.content if isinstance(b, ThinkingContent) and b.thinking.strip()]
    if thinking:
        if compat.requires_thinking_as_text:
            joined = "\n\n".join(sanitize_surrogates(b.thinking) for b in thinking)
            out["content"] = [{"type": "text", "text": joined}, *text_parts]
        else:
            # A plain string, as the API documents: some models mirror content-block arrays.
            if text:
                out["content"] = text
            # The first thinking block's signature names the field it came in (llama.cpp).
            signature = thinking[0].thinking_signature
            if signature in _REASONING_FIELDS:  # a field name, not some other signature
                out[signature] = "\n".join(b.thinking for b in thinking)
    elif text:
        out["content"] = text
    calls = [b for b in msg.content if isinstance(b, ToolCall)]
    if calls:
        out["tool_calls"] = [
            {
                "id": c.id,
                "type": "function",
                "function": {"name": c.name, "arguments": stringify(c.arguments)},
            }
            for c in calls
        ]
        details = []
        for c in calls:
            if c.thought_signature:
                try:
                    details.append(loads(c.thought_signature))
                except ValueError:
                    continue
        details = [d for d in details if d]
        if details:
            out["reasoning_details"] = details
    if (
        compat.requires_reasoning_content_on_assistant_messages
        and model.reasoning
        and "reasoning_content" not in out
    ):
        out["reasoning_content"] = ""
    content = out["content"]
    # Providers reject an assistant message with neither content nor tool calls.
    if not content and "tool_calls" not in out:
        return None
    return out


def convert_tools(tools: tuple[Tool, ...], compat: CompletionsCompat) -> list[dict[str, Any]]:
    """Convert tools to Chat Completions function tools."""
    out = []
    for tool in tools:
        fn: dict[str, Any] = {
            "name": tool.name,
            "description": tool.description,
            "parameters": tool.parameters,
        }
        if compat.supports_strict_mode:
            fn["strict"] = False
        out.append({"type": "function", "function": fn})
    return out


def _has_tool_history(messages: tuple[Message, ...]) -> bool:
    for msg in messages:
        if msg.role == "toolResult":
            return True
        if msg.role == "assistant" and any(isinstance(b, ToolCall) for b in msg.content):
            return True
    return False


def build_params(
    model: Model,
    context: Context,
    options: StreamOptions,
    *,
    compat: CompletionsCompat | None = None,
    effort: ThinkingLevel | None = None,
    tool_choice: JsonValue = None,
) -> dict[str, Any]:
    """Build the request body Pi sends (keys Pi leaves undefined are omitted)."""
    compat = compat or get_compat(model)
    retention = resolve_cache_retention(options.cache_retention)
    messages = convert_messages(model, context, compat)
    params: dict[str, Any] = {"model": model.id, "messages": messages, "stream": True}
    long_retention = retention == "long" and compat.supports_long_cache_retention
    if (
        ("api.openai.com" in model.base_url and retention != "none") or long_retention
    ) and options.session_id is not None:
        params["prompt_cache_key"] = options.session_id
    if long_retention:
        params["prompt_cache_retention"] = "24h"
    if compat.supports_usage_in_streaming:
        params["stream_options"] = {"include_usage": True}
    if compat.supports_store:
        params["store"] = False
    if options.max_tokens:
        params[compat.max_tokens_field] = options.max_tokens
    if options.temperature is not None:
        params["temperature"] = options.temperature
    if context.tools:
        params["tools"] = convert_tools(context.tools, compat)
        if compat.zai_tool_stream:
            params["tool_stream"] = True
    elif _has_tool_history(context.messages):
        params["tools"] = []  # proxies in front of Anthropic want tools when history has calls
    if compat.cache_control_format == "anthropic" and retention != "none":
        ttl = "1h" if retention == "long" and compat.supports_long_cache_retention else None
        _apply_cache_control(messages, params.get("tools"), ttl)
    if tool_choice is not None:
        params["tool_choice"] = tool_choice
    _apply_reasoning(params, model, compat, effort)
    if "openrouter.ai" in model.base_url and compat.open_router_routing is not None:
        params["provider"] = compat.open_router_routing
    routing = compat.vercel_gateway_routing
    if "ai-gateway.vercel.sh" in model.base_url and routing:
        gateway = {k: routing[k] for k in ("only", "order") if routing.get(k)}
        if gateway:
            params["providerOptions"] = {"gateway": gateway}
    return params


def _apply_reasoning(
    params: dict[str, Any], model: Model, compat: CompletionsCompat, effort: ThinkingLevel | None
) -> None:
    table = model.thinking_level_map or {}
    mapped = (table.get(effort) or effort) if effort else None
    fmt = compat.thinking_format
    if not model.reasoning:
        return
    if fmt in ("zai", "qwen"):
        params["enable_thinking"] = bool(effort)
    elif fmt == "qwen-chat-template":
        params["chat_template_kwargs"] = {
            "enable_thinking": bool(effort),
            "preserve_thinking": True,
        }
    elif fmt == "deepseek":
        params["thinking"] = {"type": "enabled" if effort else "disabled"}
        if effort:
            params["reasoning_effort"] = mapped
    elif fmt == "openrouter":
        if effort:
            params["reasoning"] = {"effort": mapped}
        elif not ("off" in table and table["off"] is None):
            params["reasoning"] = {"effort": table.get("off") or "none"}
    elif compat.supports_reasoning_effort:
        if effort:
            params["reasoning_effort"] = mapped
        elif isinstance(table.get("off"), str):
            params["reasoning_effort"] = table["off"]


def _apply_cache_control(
    messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None, ttl: str | None
) -> None:
    marker: dict[str, Any] = {"type": "ephemeral", **({"ttl": ttl} if ttl else {})}
    for message in messages:
        if message["role"] in ("system", "developer"):
            _mark_text(message, marker)
            break
    if tools:
        tools[-1]["cache_control"] = marker
    for message in reversed(messages):
        if message["role"] in ("user", "assistant") and _mark_text(message, marker):
            break


def _mark_text(message: dict[str, Any], marker: dict[str, Any]) -> bool:
    content = message.get("content")
    if isinstance(content, str):
        if not content:
            return False
        message["content"] = [{"type": "text", "text": content, "cache_control": marker}]
        return True
    if not isinstance(content, list):
        return False
    for part in reversed(content):
        if isinstance(part, dict) and part.get("type") == "text":
            part["cache_control"] = marker
            return True
    return False


def build_headers(model: Model, options: StreamOptions, api_key: str) -> dict[str, str]:
    """Return the request headers: model headers, session affinity, then `options.headers`."""
    compat = get_compat(model)
    retention = resolve_cache_retention(options.cache_retention)
    session = None if retention == "none" else options.session_id
    affinity: dict[str, str] = {}
    if session and compat.send_session_affinity_headers:
        if compat.session_affinity_format == "openrouter":
            affinity = {"x-session-id": session}
        else:
            if compat.session_affinity_format == "openai":
                affinity["session_id"] = session
            affinity |= {"x-client-request-id": session, "x-session-affinity": session}
    return merge_headers(bearer_auth(model, api_key), model.headers, affinity, options.headers)


def bearer_auth(model: Model, api_key: str) -> dict[str, str]:
    """Return the OpenAI-style auth header (Cloudflare's AI Gateway names its own)."""
    if model.provider == "cloudflare-ai-gateway":
        return {"cf-aig-authorization": f"Bearer {api_key}"}
    return {"Authorization": f"Bearer {api_key}"}


def openai_api_key(model: Model, options: StreamOptions) -> str:
    """Return the key from the options or the environment; without one, fail as the SDK does."""
    api_key = options.api_key or env_api_key(model.provider)
    if not api_key:
        raise ProviderError(
            "OpenAI API key is required. Set OPENAI_API_KEY environment variable "
            "or pass it as an argument."
        )
    return api_key


# -- response --------------------------------------------------------------------------------


def parse_usage(raw: Mapping[str, Any], model: Model) -> Usage:
    """Normalise a Chat Completions usage object to Pi's counts (cache reads split out).

    `cached_tokens` counts cache reads (OpenAI, OpenRouter); DeepSeek says
    `prompt_cache_hit_tokens` and Kimi a top-level `cached_tokens`. Cache writes are counted
    apart from reads, never subtracted from them (Pi 1.6.0). OpenRouter's billed cost replaces
    the catalogue estimate when its accounting is complete.
    """
    prompt = token_count(raw.get("prompt_tokens")) or 0
    details = as_object(raw.get("prompt_tokens_details"))
    cache_read = 0
    for reported in (
        details.get("cached_tokens"),
        raw.get("prompt_cache_hit_tokens"),
        raw.get("cached_tokens"),
    ):
        if reported is not None:  # JavaScript's `??`: the first one present
            cache_read = token_count(reported) or 0
            break
    cache_write = token_count(details.get("cache_write_tokens")) or 0
    input_tokens = max(0, prompt - cache_read - cache_write)
    output = token_count(raw.get("completion_tokens")) or 0
    completion = as_object(raw.get("completion_tokens_details"))
    reasoning = (
        token_count(completion.get("reasoning_tokens"))
        or token_count(raw.get("reasoning_tokens"))
        or 0
    )
    usage = priced_usage(model, input_tokens, output, cache_read, cache_write, reasoning=reasoning)
    if model.provider == "openrouter" or "openrouter.ai" in model.base_url:
        usage = _openrouter_billed(usage, raw)
    return usage


def _cost(value: object) -> float | None:
    """Return a reported cost that is a finite, non-negative number, else None."""
    if type(value) in (int, float) and math.isfinite(value) and value >= 0:  # type: ignore[arg-type, operator]
        return float(value)  # type: ignore[arg-type]
    return None


def _openrouter_billed(usage: Usage, raw: Mapping[str, Any]) -> Usage:
    """Replace the estimated total with OpenRouter's billed cost, when it reports all of it."""
    cost = _cost(raw.get("cost"))
    if cost is None:
        return usage
    total: float
    if raw.get("is_byok") is False:
        total = cost
    elif raw.get("is_byok") is True:
        details = raw.get("cost_details")
        if not isinstance(details, dict):
            return usage
        upstream: float | None
        if details.get("upstream_inference_cost") is None:
            prompt = _cost(details.get("upstream_inference_prompt_cost"))
            completion = _cost(details.get("upstream_inference_completions_cost"))
            if prompt is None or completion is None:
                return usage
            upstream = prompt + completion
        else:
            upstream = _cost(details.get("upstream_inference_cost"))
        if upstream is None:
            return usage
        total = cost + upstream
    else:
        return usage
    return evolve(usage, cost=evolve(usage.cost, total=total, total_from_provider=True))


def map_finish_reason(reason: str | None) -> tuple[StopReason, str | None]:
    """Map a `finish_reason` to Pi's stop reason and, for failures, an error message."""
    if reason is None or reason in ("stop", "end"):
        return "stop", None
    if reason == "length":
        return "length", None
    if reason in ("function_call", "tool_calls"):
        return "toolUse", None
    # content_filter, network_error and any reason Pi does not know: a failed response
    return "error", f"Provider finish_reason: {reason}"


_REASONING_FIELDS = ("reasoning_content", "reasoning", "reasoning_text")


def error_chunk_text(error: object) -> str:
    """Word an `{"error": ...}` chunk as the SDK does: its message, else the object as JSON."""
    text = error.get("message") if isinstance(error, dict) else None
    return text if isinstance(text, str) and text else stringify(error)


def _raw_metadata(error: object) -> str | None:
    if isinstance(error, dict):
        meta = error.get("metadata")
        if isinstance(meta, dict) and meta.get("raw"):
            return str(meta["raw"])
    return None


@final
class CompletionsParser(StreamParser):
    """Turns Chat Completions chunks into Pi events, building the message as it goes."""

    __slots__ = (
        "_by_id",
        "_by_index",
        "_calls",
        "_finished",
        "_have_response_id",
        "_text",
        "_thinking",
    )
    vendor = "OpenAI"
    no_stop_reason = "Stream ended without finish_reason"

    def __init__(self, model: Model) -> None:
        super().__init__(model)
        self._text: int | None = None
        self._thinking: int | None = None
        self._by_index: dict[int, int] = {}
        self._by_id: dict[str, int] = {}
        self._calls: dict[int, list[str]] = {}  # tool-call block -> [its id, its name] so far
        self._finished = False  # a finish_reason arrived
        self._have_response_id = False

    def _on_event(self, event: str, data: str) -> None:
        if data.startswith("[DONE]"):
            self.ended = True
            return
        chunk = decode_object(data)
        error = chunk.get("error")
        if error:
            message = error_chunk_text(error)
            raw = _raw_metadata(error)
            raise ProviderError(f"{message}\n{raw}" if raw else message)
        self._chunk(chunk)

    def _chunk(self, chunk: Mapping[str, Any]) -> None:
        b = self._b
        if not self._have_response_id and chunk.get("id"):
            self._have_response_id = True
            b.set_response(response_id=str(chunk["id"]))
        served = chunk.get("model")
        if isinstance(served, str) and served and b.head.response_model is None:
            b.set_response(response_model=served)
        usage = chunk.get("usage")
        if isinstance(usage, dict):
            b.set_usage(parse_usage(usage, self._model))
        choices = chunk.get("choices")
        choice = choices[0] if isinstance(choices, list) and choices else None
        if not isinstance(choice, dict):
            return
        if not isinstance(usage, dict) and isinstance(choice.get("usage"), dict):
            b.set_usage(parse_usage(choice["usage"], self._model))  # Moonshot puts it here
        if choice.get("finish_reason"):
            self._finished = True
            raw = choice["finish_reason"]
            raw = raw if isinstance(raw, str) else stringify(raw)
            stop, message = map_finish_reason(raw)
            b.set_stop(stop, raw, message)
        delta = choice.get("delta")
        if not isinstance(delta, dict):
            return
        content = delta.get("content")
        if isinstance(content, str) and content:
            if self._text is None:
                self._text = self._open_text()
            self._delta(self._text, content)
        # Servers name the reasoning field differently; some send two with the same text.
        for name in _REASONING_FIELDS:
            value = delta.get(name)
            if isinstance(value, str) and value:
                if self._thinking is None:
                    self._thinking = self._open_thinking(signature=name)
                self._delta(self._thinking, value)
                break
        calls = delta.get("tool_calls")
        if isinstance(calls, list):
            for call in calls:
                if isinstance(call, dict):
                    self._tool_call(call)
        details = delta.get("reasoning_details")
        if isinstance(details, list):
            for detail in details:
                if (
                    isinstance(detail, dict)
                    and detail.get("type") == "reasoning.encrypted"
                    and detail.get("id")
                    and detail.get("data")
                ):
                    for i, (call_id, _) in self._calls.items():
                        if call_id == detail["id"]:
                            b.set_tool_call(i, thought_signature=stringify(detail))
                            break

    def _tool_call(self, call: Mapping[str, Any]) -> None:
        b = self._b
        stream_index = call.get("index") if isinstance(call.get("index"), int) else None
        call_id = str_or_none(call.get("id"))
        fn = as_object(call.get("function"))
        name = str_or_none(fn.get("name"))
        i = self._by_index.get(stream_index) if stream_index is not None else None
        if i is None and call_id:
            i = self._by_id.get(call_id)
        if i is None:
            i = self._open_tool_call(call_id or "", name or "")
            self._calls[i] = [call_id or "", name or ""]
            if stream_index is not None:
                self._by_index[stream_index] = i
        if stream_index is not None and stream_index not in self._by_index:
            self._by_index[stream_index] = i
        if call_id:
            self._by_id[call_id] = i
        # The id and name may come in a later fragment than the call's first.
        known = self._calls[i]
        if not known[0] and call_id:
            known[0] = call_id
            b.set_tool_call(i, call_id=call_id)
        if not known[1] and name:
            known[1] = name
            b.set_tool_call(i, name=name)
        args = fn.get("arguments")
        self._delta(i, args if isinstance(args, str) else "")

    def _on_end(self) -> None:
        for i in range(len(self._b)):  # every block closes at the end, in content order
            self._end(i)
        if not self._finished:  # checked after the blocks closed, as Pi does
            if (self._model.compat or {}).get("supportsFinishReason") is not False:
                raise ProviderError(self.no_stop_reason)
            # A server that never sends one (compat says so): the content says why it ended.
            self._b.set_stop("toolUse" if self._has_tool_calls() else "stop")
        self._done(None, self._b.head.error_message or "Provider returned an error stop reason")


def _raise_with_raw_detail(exc: ProviderError) -> ProviderError:
    text = format_provider_error(exc)
    raw = _raw_metadata(exc.error_body)
    if raw and raw not in text:  # OpenRouter explains upstream failures here
        text = f"{text}\n{raw}"
    return ProviderError(text, exc.diagnostics, exc.error_body, exc.status)


def _request(
    model: Model,
    context: Context,
    options: StreamOptions,
    effort: ThinkingLevel | None,
    tool_choice: JsonValue,
) -> HttpRequest:
    api_key = openai_api_key(model, options)
    compat = get_compat(model)
    body = build_params(
        model, context, options, compat=compat, effort=effort, tool_choice=tool_choice
    )
    url = model.base_url.rstrip("/") + "/chat/completions"
    return HttpRequest(url, build_headers(model, options, api_key), body)


def stream_openai_completions(
    model: Model,
    context: Context | TranscriptContext,
    options: StreamOptions | None = None,
    *,
    effort: ThinkingLevel | None = None,
    tool_choice: JsonValue = None,
) -> AssistantMessageEventStream:
    """Stream a Chat Completions response (Pi's `streamOpenAICompletions`); never raises."""
    context = collapse_context(context)
    opts = options or StreamOptions()
    return provider_stream(
        model,
        opts,
        CompletionsParser(model),
        partial(_request, model, context, opts, effort, tool_choice),
        on_http_error=_raise_with_raw_detail,
    )


def stream_simple_openai_completions(
    model: Model, context: Context | TranscriptContext, options: StreamOptions | None = None
) -> AssistantMessageEventStream:
    """Pi's `streamSimpleOpenAICompletions`: simple defaults, then the provider stream."""
    base, effort = simple_options_with_effort(model, options, context)
    return stream_openai_completions(model, context, base, effort=effort)


__all__ = [
    "CompletionsParser",
    "bearer_auth",
    "build_headers",
    "build_params",
    "convert_messages",
    "convert_tools",
    "error_chunk_text",
    "map_finish_reason",
    "openai_api_key",
    "parse_usage",
    "stream_openai_completions",
    "stream_simple_openai_completions",
]
