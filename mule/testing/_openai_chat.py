"""Builders of scripted OpenAI Chat Completions streams, in the chunk shapes OpenAI documents."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any


def split_text(text: str, pieces: int) -> list[str]:
    """Return `text` cut into about `pieces` equal parts (a stream's deltas)."""
    if pieces <= 1 or len(text) <= 1:
        return [text]
    size = max(1, -(-len(text) // pieces))
    return [text[i : i + size] for i in range(0, len(text), size)]


def _chunk(
    cid: str, model: str, delta: Mapping[str, Any], finish: str | None = None, **extra: Any
) -> dict[str, Any]:
    return {
        "id": cid,
        "object": "chat.completion.chunk",
        "created": 1_700_000_000,
        "model": model,
        "system_fingerprint": "fp_fake",
        "choices": [{"index": 0, "delta": dict(delta), "logprobs": None, "finish_reason": finish}],
        **extra,
    }


def chat_usage(
    prompt: int = 10, completion: int = 5, cached: int = 0, reasoning: int = 0
) -> dict[str, Any]:
    """Return a Chat Completions usage object."""
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": cached, "audio_tokens": 0},
        "completion_tokens_details": {
            "reasoning_tokens": reasoning,
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        },
    }


def tool_call(call_id: str, name: str, arguments: Any, pieces: int = 1) -> dict[str, Any]:
    """Describe one streamed tool call; `arguments` (a JSON value or raw string) in `pieces`."""
    raw = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {"id": call_id, "name": name, "fragments": split_text(raw, pieces)}


def chat_stream(
    *,
    text: str | None = None,
    pieces: int = 1,
    reasoning: str | None = None,
    reasoning_field: str = "reasoning_content",
    calls: Sequence[Mapping[str, Any]] = (),
    interleave: bool = False,
    finish_reason: str | None = None,
    usage: Mapping[str, Any] | None = None,
    model: str = "gpt-fake",
    cid: str = "chatcmpl-fake",
    then: str = "done",
    finish: bool = True,
    **options: Any,
) -> dict[str, Any]:
    """Build a scripted Chat Completions stream (reasoning, text, tool calls, finish, usage).

    With `interleave`, the tool calls' argument fragments alternate between calls (parallel
    calls streamed by index). `usage` arrives in its own final chunk with empty `choices`, as
    with `stream_options.include_usage`; `options` are extra response keys (`chunk_size`, ...).
    """
    events: list[dict[str, Any]] = []
    u: dict[str, Any] = {"usage": None} if usage is not None else {}
    events.append(_chunk(cid, model, {"role": "assistant", "content": "", "refusal": None}, **u))
    if reasoning is not None:
        for part in split_text(reasoning, pieces):
            events.append(_chunk(cid, model, {reasoning_field: part}, **u))
    if text is not None:
        for part in split_text(text, pieces):
            events.append(_chunk(cid, model, {"content": part}, **u))
    heads = [
        {
            "index": i,
            "id": c["id"],
            "type": "function",
            "function": {"name": c["name"], "arguments": ""},
        }
        for i, c in enumerate(calls)
    ]
    frags = [
        [{"index": i, "function": {"arguments": f}} for f in c["fragments"]]
        for i, c in enumerate(calls)
    ]
    if interleave:
        for h in heads:
            events.append(_chunk(cid, model, {"tool_calls": [h]}, **u))
        for k in range(max((len(f) for f in frags), default=0)):
            for f in frags:
                if k < len(f):
                    events.append(_chunk(cid, model, {"tool_calls": [f[k]]}, **u))
    else:
        for h, f in zip(heads, frags, strict=True):
            events.append(_chunk(cid, model, {"tool_calls": [h]}, **u))
            events.extend(_chunk(cid, model, {"tool_calls": [x]}, **u) for x in f)
    if finish:  # without: the stream ends and never says why
        reason = finish_reason or ("tool_calls" if calls else "stop")
        events.append(_chunk(cid, model, {}, reason, **u))
    if usage is not None:
        events.append(
            {
                "id": cid,
                "object": "chat.completion.chunk",
                "created": 1_700_000_000,
                "model": model,
                "system_fingerprint": "fp_fake",
                "choices": [],
                "usage": dict(usage),
            }
        )
    return {"events": events, "then": then, **options}


def chat_text(text: str, pieces: int = 1, **kwargs: Any) -> dict[str, Any]:
    """Build a plain text Chat Completions stream."""
    return chat_stream(text=text, pieces=pieces, **kwargs)


def openai_error(
    status: int,
    message: str,
    *,
    type: str = "invalid_request_error",
    code: str | None = None,
    headers: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Build an HTTP error response with OpenAI's JSON error body."""
    body = {"error": {"message": message, "type": type, "param": None, "code": code}}
    return {"status": status, "headers": dict(headers or {}), "body": body}


__all__ = ["chat_stream", "chat_text", "chat_usage", "openai_error", "split_text", "tool_call"]
