"""Hypothesis strategies that draw mule.pi values (see `mule.testing.strategies`)."""

from __future__ import annotations

from typing import Any

from attrs import evolve

from mule.pi import (
    AssistantContent,
    AssistantMessage,
    AssistantMessageEvent,
    Context,
    Diagnostic,
    DiagnosticError,
    DoneEvent,
    ErrorEvent,
    ImageContent,
    InputKind,
    Message,
    Model,
    ModelCost,
    ModelCostTier,
    StartEvent,
    StopReason,
    SystemMessage,
    TextContent,
    TextDeltaEvent,
    TextEndEvent,
    TextStartEvent,
    ThinkingBudgets,
    ThinkingContent,
    ThinkingDeltaEvent,
    ThinkingEndEvent,
    ThinkingStartEvent,
    Tool,
    ToolCall,
    ToolCallDeltaEvent,
    ToolCallEndEvent,
    ToolCallStartEvent,
    ToolReference,
    ToolResultMessage,
    TranscriptContext,
    Usage,
    UsageCost,
    UserContent,
    UserMessage,
    needs_extra,
)
from mule.testing._strategy_scalars import (
    FAILURE_REASONS,
    MAX_BLOCKS,
    MODEL_THINKING_LEVELS,
    PARTIAL_REASONS,
    SUCCESS_REASONS,
    THINKING_LEVELS,
    Strategy,
    T,
    b64,
    counts,
    ids,
    json_objects,
    json_values,
    non_null_json,
    prices,
    texts,
    timestamps,
)

with needs_extra("testing", "mule.testing's strategies"):
    from hypothesis import strategies as st


def text_contents() -> Strategy[TextContent]:
    """Draw a text block, sometimes with a signature."""
    return st.builds(TextContent, texts(), st.none() | texts())


def thinking_contents() -> Strategy[ThinkingContent]:
    """Draw a thinking block: plain, signed, or redacted (then the payload is in the signature)."""
    plain = st.builds(ThinkingContent, texts(), st.none() | texts(), st.none() | st.just(False))
    redacted = st.builds(ThinkingContent, st.just("[Reasoning redacted]"), texts(), st.just(True))
    return plain | redacted


def image_contents() -> Strategy[ImageContent]:
    """Draw a base64 image block."""
    return st.builds(
        ImageContent,
        st.binary(max_size=12).map(b64),
        st.sampled_from(("image/png", "image/jpeg", "image/gif", "image/webp")),
    )


def tool_calls() -> Strategy[ToolCall]:
    """Draw a tool call whose arguments are a JSON object (maybe namespaced, maybe unparsed)."""
    return st.builds(
        ToolCall,
        ids(),
        ids(),
        json_objects(),
        st.none() | texts(),
        st.none() | ids(),
        st.none() | texts(),
    )


def user_contents() -> Strategy[UserContent]:
    """Draw a block allowed in user and tool-result content: text or image."""
    return text_contents() | image_contents()


def assistant_contents() -> Strategy[AssistantContent]:
    """Draw a block allowed in assistant content: text, thinking or a tool call."""
    return text_contents() | thinking_contents() | tool_calls()


# ------------------------------------------------------------------------------- messages


@st.composite
def usage_costs(draw: st.DrawFn) -> UsageCost:
    """Draw a cost breakdown whose total is the sum of its parts (or the provider's)."""
    a, b, c, d = (draw(prices()) for _ in range(4))
    from_provider = draw(st.none() | st.booleans())
    total = draw(prices()) if from_provider else a + b + c + d
    return UsageCost(a, b, c, d, total=total, total_from_provider=from_provider)


@st.composite
def usages(draw: st.DrawFn) -> Usage:
    """Draw token counts with `total_tokens` their sum, and a consistent cost."""
    n = [draw(counts()) for _ in range(4)]
    long_write = draw(st.none() | st.integers(0, n[3]))
    reasoning = draw(st.none() | st.integers(0, n[1]))
    return Usage(n[0], n[1], n[2], n[3], sum(n), draw(usage_costs()), long_write, reasoning)


def diagnostic_errors() -> Strategy[DiagnosticError]:
    """Draw the error part of a diagnostic."""
    code = st.none() | texts(8) | st.integers(min_value=-1000, max_value=100_000)
    return st.builds(DiagnosticError, texts(), st.none() | texts(8), st.none() | texts(), code)


def diagnostics() -> Strategy[Diagnostic]:
    """Draw a provider diagnostic."""
    return st.builds(
        Diagnostic,
        ids(),
        timestamps(),
        st.none() | diagnostic_errors(),
        st.none() | json_objects(),
    )


def user_messages() -> Strategy[UserMessage]:
    """Draw a user message with string or block content."""
    blocks = st.lists(user_contents(), max_size=MAX_BLOCKS).map(tuple)
    return st.builds(UserMessage, texts() | blocks, timestamps())


@st.composite
def assistant_messages(
    draw: st.DrawFn,
    stop_reasons: tuple[StopReason, ...] = SUCCESS_REASONS + FAILURE_REASONS,
    content: Strategy[AssistantContent] | None = None,
) -> AssistantMessage:
    """Draw an assistant message; `error_message` is set exactly for "error" and "aborted".

    A partial ("pending") has no duration or thinking level yet: the stream and the loop set
    them on the final message.
    """
    stop = draw(st.sampled_from(stop_reasons))
    final = stop != "pending"
    blocks = draw(st.lists(content or assistant_contents(), max_size=MAX_BLOCKS))
    diag = draw(st.none() | st.lists(diagnostics(), max_size=2).map(tuple))
    return AssistantMessage(
        content=tuple(blocks),
        api=draw(ids()),
        provider=draw(ids()),
        model=draw(ids()),
        usage=draw(usages()),
        stop_reason=stop,
        timestamp=draw(timestamps()),
        response_model=draw(st.none() | ids()),
        response_id=draw(st.none() | ids()),
        diagnostics=diag,
        error_message=draw(texts()) if stop in FAILURE_REASONS else None,
        provider_thinking_level=draw(st.none() | ids()),
        thinking_level=draw(st.none() | st.sampled_from(MODEL_THINKING_LEVELS)) if final else None,
        raw_stop_reason=draw(st.none() | ids()) if final else None,
        duration_ms=draw(st.none() | counts()) if final else None,
    )


def tool_result_messages() -> Strategy[ToolResultMessage]:
    """Draw a tool result; `details` is omitted or a non-null JSON value."""
    return st.builds(
        ToolResultMessage,
        tool_call_id=ids(),
        tool_name=ids(),
        content=st.lists(user_contents(), max_size=MAX_BLOCKS).map(tuple),
        is_error=st.booleans(),
        timestamp=timestamps(),
        details=st.none() | non_null_json(),
        usage=st.none() | usages(),
        duration_ms=st.none() | counts(),
    )


def system_messages() -> Strategy[SystemMessage]:
    """Draw a system message: text or text blocks, maybe sections and tool changes."""
    blocks = st.lists(text_contents(), max_size=MAX_BLOCKS).map(tuple)
    sections = st.dictionaries(ids(), st.none() | texts(), min_size=1, max_size=3)
    return st.builds(
        SystemMessage,
        content=texts() | blocks,
        timestamp=timestamps(),
        sections=st.none() | sections,
        tools_added=st.none() | st.lists(tools(), min_size=1, max_size=2).map(tuple),
        tools_removed=st.none()
        | st.lists(st.builds(ToolReference, ids()), min_size=1, max_size=2).map(tuple),
    )


def messages() -> Strategy[Message]:
    """Draw any message: system, user, assistant or tool result."""
    return system_messages() | user_messages() | assistant_messages() | tool_result_messages()


def transcript_contexts() -> Strategy[TranscriptContext]:
    """Draw a transcript context (Pi 1.6.0): messages, system messages among them."""
    return st.builds(TranscriptContext, st.lists(messages(), max_size=4).map(tuple))


# ---------------------------------------------------------------------- model and context


def model_costs() -> Strategy[ModelCost]:
    """Draw prices in USD per million tokens, sometimes with tiers for long prompts."""
    tier = st.builds(ModelCostTier, prices(), prices(), prices(), prices(), counts())
    tiers = st.none() | st.lists(tier, min_size=1, max_size=2).map(tuple)
    return st.builds(ModelCost, prices(), prices(), prices(), prices(), tiers)


def models() -> Strategy[Model]:
    """Draw a model descriptor, with or without a thinking map, headers and compat flags."""
    inputs: Strategy[tuple[InputKind, ...]] = st.sampled_from(
        (("text",), ("text", "image"), ("image", "text"))
    )
    level_map = st.dictionaries(st.sampled_from(THINKING_LEVELS), st.none() | ids(), max_size=5)
    return st.builds(
        Model,
        id=ids(),
        name=texts(),
        api=ids(),
        provider=ids(),
        base_url=texts(),
        reasoning=st.booleans(),
        input=inputs,
        cost=model_costs(),
        context_window=counts(),
        max_tokens=counts(),
        thinking_level_map=st.none() | level_map,
        headers=st.none() | st.dictionaries(ids(), texts(), max_size=3),
        compat=st.none() | json_objects(),
        prompt_cache=st.none()
        | st.fixed_dictionaries({}, optional={"short": counts(), "long": counts()}),
        input_limits=st.none() | json_objects(),
        type=st.none() | st.just("chat"),
        extras=st.none()
        | st.dictionaries(st.sampled_from(_MODEL_EXTRAS), json_values(), min_size=1),
    )


_MODEL_EXTRAS = ("samplingParams", "lab", "enabled", "providers")
"""Keys of Pi's models that mule keeps as extras."""


def tools() -> Strategy[Tool]:
    """Draw a tool descriptor with a small JSON-Schema object as parameters."""
    prop = st.fixed_dictionaries({"type": st.sampled_from(("string", "number", "boolean"))})
    schema = st.builds(
        lambda props: {"type": "object", "properties": props, "required": sorted(props)[:1]},
        st.dictionaries(ids(), prop, max_size=3),
    )
    return st.builds(Tool, ids(), texts(), schema)


def contexts() -> Strategy[Context]:
    """Draw a call context: messages, maybe a system prompt, maybe tools."""
    return st.builds(
        Context,
        st.lists(messages(), max_size=3).map(tuple),
        st.none() | texts(),
        st.none() | st.lists(tools(), max_size=2).map(tuple),
    )


def thinking_budgets() -> Strategy[ThinkingBudgets]:
    """Draw token budgets per thinking level."""
    n = st.none() | counts()
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
    # Pi's partials are "pending" (or carry the mapped reason once the provider sent it) and
    # have no error message until the terminal event.
    return assistant_messages(stop_reasons=PARTIAL_REASONS)


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
        extra["delta"] = draw(texts(8))
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
    message = draw(assistant_messages(stop_reasons=SUCCESS_REASONS))
    return DoneEvent(reason=message.stop_reason, message=message)  # type: ignore[arg-type]


@st.composite
def error_events(draw: st.DrawFn) -> ErrorEvent:
    """Draw an `error` event whose reason is its message's stop reason ("error" or "aborted")."""
    message = draw(assistant_messages(stop_reasons=FAILURE_REASONS))
    return ErrorEvent(reason=message.stop_reason, error=message)  # type: ignore[arg-type]


BLOCK_EVENT_CLASSES: tuple[type[Any], ...] = tuple(_BLOCK_OF_EVENT)
"""Every block event class, in Pi's order."""


def assistant_message_events() -> Strategy[AssistantMessageEvent]:
    """Draw any stream event."""
    blocks = [block_events(kind) for kind in BLOCK_EVENT_CLASSES]
    return st.one_of(start_events(), *blocks, done_events(), error_events())
