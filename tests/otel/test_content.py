"""The run's prompt on the first chat span (both roots), and nothing of it without capture."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import mule
from mule import effects
from mule.otel import traced
from mule.pi import Model, RetryPolicy, UserMessage
from mule.pi.scripted import Call, ScriptedModel, error_reply, reply
from mule.promise import core_input

pytestmark = pytest.mark.anyio
MODEL = Model(id="gpt-test", name="T", api="scripted", provider="openai", base_url="")


@pytest.fixture
def providers() -> Iterator[tuple[TracerProvider, InMemorySpanExporter, MeterProvider, Any]]:
    spans = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    reader = InMemoryMetricReader()
    meter_provider = MeterProvider(metric_readers=[reader])
    yield tracer_provider, spans, meter_provider, reader
    tracer_provider.shutdown()
    meter_provider.shutdown()


def _chats(spans: InMemorySpanExporter) -> list[ReadableSpan]:
    found = [s for s in spans.get_finished_spans() if s.name.startswith("chat ")]
    return sorted(found, key=lambda s: s.start_time or 0)


def _input(replies: list[Any], messages: Any) -> mule.MuleRunInput:
    return mule.MuleRunInput(
        model=MODEL,
        system_prompt="Be brief.",
        messages=messages,
        stream=ScriptedModel(replies),
    )


@pytest.mark.parametrize("root", ["mule.run", "mule.effects.run"])
async def test_the_first_chat_span_has_the_runs_prompt_without_passing_it(
    providers: Any, root: str
) -> None:
    tracer_provider, spans, meter_provider, _ = providers
    first = await mule.run(_input([reply("Hello!")], "Hi there"))
    # The second turn of the conversation: its first prompt is the whole conversation.
    inp = _input([reply("Fine.")], (*first.all_messages, UserMessage("How are you?")))
    listener = traced(
        tracer_provider=tracer_provider, meter_provider=meter_provider, capture_content=True
    )
    if root == "mule.run":
        await mule.run(inp, listener)
    else:
        (await effects.run(core_input(inp, listener))).unwrap()
    (chat,) = _chats(spans)
    sent = json.loads(str(dict(chat.attributes or {})["gen_ai.input.messages"]))
    assert sent == [
        {"role": "user", "parts": [{"type": "text", "content": "Hi there"}]},
        {
            "role": "assistant",
            "parts": [{"type": "text", "content": "Hello!"}],
            "finish_reason": "stop",
        },
        {"role": "user", "parts": [{"type": "text", "content": "How are you?"}]},
    ]


PLANTED = {
    "system": "SYSTEM-c1b6",
    "prompt": "PROMPT-9f2e",
    "argument": "ARGUMENT-77aa",
    "result": "RESULT-31d0",
    "answer": "ANSWER-5e4c",
    "provider": "PROVIDER-ERROR-0b8d",
    "tool_error": "TOOL-ERROR-a3f1",
}


@mule.tool(replay="safe")
def lookup(key: str) -> dict[str, str]:
    """Look a key up."""
    return {"value": PLANTED["result"]}


@mule.tool(errors_as_results=True)
def broken(key: str) -> str:
    """Fail with a message."""
    raise ValueError(PLANTED["tool_error"])


def _everything(spans: InMemorySpanExporter, reader: InMemoryMetricReader) -> str:
    """Every exported span (name, attributes, status, events, links) and metric, as text."""
    parts = [span.to_json() for span in spans.get_finished_spans()]
    data = reader.get_metrics_data()
    assert data is not None
    parts.append(data.to_json())
    return "\n".join(parts)


@pytest.mark.parametrize("root", ["mule.run", "mule.effects.run"])
async def test_without_capture_no_content_reaches_any_span_or_metric(
    providers: Any, root: str
) -> None:
    tracer_provider, spans, meter_provider, reader = providers
    replies = [
        error_reply(f"429 Too Many Requests: {PLANTED['provider']} in your prompt", start=True),
        reply(
            PLANTED["answer"],
            Call("c1", "lookup", {"key": PLANTED["argument"]}),
            Call("c2", "broken", {"key": PLANTED["argument"]}),
        ),
        reply(PLANTED["answer"]),
    ]
    inp = mule.MuleRunInput(
        model=MODEL,
        system_prompt=PLANTED["system"],
        messages=PLANTED["prompt"],
        stream=ScriptedModel(list(replies)),
        tools=[lookup, broken],
        retry=RetryPolicy(enabled=True, max_retries=1, base_delay_ms=1),
    )
    listener = traced(tracer_provider=tracer_provider, meter_provider=meter_provider)
    if root == "mule.run":
        out = await mule.run(inp, listener)
    else:
        out = (await effects.run(core_input(inp, listener))).unwrap()
    assert out.text == PLANTED["answer"]
    exported = _everything(spans, reader)
    assert '"error.type": "429"' in exported  # the failure's type and status are kept
    assert "execute_tool broken" in exported
    leaked = [name for name, text in PLANTED.items() if text in exported]
    assert leaked == []

    # The same run with capture on records every planted string: the scan can see them.
    spans.clear()
    inp2 = mule.MuleRunInput(
        model=MODEL,
        system_prompt=PLANTED["system"],
        messages=PLANTED["prompt"],
        stream=ScriptedModel(list(replies)),
        tools=[lookup, broken],
        retry=RetryPolicy(enabled=True, max_retries=1, base_delay_ms=1),
    )
    await mule.run(
        inp2,
        traced(
            tracer_provider=tracer_provider, meter_provider=meter_provider, capture_content=True
        ),
    )
    captured = _everything(spans, reader)
    assert [n for n, t in PLANTED.items() if t not in captured] == []
