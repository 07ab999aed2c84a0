"""Pi's `google-generative-ai` provider: Gemini's `streamGenerateContent` over SSE.

Follows pi-ai 0.73.1 (google.js, google-shared.js): thought parts become thinking blocks,
`thoughtSignature`s ride on text, thinking and function-call parts, whole function calls arrive
in one part (ids generated when missing), and thinking is set by level (Gemini 3, Gemma 4) or
by token budget (Gemini 2.5). Google's SDK does not retry, so neither does this provider.
"""

from __future__ import annotations

import itertools
import re
from functools import partial
from typing import Any, Final, TypeAlias, final

from attrs import frozen

from mule.pi._content import ImageContent, TextContent, ThinkingContent
from mule.pi._context import Context, StreamOptions, ThinkingBudgets, Tool
from mule.pi._event_stream import AssistantMessageEventStream
from mule.pi._json import JsonObject, loads, stringify
from mule.pi._messages import AssistantMessage, StopReason, ToolResultMessage
from mule.pi._model import Model
from mule.pi._transcript import TranscriptContext, collapse_context
from mule.pi.providers._env import env_api_key
from mule.pi.providers._parser import (
    ProviderError,
    StreamParser,
    as_object,
    now_ms,
    priced_usage,
    read_stop_reason,
    str_or_none,
    token_count,
)
from mule.pi.providers._simple import clamp_thinking_level, simple_options
from mule.pi.providers._transform import sanitize_surrogates, transform_messages
from mule.pi.providers._transport import HttpRequest, merge_headers, provider_stream

_Obj: TypeAlias = dict[str, Any]  # a request body under construction

_ERROR_FINISH: Final = frozenset(
    {
        "BLOCKLIST",
        "PROHIBITED_CONTENT",
        "SPII",
        "SAFETY",
        "IMAGE_SAFETY",
        "IMAGE_PROHIBITED_CONTENT",
        "IMAGE_RECITATION",
        "IMAGE_OTHER",
        "RECITATION",
        "FINISH_REASON_UNSPECIFIED",
        "OTHER",
        "LANGUAGE",
        "MALFORMED_FUNCTION_CALL",
        "UNEXPECTED_TOOL_CALL",
        "TOO_MANY_TOOL_CALLS",
        "NO_IMAGE",
    }
)
_BASE64 = re.compile(r"[A-Za-z0-9+/]+={0,2}")
_UNSAFE_ID = re.compile(r"[^a-zA-Z0-9_-]")
_GEMINI_MAJOR = re.compile(r"gemini(?:-live)?-(\d+)")
_call_counter = itertools.count(1)


@final
@frozen(kw_only=True)
class GoogleThinking:
    """Thinking for one call: off, a Gemini 3 level ("MINIMAL".."HIGH"), or a token budget."""

    enabled: bool
    budget_tokens: int | None = None
    level: str | None = None


@final
@frozen(kw_only=True)
class GoogleOptions:
    """Google-specific knobs beyond `StreamOptions` (Pi's `GoogleOptions`)."""

    thinking: GoogleThinking | None = None
    tool_choice: str | None = None


# -- small rules ---------------------------------------------------------------------------


_FINISH_REASONS: Final[dict[str, StopReason]] = {
    "STOP": "stop",
    "MAX_TOKENS": "length",
    "CONTINUATION": "length",  # the request's token limit; Pi does not resume it
    **dict.fromkeys(_ERROR_FINISH, "error"),
}


def map_finish_reason(reason: str) -> StopReason:
    """Map Gemini's finishReason onto Pi's stop reason; an unknown one is a failure."""
    return read_stop_reason(_FINISH_REASONS, reason)


def requires_tool_call_id(model_id: str) -> bool:
    """Return whether the model (Claude or gpt-oss behind Google) needs explicit call ids."""
    return model_id.startswith(("claude-", "gpt-oss-"))


def _valid_signature(signature: str | None) -> bool:
    return (
        bool(signature)
        and len(signature or "") % 4 == 0
        and bool(_BASE64.fullmatch(signature or ""))
    )


def _multimodal_function_response(model_id: str) -> bool:
    match = _GEMINI_MAJOR.match(model_id.lower())
    return match is None or int(match[1]) >= 3


def is_gemini3_pro(model: Model) -> bool:
    """Return whether the model is a Gemini 3 Pro (thinking set by level; cannot turn it off)."""
    return re.search(r"gemini-3(?:\.\d+)?-pro", model.id.lower()) is not None


def is_gemini3_flash(model: Model) -> bool:
    """Return whether the model is a Gemini 3 Flash (thinking set by level)."""
    return re.search(r"gemini-3(?:\.\d+)?-flash", model.id.lower()) is not None


def is_gemma4(model: Model) -> bool:
    """Return whether the model is a Gemma 4 (thinking set by level)."""
    return re.search(r"gemma-?4", model.id.lower()) is not None


def disabled_thinking_config(model: Model) -> _Obj:
    """Return the config that turns thinking off, or as low as the model allows."""
    if is_gemini3_pro(model):
        return {"thinkingLevel": "LOW"}
    if is_gemini3_flash(model) or is_gemma4(model):
        return {"thinkingLevel": "MINIMAL"}
    return {"thinkingBudget": 0}


def thinking_level(effort: str, model: Model) -> str | None:
    """Map a Pi level to Gemini's thinkingLevel for level-based models."""
    if is_gemini3_pro(model):
        return {"minimal": "LOW", "low": "LOW", "medium": "HIGH", "high": "HIGH"}.get(effort)
    if is_gemma4(model):
        return {"minimal": "MINIMAL", "low": "MINIMAL", "medium": "HIGH", "high": "HIGH"}.get(
            effort
        )
    return {"minimal": "MINIMAL", "low": "LOW", "medium": "MEDIUM", "high": "HIGH"}.get(effort)


def thinking_budget(model: Model, effort: str, budgets: ThinkingBudgets | None) -> int | None:
    """Return the token budget for budget-based models (-1 = dynamic for unknown models)."""
    custom = getattr(budgets, effort, None) if budgets is not None else None
    if custom is not None:
        return int(custom)
    if "2.5-pro" in model.id:
        table = {"minimal": 128, "low": 2048, "medium": 8192, "high": 32768}
    elif "2.5-flash-lite" in model.id:
        table = {"minimal": 512, "low": 2048, "medium": 8192, "high": 24576}
    elif "2.5-flash" in model.id:
        table = {"minimal": 128, "low": 2048, "medium": 8192, "high": 24576}
    else:
        return -1
    return table.get(effort)


# -- request ---------------------------------------------------------------------------------


def convert_messages(model: Model, context: Context) -> list[_Obj]:
    """Convert a transcript to Gemini contents, as Pi does."""

    def normalize(call_id: str, *_: object) -> str:
        if not requires_tool_call_id(model.id):
            return call_id
        return _UNSAFE_ID.sub("_", call_id)[:64]

    contents: list[_Obj] = []
    for msg in transform_messages(context.messages, model, normalize):
        if isinstance(msg, AssistantMessage):
            parts = _model_parts(msg, model)
            if parts:
                contents.append({"role": "model", "parts": parts})
        elif isinstance(msg, ToolResultMessage):
            _append_tool_result(contents, msg, model)
        elif isinstance(msg.content, str):
            contents.append({"role": "user", "parts": [{"text": sanitize_surrogates(msg.content)}]})
        else:
            user_parts = [
                {"text": sanitize_surrogates(item.text)}
                if isinstance(item, TextContent)
                else {"inlineData": {"mimeType": item.mime_type, "data": item.data}}
                for item in msg.content
            ]
            if user_parts:
                contents.append({"role": "user", "parts": user_parts})
    return contents


def _model_parts(msg: AssistantMessage, model: Model) -> list[_Obj]:
    same = msg.provider == model.provider and msg.model == model.id

    def signature(value: str | None) -> str | None:
        return value if same and _valid_signature(value) else None

    parts: list[_Obj] = []
    for block in msg.content:
        if isinstance(block, TextContent):
            if not block.text.strip():
                continue
            part: _Obj = {"text": sanitize_surrogates(block.text)}
            if sig := signature(block.text_signature):
                part["thoughtSignature"] = sig
            parts.append(part)
        elif isinstance(block, ThinkingContent):
            if not block.thinking.strip():
                continue
            if same:
                part = {"thought": True, "text": sanitize_surrogates(block.thinking)}
                if sig := signature(block.thinking_signature):
                    part["thoughtSignature"] = sig
            else:
                part = {"text": sanitize_surrogates(block.thinking)}
            parts.append(part)
        else:
            call: _Obj = {"name": block.name, "args": block.arguments}
            if requires_tool_call_id(model.id):
                call["id"] = block.id
            part = {"functionCall": call}
            if sig := signature(block.thought_signature):
                part["thoughtSignature"] = sig
            parts.append(part)
    return parts


def _append_tool_result(contents: list[_Obj], msg: ToolResultMessage, model: Model) -> None:
    text = "\n".join(c.text for c in msg.content if isinstance(c, TextContent))
    images = (
        [c for c in msg.content if isinstance(c, ImageContent)] if "image" in model.input else []
    )
    value = sanitize_surrogates(text) if text else ("(see attached image)" if images else "")
    image_parts = [{"inlineData": {"mimeType": i.mime_type, "data": i.data}} for i in images]
    nested = _multimodal_function_response(model.id)
    response: _Obj = {
        "name": msg.tool_name,
        "response": {"error": value} if msg.is_error else {"output": value},
    }
    if images and nested:
        response["parts"] = image_parts
    if requires_tool_call_id(model.id):
        response["id"] = msg.tool_call_id
    part = {"functionResponse": response}
    last = contents[-1] if contents else None
    # All function responses of a turn go in one user turn.
    if (
        last is not None
        and last["role"] == "user"
        and any("functionResponse" in p for p in last["parts"])
    ):
        last["parts"].append(part)
    else:
        contents.append({"role": "user", "parts": [part]})
    if images and not nested:
        contents.append({"role": "user", "parts": [{"text": "Tool result image:"}, *image_parts]})


def convert_tools(tools: tuple[Tool, ...]) -> list[_Obj]:
    """Declare tools with their full JSON Schema (`parametersJsonSchema`)."""
    return [
        {
            "functionDeclarations": [
                {"name": t.name, "description": t.description, "parametersJsonSchema": t.parameters}
                for t in tools
            ]
        }
    ]


def build_body(
    model: Model, context: Context, options: StreamOptions, extra: GoogleOptions
) -> _Obj:
    """Build the `generateContent` request body Pi's SDK call sends."""
    body: _Obj = {"contents": convert_messages(model, context)}
    if context.system_prompt:
        body["systemInstruction"] = {
            "role": "user",
            "parts": [{"text": sanitize_surrogates(context.system_prompt)}],
        }
    if context.tools:
        body["tools"] = convert_tools(context.tools)
        if extra.tool_choice:
            mode = {"auto": "AUTO", "none": "NONE", "any": "ANY"}.get(extra.tool_choice, "AUTO")
            body["toolConfig"] = {"functionCallingConfig": {"mode": mode}}
    config: _Obj = {}
    if options.temperature is not None:
        config["temperature"] = options.temperature
    if options.max_tokens is not None:
        config["maxOutputTokens"] = options.max_tokens
    thinking = extra.thinking
    if thinking is not None and thinking.enabled and model.reasoning:
        thinking_config: _Obj = {"includeThoughts": True}
        if thinking.level is not None:
            thinking_config["thinkingLevel"] = thinking.level
        elif thinking.budget_tokens is not None:
            thinking_config["thinkingBudget"] = thinking.budget_tokens
        config["thinkingConfig"] = thinking_config
    elif model.reasoning and thinking is not None and not thinking.enabled:
        config["thinkingConfig"] = disabled_thinking_config(model)
    if config:
        body["generationConfig"] = config
    return body


def stream_url(model: Model) -> str:
    """Return the SSE streaming endpoint for the model under its base URL."""
    name = model.id if model.id.startswith(("models/", "tunedModels/")) else f"models/{model.id}"
    return f"{model.base_url.rstrip('/')}/{name}:streamGenerateContent?alt=sse"


# -- response --------------------------------------------------------------------------------


def sdk_error(exc: ProviderError) -> ProviderError:
    """Word an HTTP error as Google's SDK does: the JSON error body, serialised."""
    if exc.error_body is None or not exc.diagnostics:
        return exc
    return ProviderError(stringify({"error": exc.error_body}), exc.diagnostics, exc.error_body)


@final
class GoogleParser(StreamParser):
    """Turns streamed `GenerateContentResponse` chunks into Pi events.

    Text and thought parts extend the open block while its kind holds; a function call arrives
    whole, so it opens, streams its arguments as one delta and closes at once.
    """

    __slots__ = ("_call_ids", "_current", "_response_id")
    vendor = "Google"
    no_stop_reason = "Google stream ended without a finish reason"

    def __init__(self, model: Model) -> None:
        super().__init__(model)
        self._current: int | None = None  # the open text or thinking block
        self._response_id: str | None = None
        self._call_ids: set[str] = set()

    def _close_current(self) -> None:
        if self._current is not None:
            at, self._current = self._current, None
            self._end(at)

    def _on_event(self, event: str, data: str) -> None:
        if not data.strip():
            return
        try:
            chunk = loads(data)
        except ValueError as exc:
            raise ProviderError(f"exception parsing stream chunk {data}. {exc}") from exc
        if not isinstance(chunk, dict):
            raise ProviderError(f"exception parsing stream chunk {data}. not an object")
        error = chunk.get("error")
        if isinstance(error, dict):
            raise ProviderError(f"got status: {error.get('status')}. {stringify(chunk)}")
        b = self._b
        response_id = chunk.get("responseId")
        if self._response_id is None and isinstance(response_id, str) and response_id:
            self._response_id = response_id
            b.set_response(response_id=response_id)
        candidates = chunk.get("candidates")
        candidate = as_object(candidates[0]) if isinstance(candidates, list) and candidates else {}
        parts = as_object(candidate.get("content")).get("parts")
        for part in parts if isinstance(parts, list) else ():
            self._part(as_object(part))
        finish = candidate.get("finishReason")
        if finish:
            raw = finish if isinstance(finish, str) else stringify(finish)
            b.set_stop(b.head.stop_reason, raw)  # kept when it maps to nothing
            stop = map_finish_reason(raw)
            if stop == "stop" and self._has_tool_calls():
                stop = "toolUse"
            b.set_stop(stop)
        meta = chunk.get("usageMetadata")
        if isinstance(meta, dict):
            cached = token_count(meta.get("cachedContentTokenCount")) or 0
            thoughts = token_count(meta.get("thoughtsTokenCount")) or 0
            usage = priced_usage(
                self._model,
                (token_count(meta.get("promptTokenCount")) or 0) - cached,
                (token_count(meta.get("candidatesTokenCount")) or 0) + thoughts,
                cached,
                0,
                token_count(meta.get("totalTokenCount")) or 0,
                reasoning=thoughts,
            )
            b.set_usage(usage)

    def _part(self, part: JsonObject) -> None:
        incoming = str_or_none(part.get("thoughtSignature")) or None
        text = part.get("text")
        if isinstance(text, str):
            thinking = part.get("thought") is True
            kind = "thinking" if thinking else "text"
            current = self._current
            if current is None or self._b.kind(current) != kind:
                self._close_current()
                current = self._current = self._open_thinking() if thinking else self._open_text()
            # Later deltas may omit the signature; keep the last one seen for this block.
            if incoming:
                self._b.set_signature(current, incoming)
            self._delta(current, text)
        call = part.get("functionCall")
        if isinstance(call, dict):
            self._close_current()
            name = str_or_none(call.get("name")) or ""
            given = call.get("id")
            call_id = (
                given
                if isinstance(given, str) and given and given not in self._call_ids
                else f"{name}_{now_ms()}_{next(_call_counter)}"
            )
            self._call_ids.add(call_id)
            args = call.get("args") if isinstance(call.get("args"), dict) else {}
            at = self._open_tool_call(call_id, name, incoming, arguments=stringify(args))
            self._delta(at, self._b.text(at), append=False)
            self._end(at, args)

    def _on_end(self) -> None:
        self._close_current()
        raw = self._b.head.raw_stop_reason
        self._done(None, f"Provider stopped with: {raw}" if raw else None)


def _request(
    model: Model, context: Context, options: StreamOptions, extra: GoogleOptions
) -> HttpRequest:
    api_key = options.api_key or env_api_key(model.provider) or ""
    body = build_body(model, context, options, extra)
    headers = merge_headers({"x-goog-api-key": api_key}, model.headers, options.headers)
    return HttpRequest(stream_url(model), headers, body)


def stream_google(
    model: Model,
    context: Context | TranscriptContext,
    options: StreamOptions | None = None,
    extra: GoogleOptions | None = None,
) -> AssistantMessageEventStream:
    """Stream one Gemini response as Pi's events (Pi's `streamGoogle`).

    The key is `options.api_key`, else GEMINI_API_KEY. Every failure after this returns, HTTP
    errors included, ends the stream with an `error` event. Retries follow the shared policy
    (`max_retries`, none by default), as Pi 1.6.0 wraps Google's SDK.
    """
    context = collapse_context(context)
    opts = options or StreamOptions()
    request = partial(_request, model, context, opts, extra or GoogleOptions())
    return provider_stream(model, opts, GoogleParser(model), request, on_http_error=sdk_error)


def stream_simple_google(
    model: Model, context: Context | TranscriptContext, options: StreamOptions
) -> AssistantMessageEventStream:
    """Pi's `streamSimpleGoogle`: simple defaults, then thinking by level or by budget.

    Raises `ProviderSetupError` at once when there is no API key.
    """
    base = simple_options(model, options, context)
    if not options.reasoning:
        return stream_google(
            model, context, base, GoogleOptions(thinking=GoogleThinking(enabled=False))
        )
    clamped = clamp_thinking_level(model, options.reasoning)
    effort = "high" if clamped == "off" else clamped
    if is_gemini3_pro(model) or is_gemini3_flash(model) or is_gemma4(model):
        thinking = GoogleThinking(enabled=True, level=thinking_level(effort, model))
    else:
        budget = thinking_budget(model, effort, options.thinking_budgets)
        thinking = GoogleThinking(enabled=True, budget_tokens=budget)
    return stream_google(model, context, base, GoogleOptions(thinking=thinking))


__all__ = [
    "GoogleOptions",
    "GoogleParser",
    "GoogleThinking",
    "build_body",
    "convert_messages",
    "convert_tools",
    "disabled_thinking_config",
    "map_finish_reason",
    "requires_tool_call_id",
    "sdk_error",
    "stream_google",
    "stream_simple_google",
    "stream_url",
    "thinking_budget",
    "thinking_level",
]
