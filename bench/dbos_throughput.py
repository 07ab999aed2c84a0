"""Runs per second through DBOS (1 and 2 workers) against in-process runs; cost per step.

    .venv/bin/python bench/dbos_throughput.py [--runs 60] [--concurrency 8]

Starts a throwaway PostgreSQL with scripts/pg-start (stopped at the end) and worker processes
(this file with --worker). The run is the crash matrix's scenario (mule.testing.crash): four
model attempts (one fails and is retried) and five tool calls, no-op tools that append one
line to a file; 9 DBOS steps per run. Reported:

- runs/s: wall clock from the first start to the last result (DBOS: enqueue and wait from a
  client process, so queue pickup is included);
- per-run execution time (median): in-process, one run at a time; DBOS, from the workflow's
  dequeue to its last update (no queue wait), one run at a time on one worker;
- added cost per step: the difference, divided by the steps of a run.
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
from pathlib import Path
from typing import Any

import anyio

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import mule.promise as promise  # noqa: E402
from mule.pi._messages import Message, UserMessage  # noqa: E402
from mule.testing.crash import MODEL, PROMPT, RETRY, SYSTEM, ScenarioModel, scenario_tools  # noqa: E402

STEPS_PER_RUN = 9  # 4 model attempts + 5 tool executions


def scenario_input(messages: tuple[Message, ...], effects: Path) -> promise.MuleRunInput:
    """Return the benchmark run's input."""
    return promise.MuleRunInput(
        model=MODEL,
        system_prompt=SYSTEM,
        messages=messages,
        stream=ScenarioModel(),
        tools=scenario_tools(effects),
        retry=RETRY,
    )


def prompt() -> tuple[Message, ...]:
    return (UserMessage(PROMPT, int(time.time() * 1000)),)


# -- the worker side ----------------------------------------------------------------------------


def worker_main(url: str, executor_id: str, concurrency: int, effects: str) -> None:
    from mule.dbos import launch_worker, register_agent

    register_agent("bench", lambda messages: scenario_input(messages, Path(effects)))
    worker = launch_worker(
        url, executor_id=executor_id, worker_concurrency=concurrency, queue_poll_s=0.01
    )
    print(f"ready {executor_id}", flush=True)
    sys.stdin.read()
    worker.stop()


def spawn_worker(url: str, concurrency: int, effects: Path) -> subprocess.Popen[str]:
    executor = f"bench-{uuid.uuid4().hex[:6]}"
    args = [sys.executable, __file__, "--worker", url, executor, str(concurrency), str(effects)]
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


# -- measurements ------------------------------------------------------------------------------


async def in_process(runs: int, concurrency: int, effects: Path) -> tuple[float, float]:
    """Return (runs/s with `concurrency` at once, median seconds of one run alone)."""
    alone: list[float] = []
    for _ in range(10):
        t = time.perf_counter()
        await promise.run(scenario_input(prompt(), effects))
        alone.append(time.perf_counter() - t)
    limit = anyio.Semaphore(concurrency)

    async def one() -> None:
        async with limit:
            await promise.run(scenario_input(prompt(), effects))

    t = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for _ in range(runs):
            tg.start_soon(one)
    return runs / (time.perf_counter() - t), statistics.median(alone)


def through_dbos(client: Any, runs: int) -> float:
    """Return runs/s: enqueue `runs` runs, wait for every result."""
    t = time.perf_counter()
    ids = [client.start("bench", prompt()) for _ in range(runs)]
    for run_id in ids:
        summary = client.result(run_id)
        assert summary.status == "completed", summary.error
    return runs / (time.perf_counter() - t)


def dbos_alone(client: Any, n: int = 10) -> float:
    """Return the median execution time of one run alone (dequeue to last update)."""
    took: list[float] = []
    for _ in range(n):
        run_id = client.start("bench", prompt())
        client.result(run_id)
        status = client.client.retrieve_workflow(run_id).get_status()
        took.append((status.updated_at - status.dequeued_at) / 1000)
    return statistics.median(took)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=60)
    parser.add_argument("--concurrency", type=int, default=8)
    args = parser.parse_args()

    from mule.dbos import MuleDBOSClient

    with tempfile.TemporaryDirectory() as tmp:
        here = Path(tmp)
        effects = here / "effects"
        local_rate, local_alone = anyio.run(in_process, args.runs, args.concurrency, effects)
        pg = here / "pg"
        url = subprocess.run(
            [str(ROOT / "scripts" / "pg-start"), str(pg)],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
        workers: list[subprocess.Popen[str]] = []
        try:
            workers.append(spawn_worker(url, args.concurrency, effects))
            with MuleDBOSClient(url) as client:
                through_dbos(client, 5)  # warm up
                alone = dbos_alone(client)
                one = through_dbos(client, args.runs)
                workers.append(spawn_worker(url, args.concurrency, effects))
                through_dbos(client, 5)
                two = through_dbos(client, args.runs)
        finally:
            for w in workers:
                stop_worker(w)
            subprocess.run([str(ROOT / "scripts" / "pg-stop"), str(pg)], check=False)

    per_step_ms = (alone - local_alone) / STEPS_PER_RUN * 1000
    print(f"cores: {os.cpu_count()}, runs: {args.runs}, concurrency per worker: {args.concurrency}")
    print("| path | runs/s | one run alone (median) |")
    print("|---|---:|---:|")
    print(f"| in-process mule.run | {local_rate:.1f} | {local_alone * 1000:.1f} ms |")
    print(f"| DBOS, 1 worker | {one:.1f} | {alone * 1000:.1f} ms |")
    print(f"| DBOS, 2 workers | {two:.1f} | |")
    print(f"added cost per step: {per_step_ms:.2f} ms ({STEPS_PER_RUN} steps per run)")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        worker_main(sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5])
    else:
        main()
