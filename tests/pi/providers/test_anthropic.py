"""The anthropic-messages provider against a real local HTTP server speaking Anthropic's SSE.

Tests the private rules of `mule.pi.providers._anthropic` (`stream_anthropic`,
`stream_simple_anthropic`, `build_params`, its version header and redacted-thinking placeholder) and
`mule.pi._partial_json`'s `repair_json` and `parse_json_with_repair` on Anthropic's tool input.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import anyio
import pytest
from attrs import evolve
from hypothesis import given
from hypothesis import strategies as st

from mule.pi import (
    ZERO_USAGE,
    AbortController,
    AssistantMessage,
    AssistantMessageEvent,
    Context,
    DoneEvent,
    ErrorEvent,
    ImageContent,
    Model,
    ModelCost,
    StreamOptions,
    TextContent,
    TextDeltaEvent,
    ThinkingContent,
    ThinkingEndEvent,
    ThinkingStartEvent,
    Tool,
    ToolCall,
    ToolCallDeltaEvent,
    ToolCallEndEvent,
    ToolResultMessage,
    UserMessage,
)
from mule.pi._partial_json import parse_json_with_repair, repair_json
from mule.pi.providers import ProviderSetupError, retry_after_ms
from mule.pi.providers._anthropic import (
    ANTHROPIC_VERSION,
    REDACTED_THINKING_PLACEHOLDER,
    AnthropicOptions,
    build_params,
    stream_anthropic,
    stream_simple_anthropic,
)
from mule.testing.fake_anthropic import (
    Drop,
    Event,
    FakeServer,
    Pause,
    Stall,
    Step,
    block_delta,
    block_start,
    block_stop,
    error_reply,
    message,
    message_delta,
    message_start,
    message_stop,
    ping,
    redacted_thinking_block,
    serve_script,
    sse_reply,
    stream_error,
    text_block,
    thinking_block,
)

COST = ModelCost(input=3, output=15, cache_read=0.3, cache_write=3.75)


def model_at(server: FakeServer, model_id: str = "claude-sonnet-4-5", **kw: Any) -> Model:
    """Return a Claude model pointed at the fake server."""
    return Model(
        id=model_id,
        name="Claude",
        api="anthropic-messages",
        provider="anthropic",
        base_url=server.url,
        reasoning=True,
        input=("text", "image"),
        cost=COST,
        context_window=200000,
        max_tokens=64000,
        **kw,
    )


def ctx(text: str = "hi", **kw: Any) -> Context:
    """Return a one-message context."""
    return Context(messages=(UserMessage(text, 1),), **kw)


def opts(**kw: Any) -> StreamOptions:
    """Return stream options with a test key and no SDK retries."""
    return StreamOptions(api_key=kw.pop("api_key", "sk-ant-test"), max_retries=0, **kw)


async def collect(stream: Any) -> list[AssistantMessageEvent]:
    """Drain a stream."""
    return [event async for event in stream]


def final(events: Sequence[AssistantMessageEvent]) -> AssistantMessage:
    """Return the terminal event's message."""
    last = events[-1]
    assert isinstance(last, DoneEvent | ErrorEvent)
    return last.message if isinstance(last, DoneEvent) else last.error


@pytest.mark.anyio
async def test_text_stream_events_usage_and_request() -> None:
    """A text reply streams start/text events and done; usage sums four counts and is priced."""
    events = message(
        text_block(0, "Hel", "lo"),
        input_tokens=100,
        output_tokens=20,
        cache_read=1000,
        cache_creation=50,
    )
    async with serve_script(sse_reply(events)) as server:
        model = model_at(server)
        got = await collect(stream_anthropic(model, ctx(system_prompt="be nice"), opts()))
        request = server.requests[0]
    assert [e.type for e in got] == [
        "start",
        "text_start",
        "text_delta",
        "text_delta",
        "text_end",
        "done",
    ]
    msg = final(got)
    assert msg.content == (TextContent("Hello"),)
    assert msg.stop_reason == "stop"
    assert msg.response_id == "msg_01XFDUDYJgAACzvnptvVoYEL"
    assert (msg.usage.input, msg.usage.output) == (100, 20)
    assert (msg.usage.cache_read, msg.usage.cache_write) == (1000, 50)
    assert msg.usage.total_tokens == 1170
    assert msg.usage.cost.input == pytest.approx(3 / 1e6 * 100)
    assert msg.usage.cost.cache_write == pytest.approx(3.75 / 1e6 * 50)
    assert msg.usage.cost.total == pytest.approx((3 * 100 + 15 * 20 + 0.3 * 1000 + 3.75 * 50) / 1e6)
    assert isinstance(got[2], TextDeltaEvent)
    assert got[2].partial.content == (TextContent("Hel"),)
    # The request: endpoint, headers and body as Pi sends them.
    assert request.method == "POST"
    assert request.path == "/v1/messages"
    assert request.headers["x-api-key"] == "sk-ant-test"
    assert request.headers["anthropic-version"] == ANTHROPIC_VERSION
    assert request.headers["anthropic-beta"] == "interleaved-thinking-2025-05-14"
    body = request.json()
    assert body["model"] == "claude-sonnet-4-5"
    assert body["stream"] is True
    assert body["max_tokens"] == 64000 // 3
    assert body["system"] == [
        {"type": "text", "text": "be nice", "cache_control": {"type": "ephemeral"}}
    ]
    assert body["messages"] == [
        {
            "role": "user",
            "content": [{"type": "text", "text": "hi", "cache_control": {"type": "ephemeral"}}],
        }
    ]


@pytest.mark.anyio
async def test_thinking_signature_and_redacted_thinking() -> None:
    """Thinking keeps its streamed signature; redacted thinking is a placeholder with no deltas."""
    events = message(
        thinking_block(0, "Let me ", "think.", signature="EqQBCgIYAhIM"),
        redacted_thinking_block(1, "EmwKAhgBEgy3va3pzix"),
        text_block(2, "Answer"),
    )
    async with serve_script(sse_reply(events)) as server:
        got = await collect(stream_anthropic(model_at(server), ctx(), opts()))
    msg = final(got)
    assert msg.content == (
        ThinkingContent("Let me think.", "EqQBCgIYAhIM"),
        ThinkingContent(REDACTED_THINKING_PLACEHOLDER, "EmwKAhgBEgy3va3pzix", True),
        TextContent("Answer"),
    )
    redacted = [e for e in got if getattr(e, "content_index", None) == 1]
    assert [e.type for e in redacted] == ["thinking_start", "thinking_end"]
    assert isinstance(redacted[1], ThinkingEndEvent)
    assert redacted[1].content == REDACTED_THINKING_PLACEHOLDER
    assert isinstance(redacted[0], ThinkingStartEvent)


@pytest.mark.anyio
async def test_parallel_tool_calls_interleaved_by_index() -> None:
    """Two tool_use blocks whose deltas interleave map to their own content indices."""
    events = [
        message_start(input_tokens=5),
        *text_block(0, "Calling."),
        block_start(1, {"type": "tool_use", "id": "toolu_A", "name": "read", "input": {}}),
        block_start(2, {"type": "tool_use", "id": "toolu_B", "name": "ls", "input": {}}),
        block_delta(1, {"type": "input_json_delta", "partial_json": '{"path": "a.'}),
        block_delta(2, {"type": "input_json_delta", "partial_json": '{"dir": "/tmp"}'}),
        ping(),
        block_delta(1, {"type": "input_json_delta", "partial_json": 'txt"}'}),
        block_stop(2),
        block_stop(1),
        message_delta("tool_use", output_tokens=30),
        message_stop(),
    ]
    tools = (Tool("read", "Read", {"type": "object"}), Tool("ls", "List", {"type": "object"}))
    async with serve_script(sse_reply(events)) as server:
        got = await collect(stream_anthropic(model_at(server), ctx(tools=tools), opts()))
        body = server.requests[0].json()
    msg = final(got)
    assert msg.stop_reason == "toolUse"
    assert msg.content[1:] == (
        ToolCall("toolu_A", "read", {"path": "a.txt"}),
        ToolCall("toolu_B", "ls", {"dir": "/tmp"}),
    )
    deltas = [e for e in got if isinstance(e, ToolCallDeltaEvent)]
    assert [(e.content_index, e.delta) for e in deltas] == [
        (1, '{"path": "a.'),
        (2, '{"dir": "/tmp"}'),
        (1, 'txt"}'),
    ]
    assert deltas[0].partial.content[1] == ToolCall("toolu_A", "read", {"path": "a."})
    ends = [e for e in got if isinstance(e, ToolCallEndEvent)]
    assert [e.content_index for e in ends] == [2, 1]
    assert ends[1].tool_call == ToolCall("toolu_A", "read", {"path": "a.txt"})
    assert body["tools"][0] == {
        "name": "read",
        "description": "Read",
        "eager_input_streaming": True,
        "input_schema": {"type": "object", "properties": {}, "required": []},
    }
    assert body["tools"][1]["cache_control"] == {"type": "ephemeral"}


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("wire", "expected"),
    [
        ("end_turn", "stop"),
        ("pause_turn", "stop"),
        ("stop_sequence", "stop"),
        ("max_tokens", "length"),
        ("tool_use", "toolUse"),
    ],
)
async def test_stop_reasons_map_to_pi(wire: str, expected: str) -> None:
    """Anthropic's successful stop reasons map onto Pi's."""
    async with serve_script(sse_reply(message(text_block(0, "x"), stop_reason=wire))) as server:
        got = await collect(stream_anthropic(model_at(server), ctx(), opts()))
    assert isinstance(got[-1], DoneEvent)
    assert got[-1].reason == expected


@pytest.mark.anyio
@pytest.mark.parametrize("wire", ["refusal", "sensitive", "brand_new_reason"])
async def test_failing_stop_reasons_end_in_error_keeping_content(wire: str) -> None:
    """A refusal (or an unknown reason) ends in an error event that keeps the text so far.

    The message says why, as Pi 1.6.0 words it, and keeps Anthropic's own reason.
    """
    async with serve_script(sse_reply(message(text_block(0, "I can't"), stop_reason=wire))) as s:
        got = await collect(stream_anthropic(model_at(s), ctx(), opts()))
    last = got[-1]
    assert isinstance(last, ErrorEvent)
    assert last.reason == "error"
    assert last.error.content == (TextContent("I can't"),)
    expected = {
        "refusal": "The model refused to complete the request",
        "sensitive": "Provider stopped with: sensitive",
        "brand_new_reason": "Unhandled stop reason: brand_new_reason",
    }[wire]
    assert last.error.error_message == expected
    assert last.error.raw_stop_reason == wire


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("status", "text"),
    [
        (400, "messages: at least one message is required"),
        (401, "invalid x-api-key"),
        (500, "Internal server error"),
        (529, "Overloaded"),
    ],
)
async def test_http_errors_become_error_events_without_start(status: int, text: str) -> None:
    """An HTTP error ends the stream with one error event, no start, status in the text."""
    async with serve_script(error_reply(status, text)) as server:
        got = await collect(stream_anthropic(model_at(server), ctx(), opts()))
    assert len(got) == 1
    assert isinstance(got[0], ErrorEvent)
    assert got[0].reason == "error"
    assert got[0].error.error_message is not None
    assert got[0].error.error_message.startswith(str(status))
    assert text in got[0].error.error_message
    assert got[0].error.content == ()


@pytest.mark.anyio
async def test_429_retry_after_is_recorded_for_the_loop() -> None:
    """A 429 with Retry-After leaves the requested wait on the failed message."""
    reply = error_reply(429, "rate limited", headers=(("retry-after", "7"),))
    async with serve_script(reply) as server:
        got = await collect(stream_anthropic(model_at(server), ctx(), opts()))
    msg = final(got)
    assert msg.stop_reason == "error"
    assert retry_after_ms(msg) == 7000.0


@pytest.mark.anyio
async def test_overloaded_529_is_retried_only_when_asked() -> None:
    """Pi 1.6.0 sends one request by default; with max_retries a 529 is resent, then succeeds."""
    replies = (
        error_reply(529, "Overloaded", headers=(("retry-after-ms", "10"),)),
        sse_reply(message(text_block(0, "ok"))),
    )
    async with serve_script(*replies) as server:
        options = StreamOptions(api_key="sk-ant-test")
        got = await collect(stream_anthropic(model_at(server), ctx(), options))
        assert len(server.requests) == 1
    assert final(got).stop_reason == "error"
    async with serve_script(*replies) as server:
        options = StreamOptions(api_key="sk-ant-test", max_retries=2)
        got = await collect(stream_anthropic(model_at(server), ctx(), options))
        assert len(server.requests) == 2
    assert final(got).content == (TextContent("ok"),)


@pytest.mark.anyio
async def test_in_stream_error_event_keeps_content() -> None:
    """An SSE `error` event ends the stream with its data as the error text, content kept."""
    events = [message_start(), *text_block(0, "partial"), stream_error()]
    async with serve_script(sse_reply(events)) as server:
        got = await collect(stream_anthropic(model_at(server), ctx(), opts()))
    msg = final(got)
    assert msg.stop_reason == "error"
    assert msg.content == (TextContent("partial"),)
    assert msg.error_message is not None
    assert json.loads(msg.error_message)["error"]["type"] == "overloaded_error"


@pytest.mark.anyio
async def test_disconnect_mid_stream_is_an_error() -> None:
    """A connection dropped mid-body is an error event that keeps the text streamed so far."""
    events: list[Event | Step] = [message_start(), block_start(0, {"type": "text", "text": ""})]
    events += [block_delta(0, {"type": "text_delta", "text": "so far"}), Drop()]
    async with serve_script(sse_reply(events)) as server:
        got = await collect(stream_anthropic(model_at(server), ctx(), opts()))
    msg = final(got)
    assert msg.stop_reason == "error"
    assert msg.content == (TextContent("so far"),)


@pytest.mark.anyio
async def test_stream_ending_before_message_stop_is_an_error() -> None:
    """A body that ends cleanly but without message_stop is Pi's truncation error."""
    events = [message_start(), *text_block(0, "x")]
    async with serve_script(sse_reply(events)) as server:
        got = await collect(stream_anthropic(model_at(server), ctx(), opts()))
    assert final(got).error_message == "Anthropic stream ended before message_stop"


@pytest.mark.anyio
async def test_malformed_chunk_is_an_error() -> None:
    """An event whose data is not JSON ends the stream with a parse error."""
    events = [message_start(), ("content_block_start", "{not json")]
    async with serve_script(sse_reply(events)) as server:
        got = await collect(stream_anthropic(model_at(server), ctx(), opts()))
    msg = final(got)
    assert msg.stop_reason == "error"
    assert msg.error_message is not None
    assert msg.error_message.startswith("Could not parse Anthropic SSE event content_block_start")


@pytest.mark.anyio
async def test_abort_while_stalled_ends_promptly_as_aborted() -> None:
    """Aborting a stalled stream yields one aborted error event at once, content kept."""
    controller = AbortController()
    events: list[Event | Step] = [message_start(), *text_block(0, "before"), Stall()]
    async with serve_script(sse_reply(events)) as server:
        stream = stream_anthropic(model_at(server), ctx(), opts(signal=controller.signal))
        seen: list[AssistantMessageEvent] = []
        with anyio.fail_after(5):
            async for event in stream:
                seen.append(event)
                if event.type == "text_end":
                    controller.abort()
    msg = final(seen)
    assert msg.stop_reason == "aborted"
    assert msg.content == (TextContent("before"),)
    assert isinstance(seen[-1], ErrorEvent)
    assert seen[-1].reason == "aborted"


@pytest.mark.anyio
async def test_abort_mid_stream_from_another_task() -> None:
    """An abort fired from elsewhere while the server pauses ends the stream as aborted."""
    controller = AbortController()
    pausing = anyio.Event()  # the first block is in: the server now pauses
    events: list[Event | Step] = [message_start(), *text_block(0, "a"), Pause(5000)]
    events += text_block(1, "b")
    async with serve_script(sse_reply(events)) as server, anyio.create_task_group() as tg:
        stream = stream_anthropic(model_at(server), ctx(), opts(signal=controller.signal))

        async def abort_soon() -> None:
            await pausing.wait()
            await anyio.sleep(0.05)
            controller.abort()

        tg.start_soon(abort_soon)
        got: list[AssistantMessageEvent] = []
        with anyio.fail_after(5):
            async for event in stream:
                got.append(event)
                if event.type == "text_end":
                    pausing.set()
    assert final(got).stop_reason == "aborted"
    assert final(got).content == (TextContent("a"),)


@pytest.mark.anyio
async def test_signal_aborted_before_the_call() -> None:
    """An already-aborted signal gives one aborted error event and sends no request."""
    async with serve_script() as server:
        signal = AbortController()
        signal.abort()
        got = await collect(stream_anthropic(model_at(server), ctx(), opts(signal=signal.signal)))
        assert server.requests == []
    assert len(got) == 1
    assert final(got).stop_reason == "aborted"


@pytest.mark.anyio
async def test_message_delta_usage_without_input_keeps_message_start_counts() -> None:
    """Counts missing from message_delta keep the values message_start reported."""
    events = [
        message_start(input_tokens=40, cache_read=7),
        *text_block(0, "x"),
        message_delta("end_turn", output_tokens=9),
        message_stop(),
    ]
    async with serve_script(sse_reply(events)) as server:
        got = await collect(stream_anthropic(model_at(server), ctx(), opts()))
    usage = final(got).usage
    assert (usage.input, usage.output, usage.cache_read, usage.total_tokens) == (40, 9, 7, 56)


@pytest.mark.anyio
async def test_simple_budget_thinking_and_oauth_headers() -> None:
    """StreamSimple with a level on a budget model sends Pi's budget; OAuth keys use Bearer."""
    async with serve_script(sse_reply(message(text_block(0, "x")))) as server:
        model = model_at(server, "claude-sonnet-4-5")
        options = opts(api_key="sk-ant-oat01-abc", reasoning="medium", temperature=0.5)
        await collect(stream_simple_anthropic(model, ctx(), options))
        request = server.requests[0]
    body = request.json()
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 8192, "display": "summarized"}
    assert body["max_tokens"] == 64000  # the model's cap (Pi 1.6.0 no longer caps at 32000)
    assert "temperature" not in body
    assert request.headers["authorization"] == "Bearer sk-ant-oat01-abc"
    assert "x-api-key" not in request.headers
    assert request.headers["anthropic-beta"].startswith("claude-code-20250219,oauth-2025-04-20")
    assert body["system"][0]["text"].startswith("You are Claude Code")


@pytest.mark.anyio
async def test_simple_adaptive_thinking_and_disabled_thinking() -> None:
    """Adaptive models get an effort; no level sends thinking disabled and keeps temperature."""
    replies = (sse_reply(message(text_block(0, "x"))), sse_reply(message(text_block(0, "y"))))
    async with serve_script(*replies) as server:
        # Pi 1.6.0 asks the model (its catalogue's compat), not the id, for adaptive thinking.
        adaptive = model_at(server, "claude-opus-4-6", compat={"forceAdaptiveThinking": True})
        await collect(stream_simple_anthropic(adaptive, ctx(), opts(reasoning="minimal")))
        plain = model_at(server, "claude-sonnet-4-5")
        await collect(stream_simple_anthropic(plain, ctx(), opts(temperature=0.2)))
        first, second = (r.json() for r in server.requests)
        headers = server.requests[0].headers
    assert first["thinking"] == {"type": "adaptive", "display": "summarized"}
    assert first["output_config"] == {"effort": "low"}
    assert "anthropic-beta" not in headers
    assert second["thinking"] == {"type": "disabled"}
    assert second["temperature"] == 0.2


def test_simple_without_key_raises_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """StreamSimple with no key anywhere raises before a stream exists."""
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_OAUTH_TOKEN", raising=False)
    model = Model("claude-x", "C", "anthropic-messages", "anthropic", "http://127.0.0.1:9")
    with pytest.raises(ProviderSetupError, match="No API key for provider: anthropic"):
        stream_simple_anthropic(model, ctx(), StreamOptions())


def test_custom_budgets_and_long_retention() -> None:
    """Custom budgets and long cache retention shape the body as in Pi."""
    model = Model("claude-3-7", "C", "anthropic-messages", "anthropic", "x", reasoning=True)
    extra = AnthropicOptions(thinking_enabled=True, thinking_budget_tokens=3000)
    body = build_params(model, ctx(), False, opts(cache_retention="long"), extra)
    assert body["thinking"]["budget_tokens"] == 3000
    assert body["messages"][0]["content"][0]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}
    none = build_params(model, ctx(), False, opts(cache_retention="none"), extra)
    assert none["messages"][0]["content"] == "hi"


def test_transcript_conversion_batches_results_and_rewrites_foreign_turns() -> None:
    """Tool results batch into one user turn; foreign thinking becomes text; errors drop."""
    model = Model(
        "claude-sonnet-4-5", "C", "anthropic-messages", "anthropic", "x", input=("text", "image")
    )
    mine = AssistantMessage(
        (
            ThinkingContent("plan", "sig"),
            ThinkingContent("", None),
            ThinkingContent(REDACTED_THINKING_PLACEHOLDER, "opaque", True),
            ToolCall("call|1", "a", {"x": 1}),
            ToolCall("call|2", "b", {}),
        ),
        "anthropic-messages",
        "anthropic",
        "claude-sonnet-4-5",
        ZERO_USAGE,
        "toolUse",
        2,
    )
    foreign = AssistantMessage(
        (ThinkingContent("openai thoughts", "enc"), TextContent("hello")),
        "openai-responses",
        "openai",
        "gpt-5",
        ZERO_USAGE,
        "stop",
        5,
    )
    failed = evolve(foreign, stop_reason="error", error_message="boom")
    messages = (
        UserMessage("q", 1),
        mine,
        ToolResultMessage("call|1", "a", (TextContent("one"),), False, 3),
        ToolResultMessage("call|2", "b", (ImageContent("AAAA", "image/png"),), True, 4),
        foreign,
        failed,
        UserMessage("next", 6),
    )
    body = build_params(
        model, Context(messages=messages), False, opts(cache_retention="none"), AnthropicOptions()
    )
    sent = body["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "user", "assistant", "user"]
    assert sent[1]["content"] == [
        {"type": "thinking", "thinking": "plan", "signature": "sig"},
        {"type": "redacted_thinking", "data": "opaque"},
        {"type": "tool_use", "id": "call|1", "name": "a", "input": {"x": 1}},
        {"type": "tool_use", "id": "call|2", "name": "b", "input": {}},
    ]
    assert sent[2]["content"][0] == {
        "type": "tool_result",
        "tool_use_id": "call|1",
        "content": "one",
        "is_error": False,
    }
    assert sent[2]["content"][1]["content"][0] == {"type": "text", "text": "(see attached image)"}
    assert sent[3]["content"] == [
        {"type": "text", "text": "openai thoughts"},
        {"type": "text", "text": "hello"},
    ]


@given(st.text(alphabet=st.characters(codec="utf-8"), max_size=40))
def test_repair_leaves_valid_json_strings_meaning_unchanged(text: str) -> None:
    """Repairing a valid JSON document never changes what it decodes to."""
    doc = json.dumps({"t": text}, ensure_ascii=False)
    assert json.loads(repair_json(doc)) == {"t": text}


def test_repair_accepts_raw_control_characters_and_bad_escapes() -> None:
    """Raw newlines and invalid escapes inside strings are repaired as Pi does."""
    assert parse_json_with_repair('{"a": "x\ny", "b": "c\\qd"}') == {"a": "x\ny", "b": "c\\qd"}
