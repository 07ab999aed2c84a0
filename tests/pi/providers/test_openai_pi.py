"""Mule's OpenAI providers and Pi's own (run under Node) agree on the same server replies."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import anyio
import pytest

from mule.pi import (
    Context,
    DoneEvent,
    ErrorEvent,
    Model,
    ModelCost,
    StreamOptions,
    UserMessage,
    to_wire,
)
from mule.pi.providers import stream_simple
from mule.testing.fake_openai import (
    FakeOpenAI,
    chat_stream,
    chat_usage,
    function_call_item,
    openai_error,
    responses_stream,
    responses_usage,
    tool_call,
)
from tests.pi.test_codec import key_order

PI_AI = Path(__file__).parents[3] / "node" / "node_modules" / "@earendil-works" / "pi-ai"

# Streams every case through pi-ai 1.6.0's API module for its `api` (as a provider would, with a
# normalised transcript context) and prints one JSON line per case.
NODE_SCRIPT = """
const [, piAi, casesJson] = process.argv;
const { normalizeContext } = await import(piAi + "/dist/index.js");
for (const c of JSON.parse(casesJson)) {
  const api = await import(piAi + "/dist/api/" + c.model.api + ".js");
  const s = api.streamSimple(c.model, normalizeContext(c.context), c.options);
  const types = [];
  let startStop = null;
  for await (const ev of s) {
    types.push(ev.type);
    if (ev.type === "start") startStop = ev.partial.stopReason;
  }
  const message = await s.result();
  console.log(JSON.stringify({ types, startStop, message }));
}
"""

CASES: list[tuple[str, dict[str, Any]]] = [
    (
        "openai-completions",
        chat_stream(
            text="Hello, world",
            pieces=3,
            reasoning="think first",
            calls=[
                tool_call("call_a", "read", {"path": "/a"}, pieces=3),
                tool_call("call_b", "ls", {"all": True}, pieces=2),
            ],
            interleave=True,
            usage=chat_usage(30, 9, cached=10),
        ),
    ),
    ("openai-completions", chat_stream(text="cut short", finish_reason="length")),
    # Arguments cut off, and arguments that are no object: empty, with an argumentsError.
    (
        "openai-completions",
        chat_stream(
            calls=[tool_call("c1", "read", '{"path": "/tm', pieces=2)], finish_reason="length"
        ),
    ),
    ("openai-completions", chat_stream(calls=[tool_call("c2", "ls", "[1, 2]")])),
    ("openai-completions", chat_stream(calls=[tool_call("c3", "ls", '{"a": 1,}')])),
    ("openai-completions", chat_stream(text="hidden", finish_reason="content_filter")),
    ("openai-completions", chat_stream(text="odd", finish_reason="something_new")),
    ("openai-completions", chat_stream(text="no reason given", finish=False)),
    ("openai-completions", chat_stream(text="r", usage=chat_usage(40, 12, cached=8, reasoning=5))),
    ("openai-completions", openai_error(400, "Invalid 'messages[0]'")),
    ("openai-completions", openai_error(500, "boom", type="server_error", code="internal")),
    (
        "openai-responses",
        responses_stream(
            summary=["one", "two"],
            encrypted="ENC",
            text="Hi",
            pieces=2,
            calls=[function_call_item("call_1", "fc_1", "f", {"x": [1, 2]}, pieces=3)],
            usage=responses_usage(50, 7, cached=20, reasoning=3),
        ),
    ),
    ("openai-responses", responses_stream(text="trunc", status="incomplete")),
    (
        "openai-responses",
        responses_stream(text="cut", status="incomplete", incomplete_reason="max_output_tokens"),
    ),
    (
        "openai-responses",
        responses_stream(text="no", status="incomplete", incomplete_reason="content_filter"),
    ),
    ("openai-responses", responses_stream(text="gone", terminal=False)),
    ("openai-responses", openai_error(429, "Rate limited", type="rate_limit_error")),
]


def _model(api: str, base_url: str) -> Model:
    return Model(
        "gpt-fake",
        "Fake",
        api,
        "openai",
        base_url,
        reasoning=True,
        cost=ModelCost(1.0, 4.0, 0.25, 0.0),
        max_tokens=8000,
    )


def comparable(message: dict[str, Any]) -> dict[str, Any]:
    # Clocks differ; diagnostics are mule's addition (Pi records none).
    assert type(message["durationMs"]) is int
    return {k: v for k, v in message.items() if k not in ("timestamp", "durationMs", "diagnostics")}


@pytest.mark.pi
@pytest.mark.slow
@pytest.mark.anyio
async def test_mule_matches_pi_on_the_same_replies() -> None:
    """Event types and final messages equal Pi 1.6.0's: content, usage, stop reasons, errors."""
    node = shutil.which("node")
    if node is None or not PI_AI.is_dir():
        pytest.skip("node or node/node_modules is missing (run ./dev setup)")
    user = UserMessage("hi", 1)
    async with FakeOpenAI() as fake:
        node_cases = []
        for api, script in CASES:
            fake.push(script)
            node_cases.append(
                {
                    "model": to_wire(_model(api, fake.base_url)),
                    "context": {"systemPrompt": "sys", "messages": [to_wire(user)]},
                    "options": {"apiKey": "k", "maxRetries": 0, "reasoning": "low"},
                }
            )
        done = await anyio.run_process(
            [node, "--input-type=module", "-e", NODE_SCRIPT, str(PI_AI), json.dumps(node_cases)],
        )
        pi_results = [json.loads(line) for line in done.stdout.decode().splitlines()]
        pi_bodies = [r["body"] for r in fake.requests]
        fake.reset()
        for i, (api, script) in enumerate(CASES):
            fake.push(script)
            model = _model(api, fake.base_url)
            options = StreamOptions(api_key="k", max_retries=0, reasoning="low")
            stream = stream_simple(model, Context((user,), system_prompt="sys"), options)
            with anyio.fail_after(10):
                events = [ev async for ev in stream]
            last = events[-1]
            assert isinstance(last, DoneEvent | ErrorEvent)
            final = last.message if isinstance(last, DoneEvent) else last.error
            pi = pi_results[i]
            mine = comparable(to_wire(final))
            assert [e.type for e in events] == pi["types"], (i, api)
            if events[0].type == "start":
                assert events[0].partial.stop_reason == pi["startStop"] == "pending"
            assert mine == comparable(pi["message"]), (i, api)
            assert key_order(mine) == key_order(comparable(pi["message"])), (i, api)
        assert [r["body"] for r in fake.requests] == pi_bodies
