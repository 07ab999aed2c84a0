"""Mule's providers and Pi 1.6.0's (run under Node) on the same replies and requests.

Each case is served twice by the same scripted fake vendor server: once to pi-ai 1.6.0's API
module, once to mule's provider. Event types, the final message (key order included) and the
request bodies must agree; only clocks and mule's own diagnostics differ.
"""

from __future__ import annotations

import json
import shutil
from typing import Any

import anyio
import pytest

from mule.pi import (
    AssistantMessage,
    Context,
    DoneEvent,
    ErrorEvent,
    ImageContent,
    Model,
    ModelCost,
    StreamOptions,
    TextContent,
    ThinkingContent,
    ThinkingLevel,
    Tool,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
    to_wire,
)
from mule.pi.providers import stream_simple
from mule.testing import fake_anthropic as fa
from mule.testing import fake_google as fg
from mule.testing.fake_openai import FakeOpenAI, chat_text, responses_text
from tests.pi.providers.test_openai_pi import NODE_SCRIPT, PI_AI, comparable  # one script
from tests.pi.test_codec import key_order

ANTHROPIC: list[fa.Reply] = [
    fa.sse_reply(
        fa.message(
            fa.thinking_block(0, "hm", "m", signature="c2ln"),
            fa.text_block(1, "Hel", "lo"),
            fa.tool_block(2, "toolu_1", "read", '{"pa', 'th": "/a"}'),
            stop_reason="tool_use",
            cache_read=7,
            cache_creation=3,
        )
    ),
    fa.sse_reply(fa.message(fa.text_block(0, "cut"), stop_reason="max_tokens")),
    fa.sse_reply(fa.message(fa.text_block(0, "no"), stop_reason="refusal")),
    fa.sse_reply(fa.message(fa.text_block(0, "x"), stop_reason="sensitive")),
    fa.sse_reply(fa.message(fa.text_block(0, "x"), stop_reason="brand_new_reason")),
    fa.sse_reply(fa.message(fa.text_block(0, "x"))[:-1]),  # no message_stop
    fa.error_reply(400, "messages: at least one message is required"),
    fa.error_reply(529, "Overloaded"),
]

GOOGLE: list[fa.Reply] = [
    fg.sse_reply(
        [
            fg.chunk(fg.text("think", thought=True, signature="AAAA")),
            fg.chunk(fg.text("Hi")),
            fg.chunk(
                fg.call("read", {"path": "/a"}, call_id="c1"),
                finish="STOP",
                usage_metadata=fg.usage(12, 4, thoughts=2),
            ),
        ]
    ),
    fg.sse_reply([fg.chunk(fg.text("cut"), finish="MAX_TOKENS")]),
    fg.sse_reply([fg.chunk(fg.text("bad"), finish="SAFETY")]),
    fg.sse_reply([fg.chunk(fg.text("new"), finish="SOMETHING_NEW")]),
    fg.sse_reply([fg.chunk(fg.text("never says"))]),
    fg.error_reply(400, "Invalid JSON payload"),
]


def _model(api: str, base_url: str) -> Model:
    if api == "anthropic-messages":
        return Model(
            "claude-sonnet-4-5",
            "Claude",
            api,
            "anthropic",
            base_url,
            reasoning=False,
            cost=ModelCost(3.0, 15.0, 0.3, 3.75),
            max_tokens=8000,
        )
    return Model(
        "gemini-2.5-flash",
        "Gemini",
        api,
        "google",
        base_url,
        reasoning=False,
        cost=ModelCost(0.3, 2.5, 0.03, 0.0),
        max_tokens=8000,
    )


def _bodies(server: fa.FakeServer) -> list[Any]:
    return [json.loads(r.body) for r in server.requests]


async def _run(api: str, replies: list[fa.Reply], key: str) -> None:
    node = shutil.which("node")
    if node is None or not PI_AI.is_dir():
        pytest.skip("node or node/node_modules is missing (run ./dev setup)")
    user = UserMessage("hi", 1)
    async with fa.serve_script(*replies) as server:
        cases = [
            {
                "model": to_wire(_model(api, server.url)),
                "context": {"systemPrompt": "sys", "messages": [to_wire(user)]},
                "options": {"apiKey": key, "maxRetries": 0},
            }
            for _ in replies
        ]
        done = await anyio.run_process(
            [node, "--input-type=module", "-e", NODE_SCRIPT, str(PI_AI), json.dumps(cases)]
        )
        pi_results = [json.loads(line) for line in done.stdout.decode().splitlines()]
        pi_bodies = _bodies(server)
        server.requests.clear()
        server.push(*replies)
        for i, _ in enumerate(replies):
            model = _model(api, server.url)
            options = StreamOptions(api_key=key, max_retries=0)
            with anyio.fail_after(10):
                events = [ev async for ev in stream_simple(model, Context((user,), "sys"), options)]
            last = events[-1]
            assert isinstance(last, DoneEvent | ErrorEvent)
            final = last.message if isinstance(last, DoneEvent) else last.error
            pi = pi_results[i]
            mine = comparable(to_wire(final))
            assert [e.type for e in events] == pi["types"], i
            if events[0].type == "start":
                assert events[0].partial.stop_reason == pi["startStop"] == "pending"
            assert mine == comparable(pi["message"]), i
            assert key_order(mine) == key_order(comparable(pi["message"])), i  # Pi's key order
        assert _bodies(server) == pi_bodies


@pytest.mark.pi
@pytest.mark.slow
@pytest.mark.anyio
async def test_anthropic_matches_pi() -> None:
    """Thinking, text, tools, usage, every kind of stop, a cut stream and HTTP errors."""
    await _run("anthropic-messages", ANTHROPIC, "sk-ant-test")


@pytest.mark.pi
@pytest.mark.slow
@pytest.mark.anyio
async def test_google_matches_pi() -> None:
    """Thoughts, text, a function call, usage, finish reasons and an HTTP error."""
    await _run("google-generative-ai", GOOGLE, "AIza-test")


IMAGE = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42"
    "mP8/5+hHgAHggJ/PchI7wAAAABJRU5ErkJggg=="
)
# How each API signs a thinking block it will replay.
_SIGNATURES = {
    "openai-completions": "reasoning_content",
    "openai-responses": (
        '{"type":"reasoning","id":"rs_1","summary":[{"type":"summary_text","text":"h"}]}'
    ),
    "anthropic-messages": "c2ln",
    "google-generative-ai": "AAAA",
}


def _history(model: Model) -> Context:
    """Return a transcript with thinking, text, a tool call, its result, images and a tool."""
    tool = Tool(
        "read",
        "Read a file",
        {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
    )
    answer = AssistantMessage(
        (
            ThinkingContent("hm", _SIGNATURES[model.api]),
            TextContent("Let me look."),
            ToolCall("call_1", "read", {"path": "/a"}),
        ),
        model.api,
        model.provider,
        model.id,
        Usage(),
        "toolUse",
        2,
    )
    result = ToolResultMessage(
        "call_1", "read", (TextContent("contents"), ImageContent(IMAGE, "image/png")), False, 3
    )
    more = UserMessage((TextContent("and this"), ImageContent(IMAGE, "image/png")), 4)
    return Context((UserMessage("hi", 1), answer, result, more), "sys", (tool,))


def _served(api: str) -> tuple[Any, Any]:
    """Return a fake server for `api` and one plain reply for it."""
    if api == "openai-completions":
        return FakeOpenAI(), chat_text("ok")
    if api == "openai-responses":
        return FakeOpenAI(), responses_text("ok")
    if api == "anthropic-messages":
        return fa.serve_script(), fa.sse_reply(fa.message(fa.text_block(0, "ok")))
    return fa.serve_script(), fg.sse_reply([fg.chunk(fg.text("ok"), finish="STOP")])


def _body(request: Any) -> Any:
    return request["body"] if isinstance(request, dict) else json.loads(request.body)


@pytest.mark.pi
@pytest.mark.slow
@pytest.mark.anyio
@pytest.mark.parametrize("api", list(_SIGNATURES))
@pytest.mark.parametrize("reasoning", ["low", "high"])
async def test_requests_with_history_match_pi(api: str, reasoning: ThinkingLevel) -> None:
    """A transcript with thinking, tools, results and images is sent as Pi 1.6.0 sends it."""
    node = shutil.which("node")
    if node is None or not PI_AI.is_dir():
        pytest.skip("node or node/node_modules is missing (run ./dev setup)")
    server, reply = _served(api)
    async with server as srv:
        url = srv.base_url if isinstance(srv, FakeOpenAI) else srv.url
        provider = {"anthropic-messages": "anthropic", "google-generative-ai": "google"}
        model = Model(
            {
                "anthropic-messages": "claude-sonnet-4-5",
                "google-generative-ai": "gemini-2.5-flash",
            }.get(api, "gpt-fake"),
            "M",
            api,
            provider.get(api, "openai"),
            url,
            reasoning=True,
            input=("text", "image"),
            cost=ModelCost(1.0, 2.0, 0.1, 0.2),
            # A cap above what the window leaves: Pi fits max_tokens into the context window.
            context_window=40_000,
            max_tokens=64_000,
        )
        context = _history(model)
        srv.push(reply)
        case = {
            "model": to_wire(model),
            "context": {
                "systemPrompt": "sys",
                "messages": [to_wire(m) for m in context.messages],
                "tools": [to_wire(t) for t in context.tools or ()],
            },
            "options": {"apiKey": "k", "maxRetries": 0, "reasoning": reasoning, "sessionId": "s"},
        }
        done = await anyio.run_process(
            [node, "--input-type=module", "-e", NODE_SCRIPT, str(PI_AI), json.dumps([case])]
        )
        assert json.loads(done.stdout)["types"][-1] == "done"
        pi_body = _body(srv.requests[0])
        srv.push(reply)
        options = StreamOptions(api_key="k", max_retries=0, reasoning=reasoning, session_id="s")
        with anyio.fail_after(10):
            events = [ev async for ev in stream_simple(model, context, options)]
        assert events[-1].type == "done"
        assert _body(srv.requests[1]) == pi_body


_AFFINITY = ("session_id", "x-session-id", "x-client-request-id", "x-session-affinity")


@pytest.mark.pi
@pytest.mark.slow
@pytest.mark.anyio
@pytest.mark.parametrize("provider", ["openrouter", "openai"])
async def test_session_affinity_headers_match_pi(provider: str) -> None:
    """OpenRouter gets Pi's `x-session-id`; other hosts none by default; bodies agree too."""
    node = shutil.which("node")
    if node is None or not PI_AI.is_dir():
        pytest.skip("node or node/node_modules is missing (run ./dev setup)")
    async with FakeOpenAI() as fake:
        model = Model("m", "M", "openai-completions", provider, fake.base_url, max_tokens=100)
        user = UserMessage("hi", 1)
        fake.push(chat_text("ok"))
        case = {
            "model": to_wire(model),
            "context": {"messages": [to_wire(user)]},
            "options": {"apiKey": "k", "maxRetries": 0, "sessionId": "sess-1"},
        }
        await anyio.run_process(
            [node, "--input-type=module", "-e", NODE_SCRIPT, str(PI_AI), json.dumps([case])]
        )
        fake.push(chat_text("ok"))
        options = StreamOptions(api_key="k", max_retries=0, session_id="sess-1")
        with anyio.fail_after(10):
            _ = [ev async for ev in stream_simple(model, Context((user,)), options)]
        pi, mine = fake.requests
        lowered = [{k.lower(): v for k, v in r["headers"].items()} for r in (pi, mine)]
        assert [{k: h.get(k) for k in _AFFINITY} for h in lowered] == [
            {k: lowered[0].get(k) for k in _AFFINITY}
        ] * 2
        assert mine["body"] == pi["body"]
        if provider == "openrouter":
            assert lowered[1].get("x-session-id") == "sess-1"
