"""Where tracing's whole-run cost goes: the listener's own calls in the run vs everything else.

bench/otel_overhead.py finds that whole runs at 200 deltas pay 4-5 points more than one
recorded run's events fed to the listener alone. This runs the same workload and modes (paired,
rotating order, medians) and times, inside each whole run, the listener's calls on the
non-delta events (the ones that make spans and points) with the main thread's CPU clock. What
a mode adds to a run then splits into those calls and the rest: the wrapper on every delta,
and mule's own code running slower after the SDK's (garbage collections, cache effects).
Other threads (the span processor's, the metric reader's) are measured apart.

    .venv/bin/python bench/otel_where.py [--deltas 200] [--rounds 41]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import anyio

import mule
from mule.effects import MessageUpdate

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.otel_overhead import MODES, Providers, one_run  # noqa: E402


class Timed:
    """Wraps a listener, adding its calls on non-delta events to `spent` (main-thread CPU)."""

    def __init__(self) -> None:
        self.spent = 0.0

    def wrap(self, listener: mule.MulePromiseListener) -> mule.MulePromiseListener:
        clock = time.thread_time

        def call(event: mule.MuleEvent, signal: mule.AbortSignal) -> Any:
            if type(event) is MessageUpdate:
                return listener(event, signal)
            start = clock()
            answer = listener(event, signal)
            self.spent += clock() - start
            return answer

        return call


async def measure(
    deltas: int, rounds: int, providers: Providers
) -> dict[str, list[tuple[float, float, float]]]:
    """Per mode and round: process CPU of the run, of its non-delta listener calls, of others."""
    timed = Timed()
    out: dict[str, list[tuple[float, float, float]]] = {m: [] for m in MODES}
    for r in range(rounds + 1):
        order = MODES[r % 4 :] + MODES[: r % 4]
        for mode in order:
            timed.spent = 0.0
            process, thread = time.process_time(), time.thread_time()
            await one_run(
                5, deltas, lambda inner, mode=mode: timed.wrap(providers.listener(mode, inner))
            )
            took = time.process_time() - process
            others = took - (time.thread_time() - thread)
            if r:  # the first round warms up
                out[mode].append((took, timed.spent, others))
    return out


def main() -> None:
    """Print, per mode, what it adds to a run and how that splits."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--deltas", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=41)
    args = parser.parse_args()
    providers = Providers()
    out = anyio.run(measure, args.deltas, args.rounds, providers)
    providers.shutdown()
    plain = out["plain"]
    print(f"D={args.deltas}, medians of {args.rounds} paired rounds, us added per run vs plain:")
    for mode in MODES[1:]:
        rows = list(zip(out[mode], plain, strict=True))
        run = statistics.median([m[0] - p[0] for m, p in rows])
        calls = statistics.median([m[1] - p[1] for m, p in rows])
        others = statistics.median([m[2] - p[2] for m, p in rows])
        print(
            f"  {mode}: whole run {1e6 * run:.0f}; its non-delta listener calls "
            f"{1e6 * calls:.0f}; the rest {1e6 * (run - calls):.0f} "
            f"(other threads {1e6 * others:.0f})"
        )


if __name__ == "__main__":
    main()
