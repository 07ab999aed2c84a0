"""A run traced with OpenTelemetry: the GenAI span tree and token metrics, printed.

Uses the SDK with in-memory exporters so it runs offline; in production configure your own
providers (or run `mule run --otel` with OTEL_EXPORTER_OTLP_ENDPOINT set).
"""

import anyio
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import mule
from mule.otel import traced
from mule.pi import Model, RetryPolicy, Usage, UserMessage
from mule.pi.scripted import Call, ScriptedModel, error_reply, reply


@mule.tool(replay="safe")
def word_count(text: str) -> int:
    """Count the words in a text."""
    return len(text.split())


def tree(spans: list[ReadableSpan]) -> None:
    children: dict[int | None, list[ReadableSpan]] = {}
    for s in sorted(spans, key=lambda s: s.start_time or 0):
        children.setdefault(s.parent.span_id if s.parent else None, []).append(s)

    def walk(parent: int | None, depth: int) -> None:
        for s in children.get(parent, []):
            a = s.attributes or {}
            notes = [
                f"{k}={a[k]!s}"
                for k in ("mule.attempt", "error.type", "gen_ai.usage.output_tokens")
                if k in a
            ]
            print(f"{'  ' * depth}{s.name}  {s.status.status_code.name}  {' '.join(notes)}")
            walk(s.context.span_id if s.context else None, depth + 1)

    walk(None, 0)


async def main() -> None:
    spans = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    reader = InMemoryMetricReader()
    meter_provider = MeterProvider(metric_readers=[reader])

    model = Model(id="demo-model", name="demo", api="scripted", provider="demo", base_url="")
    script = ScriptedModel([
        error_reply("503 Service Unavailable", start=True),  # retried: a sibling attempt span
        reply("Counting. ", Call("c1", "word_count", {"text": "an honest loop"}),
              usage=Usage(input=40, output=9)),
        reply("It has 3 words.", usage=Usage(input=60, output=6)),
    ])  # fmt: skip
    await mule.run(
        mule.MuleRunInput(
            model=model,
            system_prompt="You count words.",
            messages=(UserMessage("How many words in 'an honest loop'?", 0),),
            stream=script,
            tools=[word_count],
            retry=RetryPolicy(enabled=True, max_retries=2, base_delay_ms=1),
        ),
        traced(
            tracer_provider=tracer_provider, meter_provider=meter_provider, agent_name="counter"
        ),
    )
    tree(list(spans.get_finished_spans()))
    data = reader.get_metrics_data()
    for metric in data.resource_metrics[0].scope_metrics[0].metrics if data else ():
        for point in metric.data.data_points:
            kind = (point.attributes or {}).get("gen_ai.token.type", "")
            print(f"{metric.name} {kind}: count={point.count} sum={point.sum:g}")  # type: ignore[union-attr]


anyio.run(main)
