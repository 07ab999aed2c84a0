"""The cost of durable checkpoints: time per tool call with and without the SQLite journal.

Workload: T turns, each a scripted assistant message with C parallel calls to a trivial tool
(plus a few text deltas), then a final text turn. The same run is timed with no listener, with
a plain in-memory listener, and with `mule.journal.Journal` at synchronous=NORMAL and FULL
(each tool call costs three commits: its start, its end and its result message). Prints the
median time per tool call for each and the ratio to the in-memory listener, in the same run.

    .venv/bin/python bench/checkpoint_cost.py [--turns 10] [--calls 4] [--repeat 5]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import anyio

import mule.promise as promise
from mule._abort import AbortSignal
from mule.effects._events import MuleEvent
from mule.effects._tools import MuleToolExecutionPart, MuleToolResult
from mule.journal import Journal, Synchronous
from mule.pi._content import TextContent, ToolCall
from mule.pi._context import Tool
from mule.pi._messages import UserMessage
from mule.pi._model import Model
from mule.pi._scripted import Call, ScriptedModel, Text, reply

MODEL = Model(id="bench", name="Bench", api="scripted-api", provider="scripted", base_url="")
USER = UserMessage("go", 1)
MODES: tuple[Synchronous, ...] = ("NORMAL", "FULL")


def _tool() -> promise.MuleTool:
    async def prepare(call: ToolCall, signal: AbortSignal) -> promise.MuleToolPreparation:
        async def execute(s: AbortSignal) -> AsyncIterator[MuleToolExecutionPart]:
            yield MuleToolExecutionPart("result", MuleToolResult(content=(TextContent("ok"),)))

        return promise.MuleToolPrepared(execute)

    return promise.MuleTool(
        descriptor=Tool("noop", "does nothing", {"type": "object"}), prepare=prepare
    )


def _script(turns: int, calls: int) -> ScriptedModel:
    replies = [
        reply(
            Text.of("thinking about it", 4),
            *(Call(f"c{t}-{k}", "noop", {"k": k}) for k in range(calls)),
        )
        for t in range(turns)
    ]
    return ScriptedModel([*replies, reply("done")])


async def _once(
    turns: int, calls: int, listener: Callable[[MuleEvent, AbortSignal], None] | None
) -> float:
    inp = promise.MuleRunInput(
        model=MODEL,
        system_prompt="bench",
        messages=(USER,),
        stream=_script(turns, calls),
        tools=[_tool()],
    )
    start = time.perf_counter()
    await promise.run(inp, listener)
    return time.perf_counter() - start


def _recorder(events: list[MuleEvent]) -> Callable[[MuleEvent, AbortSignal], None]:
    def listen(event: MuleEvent, signal: AbortSignal) -> None:
        events.append(event)

    return listen


async def _measure(turns: int, calls: int, repeat: int, workdir: Path) -> dict[str, float]:
    per_call: dict[str, list[float]] = {}
    n = turns * calls
    for r in range(repeat):
        per_call.setdefault("no listener", []).append(await _once(turns, calls, None) / n)
        events: list[MuleEvent] = []
        per_call.setdefault("in-memory listener", []).append(
            await _once(turns, calls, _recorder(events)) / n
        )
        for mode in MODES:
            with Journal(workdir / f"{mode}.db", synchronous=mode) as j:
                rid = f"r{r}"
                j.begin(rid, [USER])
                per_call.setdefault(f"journal {mode}", []).append(
                    await _once(turns, calls, j.listener(rid)) / n
                )
    return {k: statistics.median(v) for k, v in per_call.items()}


def main() -> None:
    """Parse arguments, measure, print a table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--turns", type=int, default=10)
    ap.add_argument("--calls", type=int, default=4)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--backend", default="asyncio", choices=["asyncio", "trio"])
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        result = anyio.run(
            _measure, args.turns, args.calls, args.repeat, Path(d), backend=args.backend
        )
    base = result["in-memory listener"]
    print(f"{args.turns} turns x {args.calls} parallel calls, median of {args.repeat}")
    print(f"{'listener':<22}{'ms per tool call':>18}{'x in-memory':>14}")
    for name, seconds in result.items():
        print(f"{name:<22}{seconds * 1000:>18.3f}{seconds / base:>14.1f}")


if __name__ == "__main__":
    main()
