"""The openai-responses provider, Pi's transcript rewriting, and the fake server as a process.

Also tests the private rule `mule.pi.providers._transform.sanitize_surrogates`.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from mule.pi import (
    ZERO_USAGE,
    AssistantMessage,
    AssistantMessageEvent,
    AssistantMessageEventStream,
    Context,
    DoneEvent,
    ErrorEvent,
    ImageContent,
    Message,
    Model,
    ModelCost,
    StreamOptions,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from mule.pi.providers import stream_simple, transform_messages
from mule.pi.providers._transform import sanitize_surrogates
from mule.testing.fake_openai import (
    FakeOpenAI,
    chat_text,
    function_call_item,
    openai_error,
    responses_stream,
    responses_text,
    responses_usage,
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
        "api": "openai-responses",
        "provider": "openai",
        "base_url": fake.base_url,
        "max_tokens": 16000,
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


def terminal(events: list[AssistantMessageEvent]) -> AssistantMessage:
    last = events[-1]
    assert isinstance(last, DoneEvent | ErrorEvent)
    return last.message if isinstance(last, DoneEvent) else last.error


@pytest.mark.anyio
async def test_reasoning_text_and_function_call(fake: FakeOpenAI) -> None:
    """Summary deltas, encrypted reasoning as signature, v1 text signature, call ids, usage."""
    fake.push(
        responses_stream(
            summary=["First.", "Second."],
            encrypted="gAAAA-secret",
            text="Hello there",
            pieces=2,
            calls=[function_call_item("call_1", "fc_1", "read", {"path": "a"}, pieces=3)],
            usage=responses_usage(100, 20, cached=40),
            phase="final_answer",
        )
    )
    model = model_for(fake, reasoning=True, cost=ModelCost(input=1.0, cache_read=0.1))
    events = await collect(stream_simple(model, Context((USER,)), opts(reasoning="medium")))
    kinds = [e.type for e in events]
    assert kinds[:2] == ["start", "thinking_start"]
    assert kinds.count("thinking_delta") == 6  # 2 pieces + "\n\n" per summary part
    assert kinds[-1] == "done"
    msg = terminal(events)
    thinking, text, call = msg.content
    assert isinstance(thinking, ThinkingContent)
    assert thinking.thinking == "First.\n\nSecond."
    item = json.loads(thinking.thinking_signature or "")
    assert item["encrypted_content"] == "gAAAA-secret"
    assert item["type"] == "reasoning"
    assert text == TextContent("Hello there", '{"v":1,"id":"msg_fake","phase":"final_answer"}')
    assert call == ToolCall("call_1|fc_1", "read", {"path": "a"})
    assert msg.stop_reason == "toolUse"
    assert msg.response_id == "resp_fake"
    assert (msg.usage.input, msg.usage.cache_read, msg.usage.total_tokens) == (60, 40, 120)
    assert msg.usage.cost.input == pytest.approx(60 / 1e6)
    sent = fake.requests[-1]["body"]
    assert fake.requests[-1]["path"] == "/v1/responses"
    assert sent["reasoning"] == {"effort": "medium", "summary": "auto"}
    assert sent["include"] == ["reasoning.encrypted_content"]
    assert sent["store"] is False
    assert sent["max_output_tokens"] == 16000
    assert sent["input"] == [{"role": "user", "content": [{"type": "input_text", "text": "hi"}]}]


@pytest.mark.anyio
async def test_replay_of_own_output(fake: FakeOpenAI) -> None:
    """A previous response replays as its reasoning item, message item and function items."""
    fake.push(
        responses_stream(
            summary=["plan"],
            encrypted="ENC",
            text="ok",
            calls=[function_call_item("call_9", "fc_9", "ls", {})],
        ),
        responses_text("done"),
    )
    model = model_for(fake, reasoning=True)
    first = terminal(await collect(stream_simple(model, Context((USER,)), opts())))
    result = ToolResultMessage("call_9|fc_9", "ls", (TextContent("a\nb"),), False, 5)
    ctx = Context((USER, first, result), system_prompt="be brief")
    await collect(stream_simple(model, ctx, opts()))
    sent = fake.requests[-1]["body"]
    assert sent["reasoning"] == {"effort": "none"}  # reasoning model, no level: Pi's "off"
    assert sent["input"][0] == {"role": "developer", "content": "be brief"}
    rs, message, call, output = sent["input"][2:]
    assert rs["type"] == "reasoning"
    assert rs["encrypted_content"] == "ENC"
    assert message == {
        "type": "message",
        "role": "assistant",
        "content": [{"type": "output_text", "text": "ok", "annotations": []}],
        "status": "completed",
        "id": "msg_fake",
    }
    assert call == {
        "type": "function_call",
        "id": "fc_9",
        "call_id": "call_9",
        "name": "ls",
        "arguments": "{}",
    }
    assert output == {"type": "function_call_output", "call_id": "call_9", "output": "a\nb"}


@pytest.mark.anyio
async def test_foreign_tool_call_ids_are_normalised(fake: FakeOpenAI) -> None:
    """Another provider's Responses-style ids get an fc_ hash item id; results follow."""
    fake.push(responses_text("ok"))
    foreign = AssistantMessage(
        (ToolCall("call+1|weird/item=", "f", {}),),
        "openai-responses",
        "github-copilot",
        "gpt-x",
        ZERO_USAGE,
        "toolUse",
        2,
    )
    result = ToolResultMessage("call+1|weird/item=", "f", (TextContent("r"),), False, 3)
    await collect(stream_simple(model_for(fake), Context((USER, foreign, result)), opts()))
    sent = fake.requests[-1]["body"]["input"]
    call, output = sent[1], sent[2]
    assert call["call_id"] == "call_1"
    assert call["id"].startswith("fc_")
    assert call["id"] != "fc_weird_item"
    assert output["call_id"] == "call_1"


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("script", "expected"),
    [
        (
            {
                "events": [{"type": "error", "code": "server_error", "message": "went wrong"}],
                "named": True,
            },
            "Error Code server_error: went wrong",
        ),
        (
            responses_stream(text="x", status="failed"),
            "Unknown error (no error details in response)",
        ),
        (
            responses_stream(text="x", terminal=False),
            "OpenAI Responses stream ended before a terminal response event",
        ),
        (
            openai_error(429, "Too many", headers={"retry-after": "1"}),
            'OpenAI API error (429): {"message":"Too many"',
        ),
    ],
)
async def test_failures_become_error_events(
    fake: FakeOpenAI, script: dict[str, Any], expected: str
) -> None:
    """Error events, failed responses, truncated streams and HTTP errors end with `error`."""
    fake.push(script)
    events = await collect(stream_simple(model_for(fake), Context((USER,)), opts()))
    msg = terminal(events)
    assert msg.stop_reason == "error"
    assert (msg.error_message or "").startswith(expected)


@pytest.mark.anyio
async def test_response_failed_with_error_details(fake: FakeOpenAI) -> None:
    """response.failed names the error code and message like Pi."""
    failed = responses_stream(text="x", status="failed")
    failed["events"][-1]["response"]["error"] = {"code": "rate_limit", "message": "slow"}
    fake.push(failed)
    events = await collect(stream_simple(model_for(fake), Context((USER,)), opts()))
    assert terminal(events).error_message == "rate_limit: slow"
    assert terminal(events).content == (TextContent("x", '{"v":1,"id":"msg_fake"}'),)


@pytest.mark.anyio
async def test_incomplete_response_is_length(fake: FakeOpenAI) -> None:
    """A response that ran out of output tokens ends with done(length), its raw reason kept."""
    fake.push(
        responses_stream(text="trunc", status="incomplete", incomplete_reason="max_output_tokens")
    )
    events = await collect(stream_simple(model_for(fake), Context((USER,)), opts()))
    assert isinstance(events[-1], DoneEvent)
    assert events[-1].reason == "length"
    assert events[-1].message.raw_stop_reason == "incomplete.max_output_tokens"


@pytest.mark.anyio
async def test_incomplete_response_for_another_reason_is_an_error(fake: FakeOpenAI) -> None:
    """Any other incomplete response failed: Pi says why, or that the server did not."""
    fake.push(responses_stream(text="trunc", status="incomplete"))
    events = await collect(stream_simple(model_for(fake), Context((USER,)), opts()))
    assert isinstance(events[-1], ErrorEvent)
    assert events[-1].error.error_message == "Response incomplete without a provider reason"
    assert events[-1].error.raw_stop_reason == "incomplete"


@pytest.mark.anyio
async def test_session_headers_and_cache_key(fake: FakeOpenAI) -> None:
    """A session id becomes the prompt cache key and the session headers."""
    fake.push(responses_text("ok"))
    options = opts(session_id="sess-1", cache_retention="long")
    await collect(stream_simple(model_for(fake), Context((USER,)), options))
    request = fake.requests[-1]
    assert request["body"]["prompt_cache_key"] == "sess-1"
    assert request["body"]["prompt_cache_retention"] == "24h"
    assert request["headers"]["session_id"] == "sess-1"
    assert request["headers"]["x-client-request-id"] == "sess-1"


# -- transcript rewriting --------------------------------------------------------------------


def _assistant(content: tuple[Any, ...], stop: str = "toolUse", **kw: Any) -> AssistantMessage:
    base: dict[str, Any] = {
        "api": "openai-responses",
        "provider": "openai",
        "model": "gpt-fake",
        "usage": ZERO_USAGE,
        "stop_reason": stop,
        "timestamp": 2,
    }
    base.update(kw)
    return AssistantMessage(content=content, **base)


MODEL = Model("gpt-fake", "Fake", "openai-responses", "openai", "http://x")


def test_orphans_answered_before_the_next_turn_and_at_the_end() -> None:
    """Orphan calls get "No result provided" errors before a user message and at the end."""
    a1 = _assistant((ToolCall("c1", "f"), ToolCall("c2", "g")))
    r1 = ToolResultMessage("c1", "f", (TextContent("ok"),), False, 3)
    a2 = _assistant((ToolCall("c3", "h"),))
    out = transform_messages([USER, a1, r1, UserMessage("more", 4), a2], MODEL, clock=lambda: 9)
    assert [type(m).__name__ for m in out] == [
        "UserMessage",
        "AssistantMessage",
        "ToolResultMessage",
        "ToolResultMessage",
        "UserMessage",
        "AssistantMessage",
        "ToolResultMessage",
    ]
    synthetic = [m for m in out if isinstance(m, ToolResultMessage) and m.is_error]
    assert [(m.tool_call_id, m.tool_name) for m in synthetic] == [("c2", "g"), ("c3", "h")]
    assert synthetic[0].content == (TextContent("No result provided"),)
    assert synthetic[0].timestamp == 9


def test_failed_turns_dropped_and_their_calls_not_answered() -> None:
    """Error and aborted assistant messages disappear, with nothing synthesised for them."""
    bad = _assistant((ToolCall("c1", "f"),), "aborted", error_message="Request was aborted")
    assert transform_messages([USER, bad], MODEL) == [USER]


def test_same_and_cross_model_thinking() -> None:
    """Same model keeps signed (even empty) thinking; another model gets text, no signatures."""
    blocks = (
        ThinkingContent("", "enc"),
        ThinkingContent("visible", "sig"),
        ThinkingContent("[Reasoning redacted]", "opaque", redacted=True),
        ThinkingContent("  "),
        TextContent("answer", "tsig"),
        ToolCall("c", "f", {}, "thought"),
    )
    same = _assistant(blocks, "stop")
    result = transform_messages([USER, same], MODEL)[1]
    assert isinstance(result, AssistantMessage)
    assert result.content == blocks[:3] + blocks[4:]
    other = _assistant(blocks, "stop", model="gpt-other")
    result = transform_messages([USER, other], MODEL)[1]
    assert isinstance(result, AssistantMessage)
    assert result.content == (
        TextContent("visible"),
        TextContent("answer"),
        ToolCall("c", "f", {}),
    )


def test_tool_call_id_normaliser_rewrites_results() -> None:
    """Normalised ids of another model's calls are applied to their results too."""
    other = _assistant((ToolCall("a|b", "f"),), provider="anthropic")
    result = ToolResultMessage("a|b", "f", (TextContent("r"),), False, 3)
    out = transform_messages([USER, other, result], MODEL, lambda i, m, s: i.replace("|", "_"))
    assert isinstance(out[1], AssistantMessage)
    assert out[1].content == (ToolCall("a_b", "f"),)
    assert isinstance(out[2], ToolResultMessage)
    assert out[2].tool_call_id == "a_b"


def test_images_replaced_once_per_run_for_text_models() -> None:
    """Each run of images becomes one placeholder; vision models keep images."""
    img = ImageContent("aGk=", "image/png")
    user = UserMessage((img, img, TextContent("x"), img), 1)
    result = ToolResultMessage("c", "f", (img,), False, 2)
    messages: list[Message] = [user, _assistant((ToolCall("c", "f"),)), result]
    out = transform_messages(messages, MODEL)
    assert isinstance(out[0], UserMessage)
    assert out[0].content == (
        TextContent("(image omitted: model does not support images)"),
        TextContent("x"),
        TextContent("(image omitted: model does not support images)"),
    )
    assert isinstance(out[2], ToolResultMessage)
    assert out[2].content == (TextContent("(tool image omitted: model does not support images)"),)
    vision = Model("v", "v", "openai-responses", "openai", "http://x", input=("text", "image"))
    assert transform_messages(messages, vision)[0] == user


def test_sanitize_surrogates_keeps_pairs() -> None:
    """Lone surrogates are removed; ordinary text and astral characters stay."""
    assert sanitize_surrogates("ok 🙈 \udc00x\ud800") == "ok 🙈 x"


# -- the fake as a process -------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.anyio
async def test_fake_server_runs_as_a_process(tmp_path: Path) -> None:
    """`python -m mule.testing.fake_openai --script` serves its script and the control API."""
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"responses": [chat_text("from a file")]}))
    command = [sys.executable, "-m", "mule.testing.fake_openai", "--port", "0"]
    proc = await anyio.open_process([*command, "--script", str(script)], stdout=subprocess.PIPE)
    try:
        assert proc.stdout is not None
        out = b""
        with anyio.fail_after(20):
            while b"\n" not in out:
                out += await proc.stdout.receive()
        line = out.decode().splitlines()[0]
        assert line.startswith("listening on http://127.0.0.1:")
        base_url = line.split()[-1]
        model = Model("gpt-fake", "F", "openai-completions", "openai", base_url)
        msg = terminal(await collect(stream_simple(model, Context((USER,)), opts())))
        assert msg.content == (TextContent("from a file"),)
        root = base_url.removesuffix("/v1")
        async with httpx.AsyncClient() as client:
            pushed = await client.post(f"{root}/__fake/script", json=[chat_text("pushed")])
            assert pushed.json()["pending"] == 1
            msg = terminal(await collect(stream_simple(model, Context((USER,)), opts())))
            assert msg.content == (TextContent("pushed"),)
            recorded = (await client.get(f"{root}/__fake/requests")).json()
        assert [r["body"]["model"] for r in recorded] == ["gpt-fake", "gpt-fake"]
    finally:
        proc.terminate()
        with anyio.fail_after(10):
            await proc.aclose()
