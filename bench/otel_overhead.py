"""What tracing costs a run: mule.otel.traced vs the same listener untraced, per delivered event.

The workload of bench/loop_overhead.py (T turns of D text deltas and two parallel tool calls,
then a final text turn), run through the promise root with a counting listener, alternately
untraced and traced by the real OpenTelemetry SDK (a batch span processor whose exporter keeps
nothing, and a metric reader). Interleaved best-of-N, so both sides see the same machine load.

    .venv/bin/python bench/otel_overhead.py [--turns 5] [--deltas 200 2000] [--repeat 15]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence

import anyio
from loop_overhead import MODEL, PARAMS, script
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

import mule
from mule.otel import traced
from mule.pi import UserMessage
from mule.pi.scripted import ScriptedModel


class Dropping(SpanExporter):
    """An exporter that counts spans and keeps none (the cost we measure is recording them)."""

    def __init__(self) -> None:
        self.spans = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.spans += len(spans)
        return SpanExportResult.SUCCESS


@mule.tool(name="work", parameters=PARAMS)
async def work(n: int) -> str:
    """Do the workload's work."""
    await anyio.lowlevel.checkpoint()
    return f"done {n}"


async def one_run(
    turns: int, deltas: int, tracer: TracerProvider | None, meter: MeterProvider | None
) -> int:
    count = 0

    def listener(event: mule.MuleEvent, signal: mule.AbortSignal) -> None:
        nonlocal count
        count += 1

    inp = mule.MuleRunInput(
        model=MODEL,
        system_prompt="bench",
        messages=(UserMessage("go", 0),),
        stream=ScriptedModel(script(turns, deltas)),
        tools=(work,),
    )
    chosen = (
        listener
        if tracer is None
        else traced(listener, tracer_provider=tracer, meter_provider=meter)
    )
    await mule.run(inp, chosen)
    return count


async def compare(turns: int, deltas: int, repeat: int) -> tuple[float, float, int]:
    exporter = Dropping()
    tracer = TracerProvider()
    tracer.add_span_processor(BatchSpanProcessor(exporter))
    meter = MeterProvider(metric_readers=[InMemoryMetricReader()])
    best = {"plain": float("inf"), "traced": float("inf")}
    events = 0
    for _ in range(repeat):
        for kind in ("plain", "traced"):
            start = time.perf_counter()
            if kind == "plain":
                events = await one_run(turns, deltas, None, None)
            else:
                await one_run(turns, deltas, tracer, meter)
            best[kind] = min(best[kind], time.perf_counter() - start)
    tracer.shutdown()
    meter.shutdown()
    spans_per_run = exporter.spans / repeat
    assert spans_per_run == 1 + (turns + 1) + 2 * turns, spans_per_run
    return best["plain"] / events * 1e6, best["traced"] / events * 1e6, events


def main() -> None:
    """Run the comparison and print one line per delta count."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=5)
    parser.add_argument("--deltas", type=int, nargs="+", default=[200, 2000])
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--backend", default="asyncio")
    args = parser.parse_args()
    print(f"backend={args.backend} turns={args.turns} (spans per run: 1 + turns+1 + 2*turns)")
    for deltas in args.deltas:
        plain, traced_us, events = anyio.run(
            compare, args.turns, deltas, args.repeat, backend=args.backend
        )
        print(
            f"D={deltas:>6}: untraced {plain:6.2f} us/event   traced {traced_us:6.2f} us/event   "
            f"({events} events)   overhead {100 * (traced_us / plain - 1):+5.1f}%"
        )


if __name__ == "__main__":
    main()
