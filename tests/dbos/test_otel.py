"""DBOS-run runs traced with mule.otel: links between executions, marks on replayed steps.

A recovered execution links to the trace it continues and marks the steps it replayed from
DBOS's record.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mule.dbos import MuleDBOSClient
from tests.dbos.conftest import WorkerProc
from tests.dbos.test_workflow import prompt, wait_paused

pytest.importorskip("opentelemetry.sdk", reason="the tracing tests need the SDK (dev extra)")
pytestmark = pytest.mark.slow
TRACE_KEY = "otel.traceparent"


@pytest.fixture(scope="module")
def traced_workers(pg_url: str, pause_dir: Path) -> Iterator[list[WorkerProc]]:
    """Two traced worker processes (their spans go to files in `pause_dir`)."""
    procs = [WorkerProc(pg_url, pause_dir, traced=True) for _ in range(2)]
    try:
        yield procs
    finally:
        for p in procs:
            p.stop()


def spans_of(pause_dir: Path, executor_id: str) -> list[dict[str, Any]]:
    path = pause_dir / f"spans-{executor_id}.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]


def ids(traceparent: str) -> tuple[str, str]:
    """Return the trace and span ids a W3C traceparent names (its flags vary by SDK)."""
    _, trace, span, _ = traceparent.split("-")
    return trace, span


def wait_meta(client: MuleDBOSClient, run_id: str, timeout_s: float = 30) -> str:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = client.store.meta(run_id).get(TRACE_KEY)
        if found is not None:
            return found
        time.sleep(0.02)
    raise AssertionError(f"run {run_id} kept no trace context")


def test_a_recovered_run_links_to_the_trace_it_continues(
    pg_url: str, pause_dir: Path, traced_workers: list[WorkerProc]
) -> None:
    """Kill the worker mid run: the execution that finishes it is a new trace linking the first."""
    with MuleDBOSClient(pg_url) as client:
        run_id = f"otel-{time.monotonic_ns()}"
        (pause_dir / f"{run_id}.pause").write_text("exec-after:r1")  # after a model attempt
        client.start("scenario", prompt(), run_id)
        pid = wait_paused(pause_dir, run_id)
        first = wait_meta(client, run_id)  # kept by the first execution at its run_start
        victim = next(w for w in traced_workers if w.pid == pid)
        victim.kill()
        traced_workers.remove(victim)
        traced_workers.append(WorkerProc(pg_url, pause_dir, traced=True))
        summary = client.result(run_id)
        assert summary.status == "completed", summary.error
        kept = client.store.meta(run_id)[TRACE_KEY]
        finished_by = client.executor(run_id)

    # The first execution's run span never ended (its worker died), but its finished
    # attempts did: they name its trace and, as their parent, its run span.
    before = spans_of(pause_dir, victim.executor_id)
    chats = [s for s in before if s["name"].startswith("chat ")]
    assert chats, before
    assert {(c["trace"], c["parent"]) for c in chats} == {ids(first)}
    assert not [s for s in before if s["name"].startswith("invoke_agent")]

    assert finished_by is not None
    assert finished_by != victim.executor_id
    (run,) = [
        s
        for s in spans_of(pause_dir, finished_by)
        if s["name"] == "invoke_agent scenario"
        and s["attributes"].get("gen_ai.conversation.id") == run_id
    ]
    assert run["attributes"]["mule.outcome"] == "completed"
    assert run["trace"] != chats[0]["trace"]  # a new trace ...
    assert run["links"] == [[chats[0]["trace"], chats[0]["parent"]]]  # ... linked to the first
    assert ids(kept) == (run["trace"], run["span"])  # the next recovery links to this one


def test_a_recovered_run_marks_the_steps_it_replayed(
    pg_url: str, pause_dir: Path, traced_workers: list[WorkerProc]
) -> None:
    """Kill the worker inside the second turn's last tool: what it finished is replayed, marked.

    The scenario: turn 1 asks r1, w1, w2; turn 2's first attempt fails (503) and its retry asks
    l1 and r2; turn 3 answers. The worker dies in r2 after its side effect, before DBOS records
    its output. The recovering execution replays the three attempts and every call the first
    one finished; r2 (a safe tool) runs again, and the final attempt is new.
    """
    with MuleDBOSClient(pg_url) as client:
        run_id = f"otel-replay-{time.monotonic_ns()}"
        (pause_dir / f"{run_id}.pause").write_text("exec-after:r2")
        client.start("scenario", prompt(), run_id)
        pid = wait_paused(pause_dir, run_id)
        first = wait_meta(client, run_id)
        victim = next(w for w in traced_workers if w.pid == pid)
        victim.kill()
        traced_workers.remove(victim)
        traced_workers.append(WorkerProc(pg_url, pause_dir, traced=True))
        summary = client.result(run_id)
        assert summary.status == "completed", summary.error
        finished_by = client.executor(run_id)
    assert finished_by is not None
    assert finished_by != victim.executor_id
    ran_by: dict[str, list[str]] = {}  # pid -> the calls it executed (side effects)
    for line in (pause_dir / f"{run_id}.effects").read_text().splitlines():
        call, who = line.split()
        ran_by.setdefault(who, []).append(call)
    assert sorted(ran_by.pop(str(pid))) == ["l1", "r1", "r2", "w1", "w2"]
    recovering = next(w for w in traced_workers if w.executor_id == finished_by)
    assert ran_by == {str(recovering.pid): ["r2"]}  # only r2 ran again

    # The first execution ran every step it traced: nothing of it is marked.
    before = [s for s in spans_of(pause_dir, victim.executor_id) if s["trace"] == ids(first)[0]]
    assert len([s for s in before if s["name"].startswith("chat ")]) == 3
    assert len([s for s in before if s["name"].startswith("execute_tool ")]) == 4  # not r2
    assert not [s for s in before if "mule.replayed" in s["attributes"]]

    after = spans_of(pause_dir, finished_by)
    (run,) = [
        s
        for s in after
        if s["name"] == "invoke_agent scenario"
        and s["attributes"].get("gen_ai.conversation.id") == run_id
    ]
    assert "mule.replayed" not in run["attributes"]
    mine = [s for s in after if s["trace"] == run["trace"] and s is not run]
    chats = sorted(
        (s for s in mine if s["name"].startswith("chat ")),
        key=lambda s: int(s["attributes"]["mule.message"].split(":")[1]),
    )
    marks = [s["attributes"].get("mule.replayed") for s in chats]
    assert marks == [True, True, True, None]  # turn 1, turn 2's failed try and retry; turn 3
    assert chats[1]["attributes"]["error.type"] == "503"  # the replayed failure keeps its status
    tools = {
        s["attributes"]["gen_ai.tool.call.id"]: s["attributes"].get("mule.replayed")
        for s in mine
        if s["name"].startswith("execute_tool ")
    }
    assert tools == {"r1": True, "w1": True, "w2": True, "l1": True, "r2": None}


def test_set_meta_needs_a_known_run(pg_url: str) -> None:
    from mule.dbos import PgStore, StoreError

    with PgStore(pg_url) as store:
        with pytest.raises(StoreError, match="unknown run"):
            store.set_meta("no-such-run", "k", "v")
        with pytest.raises(StoreError, match="unknown run"):
            store.meta("no-such-run")
        store.begin("meta-run", prompt())
        assert store.meta("meta-run") == {}
        store.set_meta("meta-run", "k", "v1")
        store.set_meta("meta-run", "k", "v2")
        store.set_meta("meta-run", "j", "w")
        assert store.meta("meta-run") == {"k": "v2", "j": "w"}
