"""What `async for` costs: mule.stream vs mule.run with a listener, per delivered event.

One run of D text deltas (a scripted model) consumed by a counting listener, then by an
`async for` over `mule.stream`; best-of-N process CPU time of each, and the ratio. The floor is
the listener, which is what the stream wraps: the ratio is the price of the hand-off (one
zero-buffer stream send and one `anyio.Event` per event).

    .venv/bin/python bench/stream_overhead.py [--deltas 20000] [--repeat 7] [--backend trio]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence

import anyio

import mule
from mule.pi import Model, UserMessage
from mule.pi.scripted import ScriptedModel, Text, reply

MODEL = Model(id="b", name="bench", api="scripted", provider="bench", base_url="")


def _inp(deltas: int) -> mule.MuleRunInput:
    script = ScriptedModel([reply(Text(tuple("x" for _ in range(deltas))))])
    return mule.MuleRunInput(
        model=MODEL, system_prompt="", messages=(UserMessage("go", 1),), stream=script
    )


async def with_listener(deltas: int) -> int:
    """Run through a counting listener; return the events seen."""
    seen = 0

    def count(event: mule.MuleEvent, signal: mule.AbortSignal) -> None:
        nonlocal seen
        seen += 1

    await mule.run(_inp(deltas), count)
    return seen


async def with_stream(deltas: int) -> int:
    """Run through `async for`; return the events seen."""
    seen = 0
    async with mule.stream(_inp(deltas)) as run:
        async for _ in run:
            seen += 1
    return seen


def _best(fn: object, deltas: int, repeat: int, backend: str) -> tuple[float, int]:
    best = float("inf")
    seen = 0
    for _ in range(repeat):
        start = time.process_time()
        seen = anyio.run(fn, deltas, backend=backend)  # type: ignore[arg-type]
        best = min(best, time.process_time() - start)
    return best, seen


def main(argv: Sequence[str] | None = None) -> int:
    """Print the listener's and the stream's CPU per event, and their ratio."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--deltas", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--backend", choices=["asyncio", "trio"], default="asyncio")
    args = parser.parse_args(argv)
    floor, n_floor = _best(with_listener, args.deltas, args.repeat, args.backend)
    streamed, n_stream = _best(with_stream, args.deltas, args.repeat, args.backend)
    assert n_floor == n_stream, (n_floor, n_stream)
    print(f"events per run      {n_floor}")
    print(f"listener  us/event  {floor / n_floor * 1e6:.2f}")
    print(f"stream    us/event  {streamed / n_stream * 1e6:.2f}")
    print(f"stream / listener   {streamed / floor:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
