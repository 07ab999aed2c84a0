"""mule against the true floor: a hand-written loop over plain tuples, in the same process.

Paired: each round runs the floor, `mule.run` and `mule.effects.run` on the same workload in
rotating order, and the ratio of each round is taken; the median over the rounds is reported.
Every run's listener record is checked against the workload (the same deltas, calls and
results on both sides), so a side that skips work fails the benchmark instead of winning it.

Scenarios (issue 16):
  s1      one run: 20 turns x 200 text deltas of 4 chars, 2 echo calls per turn but the last
  s2      1,000 concurrent runs of 5 turns x 20 deltas (wall time)
  10k     10,000 concurrent S2-shaped runs
  scale   cost per event at 200 / 2,000 / 20,000 deltas per message (3 turns)
  rss     peak RSS of S2 and 10k, one fresh process per side and scenario
  first   the first run in a fresh process, after import (S2-shaped run)
  import  `import mule` in a fresh process, with a `-X importtime` breakdown

    .venv/bin/python bench/true_floor.py [--scenario s1 s2 ...] [--backend asyncio trio]
        [--pairs N] [--quick] [--json out.json]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench._floor import run_floor  # noqa: E402
from bench._workload import Backend, Record, Turn, Workload, backend, check, expected  # noqa: E402

RunFn = Callable[[tuple[Turn, ...], Callable[[], Awaitable[None]]], Coroutine[Any, Any, Record]]
FLOOR = "floor"
PROMISE = "mule.run"
EFFECTS = "mule.effects.run"
SIDES = (FLOOR, PROMISE, EFFECTS)
SCENARIOS = ("s1", "s2", "10k", "scale", "rss", "first", "import")


def side_fn(side: str) -> RunFn:
    """Return the run function of a side (mule is imported only when asked for)."""
    if side == FLOOR:
        return run_floor
    from bench import _mule_side

    return _mule_side.run_promise if side == PROMISE else _mule_side.run_effects


S1 = Workload(20, 200)
S2 = Workload(5, 20)


@dataclass(frozen=True)
class Sizes:
    """How big each scenario is; `--quick` shrinks them (ratios then are not the targets')."""

    s1: Workload = S1
    s2: Workload = S2
    s2_runs: int = 1000
    big_runs: int = 10_000
    scale: tuple[int, ...] = (200, 2000, 20_000)
    scale_turns: int = 3
    pairs: dict[str, int] = field(
        default_factory=lambda: {"s1": 21, "s2": 5, "10k": 3, "scale": 5, "first": 7, "import": 7}
    )


QUICK = Sizes(
    s1=Workload(3, 20),
    s2=Workload(3, 5),
    s2_runs=10,
    big_runs=20,
    scale=(20, 200),
    scale_turns=2,
    pairs={"s1": 2, "s2": 1, "10k": 1, "scale": 1, "first": 1, "import": 1},
)


# -- paired measurement ------------------------------------------------------------------------


@dataclass
class Paired:
    """Seconds per round for each side, rounds paired by index."""

    seconds: dict[str, list[float]]
    events: int  # the floor's listener calls per round (the workload's events)
    cpu: dict[str, list[float]] = field(default_factory=dict)  # CPU seconds per round
    runs: int = 1  # runs per round

    def ratio(self, side: str) -> float:
        """Return the median over rounds of side / floor."""
        floor = self.seconds[FLOOR]
        return statistics.median(s / f for s, f in zip(self.seconds[side], floor, strict=True))

    def us_per_event(self, side: str) -> float:
        return statistics.median(self.seconds[side]) / self.events * 1e6

    def summary(self) -> dict[str, Any]:
        return {
            "events": self.events,
            "median_s": {s: statistics.median(v) for s, v in self.seconds.items()},
            "us_per_event": {s: self.us_per_event(s) for s in self.seconds},
            "ratio": {s: self.ratio(s) for s in self.seconds if s != FLOOR},
            "rounds": len(self.seconds[FLOOR]),
            "cpu_ms_per_run": {
                s: statistics.median(v) / self.runs * 1000 for s, v in self.cpu.items()
            },
        }


async def _timed(
    fn: Callable[[], Awaitable[list[Record]]], side: str, want: Record
) -> tuple[float, float]:
    """Return the wall and CPU seconds of one round."""
    gc.collect()  # the previous side's garbage is not this side's cost
    start, cpu = time.perf_counter(), time.process_time()
    records = await fn()
    took, cpu_took = time.perf_counter() - start, time.process_time() - cpu
    for rec in records:
        check(side, rec, want)
    return took, cpu_took


async def _paired(
    be: Backend, sides: Sequence[str], work: Workload, runs: int, rounds: int
) -> Paired:
    """Time `rounds` rounds (after a warm-up) of `runs` concurrent runs per side, rotating."""
    script = work.script()
    want = expected(script)
    fns = {s: side_fn(s) for s in sides}

    def batch(side: str) -> Callable[[], Awaitable[list[Record]]]:
        fn = fns[side]
        if runs == 1:

            async def one() -> list[Record]:
                return [await fn(script, be.yield_now)]

            return one

        async def many() -> list[Record]:
            return await be.gather([lambda: fn(script, be.yield_now) for _ in range(runs)])

        return many

    seconds: dict[str, list[float]] = {s: [] for s in sides}
    cpu: dict[str, list[float]] = {s: [] for s in sides}
    for s in sides:  # warm-up: imports, caches, the allocator's arenas
        await _timed(batch(s), s, want)
    for i in range(rounds):
        order = [*sides[i % len(sides) :], *sides[: i % len(sides)]]
        for s in order:
            took, cpu_took = await _timed(batch(s), s, want)
            seconds[s].append(took)
            cpu[s].append(cpu_took)
    return Paired(seconds, work.events * runs, cpu, runs)


def paired(
    backend_name: str, sides: Sequence[str], work: Workload, runs: int, rounds: int
) -> Paired:
    """Run `_paired` on a fresh event loop of the named backend."""
    be = backend(backend_name)
    return be.run(lambda: _paired(be, sides, work, runs, rounds))


# -- fresh processes ---------------------------------------------------------------------------


def _child(*args: str) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, "-m", "bench.true_floor", "--child", *args],
        check=True,
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def _maxrss_mb() -> float:
    """Return the peak RSS of this process in MB.

    Linux's `getrusage(RUSAGE_SELF).ru_maxrss` carries the parent's peak across fork and exec
    (a child of a 200 MB parent reports 200 MB), so the exec'd image's own high-water mark,
    VmHWM, is read instead where there is one.
    """
    try:
        status = Path("/proc/self/status").read_text()
    except OSError:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    kib = next(line.split()[1] for line in status.splitlines() if line.startswith("VmHWM:"))
    return int(kib) / 1024


def child_rss(side: str, backend_name: str, turns: int, deltas: int, runs: int) -> None:
    """One batch of `runs` concurrent runs in this fresh process; print wall time and RSS."""
    fn = side_fn(side)
    be = backend(backend_name)
    script = Workload(turns, deltas).script()
    want = expected(script)
    base = _maxrss_mb()

    async def go() -> list[Record]:
        return await be.gather([lambda: fn(script, be.yield_now) for _ in range(runs)])

    start = time.perf_counter()
    records = be.run(go)
    wall = time.perf_counter() - start
    peak = _maxrss_mb()
    for rec in records:
        check(side, rec, want)
    print(json.dumps({"wall_s": wall, "peak_rss_mb": peak, "before_runs_rss_mb": base}))


def child_first(side: str, backend_name: str, turns: int, deltas: int, repeat: int) -> None:
    """Import, then time the first run and later runs of one workload in this fresh process."""
    start, cpu = time.perf_counter(), time.process_time()
    fn = side_fn(side)  # imports mule for mule's sides
    imported, imported_cpu = time.perf_counter() - start, time.process_time() - cpu
    be = backend(backend_name)
    script = Workload(turns, deltas).script()
    want = expected(script)

    cpu_took: list[float] = []

    async def go() -> list[float]:
        took = []
        for _ in range(repeat):
            t, c = time.perf_counter(), time.process_time()
            rec = await fn(script, be.yield_now)
            took.append(time.perf_counter() - t)
            cpu_took.append(time.process_time() - c)
            check(side, rec, want)
        return took

    took = be.run(go)
    print(
        json.dumps(
            {
                "import_s": imported,
                "first_s": took[0],
                "later_s": took[1:],
                # CPU time: what a loaded machine's preemption does not inflate
                "import_cpu_s": imported_cpu,
                "first_cpu_s": cpu_took[0],
                "later_cpu_s": cpu_took[1:],
            }
        )
    )


def warm() -> None:
    """Compile mule as an installed package is: its .pyc files and attrs' code cache.

    pip compiles a wheel's modules when it installs them; a source tree (an editable install,
    or any run under PYTHONDONTWRITEBYTECODE) may have none, and every fresh process would then
    compile mule from source, which no user of an installed mule pays (`measure_import`'s
    `cold_ms` is that case, on a copy).
    """
    package = str(ROOT / "mule")
    subprocess.run([sys.executable, "-m", "compileall", "-q", package], check=True, cwd=ROOT)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    subprocess.run([sys.executable, "-c", "import mule"], check=True, cwd=ROOT, env=env)


def measure_first(backend_name: str, work: Workload, rounds: int) -> dict[str, Any]:
    """Median over fresh processes of each side's first run, and of its later runs."""
    warm()
    out: dict[str, Any] = {}
    for side in SIDES:
        got = [
            _child("first", side, backend_name, str(work.turns), str(work.deltas), "4")
            for _ in range(rounds)
        ]
        out[side] = {
            "first_ms": statistics.median(g["first_s"] for g in got) * 1000,
            "later_ms": statistics.median(x for g in got for x in g["later_s"]) * 1000,
            "import_ms": statistics.median(g["import_s"] for g in got) * 1000,
            "first_cpu_ms": statistics.median(g["first_cpu_s"] for g in got) * 1000,
            "later_cpu_ms": statistics.median(x for g in got for x in g["later_cpu_s"]) * 1000,
            "import_cpu_ms": statistics.median(g["import_cpu_s"] for g in got) * 1000,
        }
    return out


def measure_rss(backend_name: str, work: Workload, runs: int) -> dict[str, Any]:
    """Each side's batch of `runs` concurrent runs, each side in its own fresh process."""
    return {
        side: _child("rss", side, backend_name, str(work.turns), str(work.deltas), str(runs))
        for side in SIDES
    }


_IMPORT_PROBE = (
    "import time; t, c = time.perf_counter(), time.process_time(); import mule; "
    "print(time.perf_counter() - t, time.process_time() - c)"
)


def _import_ms(cwd: Path, env: dict[str, str]) -> tuple[float, float]:
    """Return one fresh process's `import mule` in ms: wall time, CPU time."""
    out = subprocess.run(
        [sys.executable, "-c", _IMPORT_PROBE],
        check=True,
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
    )
    wall, cpu = out.stdout.split()
    return float(wall) * 1000, float(cpu) * 1000


def measure_import(rounds: int, top: int = 15) -> dict[str, Any]:
    """Median `import mule` over fresh processes, and the slowest imports it triggers.

    `import_ms`: compiled as an installed package is (`warm`); `cold_ms`: a copy of the
    package with no bytecode at all (no .pyc, no attrs code cache), as a first import after
    editing the source is.
    """
    warm()
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    times = [_import_ms(ROOT, env) for _ in range(rounds)]
    with tempfile.TemporaryDirectory() as tmp:
        shutil.copytree(
            ROOT / "mule", Path(tmp) / "mule", ignore=shutil.ignore_patterns("__pycache__")
        )
        cold = [_import_ms(Path(tmp), env) for _ in range(rounds)]
    trace = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "import mule"],
        check=True,
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
    ).stderr
    return {
        "import_ms": statistics.median(t[0] for t in times),
        "import_cpu_ms": statistics.median(t[1] for t in times),
        "cold_ms": statistics.median(t[0] for t in cold),
        "breakdown": importtime(trace, top),
    }


def importtime(trace: str, top: int) -> dict[str, list[tuple[str, float]]]:
    """Parse `-X importtime` output into where the time goes, exclusively (self times).

    `packages`: self ms summed by package (mule's subpackages apart, others by top-level
    name), so the figures add up to the whole import; `modules`: the slowest single modules.
    """
    rows: list[tuple[str, float]] = []
    for line in trace.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        self_us, _, name = line[len("import time:") :].split("|")
        rows.append((name.strip(), int(self_us) / 1000))

    def group(name: str) -> str:
        pieces = name.split(".")
        return ".".join(pieces[:2]) if pieces[0] == "mule" else pieces[0]

    packages: dict[str, float] = {}
    for name, ms in rows:
        packages[group(name)] = packages.get(group(name), 0.0) + ms
    ranked = sorted(packages.items(), key=lambda kv: -kv[1])[:top]
    slowest = sorted(rows, key=lambda kv: -kv[1])[:top]
    return {
        "packages": [(g, round(ms, 1)) for g, ms in ranked],
        "modules": [(m, round(ms, 1)) for m, ms in slowest],
        "total_ms": [("all", round(sum(ms for _, ms in rows), 1))],
    }


# -- the report --------------------------------------------------------------------------------


@dataclass
class Report:
    """Every figure, by backend and scenario; printed as a table against the issue's targets."""

    quick: bool
    results: dict[str, dict[str, Any]] = field(default_factory=dict)

    def put(self, backend_name: str, scenario: str, value: Any) -> None:
        self.results.setdefault(backend_name, {})[scenario] = value

    def rows(self) -> list[tuple[str, str, str, str, str]]:
        """(measure, backend, value, target, verdict) for each figure that has a target."""
        out: list[tuple[str, str, str, str, str]] = []

        def add(what: str, be: str, value: float, fmt: str, target: float, cmp: str) -> None:
            ok = value <= target if cmp == "<=" else value < target
            verdict = "-" if self.quick else ("ok" if ok else "MISSED")
            out.append((what, be, fmt.format(value), f"{cmp} {fmt.format(target)}", verdict))

        for be, res in self.results.items():
            for scen, label, target in (("s1", "S1", 1.5), ("s2", "S2", 2.0), ("10k", "10k", 2.5)):
                if scen in res:
                    for side in (PROMISE, EFFECTS):
                        ratio = res[scen]["ratio"][side]
                        add(f"{label} {side} (x floor)", be, ratio, "{:.2f}", target, "<=")
            if "scale" in res:
                per = res["scale"]
                ds = sorted(per, key=int)
                for side in (PROMISE, EFFECTS):
                    lo, hi = per[ds[0]]["us_per_event"][side], per[ds[-1]]["us_per_event"][side]
                    what = f"{side} us/event at {ds[-1]} / at {ds[0]} deltas"
                    add(what, be, hi / lo, "{:.2f}", 1.2, "<=")
            if "rss" in res:
                for key, label, target in (("s2", "S2", 60.0), ("10k", "10k", 500.0)):
                    if key in res["rss"]:
                        for side in (PROMISE, EFFECTS):
                            mb = res["rss"][key][side]["peak_rss_mb"]
                            add(f"{label} peak RSS {side} (MB)", be, mb, "{:.0f}", target, "<=")
            if "first" in res:
                for side in (PROMISE, EFFECTS):
                    ms = res["first"][side]["first_ms"]
                    add(f"first run after import, {side} (ms)", be, ms, "{:.1f}", 30.0, "<=")
                    cpu = res["first"][side]["first_cpu_ms"]
                    add(f"  same, CPU time, {side} (ms)", be, cpu, "{:.1f}", 30.0, "<=")
            if "import" in res:
                imp = res["import"]
                add("import mule (ms)", be, imp["import_ms"], "{:.0f}", 100.0, "<=")
                add("  same, CPU time (ms)", be, imp["import_cpu_ms"], "{:.0f}", 100.0, "<=")
        return out

    def print(self) -> None:
        """Print the table of targets (the detail lines were printed as measured)."""
        rows = self.rows()
        if not rows:
            return
        widths = [max(len(r[i]) for r in [*rows, _HEADER]) for i in range(5)]
        print()
        if self.quick:
            print("(--quick: reduced sizes; the targets are not judged)")
        for r in [_HEADER, tuple("-" * w for w in widths), *rows]:
            print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)))


_HEADER = ("measure", "backend", "value", "target", "verdict")


def _print_detail(be: str, scen: str, value: dict[str, Any]) -> None:
    if scen in ("s1", "s2", "10k"):
        us = value["us_per_event"]
        cpu = value["cpu_ms_per_run"]
        print(
            f"[{be}] {scen}: {value['events']} floor events per round, {value['rounds']} rounds; "
            + "; ".join(
                f"{s} {value['median_s'][s] * 1000:.1f} ms ({us[s]:.2f} us/event, CPU"
                f" {cpu[s]:.3f} ms/run)"
                for s in SIDES
            )
        )
    elif scen == "scale":
        for d in sorted(value, key=int):
            us = value[d]["us_per_event"]
            print(
                f"[{be}] scale {d} deltas/message: "
                + "; ".join(f"{s} {us[s]:.2f} us/event" for s in SIDES)
                + f"; ratio {value[d]['ratio'][PROMISE]:.2f} / {value[d]['ratio'][EFFECTS]:.2f}"
            )
    elif scen == "rss":
        for key, per in value.items():
            print(
                f"[{be}] rss {key}: "
                + "; ".join(
                    f"{s} {per[s]['peak_rss_mb']:.0f} MB peak ({per[s]['before_runs_rss_mb']:.0f}"
                    f" MB before runs), {per[s]['wall_s']:.2f} s"
                    for s in SIDES
                )
            )
    elif scen == "first":
        print(
            f"[{be}] first run: "
            + "; ".join(
                f"{s} first {v['first_ms']:.1f} ms, later {v['later_ms']:.1f} ms, "
                f"import {v['import_ms']:.0f} ms (CPU: first {v['first_cpu_ms']:.1f}, later "
                f"{v['later_cpu_ms']:.1f}, import {v['import_cpu_ms']:.0f})"
                for s, v in value.items()
            )
        )
    elif scen == "import":
        b = value["breakdown"]
        print(
            f"import mule: {value['import_ms']:.0f} ms (median; CPU {value['import_cpu_ms']:.0f} "
            f"ms; {value['cold_ms']:.0f} ms with no bytecode compiled); under -X importtime "
            f"{b['total_ms'][0][1]:.0f} ms, by package (self ms) and slowest modules:"
        )
        for (pkg, p_ms), (mod, m_ms) in zip(b["packages"], b["modules"], strict=False):
            print(f"    {pkg:<28}{p_ms:>7.1f}    {mod:<40}{m_ms:>7.1f}")


def run_scenarios(
    scenarios: Sequence[str], backends: Sequence[str], sizes: Sizes, pairs: int | None, quick: bool
) -> Report:
    """Measure each scenario on each backend; print one line per scenario as it finishes."""
    report = Report(quick)

    def rounds(s: str) -> int:
        return pairs if pairs is not None else sizes.pairs[s]

    for be in backends:
        for scen in scenarios:
            if scen == "s1":
                value: Any = paired(be, SIDES, sizes.s1, 1, rounds("s1")).summary()
            elif scen == "s2":
                value = paired(be, SIDES, sizes.s2, sizes.s2_runs, rounds("s2")).summary()
            elif scen == "10k":
                value = paired(be, SIDES, sizes.s2, sizes.big_runs, rounds("10k")).summary()
            elif scen == "scale":
                value = {
                    str(d): paired(
                        be, SIDES, Workload(sizes.scale_turns, d), 1, rounds("scale")
                    ).summary()
                    for d in sizes.scale
                }
            elif scen == "rss":
                value = {
                    "s2": measure_rss(be, sizes.s2, sizes.s2_runs),
                    "10k": measure_rss(be, sizes.s2, sizes.big_runs),
                }
            elif scen == "first":
                value = measure_first(be, sizes.s2, rounds("first"))
            elif scen == "import":
                if be != backends[0]:
                    continue  # importing does not depend on the backend
                value = measure_import(rounds("import"))
            else:
                raise ValueError(f"unknown scenario {scen!r}")
            report.put(be, scen, value)
            _print_detail(be, scen, value)
            sys.stdout.flush()
    return report


def main(argv: Sequence[str] | None = None) -> int:
    """Parse arguments, measure, print the detail lines and the table of targets."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scenario", nargs="+", default=list(SCENARIOS), choices=SCENARIOS)
    ap.add_argument(
        "--backend", nargs="+", default=["asyncio", "trio"], choices=["asyncio", "trio"]
    )
    ap.add_argument("--pairs", type=int, help="rounds per scenario (default: per scenario)")
    ap.add_argument("--runs", type=int, help="concurrent runs in S2 (default 1,000)")
    ap.add_argument("--quick", action="store_true", help="tiny sizes: checks, not figures")
    ap.add_argument("--json", type=Path, help="also write every figure to this file")
    ap.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        kind, side, be, *rest = args.child
        nums = [int(x) for x in rest]
        if kind == "rss":
            child_rss(side, be, *nums)
        else:
            child_first(side, be, *nums)
        return 0
    sizes = QUICK if args.quick else Sizes()
    if args.runs is not None:
        sizes = replace(sizes, s2_runs=args.runs)
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cores, load {os.getloadavg()}")
    report = run_scenarios(args.scenario, args.backend, sizes, args.pairs, args.quick)
    report.print()
    if args.json is not None:
        args.json.write_text(json.dumps(report.results, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
