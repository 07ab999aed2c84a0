"""The `openai-responses` provider: OpenAI's Responses API, streamed.

Follows pi-ai's provider and its shared Responses code: reasoning items become thinking blocks
(summary text streamed; the whole item, encrypted content included, kept as the signature for
replay), message items become text blocks signed `{"v":1,"id":...}`, function calls become tool
calls with ids `"<call_id>|<item id>"`; `response.completed` carries usage and the status.

Mule differs from Pi in two places: a stream that ends before a terminal response event is a
failure ("Stream ended before a terminal response event"), and `response.incomplete` is read like
`response.completed` (its status maps to "length").

Over 500 lines on purpose: the skeleton keeps a vendor's request rules and its parser in one
module; the Responses item conversion (ids, signatures, replay) and its event parser are each
about 220 lines.
"""

from __future__ import annotations

from functools import partial
from typing import Any, Final, final

from mule.pi._content import ImageContent, TextContent, ThinkingContent
from mule.pi._context import Context, StreamOptions, Tool
from mule.pi._cost import calculate_cost
from mule.pi._event_stream import AssistantMessageEventStream
from mule.pi._json import JsonObject, JsonValue, loads, stringify
from mule.pi._messages import AssistantMessage, StopReason
from mule.pi._model import Model, ThinkingLevel
from mule.pi._transcript import TranscriptContext, collapse_context
from mule.pi.providers._openai_completions import bearer_auth, error_chunk_text, openai_api_key
from mule.pi.providers._parser import (
    ProviderError,
    StreamParser,
    as_object,
    decode_object,
    priced_usage,
    read_stop_reason,
    token_count,
)
from mule.pi.providers._simple import (
    compat_flag,
    resolve_cache_retention,
    simple_options_with_effort,
)
from mule.pi.providers._transform import sanitize_surrogates, short_hash, transform_messages
from mule.pi.providers._transport import (
    HttpRequest,
    format_provider_error,
    merge_headers,
    provider_stream,
)

# Providers whose Responses tool-call ids ("<call_id>|<item id>") can be replayed as they are.
OPENAI_TOOL_CALL_PROVIDERS = frozenset({"openai", "openai-codex", "opencode"})


def encode_text_signature(item_id: str, phase: str | None = None) -> str:
    """Return Pi's v1 text signature for a message item.

    >>> encode_text_signature("msg_1", "final_answer")
    '{"v":1,"id":"msg_1","phase":"final_answer"}'
    """
    payload: dict[str, JsonValue] = {"v": 1, "id": item_id}
    if phase:
        payload["phase"] = phase
    return stringify(payload)


def parse_text_signature(signature: str | None) -> tuple[str, str | None] | None:
    """Return (item id, phase) from a v1 signature or a legacy plain id."""
    if not signature:
        return None
    if signature.startswith("{"):
        try:
            parsed = loads(signature)
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
        elif msg.role == "toolResult":
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
    text_index = 0  # the message's n-th text block
    for block in msg.content:
        if isinstance(block, ThinkingContent):
            if block.thinking_signature:
                items.append(loads(block.thinking_signature))
        elif isinstance(block, TextContent):
            parsed = parse_text_signature(block.text_signature)
            item_id = parsed[0] if parsed else None
            if not item_id:  # Pi 1.6.0's fallback id, one per text block
                item_id = (
                    f"msg_pi_{msg_index}" if text_index == 0 else f"msg_pi_{msg_index}_{text_index}"
                )
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
            text_index += 1
        else:
            call_id, _, fc_id = block.id.partition("|")
            call: dict[str, Any] = {"type": "function_call"}
            if fc_id and not (other_model and fc_id.startswith("fc_")):
                call["id"] = fc_id.split("|", 1)[0]
            call.update(
                {"call_id": call_id, "name": block.name, "arguments": stringify(block.arguments)}
            )
            items.append(call)
    return items


def convert_responses_tools(
    tools: tuple[Tool, ...], strict: bool = False, *, supports_strict_mode: bool = False
) -> list[dict[str, Any]]:
    """Convert tools to Responses function tools (`strict` only where the host supports it).

    Pi 1.6.0 assumes no strict-mode support unless `model.compat.supportsStrictMode` says so.
    """
    out: list[dict[str, Any]] = []
    for t in tools:
        tool: dict[str, Any] = {
            "type": "function",
            "name": t.name,
            "description": t.description,
            "parameters": t.parameters,
        }
        if supports_strict_mode:
            tool["strict"] = strict
        out.append(tool)
    return out


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
    if retention == "long" and compat_flag(model, "supportsLongCacheRetention"):
        params["prompt_cache_retention"] = "24h"
    params["store"] = False
    if options.max_tokens:
        params["max_output_tokens"] = options.max_tokens
    if options.temperature is not None:
        params["temperature"] = options.temperature
    if context.tools:
        strict_mode = (model.compat or {}).get("supportsStrictMode") is True
        params["tools"] = convert_responses_tools(context.tools, supports_strict_mode=strict_mode)
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
        if compat_flag(model, "sendSessionIdHeader"):
            ids["session_id"] = session
        ids["x-client-request-id"] = session
    return merge_headers(bearer_auth(model, api_key), model.headers, ids, options.headers)


# -- response --------------------------------------------------------------------------------


_STATUS: Final[dict[str, StopReason]] = {
    "completed": "stop",
    "in_progress": "stop",
    "queued": "stop",
    "failed": "error",
    "cancelled": "error",
}


def map_status(
    status: object, incomplete_reason: str | None = None
) -> tuple[StopReason, str | None]:
    """Map a response status to Pi's stop reason and, for some failures, an error message.

    An `incomplete` response stopped by the output-token limit is "length"; any other
    incomplete one failed, and says why when the server did.
    """
    if not status:
        return "stop", None
    if status == "incomplete":
        if incomplete_reason == "max_output_tokens":
            return "length", None
        if incomplete_reason:
            return "error", f"Response incomplete: {incomplete_reason}"
        return "error", "Response incomplete without a provider reason"
    return read_stop_reason(_STATUS, str(status)), None


def _str(value: object) -> str:
    return value if isinstance(value, str) else ""


def _last_part_type(content: object) -> object:
    if isinstance(content, list) and content:
        last = content[-1]
        return last.get("type") if isinstance(last, dict) else None
    return None


@final
class ResponsesParser(StreamParser):
    """Turns Responses API events into Pi events, building the message as it goes.

    Of the output item being streamed only what the deltas are checked against is kept: its
    type, how many summary parts it has, and its last content part's type. The finished item
    arrives whole in `response.output_item.done`.
    """

    __slots__ = (
        "_block",
        "_finished",
        "_item_type",
        "_part_type",
        "_summary_parts",
    )
    no_stop_reason = "OpenAI Responses stream ended without a stop reason"
    vendor = "OpenAI Responses"

    def __init__(self, model: Model) -> None:
        super().__init__(model)
        self._item_type: object = None  # the streamed output item's type, None between items
        self._block: int | None = None  # its content index
        self._summary_parts = 0
        self._part_type: object = None
        self._finished = False

    def _on_event(self, event: str, data: str) -> None:
        if data.startswith("[DONE]"):
            self.ended = True
            return
        chunk = decode_object(data)
        kind = chunk.get("type")
        block = self._block
        if kind == "response.output_text.delta" or kind == "response.refusal.delta":
            want = "output_text" if kind == "response.output_text.delta" else "refusal"
            if self._item_type == "message" and self._streaming("text") and self._part_type == want:
                assert block is not None
                self._delta(block, _str(chunk.get("delta")))
        elif kind == "response.function_call_arguments.delta":
            if self._item_type == "function_call" and self._streaming("toolCall"):
                assert block is not None
                self._delta(block, _str(chunk.get("delta")))
        elif kind in (
            "response.reasoning_summary_text.delta",
            "response.reasoning_summary_part.done",
        ):
            if (
                self._item_type == "reasoning"
                and self._streaming("thinking")
                and self._summary_parts
            ):
                assert block is not None
                delta = _str(chunk.get("delta")) if kind.endswith(".delta") else "\n\n"
                self._delta(block, delta)
        elif kind == "response.reasoning_text.delta":
            if self._item_type == "reasoning" and self._streaming("thinking"):
                assert block is not None
                self._delta(block, _str(chunk.get("delta")))
        elif kind == "response.created":
            response = as_object(chunk.get("response"))
            if response.get("id"):
                self._b.set_response(response_id=str(response["id"]))
        elif kind == "response.output_item.added":
            self._item_added(as_object(chunk.get("item")))
        elif kind == "response.reasoning_summary_part.added":
            if self._item_type == "reasoning":
                self._summary_parts += 1
        elif kind == "response.content_part.added":
            if self._item_type == "message":
                part_type = as_object(chunk.get("part")).get("type")
                if part_type in ("output_text", "refusal"):  # not reasoning text
                    self._part_type = part_type
        elif kind == "response.function_call_arguments.done":
            if self._item_type == "function_call" and self._streaming("toolCall"):
                assert block is not None
                previous = self._b.text(block)
                final = _str(chunk.get("arguments"))
                self._b.replace_text(block, final)
                if final.startswith(previous) and len(final) > len(previous):
                    self._delta(block, final[len(previous) :], append=False)
        elif kind == "response.output_item.done":
            self._item_done(as_object(chunk.get("item")))
        elif kind in ("response.completed", "response.incomplete"):
            self._completed(as_object(chunk.get("response")))
        elif kind == "error":
            raise ProviderError(f"Error Code {chunk.get('code')}: {chunk.get('message')}")
        elif kind == "response.failed":
            response = as_object(chunk.get("response"))
            status = response.get("status")
            if isinstance(status, str):
                self._b.set_stop(self._b.head.stop_reason, status)
            error = as_object(response.get("error")) if response.get("error") else None
            details = as_object(response.get("incomplete_details"))
            if error is not None:
                text = f"{error.get('code') or 'unknown'}: {error.get('message') or 'no message'}"
            elif details.get("reason"):
                text = f"incomplete: {details['reason']}"
            else:
                text = "Unknown error (no error details in response)"
            raise ProviderError(text)
        elif kind is None and chunk.get("error"):
            # The SDK turns a bare {"error": ...} chunk into an APIError with its message.
            raise ProviderError(error_chunk_text(chunk["error"]))

    def _streaming(self, kind: str) -> bool:
        return self._block is not None and self._b.kind(self._block) == kind

    def _item_added(self, item: JsonObject) -> None:
        item_type = item.get("type")
        if item_type == "reasoning":
            self._item_type, self._block = item_type, self._open_thinking()
            summary = item.get("summary")
            self._summary_parts = len(summary) if isinstance(summary, list) else 0
        elif item_type == "message":
            self._item_type, self._block = item_type, self._open_text()
            self._part_type = _last_part_type(item.get("content"))
        elif item_type == "function_call":
            arguments = item.get("arguments")
            self._item_type = item_type
            self._block = self._open_tool_call(
                f"{item.get('call_id')}|{item.get('id')}",
                _str(item.get("name")),
                arguments=str(arguments) if arguments else "",
            )

    def _item_done(self, item: JsonObject) -> None:
        b = self._b
        block = self._block
        block_kind = b.kind(block) if block is not None else None
        item_type = item.get("type")
        if item_type == "reasoning" and block_kind == "thinking":
            assert block is not None
            summary = "\n\n".join(_str(as_object(s).get("text")) for s in _list(item, "summary"))
            content = "\n\n".join(_str(as_object(c).get("text")) for c in _list(item, "content"))
            b.replace_text(block, summary or content or b.text(block))
            b.set_signature(block, stringify(item))  # the whole item, replayed verbatim
            self._end(block)
        elif item_type == "message" and block_kind == "text":
            assert block is not None
            text = "".join(
                _str(part.get("text"))
                if part.get("type") == "output_text"
                else _str(part.get("refusal"))
                for part in map(as_object, _list(item, "content"))
            )
            b.replace_text(block, text)
            b.set_signature(block, encode_text_signature(_str(item.get("id")), _phase(item)))
            self._end(block)
        elif item_type == "function_call":
            if block is None or block_kind != "toolCall":
                # A call that never streamed (Pi reports it without a block; mule adds one).
                block = self._open_tool_call(
                    f"{item.get('call_id')}|{item.get('id')}", _str(item.get("name"))
                )
            final = _str(item.get("arguments"))
            if final:  # the item's arguments are the whole text (Pi replaces the streamed one)
                b.replace_text(block, final)
            self._end(block)  # parsed as Pi does: malformed text leaves an `arguments_error`
        else:
            return
        self._item_type = self._block = None

    def _completed(self, response: JsonObject) -> None:
        b = self._b
        self._finished = True
        if response.get("id"):
            b.set_response(response_id=str(response["id"]))
        usage = response.get("usage")
        if isinstance(usage, dict):
            details = as_object(usage.get("input_tokens_details"))
            cached = token_count(details.get("cached_tokens")) or 0
            written = token_count(details.get("cache_write_tokens")) or 0
            output = as_object(usage.get("output_tokens_details"))
            b.set_usage(
                priced_usage(
                    self._model,
                    # input_tokens counts cache reads and writes too
                    max(0, (token_count(usage.get("input_tokens")) or 0) - cached - written),
                    token_count(usage.get("output_tokens")) or 0,
                    cached,
                    written,
                    token_count(usage.get("total_tokens")) or 0,
                    reasoning=token_count(output.get("reasoning_tokens")) or 0,
                )
            )
        else:
            b.set_usage(calculate_cost(self._model, b.head.usage))
        status = response.get("status")
        details = as_object(response.get("incomplete_details"))
        given = details.get("reason")
        reason = given if isinstance(given, str) else None
        raw = None if status is None else str(status) if not isinstance(status, str) else status
        if raw is not None and reason:
            raw = f"{raw}.{reason}"
        if raw is not None:  # kept even when it maps to nothing
            b.set_stop(b.head.stop_reason, raw)
        stop, message = map_status(status, reason)
        if stop == "stop" and self._has_tool_calls():
            stop = "toolUse"
        b.set_stop(stop)
        if b.head.error_message != message:  # Pi drops an earlier one when there is none now
            b.set_error_message(message)

    def _on_end(self) -> None:
        if not self._finished:
            raise ProviderError("OpenAI Responses stream ended before a terminal response event")
        self._done()


def _list(item: JsonObject, key: str) -> list[object]:
    value = item.get(key)
    return value if isinstance(value, list) else []


def _phase(item: JsonObject) -> str | None:
    phase = item.get("phase")
    return phase if isinstance(phase, str) else None


def _request(
    model: Model, context: Context, options: StreamOptions, effort: ThinkingLevel | None
) -> HttpRequest:
    api_key = openai_api_key(model, options)
    body = build_params(model, context, options, effort=effort)
    url = model.base_url.rstrip("/") + "/responses"
    return HttpRequest(url, build_headers(model, options, api_key), body)


def stream_openai_responses(
    model: Model,
    context: Context | TranscriptContext,
    options: StreamOptions | None = None,
    *,
    effort: ThinkingLevel | None = None,
) -> AssistantMessageEventStream:
    """Stream a Responses API response (Pi's `streamOpenAIResponses`); never raises."""
    context = collapse_context(context)
    opts = options or StreamOptions()
    request = partial(_request, model, context, opts, effort)
    return provider_stream(
        model, opts, ResponsesParser(model), request, on_http_error=partial(_http_error, model)
    )


_CHATGPT_USAGE_URL: Final = "https://chatgpt.com/settings/usage"
_CHATGPT_WORKSPACE_LIMIT_HINT: Final = (
    "You've reached your ChatGPT workspace's usage limit. Ask your workspace admin to increase"
    " it at admin.openai.com \u2192 Workspace \u2192 Usage limits."
)


def _http_error(model: Model, exc: ProviderError) -> ProviderError:
    """Word a failed request as Pi does: `OpenAI API error (<status>): <body>`."""
    name = "OpenAI" if model.provider == "openai" else model.provider
    text = format_provider_error(exc, f"{name} API error")
    # Sign in with ChatGPT shares the subscription's limits with other apps: Pi says where to look.
    if "subscription_sharing_usage_limit_exceeded" in text:
        text = f"{text}\nCheck your ChatGPT usage: {_CHATGPT_USAGE_URL}"
    elif "subscription_sharing_workplace_individual_usage_limit_exceeded" in text:
        text = f"{text}\n{_CHATGPT_WORKSPACE_LIMIT_HINT}"
    return ProviderError(text, exc.diagnostics, exc.error_body, exc.status)


def stream_simple_openai_responses(
    model: Model, context: Context | TranscriptContext, options: StreamOptions | None = None
) -> AssistantMessageEventStream:
    """Pi's `streamSimpleOpenAIResponses`: simple defaults, then the provider stream."""
    base, effort = simple_options_with_effort(model, options, context)
    return stream_openai_responses(model, context, base, effort=effort)


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
