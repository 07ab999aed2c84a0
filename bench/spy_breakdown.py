"""Where a run's time goes, by layer: a workload to sample with py-spy, and the breakdown.

`run` repeats a true-floor workload (S1: 1 run x 20 turns x 200 deltas; S2: 200 concurrent runs
x 5 turns x 20 deltas) through one side; `report` reads py-spy's raw (collapsed) samples and
gives each sample to the layer of its innermost frame that belongs to one (the machine, the
interpreter, the bench's provider-shaped stream, mule.pi's builder and event stream, the tool
tasks, anyio's checkpoints, ...). Imports are left out. py-spy is not a dependency of mule;
install it anywhere (`pip install py-spy`) and point it at this venv's interpreter:

    py-spy record -r 300 -f raw -o /tmp/s2.txt -- .venv/bin/python bench/spy_breakdown.py run --s2
    .venv/bin/python bench/spy_breakdown.py report /tmp/s2.txt
"""

from __future__ import annotations

import argparse
import collections
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

# (marker in "[file] function", layer): the first marker of the innermost matching frame wins.
LAYERS = (
    ("listener_for", "listener (the bench's recorder)"),
    ("[bench/_mule_side.py] execute", "tool body (the bench's echo)"),
    ("[bench/_mule_side.py] prepare", "tool body (the bench's echo)"),
    ("[bench/_mule_side.py] _produce", "model stream (the bench's provider-shaped generator)"),
    ("[bench/_mule_side.py] _guard", "model stream (the bench's provider-shaped generator)"),
    ("[bench/_mule_side.py] stream", "model stream (the bench's provider-shaped generator)"),
    ("pi/_partial.py", "mule.pi PartialBuilder (snapshots, messages)"),
    ("pi/_partial_json.py", "mule.pi PartialBuilder (snapshots, messages)"),
    ("pi/_event_stream.py", "mule.pi AssistantMessageEventStream"),
    ("pi/_validate.py", "mule.pi tool gate"),
    ("pi/_coerce.py", "mule.pi tool gate"),
    ("promise/", "mule.promise facade"),
    ("effects/_transition.py", "machine (step, stream_update)"),
    ("effects/_batch.py", "machine (step, stream_update)"),
    ("effects/_streaming.py", "machine (step, stream_update)"),
    ("effects/_turns.py", "machine (step, stream_update)"),
    ("effects/_txn.py", "machine (step, stream_update)"),
    ("effects/_limits.py", "machine (step, stream_update)"),
    ("checkpoint_if_cancelled", "anyio cancellation checkpoints"),
    ("TaskGroup", "tool tasks: anyio spawn and finish"),
    ("TaskHandle", "tool tasks: anyio spawn and finish"),
    ("Interpreter._execute", "tool tasks: mule's executor loop"),
    ("effects/_interpret.py", "interpreter (drive, perform)"),
    ("effects/_root.py", "run setup and teardown"),
    ("effects/_checks.py", "run setup and teardown"),
    ("effects/_output.py", "run setup and teardown"),
)


def report(path: str) -> list[tuple[str, float]]:
    """Return (layer, share of samples) from py-spy's raw output, imports left out."""
    counts: collections.Counter[str] = collections.Counter()
    for line in Path(path).read_text().splitlines():
        stack, _, n = line.rpartition(" ")
        frames = []
        for frame in stack.split(";"):
            name, _, where = frame.partition(" (")
            file = where.split(":")[0].replace(str(ROOT) + "/", "")
            frames.append(f"[{file}] {name}")
        if any("importlib" in f or "<module>" in f for f in frames[1:]):
            continue  # an import (the first frame is the script's own module)
        layer = next(
            (label for frame in reversed(frames) for marker, label in LAYERS if marker in frame),
            "event loop and the rest",
        )
        counts[layer] += int(n)
    total = sum(counts.values()) or 1
    return [(layer, n / total) for layer, n in counts.most_common()]


def run(side: str, s2: bool, repeat: int, backend_name: str) -> float:
    """Repeat the workload; return seconds per run."""
    from bench import _mule_side
    from bench._workload import Workload, backend

    be = backend(backend_name)
    work, runs = (Workload(5, 20), 200) if s2 else (Workload(20, 200), 1)
    script = work.script()
    fn = _mule_side.run_promise if side == "mule.run" else _mule_side.run_effects

    async def go() -> None:
        for _ in range(repeat):
            await be.gather([lambda: fn(script, be.yield_now) for _ in range(runs)])

    start = time.perf_counter()
    be.run(go)
    return (time.perf_counter() - start) / repeat / runs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="the workload to sample")
    r.add_argument("--side", choices=("mule.run", "mule.effects.run"), default="mule.effects.run")
    r.add_argument("--s2", action="store_true", help="200 concurrent S2 runs instead of S1")
    r.add_argument("--repeat", type=int, default=8)
    r.add_argument("--backend", choices=("asyncio", "trio"), default="asyncio")
    p = sub.add_parser("report", help="the breakdown of py-spy's raw samples")
    p.add_argument("path")
    args = ap.parse_args()
    if args.cmd == "run":
        per = run(args.side, args.s2, args.repeat, args.backend)
        print(f"{args.side}: {per * 1e3:.2f} ms per run")
    else:
        for layer, share in report(args.path):
            print(f"{share * 100:5.1f} %  {layer}")


if __name__ == "__main__":
    main()
