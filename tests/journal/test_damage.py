"""Damaged journals fail typed, and a run is resumed by one writer at a time (issue 17, 8 and 10).

Every open or read failure is a `JournalError` with a message naming the file and the fault
(corrupted, truncated, foreign, newer-schema files; damaged records); version-1 files (no stored
schema version) are migrated; two concurrent resumes of one run through the library API: one
runs, the other fails typed before it starts, and every unsafe tool runs once.

The migrated file's version is the private rule `mule.journal._schema.SCHEMA_VERSION`.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import anyio
import pytest

import mule.promise as promise
from mule.effects import MessageEnd, MuleEvent
from mule.journal import Journal, JournalError
from mule.journal._schema import SCHEMA_VERSION
from mule.pi import AssistantMessage, Message, ToolCall
from mule.testing.crash import (
    MODEL,
    RETRY,
    SYSTEM,
    ScenarioModel,
    scenario_tools,
    transcript_problems,
)
from tests.journal.test_journal import USER, effect_counts, scenario

TESTS = Path(__file__).parents[1]
V1 = json.loads((TESTS / "recorded" / "journal_v1.json").read_text())

_V1_DDL = """
CREATE TABLE runs(run_id TEXT PRIMARY KEY, base TEXT NOT NULL, status TEXT NOT NULL,
    segments INTEGER NOT NULL DEFAULT 0, pid INTEGER NOT NULL, host TEXT NOT NULL,
    created_ms INTEGER NOT NULL, updated_ms INTEGER NOT NULL);
CREATE TABLE events(run_id TEXT NOT NULL, segment INTEGER NOT NULL, seq INTEGER NOT NULL,
    type TEXT NOT NULL, body TEXT NOT NULL, PRIMARY KEY(run_id, segment, seq)) WITHOUT ROWID;
"""


def v1_file(path: Path) -> Path:
    """Write a journal as mule wrote it before it stored a schema version (or run metadata)."""
    with sqlite3.connect(path) as db:
        db.executescript(_V1_DDL)
        run = V1["run"]
        db.execute(
            "INSERT INTO runs VALUES (?, ?, ?, ?, 1, 'elsewhere', 0, 0)",
            (run["run_id"], run["base"], run["status"], run["segments"]),
        )
        db.executemany(
            "INSERT INTO events VALUES (?, ?, ?, ?, ?)", [(run["run_id"], *r) for r in V1["events"]]
        )
    db.close()
    return path


def written(path: Path) -> Path:
    """Write a real journal of one run (checkpointed into the main file on close)."""
    with Journal(path, synchronous="NORMAL") as journal:
        journal.begin("r", [USER])
        journal.set_meta("r", "k", "v")
    return path


def read_everything(path: Path) -> None:
    with Journal(path) as journal:
        for info in journal.runs():
            journal.meta(info.run_id)
            journal.transcript(info.run_id)
            journal.recover(info.run_id)
            list(journal.events(info.run_id))


def damage_of(path: Path) -> str | None:
    """Read everything in the file: None if it reads, else the path its JournalError names."""
    try:
        read_everything(path)
    except JournalError as exc:
        return str(path) if str(path) in str(exc) else str(exc)
    return None


def test_a_version_1_file_is_migrated_and_reads_the_same(tmp_path: Path) -> None:
    path = v1_file(tmp_path / "v1.db")
    with Journal(path) as journal:
        assert journal.transcript("r1") == tuple(promise_from_wire(m) for m in V1["transcript"])
        assert journal.meta("r1") == {}
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        assert "claim" in {row[1] for row in db.execute("PRAGMA table_info(runs)")}
    db.close()


def promise_from_wire(wire: object) -> Message:
    from mule.pi import from_wire

    message: Message = from_wire(Message, wire)
    return message


def test_a_newer_schema_is_refused_by_name(tmp_path: Path) -> None:
    path = written(tmp_path / "j.db")
    with sqlite3.connect(path) as db:
        db.execute("PRAGMA user_version = 99")
    db.close()
    with pytest.raises(JournalError, match="schema version 99"):
        Journal(path)


def test_a_foreign_database_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE invoices(id INTEGER)")
    db.close()
    with pytest.raises(JournalError, match="not a mule journal"):
        Journal(path)
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE runs(id INTEGER)")
    db.close()
    with pytest.raises(JournalError, match="not a mule journal"):
        Journal(path)


@pytest.mark.parametrize(
    "content", [b"not a database at all\n" * 100, b"SQLite format 3\x00" + b"\xff" * 4000]
)
def test_a_file_that_is_not_sqlite_is_refused(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "j.db"
    path.write_bytes(content)
    with pytest.raises(JournalError, match=str(path)):
        Journal(path)


def test_a_directory_is_refused(tmp_path: Path) -> None:
    with pytest.raises(JournalError, match="cannot open journal"):
        Journal(tmp_path)


@pytest.mark.parametrize("keep", [0.25, 0.5, 0.9])
def test_a_truncated_file_fails_typed(tmp_path: Path, keep: float) -> None:
    path = written(tmp_path / "j.db")
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * keep)])
    assert damage_of(path) in (None, str(path))


def test_corrupted_pages_fail_typed(tmp_path: Path) -> None:
    path = written(tmp_path / "j.db")
    data = bytearray(path.read_bytes())
    for at in range(100, len(data), 97):
        data[at] ^= 0x5A
    path.write_bytes(bytes(data))
    assert damage_of(path) in (None, str(path))


@pytest.mark.parametrize(
    ("sql", "params"),
    [
        ("UPDATE runs SET base = ?", ("not json",)),
        ("UPDATE runs SET base = ?", ('[{"role": "robot"}]',)),
        ("UPDATE runs SET base = ?", ("[" * 10_000,)),
        ("UPDATE runs SET status = ?", ("exploded",)),
        ("UPDATE runs SET segments = ?", ("many",)),
        ("INSERT INTO events VALUES ('r', 1, 0, 'run_start', ?)", ("{not json",)),
        ("INSERT INTO events VALUES ('r', 1, 0, 'message_end', ?)", ('{"type": "message_end"}',)),
        ("INSERT INTO events VALUES ('r', 1, 0, 'run_start', ?)", (b"\xff\xfe",)),
    ],
)
def test_damaged_records_fail_typed(tmp_path: Path, sql: str, params: tuple[object, ...]) -> None:
    path = written(tmp_path / "j.db")
    with sqlite3.connect(path) as db:
        db.execute(sql, params)
    db.close()
    with pytest.raises(JournalError) as caught:
        read_everything(path)
    assert "damaged" in str(caught.value) or "cannot read" in str(caught.value)


# -- one writer at a time (defect 10) ---------------------------------------------------------


async def resume_once(journal: Journal, run_id: str, effects: Path, gate: anyio.Event) -> str:
    """Resume `run_id` through the library API; say how it ended."""
    messages, resume = journal.recover(run_id)
    await gate.wait()  # both have recovered before either takes the run
    try:
        listener = journal.listener(run_id)
    except JournalError as exc:
        return f"refused: {exc}"
    inp = promise.MuleRunInput(
        model=MODEL,
        system_prompt=SYSTEM,
        messages=messages,
        resume=resume,
        stream=ScenarioModel(),
        tools=scenario_tools(effects),
        retry=RETRY,
    )
    outcome = await promise.run(inp, listener)
    return f"ran: {outcome!r:.60}"


def _after_assistant_with_calls(event: MuleEvent) -> bool:
    return (
        type(event) is MessageEnd
        and type(event.value) is AssistantMessage
        and any(isinstance(b, ToolCall) for b in event.value.content)
    )


@pytest.mark.anyio
@pytest.mark.parametrize("shared", [False, True])
async def test_two_concurrent_resumes_one_runs_the_other_fails_typed(
    tmp_path: Path, shared: bool
) -> None:
    path, fx = tmp_path / "j.db", tmp_path / "fx"
    with Journal(path, synchronous="NORMAL") as journal:
        journal.begin("r", [USER])
        await scenario(journal, "r", fx, stop_at=_after_assistant_with_calls)
        assert effect_counts(fx) == {}
    gate = anyio.Event()
    results: list[str] = []
    common = Journal(path, synchronous="NORMAL")

    async def one() -> None:
        if shared:  # two resumes on one Journal object
            results.append(await resume_once(common, "r", fx, gate))
        else:  # each on its own connection
            with Journal(path, synchronous="NORMAL") as own:
                results.append(await resume_once(own, "r", fx, gate))

    async with anyio.create_task_group() as tg:
        tg.start_soon(one)
        tg.start_soon(one)
        await anyio.sleep(0.05)
        gate.set()
    common.close()
    assert sorted(r.split(":")[0] for r in results) == ["ran", "refused"], results
    assert "held by another writer" in next(r for r in results if r.startswith("refused"))
    assert effect_counts(fx)
    assert all(n == 1 for n in effect_counts(fx).values())
    with Journal(path) as journal:
        assert transcript_problems(journal.transcript("r")) == []
        assert journal.runs()[0].status == "completed"


@pytest.mark.anyio
async def test_two_sequential_resumes_on_one_journal_run_once(tmp_path: Path) -> None:
    """Both recover, the first runs to the end, then the second takes the run: refused."""
    path, fx = tmp_path / "j.db", tmp_path / "fx"
    with Journal(path, synchronous="NORMAL") as journal:
        journal.begin("r", [USER])
        await scenario(journal, "r", fx, stop_at=_after_assistant_with_calls)
        gate = anyio.Event()
        gate.set()
        first = journal.recover("r")
        second = journal.recover("r")
        assert first == second
        assert (await resume_once(journal, "r", fx, gate)).startswith("ran")
        assert "moved on" in await resume_once_stale(journal, "r", fx, second)
    assert all(n == 1 for n in effect_counts(fx).values())


async def resume_once_stale(journal: Journal, run_id: str, effects: Path, state: object) -> str:
    """Take the run with an earlier recovered state (no recover of its own)."""
    try:
        journal.listener(run_id)
    except JournalError as exc:
        return str(exc)
    return f"ran with {state!r:.40}"


@pytest.mark.anyio
async def test_a_resume_after_another_finished_must_recover_again(tmp_path: Path) -> None:
    path, fx = tmp_path / "j.db", tmp_path / "fx"
    with Journal(path, synchronous="NORMAL") as journal:
        journal.begin("r", [USER])
        await scenario(journal, "r", fx, stop_at=_after_assistant_with_calls)
        stale = Journal(path, synchronous="NORMAL")
        stale.recover("r")
        await scenario(journal, "r", fx)  # another writer resumes and finishes the run
        for _ in range(2):  # a refused listener does not forget what its recover saw
            with pytest.raises(JournalError, match="moved on since it was recovered"):
                stale.listener("r")
        stale.recover("r")
        stale.listener("r")  # recovered afresh: the run is free
        stale.close()
    assert all(n == 1 for n in effect_counts(fx).values())


def test_a_live_writer_in_another_process_holds_the_run(tmp_path: Path) -> None:
    path = tmp_path / "j.db"
    with Journal(path) as journal:
        journal.begin("r", [USER])
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(
                f"""
                import sys, time
                from mule.journal import Journal
                j = Journal({str(path)!r})
                held = j.listener("r")
                print("holding", flush=True)
                sys.stdin.read()
                """
            ),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "holding"
        with Journal(path) as journal, pytest.raises(JournalError, match=f"pid {child.pid}"):
            journal.listener("r")
    finally:
        child.kill()
        child.communicate(timeout=30)  # reaps it and closes both pipes
    with Journal(path) as journal:  # its holder is gone: the run is free again
        journal.listener("r")
        assert journal.runs()[0].status == "running"


def test_a_listener_dropped_without_run_end_frees_the_run(tmp_path: Path) -> None:
    with Journal(tmp_path / "j.db") as journal:
        journal.begin("r", [USER])
        first = journal.listener("r")
        with pytest.raises(JournalError, match="held by another writer"):
            journal.listener("r")
        del first
        journal.listener("r")
    assert os.getpid() > 0


# -- the CLI prints the message, never a traceback -------------------------------------------


def mule_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mule.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
        check=False,
    )


@pytest.mark.slow
def test_mule_journal_and_resume_print_the_journal_error(tmp_path: Path) -> None:
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"not a database at all\n" * 100)
    damaged = written(tmp_path / "damaged.db")
    with sqlite3.connect(damaged) as db:
        db.execute("UPDATE runs SET base = 'not json', status = 'failed'")
    db.close()
    commands = [
        ("journal", "list", "--journal", str(garbage)),
        ("journal", "show", "--journal", str(garbage), "r"),
        ("journal", "show", "--journal", str(damaged), "r"),
        (
            "run",
            "--model",
            "local/m",
            "--base-url",
            "http://127.0.0.1:9",
            "--journal",
            str(damaged),
            "--resume",
            "r",
        ),
        (
            "run",
            "--model",
            "local/m",
            "--base-url",
            "http://127.0.0.1:9",
            "--journal",
            str(garbage),
            "--resume",
            "r",
        ),
    ]
    for command in commands:
        done = mule_cli(*command)
        assert done.returncode == 2, (command, done.stderr)
        assert "Traceback" not in done.stderr + done.stdout, command
        assert "damaged" in done.stderr or "cannot open journal" in done.stderr, done.stderr
