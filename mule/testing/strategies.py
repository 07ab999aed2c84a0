"""Hypothesis strategies for every mule.pi type, and for its Pi wire JSON.

Two families, built independently so that each can check the other:

- value strategies (`text_contents()`, `assistant_messages()`, `assistant_message_events()`, ...)
  draw mule.pi objects;
- wire strategies (`text_content_json()`, `message_json()`, `assistant_message_event_json()`, ...)
  draw the JSON Pi itself would write (plain dicts, lists and scalars, camelCase keys, unset
  optionals omitted), as `json.loads` would return it.

Every drawn value is valid by Pi's contract:

- `errorMessage` is present exactly when `stopReason` is "error" or "aborted";
- tool-call `arguments` are JSON objects; usage counts are non-negative and `totalTokens` and
  `cost.total` are the sums of their parts;
- a block event's `contentIndex` points at a block of its kind in `partial`, `*_end` events repeat
  that block's text (or the tool call), `done`/`error` reasons equal the message's stop reason;
- integers stay within JavaScript's safe range and floats are finite.

Requires `hypothesis` (a test dependency). Example::

    from hypothesis import given
    from mule.pi import Message, from_wire, to_wire
    from mule.testing import strategies as ms

    @given(ms.messages())
    def test_round_trip(m):
        assert from_wire(Message, to_wire(m)) == m
"""

from __future__ import annotations

import base64
from typing import Any, TypeAlias, TypeVar

from attrs import evolve
from hypothesis import strategies as st

from mule.pi._content import (
    AssistantContent,
    ImageContent,
    TextContent,
    ThinkingContent,
    ToolCall,
    UserContent,
)
from mule.pi._context import Context, ThinkingBudgets, Tool
from mule.pi._events import (
    AssistantMessageEvent,
    DoneEvent,
    ErrorEvent,
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
from mule.pi._json import JsonObject, JsonValue
from mule.pi._messages import (
    AssistantMessage,
    Diagnostic,
    DiagnosticError,
    Message,
    StopReason,
    ToolResultMessage,
    Usage,
    UsageCost,
    UserMessage,
)
from mule.pi._model import InputKind, Model, ModelCost

T = TypeVar("T")
Strategy: TypeAlias = st.SearchStrategy
Wire: TypeAlias = dict[str, Any]

MAX_SAFE_INTEGER = 2**53 - 1
"""JavaScript's largest exact integer; Pi's numbers beyond it lose precision."""

_MAX_BLOCKS = 4
_SUCCESS: tuple[StopReason, ...] = ("stop", "length", "toolUse")
_FAILURE: tuple[StopReason, ...] = ("error", "aborted")
_LEVELS = ("minimal", "low", "medium", "high", "xhigh")

# ------------------------------------------------------------------------------------ scalars


def _texts(max_size: int = 24) -> Strategy[str]:
    return st.text(max_size=max_size)


def _ids() -> Strategy[str]:
    return st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E), min_size=1, max_size=12)


def _counts() -> Strategy[int]:
    return st.integers(min_value=0, max_value=10_000_000)


def _prices() -> Strategy[float]:
    return st.floats(min_value=0, max_value=1000, allow_nan=False, allow_infinity=False)


def timestamps() -> Strategy[int]:
    """Draw epoch milliseconds (non-negative JavaScript-safe integers)."""
    return st.integers(min_value=0, max_value=MAX_SAFE_INTEGER)


def json_values(max_leaves: int = 8) -> Strategy[JsonValue]:
    """Draw any JSON value, as `json.loads` returns it (finite floats, safe ints)."""
    scalars = (
        st.none()
        | st.booleans()
        | st.integers(min_value=-MAX_SAFE_INTEGER, max_value=MAX_SAFE_INTEGER)
        | st.floats(allow_nan=False, allow_infinity=False)
        | _texts(12)
    )
    return st.recursive(
        scalars,
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_texts(8), inner, max_size=3),
        max_leaves=max_leaves,
    )


def json_objects(max_leaves: int = 8) -> Strategy[JsonObject]:
    """Draw a JSON object (a `dict` with string keys)."""
    return st.dictionaries(_texts(8), json_values(max_leaves), max_size=4)


def _non_null_json() -> Strategy[JsonValue]:
    # An optional JSON field holding null is indistinguishable from an omitted one.
    return json_values().filter(lambda v: v is not None)


# -------------------------------------------------------------------------------- content


def text_contents() -> Strategy[TextContent]:
    """Draw a text block, sometimes with a signature."""
    return st.builds(TextContent, _texts(), st.none() | _texts())


def thinking_contents() -> Strategy[ThinkingContent]:
    """Draw a thinking block: plain, signed, or redacted (then the payload is in the signature)."""
    plain = st.builds(ThinkingContent, _texts(), st.none() | _texts(), st.none() | st.just(False))
    redacted = st.builds(ThinkingContent, st.just("[Reasoning redacted]"), _texts(), st.just(True))
    return plain | redacted


def image_contents() -> Strategy[ImageContent]:
    """Draw a base64 image block."""
    return st.builds(
        ImageContent,
        st.binary(max_size=12).map(_b64),
        st.sampled_from(("image/png", "image/jpeg", "image/gif", "image/webp")),
    )


def tool_calls() -> Strategy[ToolCall]:
    """Draw a tool call whose arguments are a JSON object."""
    return st.builds(ToolCall, _ids(), _ids(), json_objects(), st.none() | _texts())


def user_contents() -> Strategy[UserContent]:
    """Draw a block allowed in user and tool-result content: text or image."""
    return text_contents() | image_contents()


def assistant_contents() -> Strategy[AssistantContent]:
    """Draw a block allowed in assistant content: text, thinking or a tool call."""
    return text_contents() | thinking_contents() | tool_calls()


# ------------------------------------------------------------------------------- messages


@st.composite
def usage_costs(draw: st.DrawFn) -> UsageCost:
    """Draw a cost breakdown whose total is the sum of its parts."""
    a, b, c, d = (draw(_prices()) for _ in range(4))
    return UsageCost(a, b, c, d, total=a + b + c + d)


@st.composite
def usages(draw: st.DrawFn) -> Usage:
    """Draw token counts with `total_tokens` their sum, and a consistent cost."""
    n = [draw(_counts()) for _ in range(4)]
    return Usage(n[0], n[1], n[2], n[3], sum(n), draw(usage_costs()))


def diagnostic_errors() -> Strategy[DiagnosticError]:
    """Draw the error part of a diagnostic."""
    code = st.none() | _texts(8) | st.integers(min_value=-1000, max_value=100_000)
    return st.builds(DiagnosticError, _texts(), st.none() | _texts(8), st.none() | _texts(), code)


def diagnostics() -> Strategy[Diagnostic]:
    """Draw a provider diagnostic."""
    return st.builds(
        Diagnostic,
        _ids(),
        timestamps(),
        st.none() | diagnostic_errors(),
        st.none() | json_objects(),
    )


def user_messages() -> Strategy[UserMessage]:
    """Draw a user message with string or block content."""
    blocks = st.lists(user_contents(), max_size=_MAX_BLOCKS).map(tuple)
    return st.builds(UserMessage, _texts() | blocks, timestamps())


@st.composite
def assistant_messages(
    draw: st.DrawFn,
    stop_reasons: tuple[StopReason, ...] = _SUCCESS + _FAILURE,
    content: Strategy[AssistantContent] | None = None,
) -> AssistantMessage:
    """Draw an assistant message; `error_message` is set exactly for "error" and "aborted"."""
    stop = draw(st.sampled_from(stop_reasons))
    blocks = draw(st.lists(content or assistant_contents(), max_size=_MAX_BLOCKS))
    diag = draw(st.none() | st.lists(diagnostics(), max_size=2).map(tuple))
    return AssistantMessage(
        content=tuple(blocks),
        api=draw(_ids()),
        provider=draw(_ids()),
        model=draw(_ids()),
        usage=draw(usages()),
        stop_reason=stop,
        timestamp=draw(timestamps()),
        response_model=draw(st.none() | _ids()),
        response_id=draw(st.none() | _ids()),
        diagnostics=diag,
        error_message=draw(_texts()) if stop in _FAILURE else None,
    )


def tool_result_messages() -> Strategy[ToolResultMessage]:
    """Draw a tool result; `details` is omitted or a non-null JSON value."""
    return st.builds(
        ToolResultMessage,
        tool_call_id=_ids(),
        tool_name=_ids(),
        content=st.lists(user_contents(), max_size=_MAX_BLOCKS).map(tuple),
        is_error=st.booleans(),
        timestamp=timestamps(),
        details=st.none() | _non_null_json(),
        usage=st.none() | usages(),
    )


def messages() -> Strategy[Message]:
    """Draw any message: user, assistant or tool result."""
    return user_messages() | assistant_messages() | tool_result_messages()


# ---------------------------------------------------------------------- model and context


def model_costs() -> Strategy[ModelCost]:
    """Draw prices in USD per million tokens."""
    return st.builds(ModelCost, _prices(), _prices(), _prices(), _prices())


def models() -> Strategy[Model]:
    """Draw a model descriptor, with or without a thinking map, headers and compat flags."""
    inputs: Strategy[tuple[InputKind, ...]] = st.sampled_from(
        (("text",), ("text", "image"), ("image", "text"))
    )
    level_map = st.dictionaries(st.sampled_from(_LEVELS), st.none() | _ids(), max_size=5)
    return st.builds(
        Model,
        id=_ids(),
        name=_texts(),
        api=_ids(),
        provider=_ids(),
        base_url=_texts(),
        reasoning=st.booleans(),
        input=inputs,
        cost=model_costs(),
        context_window=_counts(),
        max_tokens=_counts(),
        thinking_level_map=st.none() | level_map,
        headers=st.none() | st.dictionaries(_ids(), _texts(), max_size=3),
        compat=st.none() | json_objects(),
    )


def tools() -> Strategy[Tool]:
    """Draw a tool descriptor with a small JSON-Schema object as parameters."""
    prop = st.fixed_dictionaries({"type": st.sampled_from(("string", "number", "boolean"))})
    schema = st.builds(
        lambda props: {"type": "object", "properties": props, "required": sorted(props)[:1]},
        st.dictionaries(_ids(), prop, max_size=3),
    )
    return st.builds(Tool, _ids(), _texts(), schema)


def contexts() -> Strategy[Context]:
    """Draw a call context: messages, maybe a system prompt, maybe tools."""
    return st.builds(
        Context,
        st.lists(messages(), max_size=3).map(tuple),
        st.none() | _texts(),
        st.none() | st.lists(tools(), max_size=2).map(tuple),
    )


def thinking_budgets() -> Strategy[ThinkingBudgets]:
    """Draw token budgets per thinking level."""
    n = st.none() | _counts()
    return st.builds(ThinkingBudgets, n, n, n, n)


# ----------------------------------------------------------------------------- events

_BLOCK_OF_EVENT: dict[type[Any], type[Any]] = {
    TextStartEvent: TextContent,
    TextDeltaEvent: TextContent,
    TextEndEvent: TextContent,
    ThinkingStartEvent: ThinkingContent,
    ThinkingDeltaEvent: ThinkingContent,
    ThinkingEndEvent: ThinkingContent,
    ToolCallStartEvent: ToolCall,
    ToolCallDeltaEvent: ToolCall,
    ToolCallEndEvent: ToolCall,
}
_BLOCK_STRATEGY: dict[type[Any], Any] = {
    TextContent: text_contents,
    ThinkingContent: thinking_contents,
    ToolCall: tool_calls,
}


def _partials() -> Strategy[AssistantMessage]:
    # Pi's partials carry a success stop reason and no error message until the terminal event.
    return assistant_messages(stop_reasons=("stop",))


@st.composite
def _with_block(draw: st.DrawFn, block: type[Any]) -> tuple[AssistantMessage, int]:
    partial = draw(_partials())
    indexes = [i for i, b in enumerate(partial.content) if type(b) is block]
    if not indexes:
        extra = draw(_BLOCK_STRATEGY[block]())
        partial = _with_content(partial, (*partial.content, extra))
        indexes = [len(partial.content) - 1]
    return partial, draw(st.sampled_from(indexes))


def _with_content(m: AssistantMessage, content: tuple[AssistantContent, ...]) -> AssistantMessage:
    return evolve(m, content=content)


def start_events() -> Strategy[StartEvent]:
    """Draw a `start` event."""
    return st.builds(lambda p: StartEvent(partial=p), _partials())


@st.composite
def block_events(draw: st.DrawFn, kind: type[T]) -> T:
    """Draw a block event of class `kind` whose index points at a block of the matching type."""
    partial, index = draw(_with_block(_BLOCK_OF_EVENT[kind]))
    block: Any = partial.content[index]
    extra: dict[str, Any] = {}
    if kind in (TextDeltaEvent, ThinkingDeltaEvent, ToolCallDeltaEvent):
        extra["delta"] = draw(_texts(8))
    elif kind is TextEndEvent:
        extra["content"] = block.text
    elif kind is ThinkingEndEvent:
        extra["content"] = block.thinking
    elif kind is ToolCallEndEvent:
        extra["tool_call"] = block
    factory: Any = kind
    event: T = factory(content_index=index, partial=partial, **extra)
    return event


@st.composite
def done_events(draw: st.DrawFn) -> DoneEvent:
    """Draw a `done` event whose reason is its message's stop reason."""
    message = draw(assistant_messages(stop_reasons=_SUCCESS))
    return DoneEvent(reason=message.stop_reason, message=message)  # type: ignore[arg-type]


@st.composite
def error_events(draw: st.DrawFn) -> ErrorEvent:
    """Draw an `error` event whose reason is its message's stop reason ("error" or "aborted")."""
    message = draw(assistant_messages(stop_reasons=_FAILURE))
    return ErrorEvent(reason=message.stop_reason, error=message)  # type: ignore[arg-type]


BLOCK_EVENT_CLASSES: tuple[type[Any], ...] = tuple(_BLOCK_OF_EVENT)
"""Every block event class, in Pi's order."""


def assistant_message_events() -> Strategy[AssistantMessageEvent]:
    """Draw any stream event."""
    blocks = [block_events(kind) for kind in BLOCK_EVENT_CLASSES]
    return st.one_of(start_events(), *blocks, done_events(), error_events())


# ------------------------------------------------------------------------------- wire JSON


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _obj(
    required: dict[str, Strategy[Any]], optional: dict[str, Strategy[Any]] | None = None
) -> Strategy[Wire]:
    return st.fixed_dictionaries(required, optional=optional or {})


def text_content_json() -> Strategy[Wire]:
    """Draw wire JSON of a text block."""
    return _obj({"type": st.just("text"), "text": _texts()}, {"textSignature": _texts()})


def thinking_content_json() -> Strategy[Wire]:
    """Draw wire JSON of a thinking block (plain, signed or redacted)."""
    plain = _obj(
        {"type": st.just("thinking"), "thinking": _texts()}, {"thinkingSignature": _texts()}
    )
    redacted = _obj(
        {
            "type": st.just("thinking"),
            "thinking": st.just("[Reasoning redacted]"),
            "thinkingSignature": _texts(),
            "redacted": st.just(True),
        }
    )
    return plain | redacted


def image_content_json() -> Strategy[Wire]:
    """Draw wire JSON of an image block."""
    return _obj(
        {
            "type": st.just("image"),
            "data": st.binary(max_size=12).map(_b64),
            "mimeType": st.sampled_from(("image/png", "image/jpeg")),
        }
    )


def tool_call_json() -> Strategy[Wire]:
    """Draw wire JSON of a tool call."""
    return _obj(
        {"type": st.just("toolCall"), "id": _ids(), "name": _ids(), "arguments": json_objects()},
        {"thoughtSignature": _texts()},
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
    n = [draw(_counts()) for _ in range(4)]
    c = [draw(_prices() | st.just(0)) for _ in range(4)]
    return {
        "input": n[0],
        "output": n[1],
        "cacheRead": n[2],
        "cacheWrite": n[3],
        "totalTokens": sum(n),
        "cost": {
            "input": c[0],
            "output": c[1],
            "cacheRead": c[2],
            "cacheWrite": c[3],
            "total": c[0] + c[1] + c[2] + c[3],
        },
    }


def diagnostic_json() -> Strategy[Wire]:
    """Draw wire JSON of a diagnostic."""
    error = _obj(
        {"message": _texts()},
        {"name": _texts(8), "stack": _texts(), "code": _texts(8) | st.integers(0, 999)},
    )
    return _obj(
        {"type": _ids(), "timestamp": timestamps()},
        {"error": error, "details": json_objects()},
    )


def user_message_json() -> Strategy[Wire]:
    """Draw wire JSON of a user message."""
    content = _texts() | st.lists(user_content_json(), max_size=_MAX_BLOCKS)
    return _obj({"role": st.just("user"), "content": content, "timestamp": timestamps()})


@st.composite
def assistant_message_json(
    draw: st.DrawFn, stop_reasons: tuple[StopReason, ...] = _SUCCESS + _FAILURE
) -> Wire:
    """Draw wire JSON of an assistant message; `errorMessage` only for "error" and "aborted"."""
    stop = draw(st.sampled_from(stop_reasons))
    optional = {
        "responseModel": _ids(),
        "responseId": _ids(),
        "diagnostics": st.lists(diagnostic_json(), max_size=2),
    }
    base = {
        "role": st.just("assistant"),
        "content": st.lists(assistant_content_json(), max_size=_MAX_BLOCKS),
        "api": _ids(),
        "provider": _ids(),
        "model": _ids(),
        "usage": usage_json(),
        "stopReason": st.just(stop),
        "timestamp": timestamps(),
    }
    if stop in _FAILURE:
        base["errorMessage"] = _texts()
    out: Wire = draw(_obj(base, optional))
    return out


def tool_result_message_json() -> Strategy[Wire]:
    """Draw wire JSON of a tool result message."""
    return _obj(
        {
            "role": st.just("toolResult"),
            "toolCallId": _ids(),
            "toolName": _ids(),
            "content": st.lists(user_content_json(), max_size=_MAX_BLOCKS),
            "isError": st.booleans(),
            "timestamp": timestamps(),
        },
        {"details": _non_null_json(), "usage": usage_json()},
    )


def message_json() -> Strategy[Wire]:
    """Draw wire JSON of any message."""
    return user_message_json() | assistant_message_json() | tool_result_message_json()


def model_json() -> Strategy[Wire]:
    """Draw wire JSON of a model descriptor."""
    price = _prices() | st.just(0)
    return _obj(
        {
            "id": _ids(),
            "name": _texts(),
            "api": _ids(),
            "provider": _ids(),
            "baseUrl": _texts(),
            "reasoning": st.booleans(),
            "input": st.sampled_from((["text"], ["text", "image"])),
            "cost": _obj(
                {"input": price, "output": price, "cacheRead": price, "cacheWrite": price}
            ),
            "contextWindow": _counts(),
            "maxTokens": _counts(),
        },
        {
            "thinkingLevelMap": st.dictionaries(st.sampled_from(_LEVELS), st.none() | _ids()),
            "headers": st.dictionaries(_ids(), _texts(), max_size=3),
            "compat": json_objects(),
        },
    )


def tool_json() -> Strategy[Wire]:
    """Draw wire JSON of a tool descriptor."""
    return _obj({"name": _ids(), "description": _texts(), "parameters": json_objects()})


def context_json() -> Strategy[Wire]:
    """Draw wire JSON of a call context."""
    return _obj(
        {"messages": st.lists(message_json(), max_size=3)},
        {"systemPrompt": _texts(), "tools": st.lists(tool_json(), max_size=2)},
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
        message = draw(assistant_message_json(stop_reasons=_SUCCESS))
        return {"type": "done", "reason": message["stopReason"], "message": message}
    if kind == "error":
        message = draw(assistant_message_json(stop_reasons=_FAILURE))
        return {"type": "error", "reason": message["stopReason"], "error": message}
    partial = draw(assistant_message_json(stop_reasons=("stop",)))
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
        out["delta"] = draw(_texts(8))
    elif kind == "toolcall_end":
        out["toolCall"] = block
    elif kind.endswith("_end"):
        out["content"] = block[tag]
    out["partial"] = partial
    return out


__all__ = [
    "BLOCK_EVENT_CLASSES",
    "EVENT_TYPES",
    "MAX_SAFE_INTEGER",
    "assistant_content_json",
    "assistant_contents",
    "assistant_message_event_json",
    "assistant_message_events",
    "assistant_message_json",
    "assistant_messages",
    "block_events",
    "context_json",
    "contexts",
    "diagnostic_errors",
    "diagnostic_json",
    "diagnostics",
    "done_events",
    "error_events",
    "image_content_json",
    "image_contents",
    "json_objects",
    "json_values",
    "message_json",
    "messages",
    "model_costs",
    "model_json",
    "models",
    "start_events",
    "text_content_json",
    "text_contents",
    "thinking_budgets",
    "thinking_content_json",
    "thinking_contents",
    "timestamps",
    "tool_call_json",
    "tool_calls",
    "tool_json",
    "tool_result_message_json",
    "tool_result_messages",
    "tools",
    "usage_costs",
    "usage_json",
    "usages",
    "user_content_json",
    "user_contents",
    "user_message_json",
    "user_messages",
]
