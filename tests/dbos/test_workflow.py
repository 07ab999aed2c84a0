"""mule runs as DBOS workflows on two worker processes: outcome, events, follow, cancel."""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

import mule.promise as promise
from mule.dbos import MuleDBOSClient, StoredEvent
from mule.effects import INTERRUPTED_UNSAFE, MuleEvent, event_to_record, to_wire
from mule.pi import UserMessage
from mule.testing.crash import FINAL_TEXT, PROMPT, CrashCase, check_case
from tests.dbos import agents
from tests.dbos.conftest import WorkerProc

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def client(pg_url: str, workers: list[WorkerProc]) -> Any:
    """Return a client in the test process (no DBOS launch here)."""
    with MuleDBOSClient(pg_url) as c:
        yield c


def prompt() -> tuple[UserMessage, ...]:
    return (UserMessage(PROMPT, 1_700_000_000_000),)


def case_of(client: MuleDBOSClient, run_id: str, pause_dir: Path) -> CrashCase:
    """Return the crash kit's view of a finished DBOS run."""
    case = CrashCase(run_id, "", pause_dir / f"{run_id}.effects")
    case.transcript = client.transcript(run_id)
    return case


def test_a_run_completes_through_a_worker(client: MuleDBOSClient, pause_dir: Path) -> None:
    """A run enqueued from this process completes on a worker, with the crash kit's checks."""
    run_id = client.start("scenario", prompt())
    summary = client.result(run_id)
    assert summary.status == "completed", summary.error
    assert summary.message is not None
    assert summary.message.content[0].text == FINAL_TEXT  # type: ignore[union-attr]
    check_case(case_of(client, run_id, pause_dir))
    assert sorted(case_of(client, run_id, pause_dir).effect_counts().values()) == [1] * 5
    assert (*prompt(), *summary.messages) == client.transcript(run_id)


def committed_before(case: CrashCase, logged: list[StoredEvent]) -> None:
    """Fill the case's committed messages and tool results from events logged before a kill."""
    from mule.pi import SUCCESS_STOP_REASONS, AssistantMessage, Message, from_wire

    for ev in logged:
        body = ev.body
        if body["type"] == "message_end":
            m: Message = from_wire(Message, body["value"])
            if type(m) is not AssistantMessage or m.stop_reason in SUCCESS_STOP_REASONS:
                case.committed.append(m)
        elif body["type"] == "tool_execution_end":
            text = "".join(b["text"] for b in body["result"]["content"] if b["type"] == "text")
            case.results[body["call"]["id"]] = text


def wait_paused(pause_dir: Path, run_id: str, timeout_s: float = 30) -> int:
    """Wait until a worker paused the run at its point; return that worker's pid."""
    paused = pause_dir / f"{run_id}.paused"
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if paused.exists() and paused.read_text():
            return int(paused.read_text().split()[0])
        time.sleep(0.02)
    raise AssertionError(f"no worker paused {run_id}")


@pytest.mark.parametrize(
    "point",
    [
        "stream:1",  # mid model stream (nothing of the attempt recorded)
        "stream:3",  # mid stream of the retry, after the failed attempt was recorded
        "exec-after:r1",  # mid safe tool, after its side effect: it runs again
        "exec-before:w1",  # mid unsafe tool, claimed, before its side effect
        "exec-after:w1",  # mid unsafe tool, after its side effect: never again
        "exec-after:l1",  # mid the sequential unsafe tool
    ],
)
def test_a_run_survives_its_worker_being_killed(
    point: str,
    client: MuleDBOSClient,
    workers: list[WorkerProc],
    pg_url: str,
    pause_dir: Path,
) -> None:
    """SIGKILL the worker running a run at a point: another worker finishes it, contract kept."""
    run_id = f"crash-{point.replace(':', '-')}-{time.monotonic_ns()}"
    (pause_dir / f"{run_id}.pause").write_text(point)
    client.start("scenario", prompt(), run_id)
    pid = wait_paused(pause_dir, run_id)
    victim = next(w for w in workers if w.pid == pid)
    logged = client.events(run_id)
    victim.kill()
    workers.remove(victim)
    workers.append(WorkerProc(pg_url, pause_dir))  # keep two workers running
    summary = client.result(run_id)
    assert summary.status == "completed", summary.error
    assert client.executor(run_id) != victim.executor_id  # finished elsewhere
    case = case_of(client, run_id, pause_dir)
    committed_before(case, logged)
    check_case(case)
    effects = case.effect_counts()
    results = {m.tool_call_id: m for m in case.transcript if m.role == "toolResult"}
    if point == "exec-before:w1":
        assert effects["w1"] == 0
        assert results["w1"].is_error
        assert INTERRUPTED_UNSAFE in json.dumps(to_wire(results["w1"]))
    if point in ("exec-after:w1", "exec-after:l1"):
        cid = point.rsplit(":", 1)[1]
        assert effects[cid] == 1
        assert INTERRUPTED_UNSAFE in json.dumps(to_wire(results[cid]))
    if point == "exec-after:r1":
        assert effects["r1"] == 2  # a safe tool runs again
    # Each checkpoint event is in the log once, replay or not.
    keys = [(e.body["type"], json.dumps(e.body, sort_keys=True)) for e in client.events(run_id)]
    ends = [k for k in keys if k[0] in ("message_end", "tool_execution_end", "turn_end")]
    assert len({k[1] for k in ends}) == len(ends)
    assert sum(1 for k in keys if k[0] == "run_end") == 1


def normalised(bodies: list[dict[str, Any]], pids: set[int]) -> list[Any]:
    """Drop what differs between two executions of one scenario: clocks and process ids."""

    def clean(x: Any) -> Any:
        if isinstance(x, dict):
            return {k: clean(v) for k, v in x.items() if k not in ("timestamp", "durationMs")}
        if isinstance(x, list):
            return [clean(v) for v in x]
        if isinstance(x, str):
            for pid in pids:
                x = re.sub(rf":{pid}\b", ":PID", x)
        return x

    return [clean(b) for b in bodies]


@pytest.mark.parametrize("sequential", [True, False])
@pytest.mark.anyio
async def test_same_events_and_outcome_as_in_process(
    client: MuleDBOSClient, pause_dir: Path, tmp_path: Path, sequential: bool
) -> None:
    """The scenario through DBOS logs the same events and ends the same as mule.run in process."""
    got: list[dict[str, Any]] = []

    def record(event: MuleEvent, signal: promise.AbortSignal) -> None:
        got.append(json.loads(event_to_record(event)))

    inp = agents.in_process_input(prompt(), tmp_path / "effects", sequential=sequential)
    local = await promise.run(inp, record)

    agent = "scenario-seq" if sequential else "scenario"
    run_id = await anyio.to_thread.run_sync(client.start, agent, prompt())
    summary = await anyio.to_thread.run_sync(client.result, run_id)
    logged = [e.body for e in await anyio.to_thread.run_sync(client.events, run_id)]

    effects = (pause_dir / f"{run_id}.effects").read_text().splitlines()
    remote_pids = {int(line.split()[1]) for line in effects}
    pids = {os.getpid(), *remote_pids}
    mine, theirs = normalised(got, pids), normalised(logged, pids)
    if sequential:
        assert theirs == mine
    else:  # parallel tools finish in either order: the same events, each once
        key = lambda b: json.dumps(b, sort_keys=True)  # noqa: E731
        assert sorted(map(key, theirs)) == sorted(map(key, mine))
    assert summary.status == local.status
    assert normalised([to_wire(m) for m in summary.messages], pids) == normalised(
        [to_wire(m) for m in local.messages], pids
    )


@pytest.mark.anyio
async def test_follow_live_and_cancel_from_another_process(client: MuleDBOSClient) -> None:
    """A follower sees the run live; a cancel from here ends it with run_end(cancelled)."""
    run_id = await anyio.to_thread.run_sync(client.start, "slow", prompt())
    seen: list[StoredEvent] = []
    with anyio.fail_after(60):
        async for ev in client.follow(run_id):
            seen.append(ev)
            if ev.body["type"] == "tool_execution_start" and ev.body["call"]["id"] == "r1":
                # The slow tool is running: the run is live, and now it is cancelled.
                assert await anyio.to_thread.run_sync(client.workflow_status, run_id) == "PENDING"
                await anyio.to_thread.run_sync(client.cancel, run_id)
    assert seen[-1].body["type"] == "run_end"
    assert seen[-1].body["outcome"] == "cancelled"
    assert [e.seq for e in seen] == sorted(e.seq for e in seen)
    # Replaying from the start gives the same events.
    again = [ev async for ev in client.follow(run_id)]
    assert again == seen
    assert again == await anyio.to_thread.run_sync(client.events, run_id)
    status = await anyio.to_thread.run_sync(client.workflow_status, run_id)
    assert status == "CANCELLED"
    assert await anyio.to_thread.run_sync(client.store.status, run_id) == "cancelled"
