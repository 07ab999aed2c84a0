"""What tracing costs a run: mule.otel.traced vs the same listener untraced, per delivered event.

The workload of bench/loop_overhead.py (T turns of D text deltas and two parallel tool calls,
then a final text turn), run through the promise root with a counting listener, untraced and
traced by the real OpenTelemetry SDK (a batch span processor whose exporter keeps nothing, and
a metric reader). Two measures, both best-of-N of the process's CPU time (all its threads, the
span processor's included, so other processes' load counts less):

- run vs run: whole runs, alternately untraced and traced;
- the listener alone: one recorded run's events fed to the untraced and the traced listener,
  the difference divided by the untraced run's CPU. It is all that tracing adds, measured
  without the noise of two whole runs (which dominates on a shared machine).

    .venv/bin/python bench/otel_overhead.py [--turns 5] [--deltas 200 2000] [--repeat 15]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import anyio
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

import mule
from mule.otel import traced
from mule.pi import UserMessage
from mule.pi.scripted import ScriptedModel

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.loop_overhead import MODEL, PARAMS, script  # noqa: E402


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


def providers() -> tuple[TracerProvider, MeterProvider, Dropping]:
    exporter = Dropping()
    tracer = TracerProvider()
    tracer.add_span_processor(BatchSpanProcessor(exporter))
    meter = MeterProvider(metric_readers=[InMemoryMetricReader()])
    return tracer, meter, exporter


async def compare(turns: int, deltas: int, repeat: int) -> tuple[float, float, int]:
    """Best-of-`repeat` CPU seconds of a whole run, untraced and traced, and its event count."""
    tracer, meter, exporter = providers()
    best = {"plain": float("inf"), "traced": float("inf")}
    events = 0
    for _ in range(repeat):
        for kind in ("plain", "traced"):
            start = time.process_time()
            if kind == "plain":
                events = await one_run(turns, deltas, None, None)
            else:
                await one_run(turns, deltas, tracer, meter)
            best[kind] = min(best[kind], time.process_time() - start)
    tracer.shutdown()
    meter.shutdown()
    spans_per_run = exporter.spans / repeat
    assert spans_per_run == 1 + (turns + 1) + 2 * turns, spans_per_run
    return best["plain"], best["traced"], events


async def recorded(turns: int, deltas: int) -> list[mule.MuleEvent]:
    """Return one run's events, to replay into listeners."""
    events: list[mule.MuleEvent] = []

    def keep(event: mule.MuleEvent, signal: mule.AbortSignal) -> None:
        events.append(event)

    inp = mule.MuleRunInput(
        model=MODEL,
        system_prompt="bench",
        messages=(UserMessage("go", 0),),
        stream=ScriptedModel(script(turns, deltas)),
        tools=(work,),
    )
    await mule.run(inp, keep)
    return events


def replayed(events: list[mule.MuleEvent], repeat: int) -> float:
    """Best-of-`repeat` CPU seconds that tracing adds to one run's listener calls.

    The listener alone, fed a recorded run: untraced, then traced. Far steadier than the
    difference of two whole runs on a loaded machine, and it is all the tracing does.
    """
    tracer, meter, _ = providers()
    signal = mule.AbortController().signal
    count = 0

    def plain(event: mule.MuleEvent, signal: mule.AbortSignal) -> None:
        nonlocal count
        count += 1

    best_plain = best_traced = float("inf")
    for _ in range(repeat):
        start = time.process_time()
        for event in events:
            plain(event, signal)
        best_plain = min(best_plain, time.process_time() - start)
        listener = traced(plain, tracer_provider=tracer, meter_provider=meter)
        start = time.process_time()
        for event in events:
            listener(event, signal)
        best_traced = min(best_traced, time.process_time() - start)
    tracer.shutdown()
    meter.shutdown()
    return best_traced - best_plain


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
        plain, with_tracing, events = anyio.run(
            compare, args.turns, deltas, args.repeat, backend=args.backend
        )
        added = replayed(anyio.run(recorded, args.turns, deltas), args.repeat)
        print(
            f"D={deltas:>6} ({events} events): untraced {plain / events * 1e6:6.2f} us/event, "
            f"traced {with_tracing / events * 1e6:6.2f} us/event CPU: "
            f"{100 * (with_tracing / plain - 1):+5.1f}% run vs run; "
            f"the listener's tracing alone adds {100 * added / plain:4.1f}% of the run"
        )


if __name__ == "__main__":
    main()
