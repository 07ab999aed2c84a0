"""mule.otel.traced against the real OpenTelemetry SDK (in-memory exporter and metric reader)."""

from __future__ import annotations

import gc
import json
import weakref
from collections.abc import Iterator, Sequence

import anyio
import pytest
from attrs import frozen
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import HistogramDataPoint, InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

import mule
from mule.otel import traced, traceparent
from mule.pi import Model, RetryPolicy, Usage, UserMessage
from mule.pi.scripted import Call, Reply, ScriptedModel, Text, error_reply, reply

pytestmark = pytest.mark.anyio
MODEL = Model(id="gpt-test", name="T", api="scripted", provider="openai", base_url="")
RETRY = RetryPolicy(enabled=True, max_retries=2, base_delay_ms=1)


@frozen
class Otel:
    tracer_provider: TracerProvider
    spans: InMemorySpanExporter
    meter_provider: MeterProvider
    metrics: InMemoryMetricReader

    def finished(self) -> list[ReadableSpan]:
        return list(self.spans.get_finished_spans())

    def points(self, name: str) -> list[HistogramDataPoint]:
        data = self.metrics.get_metrics_data()
        assert data is not None
        out: list[HistogramDataPoint] = []
        for resource in data.resource_metrics:
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    if metric.name == name:
                        out.extend(p for p in metric.data.data_points)  # type: ignore[misc]
        return out


@pytest.fixture
def otel() -> Iterator[Otel]:
    spans = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    reader = InMemoryMetricReader()
    meter_provider = MeterProvider(metric_readers=[reader])
    yield Otel(tracer_provider, spans, meter_provider, reader)
    tracer_provider.shutdown()
    meter_provider.shutdown()


def usage(i: int, o: int, cache_read: int = 0) -> Usage:
    return Usage(input=i, output=o, cache_read=cache_read, total_tokens=i + o + cache_read)


@mule.tool(replay="safe")
async def add(a: int, b: int) -> int:
    """Add two integers."""
    await anyio.sleep(0.01)
    return a + b


@mule.tool
async def boom() -> str:
    """Fail hard."""
    raise RuntimeError("the disk is on fire")


@mule.tool
async def wait(signal: mule.AbortSignal) -> str:
    """Wait until aborted."""
    await signal.wait()
    signal.throw_if_aborted()
    return "unreachable"


def run_input(replies: Sequence[Reply], *tools: mule.MuleTool) -> mule.MuleRunInput:
    return mule.MuleRunInput(
        model=MODEL,
        system_prompt="You add.",
        messages=(UserMessage("What is 1+2 and 3+4?", 0),),
        stream=ScriptedModel(list(replies)),
        tools=tools,
        retry=RETRY,
    )


def by_name(spans: list[ReadableSpan]) -> dict[str, list[ReadableSpan]]:
    out: dict[str, list[ReadableSpan]] = {}
    for s in sorted(spans, key=lambda s: s.start_time or 0):
        out.setdefault(s.name, []).append(s)
    return out


def parent_of(span: ReadableSpan) -> int | None:
    return int(span.parent.span_id) if span.parent is not None else None


def sid(span: ReadableSpan) -> int:
    assert span.context is not None
    return int(span.context.span_id)


RETRIED_PARALLEL = (
    error_reply("503 Service Unavailable: overloaded", start=True),
    reply(
        Text.of("Let me add. ", 4),
        Call("c1", "add", {"a": 1, "b": 2}),
        Call("c2", "add", {"a": 3, "b": 4}),
        usage=usage(100, 20, cache_read=50),
        response_id="resp-1",
    ),
    reply(Text.of("3 and 7.", 3), usage=usage(160, 8)),
)


async def test_span_tree_of_a_run_with_a_retry_and_parallel_tools(otel: Otel) -> None:
    events: list[str] = []

    def inner(event: mule.MuleEvent, signal: mule.AbortSignal) -> None:
        events.append(event.type)

    listener = traced(
        inner,
        tracer_provider=otel.tracer_provider,
        meter_provider=otel.meter_provider,
        agent_name="adder",
        conversation_id="conv-7",
    )
    outcome = await mule.run(run_input(RETRIED_PARALLEL, add), listener)
    assert outcome.status == "completed"
    assert events[0] == "run_start"  # the wrapped listener saw every event
    assert events[-1] == "run_end"
    assert "message_update" in events

    spans = by_name(otel.finished())
    assert set(spans) == {"invoke_agent adder", "chat gpt-test", "execute_tool add"}
    (run,) = spans["invoke_agent adder"]
    chats = spans["chat gpt-test"]
    tools = spans["execute_tool add"]
    assert (len(chats), len(tools)) == (3, 2)  # never a span per delta

    assert run.parent is None
    assert run.kind is SpanKind.INTERNAL
    assert run.status.status_code is StatusCode.OK
    assert dict(run.attributes or {}) == {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": "adder",
        "gen_ai.conversation.id": "conv-7",
        "gen_ai.request.model": "gpt-test",
        "gen_ai.provider.name": "openai",
        "gen_ai.usage.input_tokens": 310,
        "gen_ai.usage.output_tokens": 28,
        "mule.run": "run:0",
        "mule.outcome": "completed",
    }

    # Attempts are siblings under the run: the failed one, its retry, then the next turn's.
    failed, retried, final = chats
    assert {parent_of(c) for c in chats} == {sid(run)}
    assert all(c.kind is SpanKind.CLIENT for c in chats)
    fa = dict(failed.attributes or {})
    assert failed.status.status_code is StatusCode.ERROR
    # Without capture_content the provider's text stays out: its stop reason and status only.
    assert failed.status.description == "error: 503"
    assert fa["error.type"] == "503"
    assert fa["gen_ai.response.finish_reasons"] == ("error",)
    assert (fa["mule.attempt"], fa["mule.turn"]) == (1, "turn:1")
    ra = dict(retried.attributes or {})
    assert retried.status.status_code is StatusCode.UNSET
    assert (ra["mule.attempt"], ra["mule.turn"]) == (2, "turn:1")
    assert ra["gen_ai.operation.name"] == "chat"
    assert ra["gen_ai.request.model"] == "gpt-test"
    assert ra["gen_ai.provider.name"] == "openai"
    assert ra["gen_ai.usage.input_tokens"] == 150  # cached input counts as input
    assert ra["gen_ai.usage.cache_read.input_tokens"] == 50
    assert ra["gen_ai.usage.output_tokens"] == 20
    assert ra["gen_ai.response.finish_reasons"] == ("tool_call",)
    assert ra["gen_ai.response.id"] == "resp-1"
    assert "error.type" not in ra
    assert dict(final.attributes or {})["mule.turn"] != "turn:1"

    # Tool calls run in parallel, under the attempt whose message asked for them.
    assert {parent_of(t) for t in tools} == {sid(retried)}
    assert {dict(t.attributes or {})["gen_ai.tool.call.id"] for t in tools} == {"c1", "c2"}
    first = dict(tools[0].attributes or {})
    assert first["gen_ai.operation.name"] == "execute_tool"
    assert first["gen_ai.tool.name"] == "add"
    assert first["gen_ai.tool.type"] == "function"
    assert first["mule.replay"] == "safe"
    assert str(first["mule.tool_call"]).startswith("tool_call:")
    starts = sorted(t.start_time or 0 for t in tools)
    ends = sorted(t.end_time or 0 for t in tools)
    assert starts[1] < ends[0]  # they overlapped
    # No content without capture_content.
    for span in otel.finished():
        keys = set(span.attributes or {})
        assert not keys & {
            "gen_ai.input.messages",
            "gen_ai.output.messages",
            "gen_ai.system_instructions",
            "gen_ai.tool.call.arguments",
            "gen_ai.tool.call.result",
        }


async def test_metrics_follow_the_genai_client_conventions(otel: Otel) -> None:
    listener = traced(tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider)
    await mule.run(run_input(RETRIED_PARALLEL, add), listener)
    durations = otel.points("gen_ai.client.operation.duration")
    assert sum(p.count for p in durations) == 3
    attrs = [dict(p.attributes or {}) for p in durations]
    by_error = {a.get("error.type"): p.count for a, p in zip(attrs, durations, strict=True)}
    assert by_error == {"503": 1, None: 2}
    assert all(a["gen_ai.operation.name"] == "chat" for a in attrs)
    assert all(a["gen_ai.request.model"] == "gpt-test" for a in attrs)
    tokens = otel.points("gen_ai.client.token.usage")
    summed: dict[object, float] = {}
    for p in tokens:
        kind = dict(p.attributes or {})["gen_ai.token.type"]
        summed[kind] = summed.get(kind, 0) + p.sum
    assert summed == {"input": 310, "output": 28}


async def test_content_only_when_asked(otel: Otel) -> None:
    listener = traced(
        tracer_provider=otel.tracer_provider,
        meter_provider=otel.meter_provider,
        capture_content=True,
    )
    await mule.run(run_input(RETRIED_PARALLEL, add), listener)
    spans = by_name(otel.finished())
    _, retried, final = spans["chat gpt-test"]
    ra = dict(retried.attributes or {})
    assert json.loads(str(ra["gen_ai.system_instructions"])) == [
        {"type": "text", "content": "You add."}
    ]
    assert json.loads(str(ra["gen_ai.input.messages"])) == [
        {"role": "user", "parts": [{"type": "text", "content": "What is 1+2 and 3+4?"}]}
    ]
    output = json.loads(str(ra["gen_ai.output.messages"]))
    assert output[0]["role"] == "assistant"
    assert output[0]["finish_reason"] == "tool_call"
    assert output[0]["parts"][0] == {"type": "text", "content": "Let me add. "}
    assert output[0]["parts"][1]["type"] == "tool_call"
    # The last attempt saw the whole conversation so far, tool results included.
    seen = json.loads(str(dict(final.attributes or {})["gen_ai.input.messages"]))
    assert [m["role"] for m in seen] == ["user", "assistant", "tool", "tool"]
    tool = next(t for t in spans["execute_tool add"] if t.attributes["gen_ai.tool.call.id"] == "c1")  # type: ignore[index]
    ta = dict(tool.attributes or {})
    assert json.loads(str(ta["gen_ai.tool.call.arguments"])) == {"a": 1, "b": 2}
    assert json.loads(str(ta["gen_ai.tool.call.result"]))["text"] == "3"


async def test_a_failed_run(otel: Otel) -> None:
    listener = traced(tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider)
    with pytest.raises(mule.MuleRunFailed):
        await mule.run(run_input([reply(Call("c1", "boom"))], boom), listener)
    spans = by_name(otel.finished())
    (run,) = spans["invoke_agent"]
    (tool,) = spans["execute_tool boom"]
    assert run.status.status_code is StatusCode.ERROR
    assert dict(run.attributes or {})["error.type"] == "failed"
    assert dict(run.attributes or {})["mule.outcome"] == "failed"
    assert tool.status.status_code is StatusCode.ERROR
    assert tool.end_time is not None
    assert run.end_time is not None
    assert tool.end_time <= run.end_time


async def test_an_error_result_marks_its_tool_span(otel: Otel) -> None:
    listener = traced(tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider)
    await mule.run(run_input([reply(Call("c1", "nope")), reply("ok")]), listener)
    (tool,) = by_name(otel.finished())["execute_tool nope"]
    assert tool.status.status_code is StatusCode.ERROR
    assert dict(tool.attributes or {})["error.type"] == "tool_error"


async def test_steps_the_host_says_were_replayed_are_marked_and_not_metered(otel: Otel) -> None:
    """`replayed` marks the spans it names; their attempts record no metric points."""
    asked: list[str] = []

    def replayed(event: mule.MuleEvent) -> bool:
        asked.append(event.type)
        if type(event) is mule.MessageStart:
            return event.message.value == "message:2"  # the failed first attempt
        return type(event) is mule.ToolExecutionEnd and event.call.id == "c1"

    listener = traced(
        tracer_provider=otel.tracer_provider,
        meter_provider=otel.meter_provider,
        replayed=replayed,
    )
    await mule.run(run_input(RETRIED_PARALLEL, add), listener)
    spans = by_name(otel.finished())
    chats = spans["chat gpt-test"]
    assert [dict(c.attributes or {}).get("mule.replayed") for c in chats] == [True, None, None]
    assert dict(chats[0].attributes or {})["mule.message"] == "message:2"
    tools = {dict(t.attributes or {})["gen_ai.tool.call.id"]: t for t in spans["execute_tool add"]}
    assert dict(tools["c1"].attributes or {})["mule.replayed"] is True
    assert "mule.replayed" not in dict(tools["c2"].attributes or {})
    assert "mule.replayed" not in dict(spans["invoke_agent"][0].attributes or {})
    # Asked once per attempt (its start) and once per tool call (its end), nothing else.
    assert sorted(asked) == ["message_start"] * 3 + ["tool_execution_end"] * 2
    durations = otel.points("gen_ai.client.operation.duration")
    assert sum(p.count for p in durations) == 2  # the replayed failed attempt is not metered
    assert all("error.type" not in dict(p.attributes or {}) for p in durations)


async def test_a_cancelled_run(otel: Otel) -> None:
    controller = mule.AbortController()

    def stop(event: mule.MuleEvent, signal: mule.AbortSignal) -> None:
        if type(event) is mule.ToolExecutionStart:
            controller.abort(mule.AbortError("stop"))

    listener = traced(
        stop, tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider
    )
    with pytest.raises(mule.AbortError):
        await mule.run(run_input([reply(Call("c1", "wait"))], wait), listener, controller.signal)
    spans = by_name(otel.finished())
    (run,) = spans["invoke_agent"]
    (tool,) = spans["execute_tool wait"]
    assert run.status.status_code is StatusCode.ERROR
    assert dict(run.attributes or {})["error.type"] == "cancelled"
    assert tool.status.status_code is StatusCode.ERROR
    assert dict(tool.attributes or {})["error.type"] == "cancelled"


async def test_a_stream_cancelled_mid_attempt(otel: Otel) -> None:
    controller = mule.AbortController()

    def stop(event: mule.MuleEvent, signal: mule.AbortSignal) -> None:
        if type(event) is mule.MessageUpdate:
            controller.abort(mule.AbortError("stop"))

    listener = traced(
        stop, tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider
    )
    script = [Reply(blocks=(Text.of("a long answer", 5),), stall_after=3)]
    with pytest.raises(mule.AbortError):
        await mule.run(run_input(script), listener, controller.signal)
    (chat,) = by_name(otel.finished())["chat gpt-test"]
    assert chat.status.status_code is StatusCode.ERROR
    assert dict(chat.attributes or {})["error.type"] == "cancelled"


async def test_the_run_span_joins_the_current_trace_and_links_the_one_it_continues(
    otel: Otel,
) -> None:
    tracer = otel.tracer_provider.get_tracer("host")
    previous = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    started: list[str] = []
    listener = traced(
        tracer_provider=otel.tracer_provider,
        meter_provider=otel.meter_provider,
        continues=previous,
        on_run_start=started.append,
    )
    with tracer.start_as_current_span("request") as host:
        await mule.run(run_input([reply("hi")]), listener)
    spans = by_name(otel.finished())
    (run,) = spans["invoke_agent"]
    assert parent_of(run) == host.get_span_context().span_id
    (link,) = run.links
    assert format(link.context.trace_id, "032x") == "0af7651916cd43dd8448eb211c80319c"
    assert dict(link.attributes or {}) == {"mule.link": "continues"}
    assert run.context is not None
    assert started == [traceparent(run.context)]
    # The same listener records a later run too (one at a time).
    await mule.run(run_input([reply("again")]), listener)
    assert len(by_name(otel.finished())["invoke_agent"]) == 2


def test_a_bad_traceparent_is_refused() -> None:
    with pytest.raises(ValueError, match="traceparent"):
        traced(continues="not-a-traceparent")


async def test_without_an_sdk_it_records_nothing_and_costs_little() -> None:
    started: list[str] = []
    outcome = await mule.run(run_input([reply("hi")]), traced(on_run_start=started.append))
    assert outcome.status == "completed"
    assert started == []  # the no-op provider has no trace to continue


async def test_runs_on_the_same_providers_share_instruments_and_do_not_keep_providers(
    otel: Otel,
) -> None:
    """The tracer and histograms are made once per provider pair, held weakly."""
    for _ in range(3):
        listener = traced(tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider)
        await mule.run(run_input([reply("hi")]), listener)
    assert [s.name for s in otel.finished()] == ["chat gpt-test", "invoke_agent"] * 3
    durations = otel.points("gen_ai.client.operation.duration")
    assert [p.count for p in durations] == [3]  # one series, all three runs in it
    tracer_provider = TracerProvider(shutdown_on_exit=False)
    meter_provider = MeterProvider(shutdown_on_exit=False)
    await mule.run(
        run_input([reply("hi")]),
        traced(tracer_provider=tracer_provider, meter_provider=meter_provider),
    )
    refs = (weakref.ref(tracer_provider), weakref.ref(meter_provider))
    del tracer_provider, meter_provider
    gc.collect()
    assert [r() for r in refs] == [None, None]


async def test_the_effects_root_records_the_same_tree(otel: Otel) -> None:
    """The Result root, given the traced listener as its emit port, yields the same spans."""
    from attrs import evolve
    from returns.result import Success

    from mule.effects import run as run_core
    from mule.promise import core_input, emit_port

    listener = traced(tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider)
    core = core_input(run_input(RETRIED_PARALLEL, add))
    assert core.ports.emit is None
    result = await run_core(evolve(core, ports=evolve(core.ports, emit=emit_port(listener))))
    assert isinstance(result, Success)
    spans = by_name(otel.finished())
    assert sorted((name, len(s)) for name, s in spans.items()) == [
        ("chat gpt-test", 3),
        ("execute_tool add", 2),
        ("invoke_agent", 1),
    ]
    retried = spans["chat gpt-test"][1]
    assert {parent_of(t) for t in spans["execute_tool add"]} == {sid(retried)}


async def test_the_effects_root_ends_a_failed_run_span_with_its_status(otel: Otel) -> None:
    """On the Result root a failure is a `Failure`, not a raise: the spans still end as failed."""
    from returns.result import Failure

    from mule.effects import run as run_core
    from mule.promise import core_input

    listener = traced(tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider)
    result = await run_core(core_input(run_input([reply(Call("c1", "boom"))], boom), listener))
    assert isinstance(result, Failure)
    spans = by_name(otel.finished())
    (run,) = spans["invoke_agent"]
    (tool,) = spans["execute_tool boom"]
    assert run.status.status_code is StatusCode.ERROR
    assert dict(run.attributes or {})["mule.outcome"] == "failed"
    assert tool.status.status_code is StatusCode.ERROR
    assert parent_of(tool) == sid(spans["chat gpt-test"][0])
