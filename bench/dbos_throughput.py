"""Runs per second through DBOS (1 and 2 workers) against in-process runs; cost per step.

    .venv/bin/python bench/dbos_throughput.py [--workload s2|crash|floor] [--runs 300]
        [--concurrency 100] [--floor-steps 13]

Starts a throwaway PostgreSQL with scripts/pg-start (stopped at the end) and worker processes
(this file with --worker). Workloads:

- `s2` (the default): the true-floor benchmark's S2-shaped run (bench/_workload.py): 5 turns
  of 20 text deltas from a provider-shaped stream, 2 parallel `echo` calls in each turn but
  the last; 13 DBOS steps per run (5 model attempts, 8 tool executions).
- `crash`: the crash matrix's scenario (mule.testing.crash): four model attempts (one fails
  and is retried) and five tool calls, no-op tools that append one line to a file; 9 steps.
- `floor`: DBOS alone, no mule: a workflow of `--floor-steps` trivial DBOS steps (each
  returning a small dict) on the same queue, worker and PostgreSQL: what DBOS itself costs
  per run (0 steps: the workflow's own start, dequeue and result).

`--concurrency` is the number in flight: the worker's concurrency (and the in-process
semaphore). Reported:

- runs/s: wall clock from the first start to the last result (DBOS: enqueue and wait from a
  client process, so queue pickup is included);
- per-run execution time (median): in-process, one run at a time; DBOS, from the workflow's
  dequeue to its last update (no queue wait), one run at a time on one worker;
- added cost per step: the difference, divided by the steps of a run;
- CPU per run: the worker process's and PostgreSQL's (all its processes) user + system CPU
  over the measured runs, divided by their number (from /proc).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import anyio

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import anyio.lowlevel  # noqa: E402

import mule.promise as promise  # noqa: E402
from bench import _mule_side  # noqa: E402
from bench._workload import Workload  # noqa: E402
from mule.pi import Message, UserMessage  # noqa: E402
from mule.testing.crash import MODEL, PROMPT, RETRY, SYSTEM, ScenarioModel, scenario_tools  # noqa: E402

S2 = Workload(5, 20)
S2_SCRIPT = S2.script()
# DBOS steps per run: model attempts + tool executions.
STEPS_PER_RUN = {"crash": 9, "s2": S2.turns + S2.calls * (S2.turns - 1)}


def scenario_input(
    workload: str, messages: tuple[Message, ...], effects: Path
) -> promise.MuleRunInput:
    """Return the benchmark run's input."""
    if workload == "s2":
        return promise.MuleRunInput(
            model=_mule_side.MODEL,
            system_prompt="bench",
            messages=messages,
            stream=_mule_side.stream_for(S2_SCRIPT, anyio.lowlevel.checkpoint),
            tools=(_mule_side.echo,),
        )
    return promise.MuleRunInput(
        model=MODEL,
        system_prompt=SYSTEM,
        messages=messages,
        stream=ScenarioModel(),
        tools=scenario_tools(effects),
        retry=RETRY,
    )


def prompt(workload: str) -> tuple[Message, ...]:
    text = "go" if workload == "s2" else PROMPT
    return (UserMessage(text, int(time.time() * 1000)),)


# -- the worker side ----------------------------------------------------------------------------


FLOOR_WORKFLOW = "bench.floor"


def register_floor() -> None:
    """Register DBOS's floor: a workflow of n trivial steps (no mule in it)."""
    from dbos import DBOS

    @DBOS.step(name="bench.floor_step")
    async def floor_step(i: int) -> dict[str, int]:
        return {"i": i}

    @DBOS.workflow(name=FLOOR_WORKFLOW)
    async def floor(n: int) -> dict[str, Any]:
        for i in range(n):
            await floor_step(i)
        return {"status": "completed", "messages": [], "message": None, "error": None}


def worker_main(url: str, executor_id: str, concurrency: int, effects: str, workload: str) -> None:
    from mule.dbos import launch_worker, register_agent

    register_floor()

    register_agent("bench", lambda messages: scenario_input(workload, messages, Path(effects)))
    worker = launch_worker(
        url, executor_id=executor_id, worker_concurrency=concurrency, queue_poll_s=0.01
    )
    print(f"ready {executor_id}", flush=True)
    sys.stdin.read()
    worker.stop()


def spawn_worker(url: str, concurrency: int, effects: Path, workload: str) -> subprocess.Popen[str]:
    executor = f"bench-{uuid.uuid4().hex[:6]}"
    args = [
        sys.executable,
        __file__,
        "--worker",
        url,
        executor,
        str(concurrency),
        str(effects),
        workload,
    ]
    proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()
    if line != f"ready {executor}":
        proc.kill()
        raise RuntimeError(f"worker did not start: {line!r}")
    return proc


def stop_worker(proc: subprocess.Popen[str]) -> None:
    assert proc.stdin is not None
    assert proc.stdout is not None
    proc.stdin.close()
    proc.wait(30)
    proc.stdout.close()


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


# -- measurements ------------------------------------------------------------------------------


async def in_process(
    workload: str, runs: int, concurrency: int, effects: Path
) -> tuple[float, float]:
    """Return (runs/s with `concurrency` at once, median seconds of one run alone)."""
    alone: list[float] = []
    for _ in range(10):
        t = time.perf_counter()
        await promise.run(scenario_input(workload, prompt(workload), effects))
        alone.append(time.perf_counter() - t)
    limit = anyio.Semaphore(concurrency)

    async def one() -> None:
        async with limit:
            await promise.run(scenario_input(workload, prompt(workload), effects))

    t = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for _ in range(runs):
            tg.start_soon(one)
    return runs / (time.perf_counter() - t), statistics.median(alone)


FLOOR_STEPS = [13]


def start(client: Any, workload: str) -> str:
    """Start one run of the workload; return its workflow id."""
    if workload != "floor":
        run_id: str = client.start("bench", prompt(workload))
        return run_id
    run_id = f"floor-{uuid.uuid4().hex}"
    client.client.enqueue(
        {"queue_name": client.queue, "workflow_name": FLOOR_WORKFLOW, "workflow_id": run_id},
        FLOOR_STEPS[0],
    )
    return run_id


def through_dbos(client: Any, workload: str, runs: int) -> float:
    """Return runs/s: enqueue `runs` runs, wait for all to complete (end to end)."""
    t = time.perf_counter()
    with ThreadPoolExecutor(4) as pool:  # one thread's enqueues alone top out near 150/s
        ids = list(pool.map(lambda _: start(client, workload), range(runs)))
    _say(f"  enqueued {runs} in {time.perf_counter() - t:.2f} s")
    # One query for all runs every 50 ms (a result wait per run, in turn, capped the rate
    # near 35 runs/s however fast the worker went).
    while True:
        got = client.client.list_workflows(workflow_ids=ids, load_input=False, load_output=False)
        if all(s.status not in ("ENQUEUED", "PENDING") for s in got):
            break
        time.sleep(0.05)
    wall = time.perf_counter() - t
    for s in client.client.list_workflows(workflow_ids=ids, load_input=False):
        assert s.status == "SUCCESS", (s.workflow_id, s.status, s.error)
        assert s.output["status"] == "completed", s.output
    took = [(s.updated_at - s.dequeued_at) / 1000 for s in got]
    waited = [(s.dequeued_at - s.created_at) / 1000 for s in got]
    window = (max(s.updated_at for s in got) - min(s.dequeued_at for s in got)) / 1000
    _say(
        f"  a run: {statistics.median(took) * 1000:.0f} ms dequeue to end (median),"
        f" {statistics.median(waited) * 1000:.0f} ms queued; about"
        f" {sum(took) / window:.0f} in flight on average; worker side (first dequeue to"
        f" last end): {runs / window:.1f} runs/s"
    )
    return runs / wall


def cpu_s(pids: list[int]) -> float:
    """Return the user + system CPU seconds the processes used so far."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / tick


def pg_pids(pg: Path) -> list[int]:
    """Return the PostgreSQL cluster's processes (the postmaster and its children)."""
    master = int((pg / "data" / "postmaster.pid").read_text().split()[0])
    kids = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == master:
            kids.append(int(stat.parent.name))
    return [master, *kids]


def dbos_alone(client: Any, workload: str, n: int = 10) -> float:
    """Return the median execution time of one run alone (dequeue to last update)."""
    took: list[float] = []
    for _ in range(n):
        run_id = start(client, workload)
        client.result(run_id)
        status = client.client.retrieve_workflow(run_id).get_status()
        took.append((status.updated_at - status.dequeued_at) / 1000)
    return statistics.median(took)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workload", choices=["s2", "crash", "floor"], default="s2")
    parser.add_argument(
        "--profile", metavar="OUT", help="py-spy the worker's measured runs (raw, to OUT)"
    )
    parser.add_argument("--floor-steps", type=int, default=13, help="DBOS steps per floor run")
    parser.add_argument("--runs", type=int, default=300)
    parser.add_argument("--concurrency", type=int, default=100, help="runs in flight")
    parser.add_argument("--workers", type=int, choices=[1, 2], default=2)
    args = parser.parse_args()
    wl = args.workload
    FLOOR_STEPS[0] = args.floor_steps
    STEPS_PER_RUN["floor"] = args.floor_steps

    from mule.dbos import MuleDBOSClient

    with tempfile.TemporaryDirectory() as tmp:
        here = Path(tmp)
        effects = here / "effects"
        if wl == "floor":
            local_rate, local_alone = float("nan"), 0.0
        else:
            local_rate, local_alone = anyio.run(
                in_process, wl, args.runs, args.concurrency, effects
            )
        _say(f"in-process: {local_rate:.1f} runs/s, one run alone {local_alone * 1000:.1f} ms")
        pg = here / "pg"
        url = subprocess.run(
            [str(ROOT / "scripts" / "pg-start"), str(pg)],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
        workers: list[subprocess.Popen[str]] = []
        try:
            workers.append(spawn_worker(url, args.concurrency, effects, wl))
            with MuleDBOSClient(url) as client:
                through_dbos(client, wl, 5)  # warm up
                alone = dbos_alone(client, wl)
                _say(f"DBOS one run alone: {alone * 1000:.1f} ms")
                watched = [workers[0].pid, *pg_pids(pg)]
                before, pg_before = cpu_s(watched[:1]), cpu_s(watched[1:])
                spy = None
                if args.profile:
                    spy = subprocess.Popen(
                        [
                            *(str(Path(sys.executable).parent / "py-spy"), "record"),
                            *("--pid", str(workers[0].pid), "--format", "raw"),
                            *("-o", args.profile, "--rate", "200", "--threads", "--gil"),
                            "--nonblocking",
                        ],
                        stdout=subprocess.DEVNULL,
                        stderr=subprocess.DEVNULL,
                    )
                    time.sleep(1)
                one = through_dbos(client, wl, args.runs)
                if spy is not None:
                    spy.send_signal(2)
                    spy.wait(60)
                worker_cpu = (cpu_s(watched[:1]) - before) / args.runs
                pg_cpu = (cpu_s(watched[1:]) - pg_before) / args.runs
                _say(
                    f"DBOS, 1 worker: {one:.1f} runs/s, CPU per run: worker "
                    f"{worker_cpu * 1000:.1f} ms, PostgreSQL {pg_cpu * 1000:.1f} ms"
                )
                two = None
                if args.workers == 2:
                    workers.append(spawn_worker(url, args.concurrency, effects, wl))
                    through_dbos(client, wl, 5)
                    two = through_dbos(client, wl, args.runs)
                    _say(f"DBOS, 2 workers: {two:.1f} runs/s")
        finally:
            for w in workers:
                stop_worker(w)
            subprocess.run([str(ROOT / "scripts" / "pg-stop"), str(pg)], check=False)

    steps = STEPS_PER_RUN[wl]
    per_step_ms = (alone - local_alone) / max(steps, 1) * 1000
    print(
        f"workload {wl}, cores: {os.cpu_count()}, runs: {args.runs}, "
        f"in flight per worker: {args.concurrency}"
    )
    print("| path | runs/s | one run alone (median) |")
    print("|---|---:|---:|")
    print(f"| in-process mule.run | {local_rate:.1f} | {local_alone * 1000:.1f} ms |")
    print(f"| DBOS, 1 worker | {one:.1f} | {alone * 1000:.1f} ms |")
    print(
        f"CPU per run (1 worker): worker {worker_cpu * 1000:.1f} ms, "
        f"PostgreSQL {pg_cpu * 1000:.1f} ms; load average {os.getloadavg()[0]:.1f}"
    )
    if two is not None:
        print(f"| DBOS, 2 workers | {two:.1f} | |")
    print(f"added cost per step: {per_step_ms:.2f} ms ({steps} steps per run)")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        worker_main(sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5], sys.argv[6])
    else:
        main()
