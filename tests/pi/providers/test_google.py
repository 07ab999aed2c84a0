"""The google-generative-ai provider against a real local HTTP server speaking Gemini's SSE.

Tests the private rules of `mule.pi.providers._google`: `stream_google`, `stream_simple_google` and
`build_body`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import anyio
import pytest

from mule.pi import (
    ZERO_USAGE,
    AbortController,
    AssistantMessage,
    AssistantMessageEvent,
    Context,
    DoneEvent,
    ErrorEvent,
    Model,
    ModelCost,
    StreamOptions,
    TextContent,
    ThinkingBudgets,
    ThinkingContent,
    Tool,
    ToolCall,
    ToolCallEndEvent,
    ToolCallStartEvent,
    ToolResultMessage,
    UserMessage,
)
from mule.pi.providers import ProviderSetupError, retry_after_ms
from mule.pi.providers._google import (
    GoogleOptions,
    build_body,
    stream_google,
    stream_simple_google,
)
from mule.testing.fake_google import (
    Chunk,
    Drop,
    Pause,
    Stall,
    Step,
    call,
    chunk,
    error_reply,
    serve_script,
    sse_reply,
    text,
    usage,
)

COST = ModelCost(input=0.3, output=2.5, cache_read=0.075, cache_write=0)


def gemini(base_url: str, model_id: str = "gemini-2.5-flash", **kw: Any) -> Model:
    """Return a Gemini model at `base_url`."""
    return Model(
        id=model_id,
        name="Gemini",
        api="google-generative-ai",
        provider="google",
        base_url=base_url,
        reasoning=True,
        input=("text", "image"),
        cost=COST,
        context_window=1048576,
        max_tokens=65536,
        **kw,
    )


def ctx(prompt: str = "hi", **kw: Any) -> Context:
    """Return a one-message context."""
    return Context(messages=(UserMessage(prompt, 1),), **kw)


def opts(**kw: Any) -> StreamOptions:
    """Return options with a test key."""
    return StreamOptions(api_key=kw.pop("api_key", "AIza-test"), **kw)


async def collect(stream: Any) -> list[AssistantMessageEvent]:
    """Drain a stream."""
    return [event async for event in stream]


def final(events: Sequence[AssistantMessageEvent]) -> AssistantMessage:
    """Return the terminal event's message."""
    last = events[-1]
    assert isinstance(last, DoneEvent | ErrorEvent)
    return last.message if isinstance(last, DoneEvent) else last.error


@pytest.mark.anyio
async def test_thinking_then_text_with_signatures_usage_and_request() -> None:
    """Thought parts form a thinking block, text a text block; signatures kept; usage mapped."""
    chunks = [
        chunk(text("Pondering ", thought=True), text("deeply.", thought=True)),
        chunk(text("Hello"), text(" world", signature="c2lnbmF0dXJl")),
        chunk(
            text("!"),
            finish="STOP",
            usage_metadata=usage(100, 20, thoughts=30, cached=40),
        ),
    ]
    async with serve_script(sse_reply(chunks)) as server:
        model = gemini(server.url)
        got = await collect(stream_google(model, ctx(system_prompt="sys"), opts(max_tokens=99)))
        request = server.requests[0]
    assert [e.type for e in got] == [
        "start",
        "thinking_start",
        "thinking_delta",
        "thinking_delta",
        "thinking_end",
        "text_start",
        "text_delta",
        "text_delta",
        "text_delta",
        "text_end",
        "done",
    ]
    msg = final(got)
    assert msg.content == (
        ThinkingContent("Pondering deeply."),
        TextContent("Hello world!", "c2lnbmF0dXJl"),
    )
    assert msg.response_id == "a1b2c3"
    u = msg.usage
    assert (u.input, u.output, u.cache_read, u.cache_write, u.total_tokens) == (60, 50, 40, 0, 150)
    assert u.cost.total == pytest.approx((0.3 * 60 + 2.5 * 50 + 0.075 * 40) / 1e6)
    assert request.path == "/models/gemini-2.5-flash:streamGenerateContent"
    assert request.query == "alt=sse"
    assert request.headers["x-goog-api-key"] == "AIza-test"
    body = request.json()
    assert body["contents"] == [{"role": "user", "parts": [{"text": "hi"}]}]
    assert body["systemInstruction"] == {"role": "user", "parts": [{"text": "sys"}]}
    assert body["generationConfig"] == {"maxOutputTokens": 99}


@pytest.mark.anyio
async def test_parallel_function_calls_ids_and_signatures() -> None:
    """Whole function calls become tool calls; missing or duplicate ids are generated."""
    chunks = [
        chunk(text("Let me look.")),
        chunk(
            call("read", {"path": "a"}, call_id="c1", signature="AAAA"),
            call("read", {"path": "b"}, call_id="c1"),
            call("ls", {}),
            finish="STOP",
            usage_metadata=usage(10, 5),
        ),
    ]
    tools = (Tool("read", "Read", {"type": "object"}), Tool("ls", "List", {"type": "object"}))
    async with serve_script(sse_reply(chunks)) as server:
        got = await collect(stream_google(gemini(server.url), ctx(tools=tools), opts()))
        body = server.requests[0].json()
    msg = final(got)
    assert msg.stop_reason == "toolUse"
    first, second, third = msg.content[1:]
    assert first == ToolCall("c1", "read", {"path": "a"}, "AAAA")
    assert isinstance(second, ToolCall)
    assert isinstance(third, ToolCall)
    assert second.id.startswith("read_")
    assert second.id != "c1"
    assert third.id.startswith("ls_")
    assert (second.arguments, third.arguments) == ({"path": "b"}, {})
    kinds = [e.type for e in got if e.type.startswith("toolcall")]
    assert kinds == ["toolcall_start", "toolcall_delta", "toolcall_end"] * 3
    start = next(e for e in got if isinstance(e, ToolCallStartEvent))
    assert start.partial.content[1] == first
    assert [e.content_index for e in got if isinstance(e, ToolCallEndEvent)] == [1, 2, 3]
    assert body["tools"] == [
        {
            "functionDeclarations": [
                {"name": "read", "description": "Read", "parametersJsonSchema": {"type": "object"}},
                {"name": "ls", "description": "List", "parametersJsonSchema": {"type": "object"}},
            ]
        }
    ]


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("finish", "reason"),
    [("STOP", "stop"), ("MAX_TOKENS", "length")],
)
async def test_finish_reasons(finish: str, reason: str) -> None:
    """STOP and MAX_TOKENS map to stop and length."""
    async with serve_script(sse_reply([chunk(text("x"), finish=finish)])) as server:
        got = await collect(stream_google(gemini(server.url), ctx(), opts()))
    assert isinstance(got[-1], DoneEvent)
    assert got[-1].reason == reason
    assert got[-1].message.raw_stop_reason == finish


@pytest.mark.anyio
@pytest.mark.parametrize("finish", ["SAFETY", "MALFORMED_FUNCTION_CALL", "SOMETHING_NEW"])
async def test_failing_finish_reasons_are_errors(finish: str) -> None:
    """Safety and other failure finishes end in an error event that keeps the content."""
    async with serve_script(sse_reply([chunk(text("part"), finish=finish)])) as server:
        got = await collect(stream_google(gemini(server.url), ctx(), opts()))
    msg = final(got)
    assert msg.stop_reason == "error"
    assert msg.content == (TextContent("part"),)
    expected = (
        "Unhandled stop reason: SOMETHING_NEW"
        if finish == "SOMETHING_NEW"
        else f"Provider stopped with: {finish}"
    )
    assert msg.error_message == expected
    assert msg.raw_stop_reason == finish


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("status", "message"),
    [(400, "Invalid JSON payload"), (401, "API key not valid"), (500, "Internal error")],
)
async def test_http_errors_are_the_json_body_and_not_retried(status: int, message: str) -> None:
    """An HTTP error is one error event holding Google's JSON body; the SDK sends one request."""
    async with serve_script(error_reply(status, message), error_reply(status, message)) as server:
        got = await collect(stream_google(gemini(server.url), ctx(), opts()))
        assert len(server.requests) == 1
    assert len(got) == 1
    msg = final(got)
    assert msg.stop_reason == "error"
    assert msg.error_message is not None
    prefix = f'{{"error":{{"code":{status},"message":"{message}"'
    assert msg.error_message.startswith(prefix)


@pytest.mark.anyio
async def test_429_with_retry_after() -> None:
    """A 429 keeps the server's requested wait for the loop's retry policy."""
    reply = error_reply(429, "Resource exhausted", headers=(("retry-after", "3"),))
    async with serve_script(reply) as server:
        got = await collect(stream_google(gemini(server.url), ctx(), opts()))
    assert retry_after_ms(final(got)) == 3000.0
    assert "RESOURCE_EXHAUSTED" in (final(got).error_message or "")


@pytest.mark.anyio
async def test_disconnect_mid_stream() -> None:
    """A dropped connection mid-body ends in an error event with the text so far."""
    chunks: list[Chunk | str | Step] = [chunk(text("so far")), Drop()]
    async with serve_script(sse_reply(chunks)) as server:
        got = await collect(stream_google(gemini(server.url), ctx(), opts()))
    msg = final(got)
    assert msg.stop_reason == "error"
    assert msg.content == (TextContent("so far"),)


@pytest.mark.anyio
async def test_malformed_chunk() -> None:
    """A chunk that is not JSON ends the stream with a parse error."""
    chunks: list[Chunk | str | Step] = [chunk(text("ok")), "{broken"]
    async with serve_script(sse_reply(chunks)) as server:
        got = await collect(stream_google(gemini(server.url), ctx(), opts()))
    msg = final(got)
    assert msg.stop_reason == "error"
    assert (msg.error_message or "").startswith("exception parsing stream chunk {broken")


@pytest.mark.anyio
async def test_in_stream_error_chunk() -> None:
    """An error object delivered as a chunk fails the stream with its status."""
    err = {"error": {"code": 503, "message": "overloaded", "status": "UNAVAILABLE"}}
    chunks: list[Chunk | str | Step] = [chunk(text("a")), err]
    async with serve_script(sse_reply(chunks)) as server:
        got = await collect(stream_google(gemini(server.url), ctx(), opts()))
    assert (final(got).error_message or "").startswith("got status: UNAVAILABLE.")


@pytest.mark.anyio
async def test_stall_then_abort() -> None:
    """Aborting while the server stalls ends the stream promptly as aborted."""
    controller = AbortController()
    chunks: list[Chunk | str | Step] = [chunk(text("before")), Stall()]
    async with serve_script(sse_reply(chunks)) as server:
        seen: list[AssistantMessageEvent] = []
        stream = stream_google(gemini(server.url), ctx(), opts(signal=controller.signal))
        with anyio.fail_after(5):
            async for event in stream:
                seen.append(event)
                if event.type == "text_delta":
                    controller.abort()
    msg = final(seen)
    assert msg.stop_reason == "aborted"
    assert msg.content == (TextContent("before"),)


@pytest.mark.anyio
async def test_abort_mid_stream_from_another_task() -> None:
    """An abort from another task while the server pauses ends the stream as aborted."""
    controller = AbortController()
    pausing = anyio.Event()  # the first chunk is in: the server now pauses
    chunks: list[Chunk | str | Step] = [chunk(text("a")), Pause(5000), chunk(text("b"))]
    async with serve_script(sse_reply(chunks)) as server, anyio.create_task_group() as tg:

        async def abort_soon() -> None:
            await pausing.wait()
            await anyio.sleep(0.05)
            controller.abort()

        tg.start_soon(abort_soon)
        got: list[AssistantMessageEvent] = []
        with anyio.fail_after(5):
            stream = stream_google(gemini(server.url), ctx(), opts(signal=controller.signal))
            async for event in stream:
                got.append(event)
                if event.type == "text_delta":
                    pausing.set()
    assert final(got).stop_reason == "aborted"
    assert final(got).content == (TextContent("a"),)


@pytest.mark.anyio
async def test_simple_thinking_config_by_level_and_budget() -> None:
    """Gemini 3 gets a thinkingLevel, 2.5 a budget (custom wins), no level disables thinking."""
    replies = [sse_reply([chunk(text("x"), finish="STOP")]) for _ in range(4)]
    async with serve_script(*replies) as server:
        g3 = gemini(server.url, "gemini-3-pro-preview")
        g25 = gemini(server.url, "gemini-2.5-pro")
        await collect(stream_simple_google(g3, ctx(), opts(reasoning="minimal")))
        await collect(stream_simple_google(g25, ctx(), opts(reasoning="high")))
        custom = opts(reasoning="low", thinking_budgets=ThinkingBudgets(low=777))
        await collect(stream_simple_google(g25, ctx(), custom))
        await collect(stream_simple_google(g25, ctx(), opts()))
        bodies = [r.json()["generationConfig"] for r in server.requests]
    assert bodies[0]["thinkingConfig"] == {"includeThoughts": True, "thinkingLevel": "LOW"}
    assert bodies[0]["maxOutputTokens"] == 65536  # the model's cap, fitted into its window
    assert bodies[1]["thinkingConfig"] == {"includeThoughts": True, "thinkingBudget": 32768}
    assert bodies[2]["thinkingConfig"] == {"includeThoughts": True, "thinkingBudget": 777}
    assert bodies[3]["thinkingConfig"] == {"thinkingBudget": 0}


def test_simple_without_key_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    """No key in options or GEMINI_API_KEY raises before any stream exists."""
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    with pytest.raises(ProviderSetupError, match="No API key for provider: google"):
        stream_simple_google(gemini("http://127.0.0.1:9"), ctx(), StreamOptions())


def test_transcript_conversion() -> None:
    """Own signed thinking replays as thought parts; results merge into one user turn."""
    model = gemini("http://x")
    mine = AssistantMessage(
        (
            ThinkingContent("plan", "AAAA"),
            TextContent("calling", "not base64!"),
            ToolCall("c1", "read", {"p": 1}, "BBBB"),
            ToolCall("c2", "ls", {}),
        ),
        "google-generative-ai",
        "google",
        "gemini-2.5-flash",
        ZERO_USAGE,
        "toolUse",
        2,
    )
    results = (
        ToolResultMessage("c1", "read", (TextContent("data"),), False, 3),
        ToolResultMessage("c2", "ls", (TextContent("nope"),), True, 4),
    )
    body = build_body(
        model, Context(messages=(UserMessage("q", 1), mine, *results)), opts(), GoogleOptions()
    )
    contents = body["contents"]
    assert contents[1] == {
        "role": "model",
        "parts": [
            {"thought": True, "text": "plan", "thoughtSignature": "AAAA"},
            {"text": "calling"},
            {"functionCall": {"name": "read", "args": {"p": 1}}, "thoughtSignature": "BBBB"},
            {"functionCall": {"name": "ls", "args": {}}},
        ],
    }
    assert contents[2] == {
        "role": "user",
        "parts": [
            {"functionResponse": {"name": "read", "response": {"output": "data"}}},
            {"functionResponse": {"name": "ls", "response": {"error": "nope"}}},
        ],
    }
    assert len(contents) == 3
