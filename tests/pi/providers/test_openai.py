"""The openai-completions provider and the shared provider plumbing, against a real local server.

Also tests the private rules `mule.pi.providers._simple.reasoning_effort` and
`adjust_max_tokens_for_thinking`, and `mule.pi.providers._transport`'s `parse_retry_after` and
`status_error_message`.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from email.utils import format_datetime
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mule.pi import (
    ZERO_USAGE,
    AbortController,
    AbortSignal,
    AssistantMessage,
    AssistantMessageEvent,
    AssistantMessageEventStream,
    Context,
    DoneEvent,
    ErrorEvent,
    ImageContent,
    JsonValue,
    Model,
    ModelCost,
    ProviderResponse,
    StreamOptions,
    SystemMessage,
    TextContent,
    ThinkingContent,
    Tool,
    ToolCall,
    ToolReference,
    ToolResultMessage,
    TranscriptContext,
    UserMessage,
    stringify,
)
from mule.pi.providers import (
    ProviderSetupError,
    clamp_thinking_level,
    env_api_key,
    register_provider,
    retry_after_ms,
    stream_simple,
    unregister_provider,
)
from mule.pi.providers._simple import adjust_max_tokens_for_thinking, reasoning_effort
from mule.pi.providers._transport import parse_retry_after, status_error_message
from mule.testing.fake_openai import (
    FakeOpenAI,
    chat_stream,
    chat_text,
    chat_usage,
    openai_error,
    tool_call,
)

USER = UserMessage("hi", 1)


@pytest.fixture(scope="module")
def server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as fake:
        yield fake


@pytest.fixture
def fake(server: FakeOpenAI) -> FakeOpenAI:
    server.reset()
    return server


def model_for(fake: FakeOpenAI, **kw: Any) -> Model:
    base: dict[str, Any] = {
        "id": "gpt-fake",
        "name": "Fake",
        "api": "openai-completions",
        "provider": "openai",
        "base_url": fake.base_url,
        "max_tokens": 64000,
    }
    base.update(kw)
    return Model(**base)


def opts(**kw: Any) -> StreamOptions:
    kw.setdefault("api_key", "sk-test")
    kw.setdefault("max_retries", 0)
    return StreamOptions(**kw)


async def collect(stream: AssistantMessageEventStream) -> list[AssistantMessageEvent]:
    with anyio.fail_after(10):
        return [ev async for ev in stream]


def body(fake: FakeOpenAI, i: int = -1) -> Any:
    return fake.requests[i]["body"]


def terminal(events: list[AssistantMessageEvent]) -> AssistantMessage:
    last = events[-1]
    assert isinstance(last, DoneEvent | ErrorEvent)
    return last.message if isinstance(last, DoneEvent) else last.error


# -- streaming -------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_text_stream_events_usage_and_request(fake: FakeOpenAI) -> None:
    """A text reply streams start, text_start, deltas, text_end, done; usage and id are kept."""
    fake.push(chat_text("Hello world", pieces=3, usage=chat_usage(prompt=12, completion=4)))
    model = model_for(fake, cost=ModelCost(input=2.0, output=8.0))
    events = await collect(stream_simple(model, Context((USER,), system_prompt="sys"), opts()))
    assert [e.type for e in events] == [
        "start",
        "text_start",
        "text_delta",
        "text_delta",
        "text_delta",
        "text_end",
        "done",
    ]
    msg = terminal(events)
    assert msg.content == (TextContent("Hello world"),)
    assert msg.stop_reason == "stop"
    assert msg.response_id == "chatcmpl-fake"
    assert (msg.usage.input, msg.usage.output, msg.usage.total_tokens) == (12, 4, 16)
    assert msg.usage.cost.total == pytest.approx(12 * 2 / 1e6 + 4 * 8 / 1e6)
    sent = body(fake)
    assert sent["messages"] == [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "hi"},
    ]
    assert sent["stream"] is True
    assert sent["stream_options"] == {"include_usage": True}
    assert sent["store"] is False
    assert sent["max_completion_tokens"] == 64000  # the model's cap (no 32000 cap since 1.x)
    assert fake.requests[-1]["headers"]["authorization"] == "Bearer sk-test"
    assert fake.requests[-1]["path"] == "/v1/chat/completions"


@pytest.mark.anyio
async def test_a_transcript_context_sends_its_replayed_prompt_and_tools(fake: FakeOpenAI) -> None:
    """Pi 1.6.0: the prompt and the tools come from the transcript's system messages."""
    fake.push(chat_text("ok"))
    old = Tool("old", "gone", {"type": "object"})
    new = Tool("new", "arrived", {"type": "object"})
    messages = (
        SystemMessage("Base.", 0, tools_added=(old,)),
        USER,
        SystemMessage("", 2, sections={"rules": "Be brief."}, tools_added=(new,)),
        SystemMessage("Later.", 3, tools_removed=(ToolReference("old"),)),
    )
    await collect(stream_simple(model_for(fake), TranscriptContext(messages), opts()))
    sent = body(fake)
    assert sent["messages"] == [
        {"role": "system", "content": "Base.\n\nLater.\n\nBe brief."},
        {"role": "user", "content": "hi"},
    ]
    assert [t["function"]["name"] for t in sent["tools"]] == ["new"]


@pytest.mark.anyio
@pytest.mark.parametrize("field", ["reasoning_content", "reasoning", "reasoning_text"])
async def test_reasoning_fields_become_thinking(fake: FakeOpenAI, field: str) -> None:
    """Every reasoning field Pi knows streams a thinking block signed with the field's name."""
    fake.push(chat_stream(reasoning="let me see", text="42", pieces=2, reasoning_field=field))
    model = model_for(fake, reasoning=True)
    events = await collect(stream_simple(model, Context((USER,)), opts(reasoning="high")))
    kinds = [e.type for e in events]
    assert kinds[:4] == ["start", "thinking_start", "thinking_delta", "thinking_delta"]
    msg = terminal(events)
    assert msg.content == (ThinkingContent("let me see", field), TextContent("42"))
    assert body(fake)["reasoning_effort"] == "high"


@pytest.mark.anyio
async def test_parallel_tool_calls_by_index_with_usage(fake: FakeOpenAI) -> None:
    """Interleaved argument fragments of parallel calls land in their own blocks by index."""
    calls = [
        tool_call("call_a", "read", {"path": "/tmp/a.txt"}, pieces=4),
        tool_call("call_b", "ls", {"dir": "/", "all": True}, pieces=3),
    ]
    fake.push(chat_stream(calls=calls, interleave=True, usage=chat_usage(20, 7, cached=5)))
    model = model_for(fake, cost=ModelCost(input=1.0, output=2.0, cache_read=0.5))
    events = await collect(stream_simple(model, Context((USER,)), opts()))
    msg = terminal(events)
    assert msg.stop_reason == "toolUse"
    assert msg.content == (
        ToolCall("call_a", "read", {"path": "/tmp/a.txt"}),
        ToolCall("call_b", "ls", {"dir": "/", "all": True}),
    )
    ends = [e for e in events if e.type == "toolcall_end"]
    assert [e.content_index for e in ends] == [0, 1]
    deltas = [e for e in events if e.type == "toolcall_delta"]
    assert {e.content_index for e in deltas} == {0, 1}
    assert (msg.usage.input, msg.usage.cache_read, msg.usage.output) == (15, 5, 7)
    assert msg.usage.cost.cache_read == pytest.approx(5 * 0.5 / 1e6)


@pytest.mark.anyio
async def test_partial_arguments_are_parsed_while_streaming(fake: FakeOpenAI) -> None:
    """A tool call's partial arguments parse leniently at every delta."""
    fake.push(chat_stream(calls=[tool_call("c", "f", {"text": "abcdef"}, pieces=5)]))
    events = await collect(stream_simple(model_for(fake), Context((USER,)), opts()))
    partials = [e.partial.content[0] for e in events if e.type == "toolcall_delta"]
    assert all(isinstance(p, ToolCall) for p in partials)
    assert partials[-1] == ToolCall("c", "f", {"text": "abcdef"})


@pytest.mark.anyio
async def test_length_and_content_filter_finish_reasons(fake: FakeOpenAI) -> None:
    """finish_reason length → done(length); content_filter → error with Pi's text."""
    fake.push(
        chat_text("cut", finish_reason="length"), chat_text("no", finish_reason="content_filter")
    )
    first = await collect(stream_simple(model_for(fake), Context((USER,)), opts()))
    assert isinstance(first[-1], DoneEvent)
    assert first[-1].reason == "length"
    second = await collect(stream_simple(model_for(fake), Context((USER,)), opts()))
    msg = terminal(second)
    assert msg.stop_reason == "error"
    assert msg.error_message == "Provider finish_reason: content_filter"
    assert msg.content == (TextContent("no"),)


# -- HTTP errors -----------------------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("status", "text"),
    [
        (400, "Invalid 'messages': empty"),
        (401, "Incorrect API key provided"),
        (500, "The server had an error"),
        (529, "Overloaded"),
    ],
)
async def test_http_errors_end_with_one_error_event(
    fake: FakeOpenAI, status: int, text: str
) -> None:
    """An HTTP error gives a lone error event "<status>: <error body>" and a diagnostic."""
    reply = openai_error(status, text)
    fake.push(reply)
    events = await collect(stream_simple(model_for(fake), Context((USER,)), opts()))
    assert [e.type for e in events] == ["error"]
    msg = terminal(events)
    assert msg.stop_reason == "error"
    assert msg.error_message == f"{status}: {stringify(reply['body']['error'])}"
    assert msg.diagnostics is not None
    assert msg.diagnostics[0].details == {"status": status}
    assert retry_after_ms(msg) is None


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("headers", "expected"),
    [({"retry-after": "2"}, 2000.0), ({"retry-after-ms": "1250", "retry-after": "9"}, 1250.0)],
)
async def test_429_records_retry_after(
    fake: FakeOpenAI, headers: dict[str, str], expected: float
) -> None:
    """A 429's Retry-After (seconds or ms) is readable from the failed message."""
    fake.push(openai_error(429, "Rate limit reached", type="requests", headers=headers))
    events = await collect(stream_simple(model_for(fake), Context((USER,)), opts()))
    msg = terminal(events)
    assert (msg.error_message or "").startswith('429: {"message":"Rate limit reached"')
    assert retry_after_ms(msg) == expected


@pytest.mark.anyio
async def test_sdk_level_retry_honours_retry_after(fake: FakeOpenAI) -> None:
    """With max_retries, a 500 is retried after the server's short wait, then succeeds."""
    fake.push(openai_error(500, "boom", headers={"retry-after-ms": "5"}), chat_text("ok"))
    events = await collect(stream_simple(model_for(fake), Context((USER,)), opts(max_retries=2)))
    assert terminal(events).content == (TextContent("ok"),)
    assert len(fake.requests) == 2


@pytest.mark.anyio
async def test_retry_delay_above_cap_fails_at_once(fake: FakeOpenAI) -> None:
    """A server wait longer than max_retry_delay_ms fails at once with "retry delay" text."""
    fake.push(openai_error(429, "slow down", headers={"retry-after": "120"}), chat_text("never"))
    started = time.monotonic()
    options = opts(max_retries=2, max_retry_delay_ms=1000)
    events = await collect(stream_simple(model_for(fake), Context((USER,)), options))
    msg = terminal(events)
    assert "retry delay" in (msg.error_message or "")
    assert "429 slow down" in (msg.error_message or "")
    assert retry_after_ms(msg) == 120_000
    assert time.monotonic() - started < 5
    assert len(fake.requests) == 1


@pytest.mark.anyio
async def test_no_retry_for_400(fake: FakeOpenAI) -> None:
    """Client errors are not retried even when retries are allowed."""
    fake.push(openai_error(400, "bad"), chat_text("never"))
    events = await collect(stream_simple(model_for(fake), Context((USER,)), opts(max_retries=2)))
    assert (terminal(events).error_message or "").startswith('400: {"message":"bad"')
    assert len(fake.requests) == 1


# -- broken streams --------------------------------------------------------------------------


def _opening(text: str = "partial") -> list[dict[str, Any]]:
    # The role chunk and one content chunk of a reply, with no finish.
    events: list[dict[str, Any]] = chat_text(text)["events"][:2]
    return events


@pytest.mark.anyio
async def test_disconnect_mid_stream_keeps_content(fake: FakeOpenAI) -> None:
    """A dropped connection ends with an error event that keeps the text so far."""
    fake.push({"events": _opening(), "then": "disconnect"})
    events = await collect(stream_simple(model_for(fake), Context((USER,)), opts()))
    assert [e.type for e in events] == ["start", "text_start", "text_delta", "error"]
    msg = terminal(events)
    assert msg.stop_reason == "error"
    assert "terminated" in (msg.error_message or "")
    assert msg.content == (TextContent("partial"),)


@pytest.mark.anyio
async def test_malformed_chunk_is_an_error(fake: FakeOpenAI) -> None:
    """A chunk that is not JSON ends the stream with an error, content kept."""
    fake.push({"events": [*_opening(), {"raw": "data: {not json\n\n"}]})
    events = await collect(stream_simple(model_for(fake), Context((USER,)), opts()))
    msg = terminal(events)
    assert msg.stop_reason == "error"
    assert (msg.error_message or "").startswith("Could not parse stream chunk as JSON")
    assert msg.content == (TextContent("partial"),)


@pytest.mark.anyio
async def test_stream_ending_without_finish_is_an_error(fake: FakeOpenAI) -> None:
    """A body that ends with no finish_reason and no [DONE] is a failure, not a success."""
    fake.push({"events": _opening(), "then": "end"})
    events = await collect(stream_simple(model_for(fake), Context((USER,)), opts()))
    msg = terminal(events)
    assert msg.stop_reason == "error"
    assert "ended without" in (msg.error_message or "")


@pytest.mark.anyio
async def test_in_stream_error_chunk(fake: FakeOpenAI) -> None:
    """An {"error": ...} chunk mid-stream is the error message (plus OpenRouter's raw detail)."""
    err = {"error": {"message": "upstream failed", "metadata": {"raw": "provider said no"}}}
    fake.push({"events": [*_opening(), err]})
    events = await collect(stream_simple(model_for(fake), Context((USER,)), opts()))
    assert terminal(events).error_message == "upstream failed\nprovider said no"


# -- aborts ----------------------------------------------------------------------------------


async def _wait_outcome(fake: FakeOpenAI, outcome: str) -> None:
    with anyio.fail_after(5):
        # The server runs in another thread: poll its record.
        while fake.requests[-1]["outcome"] != outcome:  # noqa: ASYNC110
            await anyio.sleep(0.01)


@pytest.mark.anyio
async def test_abort_ends_a_stalled_stream_at_once(fake: FakeOpenAI) -> None:
    """A stalled stream just waits; aborting it ends it promptly with stopReason aborted."""
    fake.push({"events": _opening(), "then": "stall"})
    ctl = AbortController()
    stream = stream_simple(model_for(fake), Context((USER,)), opts(signal=ctl.signal))
    seen: list[AssistantMessageEvent] = []
    at_abort: list[tuple[int, float]] = []

    async def abort_later() -> None:
        await anyio.sleep(0.3)
        at_abort.append((len(seen), time.monotonic()))
        ctl.abort()

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(abort_later)
            async for ev in stream:
                seen.append(ev)
    ended = time.monotonic()
    # The stall is the caller's watchdog's business: nothing arrived until the abort.
    assert at_abort[0][0] == 3
    assert ended - at_abort[0][1] < 1.0
    assert [e.type for e in seen] == ["start", "text_start", "text_delta", "error"]
    msg = terminal(seen)
    assert msg.stop_reason == "aborted"
    assert msg.error_message == "Request was aborted"
    assert msg.content == (TextContent("partial"),)
    await _wait_outcome(fake, "client_gone")  # the connection was closed


@pytest.mark.anyio
async def test_abort_during_a_slow_stream(fake: FakeOpenAI) -> None:
    """Aborting between events of a paced stream ends it with aborted and content so far."""
    fake.push(chat_text("abcdefghij", pieces=10, delay_ms=100))
    ctl = AbortController()
    stream = stream_simple(model_for(fake), Context((USER,)), opts(signal=ctl.signal))
    events: list[AssistantMessageEvent] = []
    with anyio.fail_after(5):
        async for ev in stream:
            events.append(ev)
            if ev.type == "text_delta":
                ctl.abort()
    msg = terminal(events)
    assert msg.stop_reason == "aborted"
    assert events[-2].type == "text_delta"
    assert msg.content == (TextContent("a"),)


@pytest.mark.anyio
async def test_abort_before_headers_and_already_aborted(fake: FakeOpenAI) -> None:
    """An abort while waiting for headers, or before the call, gives a lone aborted error."""
    fake.push({"head_delay_ms": 3000, "events": [], "then": "done"})
    ctl = AbortController()
    stream = stream_simple(model_for(fake), Context((USER,)), opts(signal=ctl.signal))
    with anyio.fail_after(2):
        async with anyio.create_task_group() as tg:
            tg.start_soon(_abort_soon, ctl)
            events = [ev async for ev in stream]
    assert [e.type for e in events] == ["error"]
    assert terminal(events).stop_reason == "aborted"
    already = stream_simple(
        model_for(fake), Context((USER,)), opts(signal=AbortSignal.abort("stop"))
    )
    events = await collect(already)
    assert [e.type for e in events] == ["error"]
    assert terminal(events).stop_reason == "aborted"


async def _abort_soon(ctl: AbortController) -> None:
    await anyio.sleep(0.1)
    ctl.abort()


@pytest.mark.anyio
async def test_timeout_signal_aborts_on_its_deadline(fake: FakeOpenAI) -> None:
    """A timeout signal ends a stall at its deadline even though nobody observes it."""
    fake.push({"events": _opening(), "then": "stall"})
    stream = stream_simple(model_for(fake), Context((USER,)), opts(signal=AbortSignal.timeout(200)))
    events = await collect(stream)
    assert terminal(events).stop_reason == "aborted"


@pytest.mark.anyio
async def test_request_timeout(fake: FakeOpenAI) -> None:
    """timeout_ms bounds the wait for the response headers."""
    fake.push({"head_delay_ms": 3000, "events": [], "then": "done"})
    events = await collect(stream_simple(model_for(fake), Context((USER,)), opts(timeout_ms=100)))
    msg = terminal(events)
    assert (msg.stop_reason, msg.error_message) == ("error", "Request timed out.")


@pytest.mark.anyio
async def test_consumer_cancellation_closes_the_connection(fake: FakeOpenAI) -> None:
    """Cancelling the consumer cancels the provider's read and closes the connection."""
    fake.push({"events": _opening(), "then": "stall"})
    stream = stream_simple(model_for(fake), Context((USER,)), opts())
    with anyio.move_on_after(0.3):
        async for _ in stream:
            pass
    await _wait_outcome(fake, "client_gone")


@pytest.mark.anyio
async def test_connection_refused_is_an_error_event() -> None:
    """No server: an error event ("Connection error."), not an exception."""
    with FakeOpenAI() as gone:
        url = gone.base_url
    model = Model("m", "m", "openai-completions", "openai", url)
    events = await collect(stream_simple(model, Context((USER,)), opts()))
    msg = terminal(events)
    assert msg.stop_reason == "error"
    assert (msg.error_message or "").startswith("Connection error.")


# -- request shaping -------------------------------------------------------------------------


def _assistant(content: tuple[Any, ...], stop: str = "toolUse", **kw: Any) -> AssistantMessage:
    base: dict[str, Any] = {
        "api": "openai-completions",
        "provider": "openai",
        "model": "gpt-fake",
        "usage": ZERO_USAGE,
        "stop_reason": stop,
        "timestamp": 2,
    }
    base.update(kw)
    return AssistantMessage(content=content, **base)


@pytest.mark.anyio
async def test_transcript_rewriting_in_the_request(fake: FakeOpenAI) -> None:
    """Failed turns dropped, orphan calls answered, images replaced, foreign thinking inlined."""
    fake.push(chat_text("ok"))
    image = ImageContent("aGk=", "image/png")
    messages = (
        UserMessage((TextContent("look"), image, image), 1),
        _assistant((TextContent("half"),), "error", error_message="boom"),
        _assistant(
            (
                ThinkingContent("foreign thought", "sig"),
                ToolCall("call_1", "read", {"p": 1}, "tsig"),
            ),
            provider="anthropic",
            api="anthropic-messages",
            model="claude",
        ),
        UserMessage("next", 3),
    )
    await collect(stream_simple(model_for(fake), Context(messages), opts()))
    sent = body(fake)["messages"]
    assert sent[0] == {
        "role": "user",
        "content": [
            {"type": "text", "text": "look"},
            {"type": "text", "text": "(image omitted: model does not support images)"},
        ],
    }
    assert sent[1] == {
        "role": "assistant",
        "content": "foreign thought",
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "read", "arguments": '{"p":1}'},
            }
        ],
    }
    assert sent[2] == {"role": "tool", "content": "No result provided", "tool_call_id": "call_1"}
    assert sent[3] == {"role": "user", "content": "next"}
    assert len(sent) == 4
    assert body(fake)["tools"] == []  # tool history without tools


@pytest.mark.anyio
async def test_compat_switches_shape_the_body(fake: FakeOpenAI) -> None:
    """model.compat overrides store, developer role, max-tokens field, result names, bridges."""
    fake.push(chat_text("ok"))
    compat: dict[str, JsonValue] = {
        "supportsStore": False,
        "supportsDeveloperRole": False,
        "supportsUsageInStreaming": False,
        "maxTokensField": "max_tokens",
        "requiresToolResultName": True,
        "requiresAssistantAfterToolResult": True,
        "supportsStrictMode": False,
        "thinkingFormat": "qwen",
    }
    model = model_for(fake, reasoning=True, compat=compat)
    messages = (
        USER,
        _assistant((ToolCall("c1", "ls", {}),)),
        ToolResultMessage("c1", "ls", (TextContent("a b"),), False, 3),
        UserMessage("thanks", 4),
    )
    tools = (Tool("ls", "list", {"type": "object", "properties": {}}),)
    ctx = Context(messages, system_prompt="sys", tools=tools)
    await collect(stream_simple(model, ctx, opts(reasoning="low", max_tokens=100)))
    sent = body(fake)
    assert "store" not in sent
    assert "stream_options" not in sent
    assert sent["max_tokens"] == 100
    assert "max_completion_tokens" not in sent
    assert sent["enable_thinking"] is True
    assert "reasoning_effort" not in sent
    assert sent["messages"][0] == {"role": "system", "content": "sys"}
    assert sent["messages"][2]["content"] == ""  # empty string, not null
    assert sent["messages"][3] == {
        "role": "tool",
        "content": "a b",
        "tool_call_id": "c1",
        "name": "ls",
    }
    assert sent["messages"][4] == {
        "role": "assistant",
        "content": "I have processed the tool results.",
    }
    assert sent["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "ls",
                "description": "list",
                "parameters": {"type": "object", "properties": {}},
            },
        }
    ]


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("provider", "expect"),
    [
        ("openai", {"reasoning_effort": "medium", "store": False}),
        ("xai", {}),  # grok: no store, no reasoning_effort
        # Pi 1.6.0 knows DeepSeek by provider or URL: no store, its own thinking format.
        ("deepseek", {"thinking": {"type": "enabled"}, "reasoning_effort": "medium"}),
        ("openrouter", {"reasoning": {"effort": "medium"}, "store": False}),
        ("zai", {"enable_thinking": True}),
    ],
)
async def test_compat_auto_detected_from_provider(
    fake: FakeOpenAI, provider: str, expect: dict[str, Any]
) -> None:
    """Pi's host detection picks the reasoning parameter and store support per provider."""
    fake.push(chat_text("ok"))
    model = model_for(fake, provider=provider, reasoning=True)
    await collect(stream_simple(model, Context((USER,)), opts(reasoning="medium")))
    sent = body(fake)
    keys = {"reasoning_effort", "store", "thinking", "reasoning", "enable_thinking"}
    assert {k: sent[k] for k in keys if k in sent} == expect


@pytest.mark.anyio
@pytest.mark.parametrize("is_async", [False, True])
async def test_on_payload_replaces_and_on_response_sees_status(
    fake: FakeOpenAI, is_async: bool
) -> None:
    """on_payload may replace the body (sync or async); on_response gets status and headers."""
    fake.push(chat_text("ok"))
    seen: list[ProviderResponse] = []

    def replace(payload: JsonValue, model: Model) -> JsonValue:
        assert isinstance(payload, dict)
        return {**payload, "messages": [{"role": "user", "content": "swapped"}], "seed": 7}

    async def replace_async(payload: JsonValue, model: Model) -> JsonValue:
        return replace(payload, model)

    def on_response(response: ProviderResponse, model: Model) -> None:
        seen.append(response)

    options = opts(
        on_payload=replace_async if is_async else replace,
        on_response=on_response,
        headers={"X-Extra": "1", "authorization": "Bearer override"},
    )
    await collect(stream_simple(model_for(fake), Context((USER,)), options))
    sent = body(fake)
    assert sent["messages"] == [{"role": "user", "content": "swapped"}]
    assert sent["seed"] == 7
    assert seen[0].status == 200
    assert seen[0].headers["content-type"].startswith("text/event-stream")
    headers = fake.requests[-1]["headers"]
    assert headers["x-extra"] == "1"
    assert headers["authorization"] == "Bearer override"


@pytest.mark.anyio
async def test_on_payload_none_keeps_the_body(fake: FakeOpenAI) -> None:
    """An on_payload hook returning None keeps Pi's body."""
    fake.push(chat_text("ok"))
    await collect(
        stream_simple(model_for(fake), Context((USER,)), opts(on_payload=lambda p, m: None))
    )
    assert body(fake)["messages"] == [{"role": "user", "content": "hi"}]


# -- API keys and registry -------------------------------------------------------------------


@pytest.mark.anyio
async def test_api_key_from_environment(fake: FakeOpenAI, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without options.api_key, the provider's environment variable is used."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env")
    fake.push(chat_text("ok"))
    options = StreamOptions(max_retries=0)
    await collect(stream_simple(model_for(fake), Context((USER,)), options))
    assert fake.requests[-1]["headers"]["authorization"] == "Bearer sk-env"


def test_missing_key_and_unknown_api_raise_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Setup errors raise from stream_simple itself, before any stream exists."""
    monkeypatch.delenv("GROQ_API_KEY", raising=False)
    model = Model("m", "m", "openai-completions", "groq", "http://127.0.0.1:9/v1")
    with pytest.raises(ProviderSetupError, match="No API key for provider: groq"):
        stream_simple(model, Context((USER,)))
    other = Model("m", "m", "no-such-api", "groq", "http://127.0.0.1:9/v1")
    with pytest.raises(ProviderSetupError, match="No API provider registered for api: no-such-api"):
        stream_simple(other, Context((USER,)), StreamOptions(api_key="k"))


def test_register_provider_dispatches_on_api() -> None:
    """A registered provider receives the model, context and options."""
    calls: list[tuple[Model, Context | TranscriptContext, StreamOptions]] = []

    def fn(
        model: Model, context: Context | TranscriptContext, options: StreamOptions
    ) -> AssistantMessageEventStream:
        calls.append((model, context, options))
        return AssistantMessageEventStream()

    register_provider("test-api", fn)
    try:
        model = Model("m", "m", "test-api", "p", "http://x")
        stream_simple(model, Context((USER,)))
        assert calls[0][0] is model
    finally:
        unregister_provider("test-api")


def test_env_api_key_names() -> None:
    """Pi's environment variable names, Anthropic's OAuth token first."""
    env = {"ANTHROPIC_API_KEY": "a", "ANTHROPIC_OAUTH_TOKEN": "o", "GEMINI_API_KEY": "g"}
    assert env_api_key("anthropic", env) == "o"
    assert env_api_key("google", env) == "g"
    assert env_api_key("openai", env) is None
    assert env_api_key("amazon-bedrock", {"AWS_PROFILE": "x"}) == "<authenticated>"


# -- pure helpers ----------------------------------------------------------------------------


def test_retry_after_forms() -> None:
    """Retry-After as seconds, as an HTTP date, and retry-after-ms; garbage is ignored."""
    now = time.time()
    date = format_datetime(datetime.fromtimestamp(now + 30, UTC), usegmt=True)
    assert parse_retry_after({"Retry-After": date}, now=now) == pytest.approx(30_000, abs=1000)
    assert parse_retry_after({"retry-after": "1.5"}) == 1500.0
    assert parse_retry_after({"retry-after": "soon"}) is None
    assert parse_retry_after({}) is None


def test_status_error_message_forms() -> None:
    """Error bodies read like the Stainless SDKs format them."""
    assert status_error_message(400, json.dumps({"error": {"message": "bad"}})) == "400 bad"
    assert status_error_message(400, json.dumps({"error": {"code": 3}})) == '400 {"code":3}'
    assert status_error_message(503, "") == "503 status code (no body)"
    assert status_error_message(502, "<html>") == "502 <html>"


def test_reasoning_clamp_and_budgets() -> None:
    """Levels clamp to the nearest supported one; budgets follow Pi's defaults and floor."""
    plain = Model("m", "m", "a", "p", "u")
    assert clamp_thinking_level(plain, "high") == "off"
    assert reasoning_effort(plain, StreamOptions(reasoning="high")) is None
    mapped = Model("m", "m", "a", "p", "u", reasoning=True, thinking_level_map={"low": None})
    assert clamp_thinking_level(mapped, "low") == "medium"
    xhigh = Model("m", "m", "a", "p", "u", reasoning=True, thinking_level_map={"xhigh": "max"})
    assert clamp_thinking_level(xhigh, "xhigh") == "xhigh"
    top = Model("m", "m", "a", "p", "u", reasoning=True, thinking_level_map={"high": None})
    assert clamp_thinking_level(top, "xhigh") == "medium"
    assert adjust_max_tokens_for_thinking(32000, 64000, "minimal") == (33024, 1024)
    assert adjust_max_tokens_for_thinking(1000, 4000, "high") == (4000, 2976)
    assert adjust_max_tokens_for_thinking(100, 1000, "low") == (1000, 0)


# -- fragmentation ---------------------------------------------------------------------------


def _shape(events: list[AssistantMessageEvent]) -> list[tuple[str, str]]:
    return [(e.type, str(getattr(e, "delta", ""))) for e in events]


@pytest.mark.anyio
@settings(max_examples=25, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(chunks=st.lists(st.integers(min_value=1, max_value=40), min_size=1, max_size=8))
async def test_fragmentation_does_not_change_events(server: FakeOpenAI, chunks: list[int]) -> None:
    """However the SSE bytes are split into HTTP chunks, the events are the same."""
    script = chat_stream(
        text="Grüße, world! ✓",
        pieces=4,
        reasoning="think",
        calls=[tool_call("c", "f", {"q": "ä"}, pieces=3)],
        usage=chat_usage(),
    )
    model = model_for(server)
    server.push(script)
    whole = _shape(await collect(stream_simple(model, Context((USER,)), opts())))
    server.push({**script, "chunks": chunks})
    split = _shape(await collect(stream_simple(model, Context((USER,)), opts())))
    assert split == whole
    assert whole[-1][0] == "done"


def test_importing_providers_does_not_import_httpx() -> None:
    """Built-in providers load lazily, so `import mule.pi.providers` works without httpx."""
    code = (
        "import sys, mule.pi, mule.pi.providers as p; "
        "assert 'httpx' not in sys.modules, 'httpx imported'; "
        "assert {'openai-completions', 'openai-responses'} <= set(p.registered_apis())"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
