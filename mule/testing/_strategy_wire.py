"""Hypothesis strategies that draw Pi's wire JSON (see `mule.testing.strategies`)."""

from __future__ import annotations

from typing import Any

from mule.pi import StopReason, needs_extra
from mule.testing._strategy_scalars import (
    FAILURE_REASONS,
    MAX_BLOCKS,
    MODEL_THINKING_LEVELS,
    PARTIAL_REASONS,
    SUCCESS_REASONS,
    THINKING_LEVELS,
    Strategy,
    Wire,
    b64,
    counts,
    ids,
    json_objects,
    non_null_json,
    prices,
    texts,
    timestamps,
)

with needs_extra("testing", "mule.testing's strategies"):
    from hypothesis import strategies as st


def _obj(
    required: dict[str, Strategy[Any]],
    optional: dict[str, Strategy[Any]] | None = None,
    order: tuple[str, ...] | None = None,
) -> Strategy[Wire]:
    """Draw an object in Pi's key order: `order`, or the required keys, then the optional ones.

    (`fixed_dictionaries` does not keep the order its keys were given in.)
    """
    optional = optional or {}
    keys = order or (*required, *optional)
    return st.fixed_dictionaries(required, optional=optional).map(
        lambda d: {k: d[k] for k in keys if k in d}
    )


def text_content_json() -> Strategy[Wire]:
    """Draw wire JSON of a text block."""
    return _obj({"type": st.just("text"), "text": texts()}, {"textSignature": texts()})


def thinking_content_json() -> Strategy[Wire]:
    """Draw wire JSON of a thinking block (plain, signed or redacted)."""
    plain = _obj({"type": st.just("thinking"), "thinking": texts()}, {"thinkingSignature": texts()})
    redacted = _obj(
        {
            "type": st.just("thinking"),
            "thinking": st.just("[Reasoning redacted]"),
            "thinkingSignature": texts(),
            "redacted": st.just(True),
        }
    )
    return plain | redacted


def image_content_json() -> Strategy[Wire]:
    """Draw wire JSON of an image block."""
    return _obj(
        {
            "type": st.just("image"),
            "data": st.binary(max_size=12).map(b64),
            "mimeType": st.sampled_from(("image/png", "image/jpeg")),
        }
    )


def tool_call_json() -> Strategy[Wire]:
    """Draw wire JSON of a tool call."""
    return _obj(
        {"type": st.just("toolCall"), "id": ids(), "name": ids(), "arguments": json_objects()},
        {"thoughtSignature": texts(), "namespace": ids(), "argumentsError": texts()},
        ("type", "id", "name", "arguments", "thoughtSignature", "namespace", "argumentsError"),
    )


def user_content_json() -> Strategy[Wire]:
    """Draw wire JSON of a text or image block."""
    return text_content_json() | image_content_json()


def assistant_content_json() -> Strategy[Wire]:
    """Draw wire JSON of a text, thinking or tool-call block."""
    return text_content_json() | thinking_content_json() | tool_call_json()


@st.composite
def usage_json(draw: st.DrawFn) -> Wire:
    """Draw wire JSON of a usage record (counts may be written as JS integers, costs as 0)."""
    n = [draw(counts()) for _ in range(4)]
    c = [draw(prices() | st.just(0)) for _ in range(4)]
    cost: Wire = {
        "input": c[0],
        "output": c[1],
        "cacheRead": c[2],
        "cacheWrite": c[3],
        "total": c[0] + c[1] + c[2] + c[3],
    }
    from_provider = draw(st.none() | st.booleans())
    if from_provider is not None:
        cost["totalFromProvider"] = from_provider
    usage: Wire = {"input": n[0], "output": n[1], "cacheRead": n[2], "cacheWrite": n[3]}
    if draw(st.booleans()):
        usage["reasoning"] = draw(st.integers(0, n[1]))
    usage |= {"totalTokens": sum(n), "cost": cost}
    if draw(st.booleans()):  # Anthropic's, after the cost
        usage["cacheWrite1h"] = draw(st.integers(0, n[3]))
    return usage


def diagnostic_json() -> Strategy[Wire]:
    """Draw wire JSON of a diagnostic."""
    error = _obj(
        {"message": texts()},
        {"name": texts(8), "stack": texts(), "code": texts(8) | st.integers(0, 999)},
    )
    return _obj(
        {"type": ids(), "timestamp": timestamps()},
        {"error": error, "details": json_objects()},
    )


def user_message_json() -> Strategy[Wire]:
    """Draw wire JSON of a user message."""
    content = texts() | st.lists(user_content_json(), max_size=MAX_BLOCKS)
    return _obj({"role": st.just("user"), "content": content, "timestamp": timestamps()})


@st.composite
def assistant_message_json(
    draw: st.DrawFn, stop_reasons: tuple[StopReason, ...] = SUCCESS_REASONS + FAILURE_REASONS
) -> Wire:
    """Draw wire JSON of an assistant message; `errorMessage` only for "error" and "aborted"."""
    stop = draw(st.sampled_from(stop_reasons))
    optional: dict[str, Strategy[Any]] = {
        "responseModel": ids(),
        "responseId": ids(),
        "providerThinkingLevel": ids(),
        "diagnostics": st.lists(diagnostic_json(), max_size=2),
    }
    if stop != "pending":  # set once the provider sent its reason; then at the end
        optional |= {
            "rawStopReason": ids(),
            "durationMs": counts(),
            "thinkingLevel": st.sampled_from(MODEL_THINKING_LEVELS),
        }
    base = {
        "role": st.just("assistant"),
        "content": st.lists(assistant_content_json(), max_size=MAX_BLOCKS),
        "api": ids(),
        "provider": ids(),
        "model": ids(),
        "usage": usage_json(),
        "stopReason": st.just(stop),
        "timestamp": timestamps(),
    }
    if stop in FAILURE_REASONS:
        base["errorMessage"] = texts()
    out: Wire = draw(_obj(base, optional, _ASSISTANT_ORDER))
    return out


_ASSISTANT_ORDER = (
    "role",
    "content",
    "api",
    "provider",
    "model",
    "usage",
    "stopReason",
    "timestamp",
    "responseId",
    "responseModel",
    "providerThinkingLevel",
    "diagnostics",
    "rawStopReason",
    "errorMessage",
    "durationMs",
    "thinkingLevel",
)
"""Pi's key order of an assistant message, as its providers and its loop build one."""


def tool_result_message_json() -> Strategy[Wire]:
    """Draw wire JSON of a tool result message."""
    return _obj(
        {
            "role": st.just("toolResult"),
            "toolCallId": ids(),
            "toolName": ids(),
            "content": st.lists(user_content_json(), max_size=MAX_BLOCKS),
            "isError": st.booleans(),
            "timestamp": timestamps(),
        },
        {"details": non_null_json(), "usage": usage_json(), "durationMs": counts()},
        (
            "role",
            "toolCallId",
            "toolName",
            "content",
            "details",
            "usage",
            "isError",
            "durationMs",
            "timestamp",
        ),
    )


@st.composite
def system_message_json(draw: st.DrawFn) -> Wire:
    """Draw wire JSON of a system message (Pi 1.6.0), in the order pi's transcripts write it.

    The agent loop's tool-change step (what pi's RPC output and sessions show) writes the tool
    fields after `timestamp`.
    """
    out: dict[str, Any] = {
        "role": "system",
        "content": draw(texts() | st.lists(text_content_json(), max_size=MAX_BLOCKS)),
    }
    if draw(st.booleans()):
        out["sections"] = draw(st.dictionaries(ids(), st.none() | texts(), min_size=1, max_size=3))
    out["timestamp"] = draw(timestamps())
    optional = {
        "toolsAdded": st.lists(tool_json(), min_size=1, max_size=2),
        "toolsRemoved": st.lists(_obj({"name": ids()}), min_size=1, max_size=2),
    }
    for key, values in optional.items():
        if draw(st.booleans()):
            out[key] = draw(values)
    return out


def message_json() -> Strategy[Wire]:
    """Draw wire JSON of any message."""
    return (
        system_message_json()
        | user_message_json()
        | assistant_message_json()
        | tool_result_message_json()
    )


def transcript_context_json() -> Strategy[Wire]:
    """Draw wire JSON of a transcript context (Pi 1.6.0's `{messages}`)."""
    return _obj({"messages": st.lists(message_json(), max_size=4)})


def model_json() -> Strategy[Wire]:
    """Draw wire JSON of a model descriptor."""
    price = prices() | st.just(0)
    return _obj(
        {
            "id": ids(),
            "name": texts(),
            "api": ids(),
            "provider": ids(),
            "baseUrl": texts(),
            "reasoning": st.booleans(),
            "input": st.sampled_from((["text"], ["text", "image"])),
            "cost": _obj(
                {"input": price, "output": price, "cacheRead": price, "cacheWrite": price},
                {"tiers": st.lists(_tier_json(), min_size=1, max_size=2)},
            ),
            "contextWindow": counts(),
            "maxTokens": counts(),
        },
        {
            "thinkingLevelMap": st.dictionaries(
                st.sampled_from(THINKING_LEVELS), st.none() | ids()
            ),
            "headers": st.dictionaries(ids(), texts(), max_size=3),
            "compat": json_objects(),
            "promptCache": _obj({}, {"short": counts(), "long": counts()}),
            "inputLimits": json_objects(),
            "type": st.just("chat"),
            "samplingParams": json_objects(),  # no field: kept as an extra, written last
            "lab": ids(),
        },
    )


def _tier_json() -> Strategy[Wire]:
    price = prices() | st.just(0)
    return _obj(
        {
            "input": price,
            "output": price,
            "cacheRead": price,
            "cacheWrite": price,
            "inputTokensAbove": counts(),
        }
    )


def tool_json() -> Strategy[Wire]:
    """Draw wire JSON of a tool descriptor."""
    return _obj({"name": ids(), "description": texts(), "parameters": json_objects()})


def context_json() -> Strategy[Wire]:
    """Draw wire JSON of a call context."""
    return _obj(
        {"messages": st.lists(message_json(), max_size=3)},
        {"systemPrompt": texts(), "tools": st.lists(tool_json(), max_size=2)},
    )


_BLOCK_JSON = {
    "text": text_content_json,
    "thinking": thinking_content_json,
    "toolCall": tool_call_json,
}
_EVENT_BLOCK_TAG = {
    "text_start": "text",
    "text_delta": "text",
    "text_end": "text",
    "thinking_start": "thinking",
    "thinking_delta": "thinking",
    "thinking_end": "thinking",
    "toolcall_start": "toolCall",
    "toolcall_delta": "toolCall",
    "toolcall_end": "toolCall",
}
EVENT_TYPES: tuple[str, ...] = ("start", *_EVENT_BLOCK_TAG, "done", "error")
"""Every AssistantMessageEvent `type` tag, in Pi's order."""


@st.composite
def assistant_message_event_json(draw: st.DrawFn, event_type: str | None = None) -> Wire:
    """Draw wire JSON of a stream event (of `event_type`, or any type)."""
    kind = event_type or draw(st.sampled_from(EVENT_TYPES))
    if kind == "done":
        message = draw(assistant_message_json(stop_reasons=SUCCESS_REASONS))
        return {"type": "done", "reason": message["stopReason"], "message": message}
    if kind == "error":
        message = draw(assistant_message_json(stop_reasons=FAILURE_REASONS))
        return {"type": "error", "reason": message["stopReason"], "error": message}
    partial = draw(assistant_message_json(stop_reasons=PARTIAL_REASONS))
    if kind == "start":
        return {"type": "start", "partial": partial}
    tag = _EVENT_BLOCK_TAG[kind]
    indexes = [i for i, b in enumerate(partial["content"]) if b["type"] == tag]
    if not indexes:
        partial["content"].append(draw(_BLOCK_JSON[tag]()))
        indexes = [len(partial["content"]) - 1]
    index = draw(st.sampled_from(indexes))
    block = partial["content"][index]
    out: Wire = {"type": kind, "contentIndex": index}
    if kind.endswith("_delta"):
        out["delta"] = draw(texts(8))
    elif kind == "toolcall_end":
        out["toolCall"] = block
    elif kind.endswith("_end"):
        out["content"] = block[tag]
    out["partial"] = partial
    return out
