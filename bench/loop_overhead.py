"""mule's loop against a bare anyio loop doing the same work, per delivered event.

Workload: T turns, each streaming D text deltas then two parallel tool calls, and a final text
turn. Both sides consume the same scripted streams (so stream production costs the same), call
a listener for every event, and run the two tools concurrently. Prints microseconds per
delivered event for each and the ratio; then wall time and peak RSS for N concurrent runs, each
measured in a fresh child process.

    .venv/bin/python bench/loop_overhead.py [--turns 5] [--deltas 200 20000] [--runs 1000]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from collections.abc import AsyncIterator

import anyio
import anyio.lowlevel
from returns.result import Result, Success

from mule.effects import (
    MuleError,
    MuleEvent,
    MulePortsInput,
    MulePreparedCall,
    MuleToolDeclaration,
    MuleToolExecutionPart,
    MuleToolResult,
    Ports,
    PreparePort,
    run,
)
from mule.pi import (
    AbortSignal,
    AssistantMessage,
    Context,
    DoneEvent,
    ErrorEvent,
    JsonObject,
    Model,
    StreamOptions,
    TextContent,
    Tool,
    ToolCall,
    ToolResultMessage,
    UserMessage,
    normalize_context,
)
from mule.pi._scripted import Call, Reply, ScriptedModel, Text

MODEL = Model(id="bench", name="bench", api="scripted", provider="bench", base_url="")
PARAMS: JsonObject = {"type": "object", "properties": {"n": {"type": "integer"}}}
_OK: Result[None, MuleError] = Success(None)


def script(turns: int, deltas: int) -> list[Reply]:
    """Return the standard workload's replies."""
    out = []
    for t in range(turns):
        text = Text(tuple("tok " for _ in range(deltas)))
        calls = (Call(f"a{t}", "work", {"n": t}), Call(f"b{t}", "work", {"n": t + 1}))
        out.append(Reply(blocks=(text, *calls)))
    out.append(Reply(blocks=(Text(tuple("end " for _ in range(deltas))),)))
    return out


async def _work(n: int) -> MuleToolResult:
    await anyio.lowlevel.checkpoint()
    return MuleToolResult(content=(TextContent(f"done {n}"),))


TOOL = MuleToolDeclaration(descriptor=Tool("work", "work", PARAMS))


def mule_prepare() -> PreparePort:
    """Return the workload's tool door in mule's core form."""

    async def prepare(call: ToolCall, signal: AbortSignal) -> Result[MulePreparedCall, MuleError]:
        async def execute(
            signal: AbortSignal,
        ) -> AsyncIterator[Result[MuleToolExecutionPart, MuleError]]:
            n = call.arguments.get("n")
            yield Success(MuleToolExecutionPart("result", await _work(int(str(n)))))

        return Success(MulePreparedCall(execute))

    return prepare


async def run_mule(turns: int, deltas: int) -> int:
    """One mule run; return the number of events its listener received."""
    count = 0

    async def listener(event: MuleEvent, signal: AbortSignal) -> Result[None, MuleError]:
        nonlocal count
        count += 1
        return _OK

    inp = MulePortsInput(
        model=MODEL,
        system_prompt="bench",
        messages=(UserMessage("go", 0),),
        stream=ScriptedModel(script(turns, deltas)),
        tools=(TOOL,),
        ports=Ports(emit=listener, prepare_tool=mule_prepare()),
    )
    result = await run(inp)
    assert isinstance(result, Success), result
    return count


async def run_bare(turns: int, deltas: int) -> int:
    """Do the same work with a plain loop: stream, listener per event, two tools at once."""
    count = 0
    model = ScriptedModel(script(turns, deltas))
    messages: list[object] = [UserMessage("go", 0)]
    tool = Tool("work", "work", PARAMS)

    async def listener(event: object) -> None:
        nonlocal count
        count += 1

    while True:
        context = normalize_context(Context(tuple(messages), "bench", (tool,)))  # type: ignore[arg-type]
        stream = model(MODEL, context, StreamOptions())
        final: AssistantMessage | None = None
        async for event in stream:
            await listener(event)
            if isinstance(event, DoneEvent):
                final = event.message
            elif isinstance(event, ErrorEvent):
                final = event.error
        assert final is not None
        messages.append(final)
        calls = [b for b in final.content if isinstance(b, ToolCall)]
        if not calls:
            break
        results: dict[int, MuleToolResult] = {}

        async def one(i: int, call: ToolCall, results: dict[int, MuleToolResult]) -> None:
            await listener(call)
            results[i] = await _work(int(str(call.arguments.get("n"))))
            await listener(results[i])

        async with anyio.create_task_group() as tg:
            for i, call in enumerate(calls):
                tg.start_soon(one, i, call, results)
        for i, call in enumerate(calls):
            r = results[i]
            msg = ToolResultMessage(call.id, call.name, r.content, r.is_error, 0)
            await listener(msg)
            messages.append(msg)
    return count


async def per_event(kind: str, turns: int, deltas: int, repeat: int) -> tuple[float, int]:
    """Best-of-`repeat` microseconds per delivered event."""
    fn = run_mule if kind == "mule" else run_bare
    best = float("inf")
    events = 0
    for _ in range(repeat):
        start = time.perf_counter()
        events = await fn(turns, deltas)
        best = min(best, time.perf_counter() - start)
    return best / events * 1e6, events


async def concurrent(kind: str, runs: int, turns: int, deltas: int) -> float:
    """Wall time of `runs` concurrent runs."""
    fn = run_mule if kind == "mule" else run_bare
    start = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for _ in range(runs):
            tg.start_soon(fn, turns, deltas)
    return time.perf_counter() - start


def child(kind: str, runs: int, turns: int, deltas: int) -> None:
    """Measure one concurrency configuration and print JSON (run in a fresh process)."""
    wall = anyio.run(concurrent, kind, runs, turns, deltas)
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"wall_s": wall, "peak_rss_mb": peak_kb / 1024}))


def main() -> None:
    """Run the benchmark and print its table."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=5)
    parser.add_argument("--deltas", type=int, nargs="+", default=[200, 20000])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--backend", default="asyncio")
    parser.add_argument("--child", nargs=4, metavar=("KIND", "RUNS", "TURNS", "DELTAS"))
    args = parser.parse_args()
    if args.child:
        kind, runs, turns, deltas = args.child
        child(kind, int(runs), int(turns), int(deltas))
        return
    print(f"backend={args.backend} turns={args.turns}")
    for deltas in args.deltas:
        repeat = args.repeat if deltas <= 1000 else 2
        bare, n_bare = anyio.run(
            per_event, "bare", args.turns, deltas, repeat, backend=args.backend
        )
        mule, n_mule = anyio.run(
            per_event, "mule", args.turns, deltas, repeat, backend=args.backend
        )
        print(
            f"D={deltas:>6}: bare {bare:6.2f} us/event ({n_bare} events)   "
            f"mule {mule:6.2f} us/event ({n_mule} events)   ratio {mule / bare:4.2f}x"
        )
    for kind in ("bare", "mule"):
        out = subprocess.run(
            [sys.executable, __file__, "--child", kind, str(args.runs), str(args.turns), "200"],
            check=True,
            capture_output=True,
            text=True,
        )
        got = json.loads(out.stdout)
        print(
            f"N={args.runs} concurrent runs (D=200), {kind}: wall {got['wall_s']:.2f} s, "
            f"peak RSS {got['peak_rss_mb']:.0f} MB"
        )


if __name__ == "__main__":
    main()
