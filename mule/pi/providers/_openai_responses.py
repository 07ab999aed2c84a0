"""The `openai-responses` provider: OpenAI's Responses API, streamed.

Follows pi-ai's provider and its shared Responses code: reasoning items become thinking blocks
(summary text streamed; the whole item, encrypted content included, kept as the signature for
replay), message items become text blocks signed `{"v":1,"id":...}`, function calls become tool
calls with ids `"<call_id>|<item id>"`; `response.completed` carries usage and the status.

Mule differs from Pi in two places: a stream that ends before a terminal response event is a
failure ("Stream ended before a terminal response event"), and `response.incomplete` is read like
`response.completed` (its status maps to "length").
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator, Mapping
from functools import partial
from typing import Any, final

from mule.pi._content import ImageContent, TextContent, ThinkingContent
from mule.pi._context import Context, StreamOptions, Tool
from mule.pi._events import (
    AssistantMessageEvent,
    DoneEvent,
    StartEvent,
    TextDeltaEvent,
    TextEndEvent,
    TextStartEvent,
    ThinkingDeltaEvent,
    ThinkingEndEvent,
    ThinkingStartEvent,
    ToolCallDeltaEvent,
    ToolCallEndEvent,
    ToolCallStartEvent,
)
from mule.pi._json import JsonValue
from mule.pi._messages import AssistantMessage, StopReason, Usage
from mule.pi._model import Model, ThinkingLevel
from mule.pi._partial import PartialBuilder
from mule.pi._partial_json import parse_streaming_json
from mule.pi._stream import AssistantMessageEventStream
from mule.pi.providers._env import env_api_key
from mule.pi.providers._http import (
    ProviderError,
    SseConnection,
    StreamAborted,
    apply_payload_hook,
    merge_headers,
    notify_response,
    parse_json_event,
    provider_stream,
)
from mule.pi.providers._openai_completions import resolve_cache_retention
from mule.pi.providers._simple import (
    build_base_options,
    reasoning_effort,
    resolve_api_key,
    with_cost,
)
from mule.pi.providers._transform import sanitize_surrogates, short_hash, transform_messages

# Providers whose Responses tool-call ids ("<call_id>|<item id>") can be replayed as they are.
OPENAI_TOOL_CALL_PROVIDERS = frozenset({"openai", "openai-codex", "opencode"})


def _js_json(value: JsonValue) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def encode_text_signature(item_id: str, phase: str | None = None) -> str:
    """Return Pi's v1 text signature for a message item.

    >>> encode_text_signature("msg_1", "final_answer")
    '{"v":1,"id":"msg_1","phase":"final_answer"}'
    """
    payload: dict[str, JsonValue] = {"v": 1, "id": item_id}
    if phase:
        payload["phase"] = phase
    return _js_json(payload)


def parse_text_signature(signature: str | None) -> tuple[str, str | None] | None:
    """Return (item id, phase) from a v1 signature or a legacy plain id."""
    if not signature:
        return None
    if signature.startswith("{"):
        try:
            parsed = json.loads(signature)
        except ValueError:
            parsed = None
        if isinstance(parsed, dict) and parsed.get("v") == 1 and isinstance(parsed.get("id"), str):
            phase = parsed.get("phase")
            return parsed["id"], phase if phase in ("commentary", "final_answer") else None
    return signature, None


# -- request ---------------------------------------------------------------------------------


def _id_part(part: str) -> str:
    cleaned = "".join(ch if ch.isascii() and (ch.isalnum() or ch in "_-") else "_" for ch in part)
    return cleaned[:64].rstrip("_")


def convert_responses_messages(
    model: Model,
    context: Context,
    allowed_tool_call_providers: frozenset[str] = OPENAI_TOOL_CALL_PROVIDERS,
    *,
    include_system_prompt: bool = True,
) -> list[dict[str, Any]]:
    """Convert a context to Responses `input` items exactly as Pi does."""

    def normalize(call_id: str, _target: Model, source: AssistantMessage) -> str:
        if model.provider not in allowed_tool_call_providers or "|" not in call_id:
            return _id_part(call_id)
        head, item = call_id.split("|", 2)[:2]
        foreign = source.provider != model.provider or source.api != model.api
        item_id = f"fc_{short_hash(item)}"[:64] if foreign else _id_part(item)
        if not item_id.startswith("fc_"):
            item_id = _id_part(f"fc_{item_id}")  # the API wants function-call items to say "fc"
        return f"{_id_part(head)}|{item_id}"

    messages = transform_messages(context.messages, model, normalize)
    out: list[dict[str, Any]] = []
    if include_system_prompt and context.system_prompt:
        role = "developer" if model.reasoning else "system"
        out.append({"role": role, "content": sanitize_surrogates(context.system_prompt)})
    msg_index = 0
    for msg in messages:
        if msg.role == "user":
            if isinstance(msg.content, str):
                parts: list[dict[str, Any]] = [
                    {"type": "input_text", "text": sanitize_surrogates(msg.content)}
                ]
            else:
                parts = [
                    {"type": "input_text", "text": sanitize_surrogates(b.text)}
                    if isinstance(b, TextContent)
                    else _input_image(b)
                    for b in msg.content
                ]
                if not parts:
                    continue
            out.append({"role": "user", "content": parts})
        elif msg.role == "assistant":
            items = _assistant_items(model, msg, msg_index)
            if not items:
                continue
            out.extend(items)
        else:
            text = "\n".join(b.text for b in msg.content if isinstance(b, TextContent))
            images = [b for b in msg.content if isinstance(b, ImageContent)]
            output: Any
            if images and "image" in model.input:
                output = []
                if text:
                    output.append({"type": "input_text", "text": sanitize_surrogates(text)})
                output.extend(_input_image(b) for b in images)
            else:
                output = sanitize_surrogates(text if text else "(see attached image)")
            out.append(
                {
                    "type": "function_call_output",
                    "call_id": msg.tool_call_id.split("|", 1)[0],
                    "output": output,
                }
            )
        msg_index += 1
    return out


def _input_image(block: ImageContent) -> dict[str, Any]:
    return {
        "type": "input_image",
        "detail": "auto",
        "image_url": f"data:{block.mime_type};base64,{block.data}",
    }


def _assistant_items(model: Model, msg: AssistantMessage, msg_index: int) -> list[dict[str, Any]]:
    # Same provider and api but another model: OpenAI pairs fc_ items with their reasoning
    # items, so such ids are left out.
    other_model = msg.model != model.id and msg.provider == model.provider and msg.api == model.api
    items: list[dict[str, Any]] = []
    for block in msg.content:
        if isinstance(block, ThinkingContent):
            if block.thinking_signature:
                items.append(json.loads(block.thinking_signature))
        elif isinstance(block, TextContent):
            parsed = parse_text_signature(block.text_signature)
            item_id = parsed[0] if parsed else None
            if not item_id:
                item_id = f"msg_{msg_index}"
            elif len(item_id) > 64:
                item_id = f"msg_{short_hash(item_id)}"
            item: dict[str, Any] = {
                "type": "message",
                "role": "assistant",
                "content": [
                    {
                        "type": "output_text",
                        "text": sanitize_surrogates(block.text),
                        "annotations": [],
                    }
                ],
                "status": "completed",
                "id": item_id,
            }
            if parsed and parsed[1]:
                item["phase"] = parsed[1]
            items.append(item)
        else:
            call_id, _, fc_id = block.id.partition("|")
            call: dict[str, Any] = {"type": "function_call"}
            if fc_id and not (other_model and fc_id.startswith("fc_")):
                call["id"] = fc_id.split("|", 1)[0]
            call.update(
                {"call_id": call_id, "name": block.name, "arguments": _js_json(block.arguments)}
            )
            items.append(call)
    return items


def convert_responses_tools(tools: tuple[Tool, ...], strict: bool = False) -> list[dict[str, Any]]:
    """Convert tools to Responses function tools."""
    return [
        {
            "type": "function",
            "name": t.name,
            "description": t.description,
            "parameters": t.parameters,
            "strict": strict,
        }
        for t in tools
    ]


def _compat_flag(model: Model, key: str) -> bool:
    value = (model.compat or {}).get(key)
    return value if isinstance(value, bool) else True


def build_params(
    model: Model,
    context: Context,
    options: StreamOptions,
    *,
    effort: ThinkingLevel | None = None,
    reasoning_summary: str | None = None,
) -> dict[str, Any]:
    """Build the request body Pi sends (keys Pi leaves undefined are omitted)."""
    retention = resolve_cache_retention(options.cache_retention)
    params: dict[str, Any] = {
        "model": model.id,
        "input": convert_responses_messages(model, context),
        "stream": True,
    }
    if retention != "none" and options.session_id is not None:
        params["prompt_cache_key"] = options.session_id
    if retention == "long" and _compat_flag(model, "supportsLongCacheRetention"):
        params["prompt_cache_retention"] = "24h"
    params["store"] = False
    if options.max_tokens:
        params["max_output_tokens"] = options.max_tokens
    if options.temperature is not None:
        params["temperature"] = options.temperature
    if context.tools:
        params["tools"] = convert_responses_tools(context.tools)
    if model.reasoning:
        table = model.thinking_level_map or {}
        if effort or reasoning_summary:
            level = (table.get(effort) or effort) if effort else "medium"
            params["reasoning"] = {"effort": level, "summary": reasoning_summary or "auto"}
            params["include"] = ["reasoning.encrypted_content"]
        elif model.provider != "github-copilot" and not ("off" in table and table["off"] is None):
            params["reasoning"] = {"effort": table.get("off") or "none"}
    return params


def build_headers(model: Model, options: StreamOptions, api_key: str) -> dict[str, str]:
    """Return the request headers: model headers, session ids, then `options.headers`."""
    retention = resolve_cache_retention(options.cache_retention)
    session = None if retention == "none" else options.session_id
    ids: dict[str, str] = {}
    if session:
        if _compat_flag(model, "sendSessionIdHeader"):
            ids["session_id"] = session
        ids["x-client-request-id"] = session
    auth = {"Authorization": f"Bearer {api_key}"}
    if model.provider == "cloudflare-ai-gateway":
        auth = {"cf-aig-authorization": f"Bearer {api_key}"}
    return merge_headers(auth, model.headers, ids, options.headers)


# -- response --------------------------------------------------------------------------------


def map_status(status: object) -> StopReason:
    """Map a response status to Pi's stop reason."""
    if not status or status in ("completed", "in_progress", "queued"):
        return "stop"
    if status == "incomplete":
        return "length"
    if status in ("failed", "cancelled"):
        return "error"
    raise ProviderError(f"Unhandled stop reason: {status}")


def _str(value: object) -> str:
    return value if isinstance(value, str) else ""


@final
class ResponsesParser:
    """Turns Responses API events into Pi events, building the message as it goes."""

    def __init__(self, builder: PartialBuilder, model: Model) -> None:
        self.b = builder
        self.model = model
        self.item: dict[str, Any] | None = None  # the output item being streamed
        self.block: int | None = None  # its content index
        self.stop_reason: StopReason = "stop"
        self.finished = False

    def feed(self, event: Mapping[str, Any]) -> Iterator[AssistantMessageEvent]:
        """Apply one event; yield the Pi events it causes."""
        b = self.b
        kind = event.get("type")
        item = self.item
        block = self.block
        block_kind = b.kind(block) if block is not None else None
        if kind == "response.created":
            response = event.get("response") or {}
            if response.get("id"):
                b.set_response(response_id=str(response["id"]))
        elif kind == "response.output_item.added":
            new = dict(event.get("item") or {})
            if new.get("type") == "reasoning":
                self.item, self.block = new, b.open_thinking()
                yield ThinkingStartEvent(content_index=self.block, partial=b.snapshot())
            elif new.get("type") == "message":
                self.item, self.block = new, b.open_text()
                yield TextStartEvent(content_index=self.block, partial=b.snapshot())
            elif new.get("type") == "function_call":
                self.item = new
                self.block = b.open_tool_call(
                    f"{new.get('call_id')}|{new.get('id')}", _str(new.get("name"))
                )
                if new.get("arguments"):
                    b.append(self.block, str(new["arguments"]))
                yield ToolCallStartEvent(content_index=self.block, partial=b.snapshot())
        elif kind == "response.reasoning_summary_part.added":
            if item is not None and item.get("type") == "reasoning":
                item.setdefault("summary", [])
                item["summary"] = [*item["summary"], dict(event.get("part") or {})]
        elif kind in (
            "response.reasoning_summary_text.delta",
            "response.reasoning_summary_part.done",
        ):
            if item is not None and item.get("type") == "reasoning" and block_kind == "thinking":
                assert block is not None
                summary = item.setdefault("summary", [])
                if summary:
                    delta = _str(event.get("delta")) if kind.endswith(".delta") else "\n\n"
                    summary[-1] = {**summary[-1], "text": _str(summary[-1].get("text")) + delta}
                    b.append(block, delta)
                    yield ThinkingDeltaEvent(content_index=block, delta=delta, partial=b.snapshot())
        elif kind == "response.reasoning_text.delta":
            if item is not None and item.get("type") == "reasoning" and block_kind == "thinking":
                assert block is not None
                delta = _str(event.get("delta"))
                b.append(block, delta)
                yield ThinkingDeltaEvent(content_index=block, delta=delta, partial=b.snapshot())
        elif kind == "response.content_part.added":
            if item is not None and item.get("type") == "message":
                part = event.get("part") or {}
                if part.get("type") in ("output_text", "refusal"):  # not reasoning text
                    item["content"] = [*(item.get("content") or []), dict(part)]
        elif kind in ("response.output_text.delta", "response.refusal.delta"):
            if item is not None and item.get("type") == "message" and block_kind == "text":
                assert block is not None
                parts = item.get("content") or []
                want = "output_text" if kind == "response.output_text.delta" else "refusal"
                if parts and parts[-1].get("type") == want:
                    delta = _str(event.get("delta"))
                    b.append(block, delta)
                    yield TextDeltaEvent(content_index=block, delta=delta, partial=b.snapshot())
        elif kind == "response.function_call_arguments.delta":
            if (
                item is not None
                and item.get("type") == "function_call"
                and block_kind == "toolCall"
            ):
                assert block is not None
                delta = _str(event.get("delta"))
                b.append(block, delta)
                yield ToolCallDeltaEvent(content_index=block, delta=delta, partial=b.snapshot())
        elif kind == "response.function_call_arguments.done":
            if (
                item is not None
                and item.get("type") == "function_call"
                and block_kind == "toolCall"
            ):
                assert block is not None
                previous = b.text(block)
                final = _str(event.get("arguments"))
                b.replace_text(block, final)
                if final.startswith(previous) and len(final) > len(previous):
                    delta = final[len(previous) :]
                    yield ToolCallDeltaEvent(content_index=block, delta=delta, partial=b.snapshot())
        elif kind == "response.output_item.done":
            yield from self._item_done(dict(event.get("item") or {}))
        elif kind in ("response.completed", "response.incomplete"):
            self._completed(event.get("response") or {})
        elif kind == "error":
            raise ProviderError(f"Error Code {event.get('code')}: {event.get('message')}")
        elif kind == "response.failed":
            response = event.get("response") or {}
            error = response.get("error")
            details = response.get("incomplete_details") or {}
            if error:
                text = f"{error.get('code') or 'unknown'}: {error.get('message') or 'no message'}"
            elif details.get("reason"):
                text = f"incomplete: {details['reason']}"
            else:
                text = "Unknown error (no error details in response)"
            raise ProviderError(text)

    def _item_done(self, item: dict[str, Any]) -> Iterator[AssistantMessageEvent]:
        b = self.b
        block = self.block
        block_kind = b.kind(block) if block is not None else None
        if item.get("type") == "reasoning" and block_kind == "thinking":
            assert block is not None
            summary = "\n\n".join(_str(s.get("text")) for s in item.get("summary") or [])
            content = "\n\n".join(_str(c.get("text")) for c in item.get("content") or [])
            thinking = summary or content or b.text(block)
            b.replace_text(block, thinking)
            b.set_signature(block, _js_json(item))  # the whole item, replayed verbatim
            self.item = self.block = None
            yield ThinkingEndEvent(content_index=block, content=thinking, partial=b.snapshot())
        elif item.get("type") == "message" and block_kind == "text":
            assert block is not None
            text = "".join(
                _str(c.get("text")) if c.get("type") == "output_text" else _str(c.get("refusal"))
                for c in item.get("content") or []
            )
            b.replace_text(block, text)
            b.set_signature(block, encode_text_signature(_str(item.get("id")), item.get("phase")))
            self.item = self.block = None
            yield TextEndEvent(content_index=block, content=text, partial=b.snapshot())
        elif item.get("type") == "function_call":
            if block is None or block_kind != "toolCall":
                # A call that never streamed (Pi reports it without a block; mule adds one).
                block = b.open_tool_call(
                    f"{item.get('call_id')}|{item.get('id')}", _str(item.get("name"))
                )
                yield ToolCallStartEvent(content_index=block, partial=b.snapshot())
                args = parse_streaming_json(_str(item.get("arguments")) or "{}")
            else:
                raw = b.text(block)
                args = parse_streaming_json(raw if raw else _str(item.get("arguments")) or "{}")
            call = b.close_tool_call(block, args)
            self.item = self.block = None
            yield ToolCallEndEvent(content_index=block, tool_call=call, partial=b.snapshot())

    def _completed(self, response: Mapping[str, Any]) -> None:
        b = self.b
        self.finished = True
        if response.get("id"):
            b.set_response(response_id=str(response["id"]))
        usage = response.get("usage")
        current = b.head.usage
        if isinstance(usage, Mapping):
            cached = int((usage.get("input_tokens_details") or {}).get("cached_tokens") or 0)
            current = Usage(
                input=int(usage.get("input_tokens") or 0) - cached,  # input includes cache hits
                output=int(usage.get("output_tokens") or 0),
                cache_read=cached,
                cache_write=0,
                total_tokens=int(usage.get("total_tokens") or 0),
            )
        b.set_usage(with_cost(self.model, current))
        self.stop_reason = map_status(response.get("status"))
        has_calls = any(b.kind(i) == "toolCall" for i in range(len(b)))
        if has_calls and self.stop_reason == "stop":
            self.stop_reason = "toolUse"

    def finish(self) -> Iterator[AssistantMessageEvent]:
        """Yield `done`; raise for a stream that failed or never completed."""
        if not self.finished:
            raise ProviderError("Stream ended before a terminal response event")
        if self.stop_reason in ("error", "aborted"):
            raise ProviderError("An unknown error occurred")
        reason = self.stop_reason
        assert reason in ("stop", "length", "toolUse")
        yield DoneEvent(reason=reason, message=self.b.message(reason))


async def _produce(
    model: Model,
    context: Context,
    options: StreamOptions,
    effort: ThinkingLevel | None,
    conn: SseConnection,
    b: PartialBuilder,
) -> AsyncIterator[AssistantMessageEvent]:
    api_key = options.api_key or env_api_key(model.provider) or ""
    if not api_key:
        raise ProviderError(
            "OpenAI API key is required. Set OPENAI_API_KEY environment variable "
            "or pass it as an argument."
        )
    payload = await apply_payload_hook(
        options, build_params(model, context, options, effort=effort), model
    )
    url = model.base_url.rstrip("/") + "/responses"
    response = await conn.open(url, build_headers(model, options, api_key), payload)
    await notify_response(options, response, model)
    yield StartEvent(partial=b.snapshot())
    parser = ResponsesParser(b, model)
    while (event := await conn.next_event()) is not None:
        if event.data.startswith("[DONE]"):
            break
        chunk = parse_json_event(event)
        error = chunk.get("error")
        if error and chunk.get("type") is None:
            # The SDK turns a bare {"error": ...} chunk into an APIError with its message.
            text = error.get("message") if isinstance(error, Mapping) else None
            raise ProviderError(text if isinstance(text, str) and text else _js_json(error))
        for ev in parser.feed(chunk):
            yield ev
    signal = options.signal
    if signal is not None and signal.aborted:
        raise StreamAborted
    for ev in parser.finish():
        yield ev


def stream_openai_responses(
    model: Model,
    context: Context,
    options: StreamOptions | None = None,
    *,
    effort: ThinkingLevel | None = None,
) -> AssistantMessageEventStream:
    """Stream a Responses API response (Pi's `streamOpenAIResponses`); never raises."""
    opts = options or StreamOptions()
    return provider_stream(model, opts, partial(_produce, model, context, opts, effort))


def stream_simple_openai_responses(
    model: Model, context: Context, options: StreamOptions | None = None
) -> AssistantMessageEventStream:
    """Pi's `streamSimpleOpenAIResponses`: simple defaults, then the provider stream."""
    opts = options or StreamOptions()
    key = resolve_api_key(model, opts)
    base = build_base_options(model, opts, key)
    return stream_openai_responses(model, context, base, effort=reasoning_effort(model, opts))


__all__ = [
    "OPENAI_TOOL_CALL_PROVIDERS",
    "ResponsesParser",
    "build_headers",
    "build_params",
    "convert_responses_messages",
    "convert_responses_tools",
    "encode_text_signature",
    "map_status",
    "parse_text_signature",
    "stream_openai_responses",
    "stream_simple_openai_responses",
]
