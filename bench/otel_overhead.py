"""What tracing costs a run: mule.otel.traced vs the same listener untraced, per delivered event.

The workload of bench/loop_overhead.py (T turns of D text deltas and two parallel tool calls,
then a final text turn), run through the promise root with a counting listener, three ways:

- plain: the counting listener alone;
- noop: `traced(listener)` on the API's no-op tracer and meter providers: everything mule does
  to trace (dispatch, attribute dicts, the calls into the API), nothing the SDK does;
- floor: the SDK's floor for the same telemetry, not mule: a hand-written listener that makes
  the same spans (parented the same way, no attributes) and the same histogram points (with
  the attributes the conventions require) on the SDK below;
- sdk: `traced(listener)` on the SDK as a production host configures it: a `TracerProvider`
  with a `BatchSpanProcessor` (its exporter counts spans and keeps none) and a `MeterProvider`
  with a `PeriodicExportingMetricReader` (default interval; its exporter keeps nothing).

Paired: each round runs the three in rotating order and takes the ratios of that round; the
median over rounds is reported (the machine may be shared: medians of paired ratios, not
best-of). Time is the process's CPU time (all its threads: the span processor's included).
Garbage-collection time is measured with `gc.callbacks` and shown apart, as a mean per run
of the modes without the SDK and of those with it (a full collection lands on whichever run
crosses the threshold, so it is not one mode's: the medians mostly leave it out).

A second measure feeds one recorded run's events to the three listeners directly: all that
tracing adds, without the noise of two whole runs.

    .venv/bin/python bench/otel_overhead.py [--turns 5] [--deltas 200 2000] [--rounds 21]
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import anyio
from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import (
    MetricExporter,
    MetricExportResult,
    MetricsData,
    PeriodicExportingMetricReader,
)
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

import mule
from mule.effects import (
    MessageEnd,
    MessageStart,
    MessageUpdate,
    RunEnd,
    RunStart,
    ToolExecutionEnd,
    ToolExecutionStart,
)
from mule.otel import traced
from mule.pi import AssistantMessage, UserMessage
from mule.pi.scripted import ScriptedModel

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.loop_overhead import MODEL, PARAMS, script  # noqa: E402

MODES = ("plain", "noop", "floor", "sdk")


class Dropping(SpanExporter):
    """An exporter that counts spans and keeps none (the cost we measure is recording them)."""

    def __init__(self) -> None:
        self.spans = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.spans += len(spans)
        return SpanExportResult.SUCCESS


class DroppingMetrics(MetricExporter):
    """A metric exporter that keeps nothing."""

    def export(
        self, metrics_data: MetricsData, timeout_millis: float = 10_000, **kwargs: Any
    ) -> MetricExportResult:
        return MetricExportResult.SUCCESS

    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        return True

    def shutdown(self, timeout_millis: float = 30_000, **kwargs: Any) -> None:
        return None


@mule.tool(name="work", parameters=PARAMS)
async def work(n: int) -> str:
    """Do the workload's work."""
    await anyio.lowlevel.checkpoint()
    return f"done {n}"


class Providers:
    """The providers of the traced modes, and the SDK's span count."""

    def __init__(self) -> None:
        self.exporter = Dropping()
        self.sdk_tracer = TracerProvider()
        self.sdk_tracer.add_span_processor(BatchSpanProcessor(self.exporter))
        self.sdk_meter = MeterProvider(
            metric_readers=[PeriodicExportingMetricReader(DroppingMetrics())]
        )
        meter = self.sdk_meter.get_meter("floor")
        self.floor_instruments = (  # made once, as traced() makes mule's
            self.sdk_tracer.get_tracer("floor"),
            meter.create_histogram("gen_ai.client.operation.duration"),
            meter.create_histogram("gen_ai.client.token.usage"),
        )
        self.noop_tracer = trace.NoOpTracerProvider()
        self.noop_meter = metrics.NoOpMeterProvider()

    def listener(self, mode: str, inner: mule.MulePromiseListener) -> mule.MulePromiseListener:
        if mode == "plain":
            return inner
        if mode == "noop":
            return traced(inner, tracer_provider=self.noop_tracer, meter_provider=self.noop_meter)
        if mode == "floor":
            return self.floor(inner)
        return traced(inner, tracer_provider=self.sdk_tracer, meter_provider=self.sdk_meter)

    def floor(self, inner: mule.MulePromiseListener) -> mule.MulePromiseListener:
        """Return a listener making the same spans (no attributes) and points on the SDK."""
        tracer, duration, tokens = self.floor_instruments
        metric = {"gen_ai.operation.name": "chat", "gen_ai.provider.name": "bench"}
        metric["gen_ai.request.model"] = "bench"
        inputs = {**metric, "gen_ai.token.type": "input"}
        outputs = {**metric, "gen_ai.token.type": "output"}
        spans: dict[str, Any] = {}
        run: list[Any] = []

        def record(event: mule.MuleEvent, signal: mule.AbortSignal) -> Any:
            kind = type(event)
            if kind is not MessageUpdate:
                if kind is RunStart:
                    span = tracer.start_span("invoke_agent")
                    run[:] = [span, trace.set_span_in_context(span)]
                elif kind is MessageStart and type(event.value) is AssistantMessage:  # type: ignore[union-attr]
                    spans[event.message.value] = (  # type: ignore[union-attr]
                        tracer.start_span("chat", context=run[1]),
                        time.perf_counter(),
                    )
                elif kind is MessageEnd and type(event.value) is AssistantMessage:  # type: ignore[union-attr]
                    span, started = spans.pop(event.message.value)  # type: ignore[union-attr]
                    span.end()
                    usage = event.value.usage  # type: ignore[union-attr]
                    duration.record(time.perf_counter() - started, metric)
                    tokens.record(usage.input, inputs)
                    tokens.record(usage.output, outputs)
                elif kind is ToolExecutionStart:
                    spans[event.tool_call.value] = tracer.start_span(  # type: ignore[union-attr]
                        "execute_tool", context=run[1]
                    )
                elif kind is ToolExecutionEnd:
                    spans.pop(event.tool_call.value).end()  # type: ignore[union-attr]
                elif kind is RunEnd:
                    run[0].end()
            return inner(event, signal)

        return record

    def shutdown(self) -> None:
        self.sdk_tracer.shutdown()
        self.sdk_meter.shutdown()


class GcClock:
    """CPU seconds spent in garbage collection, from `gc.callbacks`."""

    def __init__(self) -> None:
        self.total = 0.0
        self._start = 0.0
        gc.callbacks.append(self._on)

    def _on(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._start = time.process_time()
        else:
            self.total += time.process_time() - self._start


def run_input(turns: int, deltas: int) -> mule.MuleRunInput:
    return mule.MuleRunInput(
        model=MODEL,
        system_prompt="bench",
        messages=(UserMessage("go", 0),),
        stream=ScriptedModel(script(turns, deltas)),
        tools=(work,),
    )


async def one_run(turns: int, deltas: int, listener_for: Callable[..., Any]) -> int:
    count = 0

    def listener(event: mule.MuleEvent, signal: mule.AbortSignal) -> None:
        nonlocal count
        count += 1

    await mule.run(run_input(turns, deltas), listener_for(listener))
    return count


def median(values: Sequence[float]) -> float:
    return statistics.median(values)


async def whole_runs(
    turns: int, deltas: int, rounds: int, providers: Providers, clock: GcClock
) -> tuple[dict[str, list[float]], dict[str, list[float]], int]:
    """Per round and mode: CPU seconds of one whole run, and GC seconds in it; events per run."""
    cpu: dict[str, list[float]] = {m: [] for m in MODES}
    gcs: dict[str, list[float]] = {m: [] for m in MODES}
    events = 0
    for mode in MODES:  # warm up every path once
        await one_run(turns, deltas, lambda inner, mode=mode: providers.listener(mode, inner))
    for r in range(rounds):
        order = MODES[r % 4 :] + MODES[: r % 4]
        for mode in order:
            gc_before = clock.total
            start = time.process_time()
            events = await one_run(
                turns, deltas, lambda inner, mode=mode: providers.listener(mode, inner)
            )
            cpu[mode].append(time.process_time() - start)
            gcs[mode].append(clock.total - gc_before)
    return cpu, gcs, events


async def recorded(turns: int, deltas: int) -> list[mule.MuleEvent]:
    """Return one run's events, to feed to listeners."""
    events: list[mule.MuleEvent] = []

    def keep(event: mule.MuleEvent, signal: mule.AbortSignal) -> None:
        events.append(event)

    await mule.run(run_input(turns, deltas), keep)
    return events


def listeners_alone(
    events: list[mule.MuleEvent], rounds: int, providers: Providers
) -> dict[str, list[float]]:
    """Per round and mode: CPU seconds of feeding one run's events to the listener."""
    signal = mule.AbortController().signal
    count = 0

    def plain(event: mule.MuleEvent, signal: mule.AbortSignal) -> None:
        nonlocal count
        count += 1

    out: dict[str, list[float]] = {m: [] for m in MODES}
    for r in range(rounds + 1):
        order = MODES[r % 4 :] + MODES[: r % 4]
        for mode in order:
            listener = providers.listener(mode, plain)
            start = time.process_time()
            for event in events:
                listener(event, signal)
            took = time.process_time() - start
            if r:  # the first round warms up
                out[mode].append(took)
    return out


def added(cpu: dict[str, list[float]], mode: str, base: str = "plain") -> float:
    """Median over rounds of this mode's CPU against the base's, in percent."""
    return 100 * (median([t / p for t, p in zip(cpu[mode], cpu[base], strict=True)]) - 1)


def main() -> None:
    """Run the comparison and print its lines per delta count."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=5)
    parser.add_argument("--deltas", type=int, nargs="+", default=[200, 2000])
    parser.add_argument("--rounds", type=int, default=21)
    parser.add_argument("--backend", default="asyncio")
    args = parser.parse_args()
    turns = args.turns
    spans = 1 + (turns + 1) + 2 * turns
    print(
        f"backend={args.backend} turns={turns}: {spans} spans and {3 * (turns + 1)} histogram "
        f"points per run; medians of {args.rounds} paired rounds, process CPU time"
    )
    clock = GcClock()
    for deltas in args.deltas:
        providers = Providers()
        cpu, gcs, events = anyio.run(
            whole_runs, turns, deltas, args.rounds, providers, clock, backend=args.backend
        )
        runs = providers.exporter.spans  # ended spans so far; the batch exports them on shutdown
        providers.shutdown()
        # floor and sdk both export every run's spans (a warm-up run, then one per round)
        assert providers.exporter.spans == 2 * spans * (args.rounds + 1), (runs, spans)
        plain_us = median(cpu["plain"]) / events * 1e6
        print(
            f"D={deltas:>5} ({events} events/run), whole runs: plain {plain_us:.2f} us/event; "
            f"added: noop {added(cpu, 'noop'):+.1f}%, floor {added(cpu, 'floor'):+.1f}%, "
            f"sdk {added(cpu, 'sdk'):+.1f}%; mean GC ms/run: without the SDK "
            f"{1e3 * statistics.fmean(gcs['plain'] + gcs['noop']):.2f}, with it "
            f"{1e3 * statistics.fmean(gcs['floor'] + gcs['sdk']):.2f}"
        )
        providers = Providers()
        alone = listeners_alone(anyio.run(recorded, turns, deltas), args.rounds, providers)
        providers.shutdown()
        plain_run = median(cpu["plain"])
        extra = {
            m: median([t - p for t, p in zip(alone[m], alone["plain"], strict=True)])
            for m in MODES[1:]
        }
        print(
            "        the listener alone, added per run: "
            + ", ".join(
                f"{m} {1e6 * extra[m]:.0f} us ({100 * extra[m] / plain_run:.1f}% of a plain run)"
                for m in MODES[1:]
            )
        )


if __name__ == "__main__":
    main()
