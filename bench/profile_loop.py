"""Where mule's microseconds above the floor go: an ablation ladder, a per-turn fit, a profile.

1. `ladder`: the per-event path rebuilt one layer at a time, each rung paired against the
   floor in the same process (S1's shape, median of rounds), so each rung's increment is the
   cost of that layer per workload event:
     floor            tuples, one yield per delta/call, a listener call per delta/call/result
     stream:bare      mule's provider-shaped events (PartialBuilder snapshots, Pi events) from
                      a plain async generator, consumed by a plain loop like the floor's
     stream:guarded   + the providers' guard generator
     stream:pulled    + the pull-mode AssistantMessageEventStream around it
     mule.effects.run the core (machine, interpreter, identities, events, tool tasks)
     mule.run         + the promise facade (adapted listener and tools, @mule.tool)
2. `fit`: seconds per run against deltas per message at a fixed number of turns; the slope is
   the cost per streamed delta and the intercept / turns the cost per turn (tools included).
3. `profile`: cProfile of S1 (or S2) through one side, the top functions by own time, in
   microseconds per workload event (cProfile inflates small functions; read it for shares).

4. `micro`: nanoseconds per operation of the pieces the per-event and per-turn paths are made
   of (public names only), for sizing the gap.

    .venv/bin/python bench/profile_loop.py [ladder] [fit] [profile] [micro] [--backend asyncio]
        [--side mule.run|mule.effects.run] [--s2] [--rounds N] [--top 30]
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import gc
import pstats
import statistics
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench import _mule_side  # noqa: E402
from bench._floor import listener_for as floor_listener  # noqa: E402
from bench._floor import run_floor  # noqa: E402
from bench._workload import (  # noqa: E402
    Backend,
    Record,
    Turn,
    Workload,
    backend,
    check,
    echo_text,
    expected,
)
from mule.pi import (  # noqa: E402
    AssistantMessageEvent,
    AssistantMessageEventStream,
    DoneEvent,
    PartialBuilder,
    TextDeltaEvent,
    ToolCallEndEvent,
)

YieldNow = Callable[[], Awaitable[None]]
RunFn = Callable[[tuple[Turn, ...], YieldNow], Coroutine[Any, Any, Record]]
S1 = Workload(20, 200)


def _plain_loop(
    wrap: Callable[[AsyncIterator[AssistantMessageEvent], PartialBuilder], Any],
) -> RunFn:
    """Return a floor-like loop consuming mule's provider-shaped events (no mule loop)."""

    async def run(script: tuple[Turn, ...], yield_now: YieldNow) -> Record:
        rec = Record()
        listener = floor_listener(rec)
        raw = _mule_side.raw_arguments(script)
        for turn in script:
            b = PartialBuilder(api="bench", provider="bench", model="bench", timestamp=0)
            final = None
            async for ev in wrap(_mule_side._produce(turn, raw, b, yield_now), b):
                kind = type(ev)
                if kind is TextDeltaEvent:
                    listener(("text", ev.delta))
                elif kind is ToolCallEndEvent:
                    c = ev.tool_call
                    listener(("call", c.id, c.name, c.arguments))
                elif kind is DoneEvent:
                    final = ev.message
            assert final is not None
            calls = [(c.id, c.arguments) for c in final.content if c.type == "toolCall"]
            for cid, arguments in calls:
                listener(("result", cid, echo_text(arguments)))
            if not calls:
                rec.final_text = "".join(c.text for c in final.content if c.type == "text")
        return rec

    return run


def _bare(inner: AsyncIterator[AssistantMessageEvent], b: PartialBuilder) -> Any:
    return inner


def _guarded(inner: AsyncIterator[AssistantMessageEvent], b: PartialBuilder) -> Any:
    return _mule_side._guard(b, inner)


def _pulled(inner: AsyncIterator[AssistantMessageEvent], b: PartialBuilder) -> Any:
    return AssistantMessageEventStream.from_source(_mule_side._guard(b, inner))


RUNGS: dict[str, RunFn] = {
    "floor": run_floor,
    "stream:bare": _plain_loop(_bare),
    "stream:guarded": _plain_loop(_guarded),
    "stream:pulled": _plain_loop(_pulled),
    "mule.effects.run": _mule_side.run_effects,
    "mule.run": _mule_side.run_promise,
}


async def _time(fn: RunFn, script: tuple[Turn, ...], be: Backend, want: Record) -> float:
    gc.collect()
    start = time.perf_counter()
    rec = await fn(script, be.yield_now)
    took = time.perf_counter() - start
    check("rung", rec, want)
    return took


def ladder(be: Backend, work: Workload, rounds: int) -> dict[str, float]:
    """Median microseconds per workload event of each rung, paired round by round."""
    script = work.script()
    want = expected(script)

    async def go() -> dict[str, float]:
        names = list(RUNGS)
        for n in names:
            await _time(RUNGS[n], script, be, want)
        secs: dict[str, list[float]] = {n: [] for n in names}
        for i in range(rounds):
            for n in names[i % len(names) :] + names[: i % len(names)]:
                secs[n].append(await _time(RUNGS[n], script, be, want))
        floor = secs["floor"]
        # Each rung's time scaled by its round's floor, so slow rounds do not skew the medians.
        base = statistics.median(floor)
        return {
            n: statistics.median(s / f for s, f in zip(v, floor, strict=True))
            * base
            / work.events
            * 1e6
            for n, v in secs.items()
        }

    return be.run(go)


def fit(be: Backend, side: str, turns: int, deltas: tuple[int, ...], rounds: int) -> list[str]:
    """Least-squares seconds(run) = a + b * deltas_per_message for the side and the floor."""
    lines = []
    for name in ("floor", side):
        fn = RUNGS[name]
        xs: list[float] = []
        ys: list[float] = []
        for d in deltas:
            script = Workload(turns, d).script()
            want = expected(script)

            async def go(
                script: tuple[Turn, ...] = script, want: Record = want, fn: RunFn = fn
            ) -> float:
                await _time(fn, script, be, want)
                return statistics.median([await _time(fn, script, be, want) for _ in range(rounds)])

            xs.append(d)
            ys.append(be.run(go))
        mx, my = statistics.fmean(xs), statistics.fmean(ys)
        slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum(
            (x - mx) ** 2 for x in xs
        )
        intercept = my - slope * mx
        lines.append(
            f"{name:<18} {slope / turns * 1e6:7.2f} us per delta   "
            f"{intercept / turns * 1e6:8.1f} us per turn (2 tool calls, turn and model call)"
        )
    return lines


def profile(be: Backend, side: str, work: Workload, runs: int, top: int) -> None:
    """Print the top functions by own time under cProfile, per workload event."""
    fn = RUNGS[side]
    script = work.script()

    async def go() -> None:
        await fn(script, be.yield_now)  # warm-up, outside the profile
        prof = cProfile.Profile()
        prof.enable()
        if runs == 1:
            await fn(script, be.yield_now)
        else:
            await be.gather([lambda: fn(script, be.yield_now) for _ in range(runs)])
        prof.disable()
        stats = pstats.Stats(prof)
        events = work.events * runs
        rows = sorted(stats.stats.items(), key=lambda kv: -kv[1][2])  # type: ignore[attr-defined]
        total = sum(v[2] for _, v in rows)
        print(
            f"{side}, {work.label()} x {runs} run(s): {total / events * 1e6:.2f} us/event "
            "under cProfile; own time per function:"
        )
        print(f"{'us/event':>9} {'share':>6} {'calls/event':>12}  function")
        for (file, line, name), (_, ncalls, tottime, _, _) in rows[:top]:
            where = f"{Path(file).parent.name}/{Path(file).name}:{line}" if line else file
            print(
                f"{tottime / events * 1e6:9.3f} {tottime / total:6.1%} "
                f"{ncalls / events:12.2f}  {name} ({where})"
            )

    be.run(go)


def _per_op(fn: Callable[[], object], n: int = 20_000) -> float:
    """Best-of-5 nanoseconds per call of `fn`."""
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(n):
            fn()
        best = min(best, time.perf_counter() - start)
    return best / n * 1e9


def micro(be: Backend) -> list[tuple[str, float]]:
    """Nanoseconds per operation of the per-event and per-turn pieces (public names only)."""
    import anyio
    import attrs
    from returns.result import Success

    import mule.effects as fx
    from mule import AbortController, AbortSignal, MuleIdentity
    from mule.pi import StreamOptions, Tool, ToolCall, ToolValidator

    b = PartialBuilder(api="bench", provider="bench", model="bench", timestamp=0)
    i = b.open_text()
    snap = b.snapshot()
    ev = TextDeltaEvent(content_index=i, delta="0000", partial=snap)
    run = MuleIdentity("run", "run:0")
    turn = MuleIdentity("turn", "turn:1", run)
    mid = MuleIdentity("message", "message:2", turn)
    rec = Record()
    plain = _mule_side.listener_for(rec)
    core = _mule_side.core_listener_for(rec)
    update = fx.MessageUpdate(run, turn, mid, snap, ev)
    signal = AbortSignal()
    tool = Tool("echo", "Echo.", _mule_side.SCHEMA)
    validator = ToolValidator.for_tool(tool)
    call = ToolCall("c", "echo", {"x": 1})
    options = StreamOptions()

    def grow() -> None:
        b.append(i, "0000")
        b.snapshot()

    def drive(coro: Any) -> None:
        with contextlib.suppress(StopIteration):
            coro.send(None)

    out = [
        ("PartialBuilder.append + snapshot (1 block)", _per_op(grow)),
        (
            "TextDeltaEvent(...)",
            _per_op(lambda: TextDeltaEvent(content_index=0, delta="x", partial=snap)),
        ),
        ("MessageUpdate(...)", _per_op(lambda: fx.MessageUpdate(run, turn, mid, snap, ev))),
        ("MuleIdentity(...)", _per_op(lambda: MuleIdentity("turn", "turn:1", run))),
        ("plain listener call (the recorder)", _per_op(lambda: plain(update, signal))),
        ("core listener: coroutine made and run", _per_op(lambda: drive(core(update, signal)))),
        ("Success(None)", _per_op(lambda: Success(None))),
        (
            "attrs.evolve(StreamOptions, signal=...)",
            _per_op(lambda: attrs.evolve(options, signal=signal)),
        ),
        ("AbortController()", _per_op(AbortController)),
        (
            "ToolValidator.for_tool(tool).validate(call)",
            _per_op(lambda: ToolValidator.for_tool(tool).validate(call), 5000),
        ),
        ("validator.validate(call) (compiled)", _per_op(lambda: validator.validate(call), 5000)),
        (
            "anyio.create_memory_object_stream(1)",
            _per_op(lambda: anyio.create_memory_object_stream[str](1), 5000),
        ),
        ("anyio.Event()", _per_op(anyio.Event, 5000)),
    ]

    async def in_loop() -> list[tuple[str, float]]:
        from anyio.lowlevel import checkpoint, checkpoint_if_cancelled

        async def nothing() -> None:
            return None

        async def timed(
            label: str, make: Callable[[], Awaitable[object]], n: int
        ) -> tuple[str, float]:
            best = float("inf")
            for _ in range(5):
                start = time.perf_counter()
                for _ in range(n):
                    await make()
                best = min(best, time.perf_counter() - start)
            return label, best / n * 1e9

        got = [
            await timed("the floor's yield (one event-loop round trip)", be.yield_now, 20_000),
            await timed("anyio.lowlevel.checkpoint()", checkpoint, 20_000),
            await timed(
                "anyio.lowlevel.checkpoint_if_cancelled()", checkpoint_if_cancelled, 20_000
            ),
        ]
        async with anyio.create_task_group() as tg:

            def spawn() -> Awaitable[None]:
                tg.start_soon(nothing)
                return be.yield_now()

            got.append(await timed("task group start_soon + one yield", spawn, 5000))
        send, recv = anyio.create_memory_object_stream[int](float("inf"))

        async def roundtrip() -> None:
            await send.send(1)
            await recv.receive()

        got.append(await timed("memory stream send + receive (ready)", roundtrip, 20_000))
        send.close()
        recv.close()
        return got

    return out + be.run(in_loop)


def main() -> None:
    """Parse arguments and run the asked parts."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("parts", nargs="*", default=["ladder", "fit", "profile"])
    ap.add_argument("--backend", default="asyncio", choices=["asyncio", "trio"])
    ap.add_argument("--side", default="mule.run", choices=["mule.run", "mule.effects.run"])
    ap.add_argument("--s2", action="store_true", help="profile 1,000 concurrent S2 runs")
    ap.add_argument("--rounds", type=int, default=11)
    ap.add_argument("--top", type=int, default=30)
    args = ap.parse_args()
    be = backend(args.backend)
    if "ladder" in args.parts:
        got = ladder(be, S1, args.rounds)
        print(f"ladder ({S1.label()}, {args.backend}, median of {args.rounds} paired rounds)")
        prev = None
        for name, us in got.items():
            step = "" if prev is None else f"  (+{us - prev:5.2f})"
            print(f"  {name:<18}{us:7.2f} us/event{step}")
            prev = us
    if "fit" in args.parts:
        print(f"fit (4 turns, {args.backend}, median of {max(3, args.rounds // 3)} per point)")
        for line in fit(be, args.side, 4, (20, 200, 800), max(3, args.rounds // 3)):
            print("  " + line)
    if "micro" in args.parts:
        print(f"micro ({args.backend}): ns per operation, best of 5")
        for label, ns in micro(be):
            print(f"  {ns:9.0f}  {label}")
    if "profile" in args.parts:
        work, runs = (Workload(5, 20), 1000) if args.s2 else (S1, 1)
        profile(be, args.side, work, runs, args.top)


if __name__ == "__main__":
    main()
