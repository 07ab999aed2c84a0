"""Pi's `anthropic-messages` provider: Anthropic's Messages API over SSE.

Request building follows pi-ai 0.73.1: transcript rewriting, tool-result batching, prompt-cache
breakpoints by `cache_retention`, budget or adaptive thinking, the beta headers Pi sends, and
OAuth (Claude Code) tokens. `AnthropicParser` maps Anthropic's content blocks, which may
interleave by index, onto Pi's block events; the shared transport does the I/O.

Over 500 lines on purpose: the skeleton keeps a vendor's request rules and its parser in one
module, so a change to the wire format is one file, and Pi's rules for this vendor (Claude Code
names, cache breakpoints, thinking modes, betas) take about 400 lines of the 620.
"""

from __future__ import annotations

import re
from functools import partial
from typing import Any, Final, Literal, TypeAlias, final

from attrs import evolve, frozen

from mule.pi._content import ImageContent, TextContent, ThinkingContent
from mule.pi._context import CacheRetention, Context, StreamOptions, Tool
from mule.pi._event_stream import AssistantMessageEventStream
from mule.pi._json import JsonObject, JsonValue, loads, stringify
from mule.pi._messages import AssistantMessage, Message, StopReason, ToolResultMessage
from mule.pi._model import Model, ThinkingLevel
from mule.pi._partial_json import parse_json_with_repair
from mule.pi._transcript import TranscriptContext, collapse_context
from mule.pi.providers._env import env_api_key
from mule.pi.providers._estimate import clamp_max_tokens_to_context
from mule.pi.providers._parser import (
    ProviderError,
    StreamParser,
    as_object,
    priced_usage,
    read_stop_reason,
    str_field,
    str_or_none,
    token_count,
)
from mule.pi.providers._simple import (
    adjust_max_tokens_for_thinking,
    compat_flag,
    resolve_cache_retention,
    simple_options,
)
from mule.pi.providers._transform import sanitize_surrogates, transform_messages
from mule.pi.providers._transport import HttpRequest, merge_headers, provider_stream

ANTHROPIC_VERSION: Final = "2023-06-01"
FINE_GRAINED_TOOL_STREAMING_BETA: Final = "fine-grained-tool-streaming-2025-05-14"
INTERLEAVED_THINKING_BETA: Final = "interleaved-thinking-2025-05-14"
REDACTED_THINKING_PLACEHOLDER: Final = "[Reasoning redacted]"
CLAUDE_CODE_VERSION: Final = "2.1.75"
CLAUDE_CODE_IDENTITY: Final = "You are Claude Code, Anthropic's official CLI for Claude."
# Claude Code's tool names: OAuth requests present matching tools in this exact casing.
_CLAUDE_CODE_TOOLS: Final = (
    "Read",
    "Write",
    "Edit",
    "Bash",
    "Grep",
    "Glob",
    "AskUserQuestion",
    "EnterPlanMode",
    "ExitPlanMode",
    "KillShell",
    "NotebookEdit",
    "Skill",
    "Task",
    "TaskOutput",
    "TodoWrite",
    "WebFetch",
    "WebSearch",
)
_CC_LOOKUP: Final = {name.lower(): name for name in _CLAUDE_CODE_TOOLS}
_MESSAGE_EVENTS: Final = frozenset(
    {
        "message_start",
        "message_delta",
        "message_stop",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
    }
)

ThinkingDisplay: TypeAlias = Literal["summarized", "omitted"]
_Obj: TypeAlias = dict[str, Any]  # a request body under construction


@final
@frozen(kw_only=True)
class AnthropicOptions:
    """Anthropic-specific knobs beyond `StreamOptions` (Pi's `AnthropicOptions`)."""

    thinking_enabled: bool | None = None
    thinking_budget_tokens: int | None = None
    effort: str | None = None
    thinking_display: ThinkingDisplay | None = None
    interleaved_thinking: bool = True
    tool_choice: str | JsonObject | None = None


# -- small rules ---------------------------------------------------------------------------------


def supports_adaptive_thinking(model_id: str) -> bool:
    """Return whether the model thinks adaptively (Opus 4.6/4.7, Sonnet 4.6), not by budget."""
    return any(
        tag in model_id
        for tag in ("opus-4-6", "opus-4.6", "opus-4-7", "opus-4.7", "sonnet-4-6", "sonnet-4.6")
    )


def thinking_effort(model: Model, level: ThinkingLevel) -> str:
    """Map a thinking level to an adaptive-thinking effort (the model's map wins)."""
    mapped = (model.thinking_level_map or {}).get(level)
    if isinstance(mapped, str):
        return mapped
    return {"minimal": "low", "low": "low", "medium": "medium", "high": "high"}.get(level, "high")


def is_oauth_token(api_key: str) -> bool:
    """Return whether the key is a Claude subscription (OAuth) token rather than an API key."""
    return "sk-ant-oat" in api_key


def to_claude_code_name(name: str) -> str:
    """Return Claude Code's casing for a tool name it knows, else the name unchanged."""
    return _CC_LOOKUP.get(name.lower(), name)


def from_claude_code_name(name: str, tools: tuple[Tool, ...] | None) -> str:
    """Map a tool name back to the caller's tool of that name, ignoring case."""
    for tool in tools or ():
        if tool.name.lower() == name.lower():
            return tool.name
    return name


_UNSAFE_ID = re.compile(r"[^a-zA-Z0-9_-]")


def normalize_tool_call_id(call_id: str, *_: object) -> str:
    """Make a foreign tool-call id acceptable to Anthropic: [a-zA-Z0-9_-], at most 64 chars."""
    return _UNSAFE_ID.sub("_", call_id)[:64]


_STOP_REASONS: Final[dict[str, StopReason]] = {
    "end_turn": "stop",
    "max_tokens": "length",
    "tool_use": "toolUse",
    "refusal": "error",
    "pause_turn": "stop",  # the caller may resubmit; the turn itself is fine
    "stop_sequence": "stop",
    "sensitive": "error",
}


def map_stop_reason(reason: str) -> StopReason:
    """Map Anthropic's stop_reason onto Pi's; an unknown reason is a stream failure."""
    return read_stop_reason(_STOP_REASONS, reason)


def stop_error_message(reason: str, details: object) -> str | None:
    """Pi's error text for a failing stop reason (a refusal's explanation when it has one)."""
    if reason == "refusal":
        explanation = as_object(details).get("explanation")
        if isinstance(explanation, str) and explanation:
            return explanation
        return "The model refused to complete the request"
    if reason == "sensitive":
        return "Provider stopped with: sensitive"
    return None


def cache_control(model: Model, retention: CacheRetention | None) -> _Obj | None:
    """Return the cache_control marker for a retention ("short" by default), or None for "none"."""
    retention = resolve_cache_retention(retention)
    if retention == "none":
        return None
    control: _Obj = {"type": "ephemeral"}
    if retention == "long" and compat_flag(model, "supportsLongCacheRetention"):
        control["ttl"] = "1h"
    return control


# -- request ---------------------------------------------------------------------------------


def _tool_result_content(content: tuple[TextContent | ImageContent, ...]) -> JsonValue:
    if not any(isinstance(b, ImageContent) for b in content):
        return sanitize_surrogates("\n".join(b.text for b in content if isinstance(b, TextContent)))
    blocks: list[JsonValue] = [
        {"type": "text", "text": sanitize_surrogates(b.text)}
        if isinstance(b, TextContent)
        else {
            "type": "image",
            "source": {"type": "base64", "media_type": b.mime_type, "data": b.data},
        }
        for b in content
    ]
    if not any(isinstance(b, TextContent) for b in content):
        blocks.insert(0, {"type": "text", "text": "(see attached image)"})
    return blocks


def _user_blocks(content: tuple[TextContent | ImageContent, ...]) -> list[_Obj]:
    blocks: list[_Obj] = []
    for item in content:
        if isinstance(item, TextContent):
            if item.text.strip():
                blocks.append({"type": "text", "text": sanitize_surrogates(item.text)})
        else:
            blocks.append(
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": item.mime_type, "data": item.data},
                }
            )
    return blocks


def _assistant_blocks(message: AssistantMessage, oauth: bool) -> list[_Obj]:
    blocks: list[_Obj] = []
    for block in message.content:
        if isinstance(block, TextContent):
            if block.text.strip():
                blocks.append({"type": "text", "text": sanitize_surrogates(block.text)})
        elif isinstance(block, ThinkingContent):
            if block.redacted:
                blocks.append({"type": "redacted_thinking", "data": block.thinking_signature})
            elif not block.thinking.strip():
                continue
            elif not block.thinking_signature or not block.thinking_signature.strip():
                # Unsigned reasoning (an aborted stream, say) would be rejected; send it as text.
                blocks.append({"type": "text", "text": sanitize_surrogates(block.thinking)})
            else:
                blocks.append(
                    {
                        "type": "thinking",
                        "thinking": sanitize_surrogates(block.thinking),
                        "signature": block.thinking_signature,
                    }
                )
        else:
            blocks.append(
                {
                    "type": "tool_use",
                    "id": block.id,
                    "name": to_claude_code_name(block.name) if oauth else block.name,
                    "input": block.arguments,
                }
            )
    return blocks


def convert_messages(
    messages: tuple[Message, ...], model: Model, oauth: bool, control: _Obj | None
) -> list[_Obj]:
    """Convert a transcript to Anthropic messages, as Pi does (results batched per user turn)."""
    out: list[_Obj] = []
    rewritten = transform_messages(messages, model, normalize_tool_call_id)
    i = 0
    while i < len(rewritten):
        msg = rewritten[i]
        i += 1
        if isinstance(msg, AssistantMessage):
            blocks = _assistant_blocks(msg, oauth)
            if blocks:
                out.append({"role": "assistant", "content": list[JsonValue](blocks)})
        elif isinstance(msg, ToolResultMessage):
            results: list[JsonValue] = []
            batch = [msg]
            while i < len(rewritten) and isinstance(rewritten[i], ToolResultMessage):
                nxt = rewritten[i]
                assert isinstance(nxt, ToolResultMessage)
                batch.append(nxt)
                i += 1
            for result in batch:
                results.append(
                    {
                        "type": "tool_result",
                        "tool_use_id": result.tool_call_id,
                        "content": _tool_result_content(result.content),
                        "is_error": result.is_error,
                    }
                )
            out.append({"role": "user", "content": results})
        elif isinstance(msg.content, str):
            if msg.content.strip():
                out.append({"role": "user", "content": sanitize_surrogates(msg.content)})
        else:
            user_blocks = _user_blocks(msg.content)
            if user_blocks:
                out.append({"role": "user", "content": list[JsonValue](user_blocks)})
    # One cache breakpoint on the last user turn caches the whole conversation so far.
    if control is not None and out and out[-1]["role"] == "user":
        last = out[-1]
        content = last["content"]
        if isinstance(content, list) and content:
            tail = content[-1]
            if isinstance(tail, dict) and tail.get("type") in ("text", "image", "tool_result"):
                tail["cache_control"] = dict(control)
        elif isinstance(content, str):
            last["content"] = [{"type": "text", "text": content, "cache_control": dict(control)}]
    return out


def convert_tools(
    tools: tuple[Tool, ...], oauth: bool, eager: bool, control: _Obj | None
) -> list[JsonValue]:
    """Convert tool descriptors; the last one carries the cache breakpoint."""
    out: list[JsonValue] = []
    for n, tool in enumerate(tools):
        schema = tool.parameters
        entry: _Obj = {
            "name": to_claude_code_name(tool.name) if oauth else tool.name,
            "description": tool.description,
        }
        if eager:
            entry["eager_input_streaming"] = True
        entry["input_schema"] = {
            "type": "object",
            "properties": schema.get("properties") or {},
            "required": schema.get("required") or [],
        }
        if control is not None and n == len(tools) - 1:
            entry["cache_control"] = dict(control)
        out.append(entry)
    return out


def build_params(
    model: Model,
    context: Context,
    oauth: bool,
    options: StreamOptions,
    extra: AnthropicOptions,
) -> _Obj:
    """Build the Messages API request body Pi sends."""
    control = cache_control(model, options.cache_retention)
    params: _Obj = {
        "model": model.id,
        "messages": list[JsonValue](convert_messages(context.messages, model, oauth, control)),
        "max_tokens": options.max_tokens or model.max_tokens // 3,
        "stream": True,
    }

    def text_block(text: str) -> _Obj:
        block: _Obj = {"type": "text", "text": text}
        if control is not None:
            block["cache_control"] = dict(control)
        return block

    system: list[JsonValue] = []
    if oauth:
        system.append(text_block(CLAUDE_CODE_IDENTITY))
    if context.system_prompt:
        system.append(text_block(sanitize_surrogates(context.system_prompt)))
    if system:
        params["system"] = system
    # Extended thinking rejects a temperature.
    if options.temperature is not None and not extra.thinking_enabled:
        params["temperature"] = options.temperature
    if context.tools:
        eager = compat_flag(model, "supportsEagerToolInputStreaming")
        params["tools"] = convert_tools(context.tools, oauth, eager, control)
    if model.reasoning:
        if extra.thinking_enabled:
            display = extra.thinking_display or "summarized"
            if supports_adaptive_thinking(model.id):
                params["thinking"] = {"type": "adaptive", "display": display}
                if extra.effort:
                    params["output_config"] = {"effort": extra.effort}
            else:
                params["thinking"] = {
                    "type": "enabled",
                    "budget_tokens": extra.thinking_budget_tokens or 1024,
                    "display": display,
                }
        elif extra.thinking_enabled is False:
            params["thinking"] = {"type": "disabled"}
    if options.metadata is not None:
        user_id = options.metadata.get("user_id")
        if isinstance(user_id, str):
            params["metadata"] = {"user_id": user_id}
    if extra.tool_choice is not None:
        params["tool_choice"] = (
            {"type": extra.tool_choice} if isinstance(extra.tool_choice, str) else extra.tool_choice
        )
    return params


def build_headers(
    model: Model, context: Context, api_key: str, options: StreamOptions, extra: AnthropicOptions
) -> dict[str, str]:
    """Return the request headers: auth, version, and the betas Pi enables."""
    betas: list[str] = []
    if context.tools and not compat_flag(model, "supportsEagerToolInputStreaming"):
        betas.append(FINE_GRAINED_TOOL_STREAMING_BETA)
    if extra.interleaved_thinking and not supports_adaptive_thinking(model.id):
        betas.append(INTERLEAVED_THINKING_BETA)
    base = {"accept": "application/json", "anthropic-version": ANTHROPIC_VERSION}
    browser = {"anthropic-dangerous-direct-browser-access": "true"}
    if is_oauth_token(api_key):
        identity = {
            "authorization": f"Bearer {api_key}",
            "anthropic-beta": ",".join(["claude-code-20250219", "oauth-2025-04-20", *betas]),
            "user-agent": f"claude-cli/{CLAUDE_CODE_VERSION}",
            "x-app": "cli",
        }
        return merge_headers(base, browser, identity, model.headers, options.headers)
    auth = {"x-api-key": api_key}
    beta = {"anthropic-beta": ",".join(betas)} if betas else {}
    return merge_headers(base, auth, browser, beta, model.headers, options.headers)


def messages_url(model: Model) -> str:
    """Return the Messages endpoint under the model's base URL."""
    return model.base_url.rstrip("/") + "/v1/messages"


# -- response --------------------------------------------------------------------------------


def sdk_error(exc: ProviderError) -> ProviderError:
    """Word an HTTP error as Anthropic's SDK does: the status, then the whole JSON body.

    Anthropic's error bodies are `{"type": "error", "error": {...}}`; the SDK prints them whole.
    """
    status = next(
        (d.details.get("status") for d in exc.diagnostics if d.details and "status" in d.details),
        None,
    )
    if status is None or exc.error_body is None or not exc.message.startswith(f"{status} "):
        return exc
    body = {"type": "error", "error": exc.error_body}
    return ProviderError(f"{status} {stringify(body)}", exc.diagnostics, exc.error_body)


def stream_error_text(data: str) -> str:
    """Word an in-stream `error` event as the SDK's APIError does (its body as JSON)."""
    try:
        body: object = loads(data)
    except ValueError:
        body = data
    message = body.get("message") if isinstance(body, dict) else None
    if message:
        return message if isinstance(message, str) else stringify(message)
    return stringify(body) if body else "(no status code or body)"


_USAGE_KEYS: Final = (
    "input_tokens",
    "output_tokens",
    "cache_read_input_tokens",
    "cache_creation_input_tokens",
)


@final
class AnthropicParser(StreamParser):
    """Turns Messages API events into Pi events; blocks may interleave by Anthropic's index."""

    __slots__ = (
        "_long_write",
        "_open",
        "_reasoning",
        "_saw_start",
        "_saw_stop",
        "_signatures",
        "_tools",
        "_usage",
    )
    vendor = "Anthropic"
    no_stop_reason = "Anthropic stream ended without a stop reason"

    def __init__(self, model: Model, oauth_tools: tuple[Tool, ...] | None = None) -> None:
        """`oauth_tools`: for OAuth calls, the caller's tools (Claude Code's names map back)."""
        super().__init__(model)
        self._tools = oauth_tools
        self._open: dict[object, int] = {}  # Anthropic block index -> content index, while open
        self._signatures: dict[int, str] = {}
        self._usage = [0, 0, 0, 0]  # input, output, cache read, cache write
        self._long_write: int | None = None  # cache writes with one-hour retention
        self._reasoning: int | None = None  # thinking tokens, a part of the output
        self._saw_start = self._saw_stop = False

    def _on_event(self, event: str, data: str) -> None:
        if event == "error":
            raise ProviderError(stream_error_text(data))
        if event not in _MESSAGE_EVENTS:
            return  # ping and events Pi does not know
        try:
            chunk = parse_json_with_repair(data)
        except ValueError as exc:
            raise ProviderError(
                f"Could not parse Anthropic SSE event {event}: {exc}; data={data}"
            ) from exc
        chunk = as_object(chunk)
        kind = chunk.get("type")
        if kind == "content_block_delta":
            self._block_delta(chunk)
        elif kind == "content_block_start":
            self._block_start(chunk)
        elif kind == "content_block_stop":
            at = self._open.pop(chunk.get("index"), None)
            if at is not None:
                self._end(at)
        elif kind == "message_start":
            self._saw_start = True
            message = as_object(chunk.get("message"))
            response_id = message.get("id")
            if isinstance(response_id, str):
                self._b.set_response(response_id=response_id)
            reported = as_object(message.get("usage"))
            self._usage = [token_count(reported.get(key)) or 0 for key in _USAGE_KEYS]
            creation = as_object(reported.get("cache_creation"))
            self._long_write = token_count(creation.get("ephemeral_1h_input_tokens")) or 0
            self._set_usage()
        elif kind == "message_delta":
            delta = as_object(chunk.get("delta"))
            if delta.get("stop_reason"):
                raw = str(delta["stop_reason"])
                self._b.set_stop(self._b.head.stop_reason, raw)  # kept if it maps to nothing
                text = stop_error_message(raw, delta.get("stop_details"))
                self._b.set_stop(map_stop_reason(raw), None, text)
            reported = as_object(chunk.get("usage"))
            # Proxies may omit counts here; keep what message_start said.
            for n, key in enumerate(_USAGE_KEYS):
                value = token_count(reported.get(key))
                if value is not None:
                    self._usage[n] = value
            long_write = token_count(
                as_object(reported.get("cache_creation")).get("ephemeral_1h_input_tokens")
            )
            if long_write is not None:
                self._long_write = long_write
            thinking = token_count(
                as_object(reported.get("output_tokens_details")).get("thinking_tokens")
            )
            if thinking is not None:
                self._reasoning = thinking
            self._set_usage()
        elif kind == "message_stop":
            self._saw_stop = True

    def _set_usage(self) -> None:
        # Anthropic reports no total: it is the sum of the four counts.
        self._b.set_usage(
            priced_usage(
                self._model,
                *self._usage,
                reasoning=self._reasoning,
                cache_write_1h=self._long_write,
            )
        )

    def _block_start(self, chunk: JsonObject) -> None:
        block = as_object(chunk.get("content_block"))
        index = chunk.get("index")
        block_type = block.get("type")
        if block_type == "text":
            self._open[index] = self._open_text()
        elif block_type == "thinking":
            at = self._open[index] = self._open_thinking(signature="")
            self._signatures[at] = ""
        elif block_type == "redacted_thinking":
            signature = str_or_none(block.get("data"))
            self._open[index] = self._open_thinking(
                REDACTED_THINKING_PLACEHOLDER, signature=signature, redacted=True
            )
        elif block_type == "tool_use":
            name = str_or_none(block.get("name")) or ""
            if self._tools is not None:
                name = from_claude_code_name(name, self._tools)
            self._open[index] = self._open_tool_call(str_or_none(block.get("id")) or "", name)

    def _block_delta(self, chunk: JsonObject) -> None:
        at = self._open.get(chunk.get("index"))
        if at is None:
            return
        delta = as_object(chunk.get("delta"))
        block_kind = self._b.kind(at)
        delta_type = delta.get("type")
        if delta_type == "text_delta" and block_kind == "text":
            self._delta(at, str_field(delta, "text"))
        elif delta_type == "thinking_delta" and block_kind == "thinking":
            self._delta(at, str_field(delta, "thinking"))
        elif delta_type == "input_json_delta" and block_kind == "toolCall":
            self._delta(at, str_field(delta, "partial_json"))
        elif delta_type == "signature_delta" and block_kind == "thinking":
            signature = self._signatures.get(at, "") + str_field(delta, "signature")
            self._signatures[at] = signature
            self._b.set_signature(at, signature)

    def _on_end(self) -> None:
        if not self._saw_stop:
            raise ProviderError("Anthropic stream ended before message_stop")
        self._done()


def _request(
    model: Model, context: Context, api_key: str, options: StreamOptions, extra: AnthropicOptions
) -> HttpRequest:
    oauth = is_oauth_token(api_key)
    params = build_params(model, context, oauth, options, extra)
    headers = build_headers(model, context, api_key, options, extra)
    return HttpRequest(messages_url(model), headers, params)


def stream_anthropic(
    model: Model,
    context: Context | TranscriptContext,
    options: StreamOptions | None = None,
    extra: AnthropicOptions | None = None,
) -> AssistantMessageEventStream:
    """Stream one Messages API response as Pi's events (Pi's `streamAnthropic`).

    The key is `options.api_key`, else the provider's environment variable. Every failure
    after this returns, HTTP errors included, ends the stream with an `error` event.
    """
    context = collapse_context(context)
    opts = options or StreamOptions()
    more = extra or AnthropicOptions()
    api_key = opts.api_key or env_api_key(model.provider) or ""
    tools = (context.tools or ()) if is_oauth_token(api_key) else None
    request = partial(_request, model, context, api_key, opts, more)
    return provider_stream(
        model, opts, AnthropicParser(model, tools), request, on_http_error=sdk_error
    )


def stream_simple_anthropic(
    model: Model, context: Context | TranscriptContext, options: StreamOptions
) -> AssistantMessageEventStream:
    """Pi's `streamSimpleAnthropic`: simple defaults, then budget or adaptive thinking by level.

    Raises `ProviderSetupError` at once when there is no API key.
    """
    base = simple_options(model, options, context)
    level = options.reasoning
    if not level:
        return stream_anthropic(model, context, base, AnthropicOptions(thinking_enabled=False))
    if (model.compat or {}).get("forceAdaptiveThinking") is True:  # Pi 1.6.0 asks the model
        extra = AnthropicOptions(thinking_enabled=True, effort=thinking_effort(model, level))
        return stream_anthropic(model, context, base, extra)
    max_tokens, budget = adjust_max_tokens_for_thinking(
        base.max_tokens or 0, model.max_tokens, level, options.thinking_budgets
    )
    if max_tokens > 0:  # fitted into the context window again, the budget under it
        max_tokens = clamp_max_tokens_to_context(model, context, max_tokens)
        budget = min(budget, max(0, max_tokens - 1024))
    extra = AnthropicOptions(thinking_enabled=True, thinking_budget_tokens=budget)
    return stream_anthropic(model, context, evolve(base, max_tokens=max_tokens), extra)


__all__ = [
    "ANTHROPIC_VERSION",
    "REDACTED_THINKING_PLACEHOLDER",
    "AnthropicOptions",
    "AnthropicParser",
    "build_headers",
    "build_params",
    "cache_control",
    "convert_messages",
    "convert_tools",
    "is_oauth_token",
    "map_stop_reason",
    "messages_url",
    "normalize_tool_call_id",
    "sdk_error",
    "stream_anthropic",
    "stream_simple_anthropic",
    "supports_adaptive_thinking",
    "thinking_effort",
]
