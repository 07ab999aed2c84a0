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

    .venv/bin/python bench/profile_loop.py [ladder] [fit] [profile] [--backend asyncio]
        [--side mule.run|mule.effects.run] [--s2] [--rounds N] [--top 30]
"""

from __future__ import annotations

import argparse
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
    if "profile" in args.parts:
        work, runs = (Workload(5, 20), 1000) if args.s2 else (S1, 1)
        profile(be, args.side, work, runs, args.top)


if __name__ == "__main__":
    main()
