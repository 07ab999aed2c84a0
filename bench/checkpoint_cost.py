"""The cost of durable checkpoints: time per tool call, loop time, and blocking of other runs.

Workload: the true-floor benchmark's (bench/_workload.py): T turns, each streaming D text
deltas and then C parallel `echo` calls, then a final text turn, from a provider-shaped stream
that yields to the event loop before each delta and call. The same run is measured with no listener,
with a plain in-memory listener, and with `mule.journal.Journal` at synchronous=NORMAL and
FULL (each tool call costs three commits: its start, its end and its result message).

1. One run at a time (median of `--repeat`): wall time per tool call, and the *loop time* per
   tool call: the time the listener held the event loop (its synchronous part, or each step of
   an async listener between two suspensions), which no other task in the process can use,
   as wall time and as the loop thread's CPU time (the load-independent figure);
   and the journal's commits (transactions) per tool call.
2. `--concurrent K` runs at once beside a ticker task that sleeps 1 ms in a loop: how late the
   ticker wakes (max and 99th percentile) says whether checkpoints block the other runs, and
   commits per tool call shows the group commit (runs that reach a checkpoint during a commit
   share the next one).

    .venv/bin/python bench/checkpoint_cost.py [--turns 10] [--deltas 20] [--calls 4]
        [--repeat 5] [--concurrent 20] [--backend asyncio|trio] [--dir PATH]
"""

from __future__ import annotations

import argparse
import inspect
import statistics
import sys
import tempfile
import time
import types
from collections.abc import Awaitable, Callable, Coroutine, Generator
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import mule  # noqa: E402
from bench._mule_side import MODEL, echo, stream_for  # noqa: E402
from bench._workload import Workload  # noqa: E402
from mule import AbortSignal, MuleEvent  # noqa: E402
from mule.journal import Journal, Synchronous  # noqa: E402
from mule.pi import UserMessage  # noqa: E402

USER = UserMessage("go", 1)
MODES: tuple[Synchronous, ...] = ("NORMAL", "FULL")
Listen = Callable[[MuleEvent, AbortSignal], Awaitable[None] | None]
TICK_S = 0.001


async def _once(work: Workload, listener: Listen | None) -> float:
    inp = mule.MuleRunInput(
        model=MODEL,
        system_prompt="bench",
        messages=(USER,),
        stream=stream_for(work.script(), anyio.lowlevel.checkpoint),
        tools=(echo,),
    )
    start = time.perf_counter()
    await mule.run(inp, listener)
    return time.perf_counter() - start


# -- loop time: how long a listener holds the event loop ----------------------------------------


class LoopClock:
    """Wraps a listener and adds up the time it runs without yielding to the event loop.

    `seconds` is wall time (on a loaded machine it includes the loop thread being preempted
    or waiting for the GIL); `cpu` is the loop thread's own CPU time in the same spans.
    """

    def __init__(self, inner: Listen) -> None:
        self.inner = inner
        self.seconds = 0.0
        self.cpu = 0.0

    def __call__(self, event: MuleEvent, signal: AbortSignal) -> Awaitable[None] | None:
        start, cpu = time.perf_counter(), time.thread_time()
        got = self.inner(event, signal)
        self.seconds += time.perf_counter() - start
        self.cpu += time.thread_time() - cpu
        if got is not None and inspect.iscoroutine(got):
            return self._stepped(got)
        return got

    @types.coroutine
    def _stepped(self, coro: Coroutine[Any, Any, None]) -> Generator[Any, Any, None]:
        """Drive `coro` step by step, timing each step (a suspension is not loop time)."""
        send: Any = None
        error: BaseException | None = None
        while True:
            start, cpu = time.perf_counter(), time.thread_time()
            try:
                yielded = coro.send(send) if error is None else coro.throw(error)
            except StopIteration:
                self.seconds += time.perf_counter() - start
                self.cpu += time.thread_time() - cpu
                return
            self.seconds += time.perf_counter() - start
            self.cpu += time.thread_time() - cpu
            try:
                send, error = (yield yielded), None
            except BaseException as exc:  # delivered into the coroutine at its next step
                send, error = None, exc


def _recorder() -> Listen:
    events: list[MuleEvent] = []

    def listen(event: MuleEvent, signal: AbortSignal) -> None:
        events.append(event)

    return listen


class _Listeners:
    """Makes each measured listener kind; journals live in `workdir` for the whole benchmark."""

    def __init__(self, workdir: Path) -> None:
        self.journals = {m: Journal(workdir / f"{m}.db", synchronous=m) for m in MODES}
        self.n = 0

    def kinds(self) -> list[str]:
        return ["no listener", "in-memory listener", *(f"journal {m}" for m in MODES)]

    def make(self, kind: str) -> Listen | None:
        if kind == "no listener":
            return None
        if kind == "in-memory listener":
            return _recorder()
        j = self.journals[kind.removeprefix("journal ")]  # type: ignore[index]
        self.n += 1
        rid = f"r{self.n}"
        j.begin(rid, [USER])
        return j.listener(rid)

    def commits(self, kind: str) -> int:
        """Transactions the kind's journal has written so far (0 for the other kinds)."""
        j = self.journals.get(kind.removeprefix("journal "))  # type: ignore[call-overload]
        return 0 if j is None else j._writer.commits

    def close(self) -> None:
        for j in self.journals.values():
            j.close()


async def _one_at_a_time(
    work: Workload, repeat: int, listeners: _Listeners
) -> dict[str, tuple[float, float, float, float]]:
    """(wall s, loop s, loop CPU s, commits) per tool call, medians over `repeat` rounds."""
    n = (work.turns - 1) * work.calls
    wall: dict[str, list[float]] = {k: [] for k in listeners.kinds()}
    loop: dict[str, list[float]] = {k: [] for k in listeners.kinds()}
    commits: dict[str, list[float]] = {k: [] for k in listeners.kinds()}
    cpu: dict[str, list[float]] = {k: [] for k in listeners.kinds()}
    for _ in range(repeat):
        for kind in listeners.kinds():
            made = listeners.make(kind)
            clock = LoopClock(made) if made is not None else None
            before = listeners.commits(kind)
            wall[kind].append(await _once(work, clock) / n)
            loop[kind].append((clock.seconds if clock is not None else 0.0) / n)
            cpu[kind].append((clock.cpu if clock is not None else 0.0) / n)
            commits[kind].append((listeners.commits(kind) - before) / n)
    return {
        k: (
            statistics.median(wall[k]),
            statistics.median(loop[k]),
            statistics.median(cpu[k]),
            statistics.median(commits[k]),
        )
        for k in wall
    }


async def _beside_ticker(
    work: Workload, runs: int, listeners: _Listeners, kind: str
) -> tuple[float, float, float, float]:
    """Run `runs` runs at once beside a 1 ms ticker: wall, max and p99 lateness, commits/call."""
    late: list[float] = []
    done = anyio.Event()

    async def ticker() -> None:
        while not done.is_set():
            start = time.perf_counter()
            await anyio.sleep(TICK_S)
            late.append(time.perf_counter() - start - TICK_S)

    made = [listeners.make(kind) for _ in range(runs)]
    before = listeners.commits(kind)
    async with anyio.create_task_group() as tg:
        tg.start_soon(ticker)
        await anyio.sleep(0.05)  # the ticker's own baseline is in the sample too
        start = time.perf_counter()
        async with anyio.create_task_group() as runs_tg:
            for listener in made:
                runs_tg.start_soon(_once, work, listener)
        wall = time.perf_counter() - start
        done.set()
    late.sort()
    commits = (listeners.commits(kind) - before) / (runs * (work.turns - 1) * work.calls)
    return wall, late[-1], late[int(len(late) * 0.99)], commits


async def _measure(args: argparse.Namespace, workdir: Path) -> None:
    listeners = _Listeners(workdir)
    # T turns with tool calls, and the final text turn.
    work = Workload(args.turns + 1, args.deltas, args.calls)
    try:
        alone = await _one_at_a_time(work, args.repeat, listeners)
        base = alone["in-memory listener"][0]
        print(
            f"{args.turns} turns x ({args.deltas} deltas, {args.calls} parallel calls), one run "
            f"at a time, median of {args.repeat}; journals in {workdir}"
        )
        print(
            f"{'listener':<22}{'ms per tool call':>18}{'x in-memory':>13}{'loop ms/call':>14}"
            f"{'loop CPU ms':>13}{'commits/call':>14}"
        )
        for name, (wall, loop, loop_cpu, commits) in alone.items():
            print(
                f"{name:<22}{wall * 1000:>18.3f}{wall / base:>13.1f}{loop * 1000:>14.3f}"
                f"{loop_cpu * 1000:>13.3f}{commits:>14.2f}"
            )
        if args.concurrent:
            print(f"\n{args.concurrent} runs at once beside a {TICK_S * 1000:.0f} ms ticker")
            print(
                f"{'listener':<22}{'wall s':>10}{'ticker late max ms':>20}{'p99 ms':>10}"
                f"{'commits/call':>14}"
            )
            for kind in listeners.kinds()[1:]:
                wall, worst, p99, commits = await _beside_ticker(
                    work, args.concurrent, listeners, kind
                )
                print(
                    f"{kind:<22}{wall:>10.3f}{worst * 1000:>20.2f}{p99 * 1000:>10.2f}"
                    f"{commits:>14.2f}"
                )
    finally:
        listeners.close()


def main() -> None:
    """Parse arguments, measure, print the tables."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--turns", type=int, default=10)
    ap.add_argument("--deltas", type=int, default=20)
    ap.add_argument("--calls", type=int, default=4)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--concurrent", type=int, default=20, help="runs beside the ticker (0: skip)")
    ap.add_argument("--backend", default="asyncio", choices=["asyncio", "trio"])
    ap.add_argument("--dir", type=Path, help="where the journals go (default: a temporary dir)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir) as d:
        anyio.run(_measure, args, Path(d), backend=args.backend)


if __name__ == "__main__":
    main()
