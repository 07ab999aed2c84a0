"""The interpreter's cost per event on a model stream whose events are always ready.

Such a stream (a scripted, cached or in-memory model) never suspends, so every microsecond is
mule's: the machine, the listener call, and the periodic checkpoint that lets a deadline fire
and other tasks run (issue 30). One run of N text deltas with a listener, repeated; prints the
median microseconds per delta. Compare two trees by running each in alternating processes:

    PYTHONPATH=/path/to/tree .venv/bin/python bench/ready_stream.py [--deltas 100000]
        [--repeat 5] [--backend asyncio|trio]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import AsyncIterator, Callable

import anyio
from returns.result import Result, Success

from mule.effects import MuleError, MuleEvent, MulePortsInput, Ports
from mule.effects import run as effects_run
from mule.pi import (
    AbortSignal,
    AssistantMessageEvent,
    AssistantMessageEventStream,
    Context,
    DoneEvent,
    Model,
    PartialBuilder,
    StartEvent,
    StreamOptions,
    TextDeltaEvent,
    TextEndEvent,
    TextStartEvent,
    UserMessage,
)

MODEL = Model(id="m", name="M", api="scripted", provider="p", base_url="")


def ready_stream(deltas: int) -> Callable[..., AssistantMessageEventStream]:
    """Return a stream function of `deltas` empty text deltas, each ready at once."""

    def stream(
        model: Model, context: Context, options: StreamOptions | None = None
    ) -> AssistantMessageEventStream:
        async def events() -> AsyncIterator[AssistantMessageEvent]:
            b = PartialBuilder(api=model.api, provider=model.provider, model=model.id, timestamp=0)
            yield StartEvent(partial=b.snapshot())
            i = b.open_text()
            yield TextStartEvent(content_index=i, partial=b.snapshot())
            snapshot = b.snapshot()
            for _ in range(deltas):
                yield TextDeltaEvent(content_index=i, delta="", partial=snapshot)
            yield TextEndEvent(content_index=i, content="", partial=b.snapshot())
            yield DoneEvent(reason="stop", message=b.message("stop"))

        return AssistantMessageEventStream.from_source(events())

    return stream


async def listener(event: MuleEvent, signal: AbortSignal) -> Result[None, MuleError]:
    return Success(None)


async def one_run(deltas: int) -> float:
    inp = MulePortsInput(
        model=MODEL,
        system_prompt="s",
        messages=(UserMessage("go", 1),),
        stream=ready_stream(deltas),
        ports=Ports(emit=listener),
    )
    start = time.perf_counter()
    result = await effects_run(inp)
    elapsed = time.perf_counter() - start
    assert isinstance(result, Success), result
    return elapsed


async def measure(deltas: int, repeat: int) -> float:
    await one_run(deltas)  # warm
    return statistics.median([await one_run(deltas) for _ in range(repeat)]) / deltas * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--deltas", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--backend", choices=("asyncio", "trio"), default="asyncio")
    args = ap.parse_args()
    us = anyio.run(measure, args.deltas, args.repeat, backend=args.backend)
    print(f"[{args.backend}] {args.deltas} always-ready deltas: {us:.3f} us/event")


if __name__ == "__main__":
    main()
