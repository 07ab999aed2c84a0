"""End to end: `mule.run` with a real tool and the real providers against each fake vendor server.

Each run: the first call answers HTTP 429 with a server-requested wait, the loop retries after at
least that wait, the second attempt calls a tool that really touches the file system, the tool's
result goes back over HTTP, and the third call's text completes the run. Provider-level (SDK)
retries are off (`max_retries=0`), so the retry seen here is the loop's.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from attrs import frozen

import mule
import mule.pi
from mule.effects import MuleEvent
from mule.pi import AbortSignal, AssistantMessage, Model, StreamOptions, TextContent, UserMessage
from mule.testing import fake_anthropic as fa
from mule.testing import fake_google as fg
from mule.testing import fake_openai as fo

pytestmark = pytest.mark.anyio

RATE_LIMIT = "Rate limit reached for requests"
FINAL = "All done: the note is stored."
NOTE = "buy oats"
CALL_ID = "call_e2e_1"
MS_WAIT = 300  # retry-after-ms, honoured by the Stainless SDK path (OpenAI, Anthropic)
SECONDS_WAIT = 1  # Retry-After in whole seconds (what Google's front end would send)


@frozen
class Sandbox:
    """A tool that writes a file and answers with a token only the file system knows."""

    tool: mule.MuleTool
    note: Path
    token: str


def _sandbox(tmp_path: Path) -> Sandbox:
    token = uuid.uuid4().hex
    (tmp_path / "token.txt").write_text(token)
    note = tmp_path / "note.txt"

    @mule.tool
    def stash(text: str) -> str:
        """Store a note on disk."""
        note.write_text(text)
        secret = (tmp_path / "token.txt").read_text()
        return f"stored {len(text)} chars; receipt {secret}"

    return Sandbox(stash, note, token)


@frozen
class Seen:
    """One listener event and the loop clock when it arrived."""

    event: MuleEvent
    at: float


async def _run(model: Model, sandbox: Sandbox) -> tuple[mule.MuleRunOutcome, list[Seen]]:
    seen: list[Seen] = []

    def listener(event: MuleEvent, signal: AbortSignal) -> None:
        seen.append(Seen(event, anyio.current_time()))

    inp = mule.MuleRunInput(
        model=model,
        system_prompt="You keep notes.",
        messages=(UserMessage(f"Please note: {NOTE}", 1),),
        tools=(sandbox.tool,),
        stream_options=StreamOptions(api_key="test", max_retries=0),
        retry=mule.RetryPolicy(True, 2, 1),
        retry_after_ms=mule.pi.retry_after_ms,
    )
    with anyio.fail_after(10):
        outcome = await mule.run(inp, listener)
    return outcome, seen


def _check_run(
    outcome: mule.MuleRunOutcome,
    seen: list[Seen],
    sandbox: Sandbox,
    wait_ms: float,
) -> None:
    """Check the retry after the server's wait, the real tool, and the final answer."""
    prompts: list[tuple[int, mule.ModelPrompt, float]] = []
    ends: list[tuple[int, AssistantMessage, float]] = []
    for i, s in enumerate(seen):
        if isinstance(s.event, mule.ModelPrompt):
            prompts.append((i, s.event, s.at))
        elif isinstance(s.event, mule.MessageEnd) and isinstance(s.event.value, AssistantMessage):
            ends.append((i, s.event.value, s.at))
    assert [p.attempt for _, p, _ in prompts] == [1, 2, 1]  # turn 1 and its retry; turn 2
    failed_index, failed, failed_at = ends[0]
    assert failed.stop_reason == "error"
    assert failed.error_message is not None
    assert "429" in failed.error_message
    assert RATE_LIMIT in failed.error_message
    assert mule.pi.retry_after_ms(failed) == wait_ms
    # order: attempt 1, its error message_end, attempt 2, then the tool
    retry_index, _, retry_at = prompts[1]
    tool_index = next(i for i, s in enumerate(seen) if s.event.type == "tool_execution_start")
    assert prompts[0][0] < failed_index < retry_index < tool_index
    # the loop slept at least the server's wait (base backoff is 1 ms, so nothing else explains it)
    assert retry_at - failed_at >= wait_ms / 1000
    assert failed not in outcome.messages  # a retried attempt is never committed
    # the tool really ran
    assert sandbox.note.read_text() == NOTE
    tool_ends = [s.event for s in seen if isinstance(s.event, mule.ToolExecutionEnd)]
    assert len(tool_ends) == 1
    assert not tool_ends[0].result.is_error
    # the run completed with the model's final text
    assert outcome.status == "completed"
    assert outcome.message.stop_reason == "stop"
    assert len(outcome.message.content) == 1
    assert [b.text for b in outcome.message.content if isinstance(b, TextContent)] == [FINAL]
    last = seen[-1].event
    assert isinstance(last, mule.RunEnd)
    assert last.outcome == "completed"


def _only(items: list[Any]) -> Any:
    assert len(items) == 1, items
    return items[0]


# -- OpenAI (one server thread for the module; it runs outside the test's event loop) -----------


@pytest.fixture(scope="module")
def openai_server() -> Iterator[fo.FakeOpenAI]:
    with fo.FakeOpenAI() as fake:
        yield fake


@pytest.fixture
def openai(openai_server: fo.FakeOpenAI) -> fo.FakeOpenAI:
    openai_server.reset()
    return openai_server


def _openai_model(fake: fo.FakeOpenAI, api: str) -> Model:
    return Model(
        id="gpt-fake",
        name="Fake",
        api=api,
        provider="openai",
        base_url=fake.base_url,
        max_tokens=16000,
    )


def _rate_limited_openai() -> dict[str, Any]:
    return fo.openai_error(
        429,
        RATE_LIMIT,
        type="requests",
        code="rate_limit_exceeded",
        headers={"retry-after-ms": str(MS_WAIT)},
    )


async def test_openai_completions_retry_tool_and_answer(
    openai: fo.FakeOpenAI, tmp_path: Path
) -> None:
    """Chat Completions: a 429 with retry-after-ms is waited out, a real tool runs, text ends."""
    sandbox = _sandbox(tmp_path)
    openai.push(
        _rate_limited_openai(),
        fo.chat_stream(calls=[fo.tool_call(CALL_ID, "stash", {"text": NOTE}, pieces=3)]),
        fo.chat_text(FINAL, pieces=4),
    )
    outcome, seen = await _run(_openai_model(openai, "openai-completions"), sandbox)
    _check_run(outcome, seen, sandbox, MS_WAIT)
    bodies = [r["body"] for r in openai.requests]
    assert len(bodies) == 3
    assert bodies[0] == bodies[1]  # the retry sends the identical request
    result = _only([m for m in bodies[2]["messages"] if m["role"] == "tool"])
    assert result["tool_call_id"] == CALL_ID
    assert sandbox.token in json.dumps(result["content"])


async def test_openai_responses_retry_tool_and_answer(
    openai: fo.FakeOpenAI, tmp_path: Path
) -> None:
    """Responses API: a 429 with retry-after-ms is waited out, a real tool runs, text ends."""
    sandbox = _sandbox(tmp_path)
    call = fo.function_call_item(CALL_ID, "fc_e2e_1", "stash", {"text": NOTE}, pieces=2)
    openai.push(
        _rate_limited_openai(),
        fo.responses_stream(calls=[call]),
        fo.responses_text(FINAL, pieces=3),
    )
    outcome, seen = await _run(_openai_model(openai, "openai-responses"), sandbox)
    _check_run(outcome, seen, sandbox, MS_WAIT)
    bodies = [r["body"] for r in openai.requests]
    assert len(bodies) == 3
    assert all(r["path"] == "/v1/responses" for r in openai.requests)
    assert bodies[0] == bodies[1]
    output = _only([i for i in bodies[2]["input"] if i.get("type") == "function_call_output"])
    assert output["call_id"] == CALL_ID
    assert sandbox.token in json.dumps(output["output"])


# -- Anthropic and Google (served from the test's own event loop) ------------------------------


async def test_anthropic_messages_retry_tool_and_answer(tmp_path: Path) -> None:
    """Anthropic: a 429 with retry-after-ms is waited out, a real tool runs, text ends."""
    sandbox = _sandbox(tmp_path)
    replies = (
        fa.error_reply(429, RATE_LIMIT, headers=(("retry-after-ms", str(MS_WAIT)),)),
        fa.sse_reply(
            fa.message(
                fa.tool_block(0, CALL_ID, "stash", '{"te', 'xt": "', NOTE, '"}'),
                stop_reason="tool_use",
            )
        ),
        fa.sse_reply(fa.message(fa.text_block(0, "All done: ", "the note is stored."))),
    )
    async with fa.serve_script(*replies) as server:
        model = Model(
            id="claude-sonnet-4-5",
            name="Claude",
            api="anthropic-messages",
            provider="anthropic",
            base_url=server.url,
            max_tokens=64000,
        )
        outcome, seen = await _run(model, sandbox)
    _check_run(outcome, seen, sandbox, MS_WAIT)
    bodies = [r.json() for r in server.requests]
    assert len(bodies) == 3
    assert bodies[0] == bodies[1]
    last_user = bodies[2]["messages"][-1]
    assert last_user["role"] == "user"
    result = _only([b for b in last_user["content"] if b.get("type") == "tool_result"])
    assert result["tool_use_id"] == CALL_ID
    assert sandbox.token in json.dumps(result["content"])


async def test_google_generative_ai_retry_tool_and_answer(tmp_path: Path) -> None:
    """Gemini: a 429 with Retry-After in seconds is waited out, a real tool runs, text ends."""
    sandbox = _sandbox(tmp_path)
    usage = fg.usage(12, 4)
    replies = (
        fg.error_reply(429, RATE_LIMIT, headers=(("retry-after", str(SECONDS_WAIT)),)),
        fg.sse_reply(
            [
                fg.chunk(
                    fg.call("stash", {"text": NOTE}, call_id=CALL_ID),
                    finish="STOP",
                    usage_metadata=usage,
                )
            ]
        ),
        fg.sse_reply(
            [
                fg.chunk(fg.text("All done: ")),
                fg.chunk(fg.text("the note is stored."), finish="STOP", usage_metadata=usage),
            ]
        ),
    )
    async with fa.serve_script(*replies) as server:
        model = Model(
            id="gemini-2.5-flash",
            name="Gemini",
            api="google-generative-ai",
            provider="google",
            base_url=server.url,
            max_tokens=65536,
        )
        outcome, seen = await _run(model, sandbox)
    _check_run(outcome, seen, sandbox, SECONDS_WAIT * 1000)
    bodies = [r.json() for r in server.requests]
    assert len(bodies) == 3
    assert bodies[0] == bodies[1]
    parts = [p for c in bodies[2]["contents"] for p in c["parts"] if "functionResponse" in p]
    response = _only(parts)["functionResponse"]
    assert response["name"] == "stash"
    assert sandbox.token in json.dumps(response["response"])
