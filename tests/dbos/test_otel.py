"""DBOS-run runs traced with mule.otel: a recovered execution links to the trace it continues."""

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
