"""The SQLite journal: what it records, when it commits, and how it recovers runs."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from pathlib import Path

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from returns.result import Result, Success

import mule.promise as promise
from mule.effects import (
    INTERRUPTED_UNSAFE,
    MessageEnd,
    MuleCallPreparation,
    MuleError,
    MuleEvent,
    MulePortsInput,
    MuleResume,
    MuleToolDeclaration,
    MuleToolExecutionPart,
    MuleToolPrepared,
    MuleToolResult,
    Ports,
    PreparePort,
    ToolCompleted,
    ToolExecutionStart,
    ToolPending,
    ToolStarted,
)
from mule.effects import run as effects_run
from mule.journal import Journal, JournalError
from mule.pi import (
    AbortController,
    AbortSignal,
    AssistantMessage,
    Message,
    TextContent,
    Tool,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from mule.pi.scripted import Call, ScriptedModel, Text, error_reply, reply
from mule.testing.crash import (
    FINAL_TEXT,
    MODEL,
    RETRY,
    SYSTEM,
    ScenarioModel,
    scenario_tools,
    transcript_problems,
)

USER = UserMessage("Do the chores.", 1)


class Crash(Exception):
    """Raised by a listener to stop a run as a crash would (nothing after it is recorded)."""


def crashing(
    inner: Callable[[MuleEvent, AbortSignal], Awaitable[None] | None],
    after: int | None,
    seen: list[MuleEvent],
) -> Callable[[MuleEvent, AbortSignal], Awaitable[None]]:
    """Record through `inner` (awaiting its commit), then crash after `after` events."""

    async def listen(event: MuleEvent, signal: AbortSignal) -> None:
        pending = inner(event, signal)
        if pending is not None:
            await pending
        seen.append(event)
        if after is not None and len(seen) > after:
            raise Crash(event.type)

    return listen


async def scenario(
    journal: Journal,
    run_id: str,
    effects: Path,
    *,
    crash_after: int | None = None,
    stop_at: Callable[[MuleEvent], bool] | None = None,
) -> list[MuleEvent]:
    """Recover `run_id` and run the crash scenario in-process; return the events seen.

    `crash_after=n` stops the run after n+1 recorded events; `stop_at` after the first event
    it accepts. A crash is swallowed (the run is left as a killed process would leave it).
    """
    messages, resume = journal.recover(run_id)
    seen: list[MuleEvent] = []
    inner = journal.listener(run_id)
    listener = crashing(inner, crash_after, seen)
    if stop_at is not None:
        base = listener

        async def listener(event: MuleEvent, signal: AbortSignal) -> None:
            await base(event, signal)
            if stop_at(event):
                raise Crash(event.type)

    inp = promise.MuleRunInput(
        model=MODEL,
        system_prompt=SYSTEM,
        messages=messages,
        resume=resume,
        stream=ScenarioModel(),
        tools=scenario_tools(effects),
        retry=RETRY,
    )
    try:
        await promise.run(inp, listener)
    except promise.MuleRunFailed as exc:
        if not isinstance(exc.cause, Crash):
            raise
    return seen


def effect_counts(effects: Path) -> dict[str, int]:
    """How many times each call's side effect happened."""
    counts: dict[str, int] = {}
    if effects.exists():
        for line in effects.read_text().splitlines():
            cid = line.split()[0]
            counts[cid] = counts.get(cid, 0) + 1
    return counts


def text_of(m: Message | MuleToolResult) -> str:
    """Return the concatenated text of a message or result."""
    content = m.content
    if isinstance(content, str):
        return content
    return "".join(b.text for b in content if type(b) is TextContent)


@pytest.fixture
def journal(tmp_path: Path) -> Iterator[Journal]:
    """Open a fresh journal file (synchronous=NORMAL: these tests do not cut the power)."""
    j = Journal(tmp_path / "j.db", synchronous="NORMAL")
    yield j
    j.close()


# -- recording ------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_records_every_event_and_the_transcript(journal: Journal, tmp_path: Path) -> None:
    """Every event is stored in order; the transcript is the input plus the run's messages."""
    journal.begin("r", [USER])
    seen = await scenario(journal, "r", tmp_path / "fx")
    stored = list(journal.events("r"))
    assert [d["type"] for _, _, d in stored] == [e.type for e in seen]
    assert [seq for _, seq, _ in stored] == list(range(len(seen)))
    t = journal.transcript("r")
    assert transcript_problems(t) == []
    assert text_of(t[-1]) == FINAL_TEXT
    assert t[0] == USER
    (info,) = journal.runs()
    assert (info.run_id, info.status, info.segments) == ("r", "completed", 1)


@pytest.mark.anyio
async def test_a_retried_attempt_is_recorded_but_not_committed(
    journal: Journal, tmp_path: Path
) -> None:
    """The failed attempt's events are stored; the transcript holds only the retry's message."""
    journal.begin("r", [USER])
    await scenario(journal, "r", tmp_path / "fx")
    ends = [
        d["value"]
        for _, _, d in journal.events("r")
        if d["type"] == "message_end" and d["value"]["role"] == "assistant"
    ]
    assert [m["stopReason"] for m in ends] == ["toolUse", "error", "toolUse", "stop"]
    t = journal.transcript("r")
    assert all(m.stop_reason != "error" for m in t if type(m) is AssistantMessage)
    assert len([m for m in t if type(m) is AssistantMessage]) == 3


@pytest.mark.anyio
async def test_a_failed_run_keeps_its_final_error(journal: Journal) -> None:
    """A non-retryable error ends the run: failed status, the error message is committed."""
    journal.begin("r", [USER])
    inp = promise.MuleRunInput(
        model=MODEL,
        system_prompt=SYSTEM,
        messages=(USER,),
        stream=ScriptedModel([error_reply("invalid api key")]),
    )
    with pytest.raises(promise.MuleRunFailed):
        await promise.run(inp, journal.listener("r"))
    t = journal.transcript("r")
    assert [type(m) for m in t] == [UserMessage, AssistantMessage]
    assert t[-1].stop_reason == "error"  # type: ignore[union-attr]
    assert journal.recover("r") == (t, None)
    assert journal.runs()[0].status == "failed"


@pytest.mark.anyio
async def test_message_update_is_stored_without_snapshots(journal: Journal) -> None:
    """Deltas are stored as deltas: no partial message per update, so storage grows linearly."""
    journal.begin("r", [USER])
    n = 2000
    inp = promise.MuleRunInput(
        model=MODEL,
        system_prompt=SYSTEM,
        messages=(USER,),
        stream=ScriptedModel([reply(Text.of("abcdefghij" * n, n))]),
    )
    await promise.run(inp, journal.listener("r"))
    updates = [d for _, _, d in journal.events("r") if d["type"] == "message_update"]
    assert len(updates) == n + 2
    deltas = [u for u in updates if u["event"]["type"] == "text_delta"]
    assert deltas[5]["event"] == {"type": "text_delta", "contentIndex": 0, "delta": "abcdefghij"}
    assert all("partial" not in u["event"] and "value" not in u for u in updates)
    # Only text_end carries the block (once); a snapshot per delta would be ~n²/2 * 10 bytes.
    size = sum(len(json.dumps(u)) for u in updates)
    assert size < 200 * n


# -- the ordering guarantee ------------------------------------------------------------------


def _probe_prepare(db: Path, seen: list[tuple[str, bool]]) -> PreparePort:
    """Return a tool checking, from a second connection, that its start was committed."""

    def durable(cid: str) -> bool:
        with sqlite3.connect(db) as other:
            rows = other.execute(
                "SELECT body FROM events WHERE type = 'tool_execution_start'"
            ).fetchall()
        return any(json.loads(b)["call"]["id"] == cid for (b,) in rows)

    async def prepare(
        call: ToolCall, signal: AbortSignal
    ) -> Result[MuleCallPreparation, MuleError]:
        seen.append(("prepare", durable(call.id)))

        async def execute(
            s: AbortSignal,
        ) -> AsyncIterator[Result[MuleToolExecutionPart, MuleError]]:
            seen.append(("execute", durable(call.id)))
            yield Success(
                MuleToolExecutionPart("result", MuleToolResult(content=(TextContent("ok"),)))
            )

        return Success(MuleToolPrepared(execute))

    return prepare


@pytest.mark.anyio
async def test_tool_start_is_durable_before_the_tool_runs(tmp_path: Path) -> None:
    """Back-pressure: the start is committed (seen by another connection) before prepare/execute."""
    db = tmp_path / "j.db"
    with Journal(db) as j:
        j.begin("r", [USER])
        seen: list[tuple[str, bool]] = []
        inp = MulePortsInput(
            model=MODEL,
            system_prompt=SYSTEM,
            messages=(USER,),
            stream=ScriptedModel([reply(Call("a", "probe"), Call("b", "probe")), reply("done")]),
            tools=(MuleToolDeclaration(descriptor=Tool("probe", "probe", {"type": "object"})),),
            ports=Ports(
                emit=promise.emit_port(j.listener("r")), prepare_tool=_probe_prepare(db, seen)
            ),
        )
        res = await effects_run(inp)
        assert isinstance(res, Success)
        assert sorted(seen) == [("execute", True)] * 2 + [("prepare", True)] * 2


# -- recovery --------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_interrupted_mid_stream_recovers_without_resume(
    journal: Journal, tmp_path: Path
) -> None:
    """A crash mid model stream: the committed messages only, so the next run asks again."""
    journal.begin("r", [USER])
    await scenario(journal, "r", tmp_path / "fx", stop_at=lambda e: e.type == "message_update")
    assert journal.recover("r") == ((USER,), None)
    assert journal.runs()[0].status == "running"
    await scenario(journal, "r", tmp_path / "fx")
    assert transcript_problems(journal.transcript("r")) == []
    assert journal.runs()[0].segments == 2


@pytest.mark.anyio
async def test_interrupted_during_backoff_drops_the_failed_attempt(
    journal: Journal, tmp_path: Path
) -> None:
    """A crash after a retryable error's message_end: no resume, the attempt is not recovered."""
    journal.begin("r", [USER])

    def failed_end(e: MuleEvent) -> bool:
        return type(e) is MessageEnd and getattr(e.value, "stop_reason", "") == "error"

    await scenario(journal, "r", tmp_path / "fx", stop_at=failed_end)
    messages, resume = journal.recover("r")
    assert resume is None
    assert [type(m) for m in messages] == [UserMessage, AssistantMessage, *[ToolResultMessage] * 3]
    await scenario(journal, "r", tmp_path / "fx")
    assert text_of(journal.transcript("r")[-1]) == FINAL_TEXT


@pytest.mark.anyio
async def test_unsafe_start_resumes_as_an_error_every_time(
    journal: Journal, tmp_path: Path
) -> None:
    """Started + unsafe stays unsafe across several interrupted resumes, and never runs."""
    journal.begin("r", [USER])
    fx = tmp_path / "fx"

    def started_w1(e: MuleEvent) -> bool:
        return type(e) is ToolExecutionStart and e.call.id == "w1"

    await scenario(journal, "r", fx, stop_at=started_w1)
    _, resume = journal.recover("r")
    assert resume is not None
    states = {cp.call.id: cp for cp in resume.tools}
    assert states["r1"] == ToolStarted(states["r1"].call, "safe")
    assert states["w1"] == ToolStarted(states["w1"].call, "unsafe")
    assert type(states["w2"]) is ToolPending
    await scenario(journal, "r", fx, stop_at=lambda e: e.type == "run_start")
    assert journal.recover("r")[1] == resume
    await scenario(journal, "r", fx)
    t = journal.transcript("r")
    w1 = next(m for m in t if type(m) is ToolResultMessage and m.tool_call_id == "w1")
    assert (text_of(w1), w1.is_error) == (INTERRUPTED_UNSAFE, True)
    assert "w1" not in effect_counts(fx)
    assert transcript_problems(t) == []


@pytest.mark.anyio
async def test_completed_checkpoints_carry_results_and_messages(
    journal: Journal, tmp_path: Path
) -> None:
    """After ends and some result messages: completed, with the message once it was committed."""
    journal.begin("r", [USER])

    def result_w1(e: MuleEvent) -> bool:
        v = getattr(e, "value", None)
        return e.type == "message_end" and type(v) is ToolResultMessage and v.tool_call_id == "w1"

    await scenario(journal, "r", tmp_path / "fx", stop_at=result_w1)
    messages, resume = journal.recover("r")
    assert messages == (USER,)
    assert resume is not None
    cps = {cp.call.id: cp for cp in resume.tools}
    assert [type(cps[c]) for c in ("r1", "w1", "w2")] == [ToolCompleted] * 3
    r1, w1, w2 = (cps[c] for c in ("r1", "w1", "w2"))
    assert isinstance(r1, ToolCompleted)
    assert isinstance(w1, ToolCompleted)
    assert isinstance(w2, ToolCompleted)
    assert r1.message is not None
    assert w1.message is not None
    assert w2.message is None
    assert text_of(w2.result).startswith("write:w2:")


@pytest.mark.anyio
async def test_recovering_a_completed_run_finishes_at_once(
    journal: Journal, tmp_path: Path
) -> None:
    """A completed run recovers as its last turn; running it again ends without a model call."""
    journal.begin("r", [USER])
    await scenario(journal, "r", tmp_path / "fx")
    before = journal.transcript("r")
    messages, resume = journal.recover("r")
    assert resume == MuleResume(before[-1])  # type: ignore[arg-type]
    assert messages == before[:-1]
    model = ScriptedModel([])
    inp = promise.MuleRunInput(
        model=MODEL, system_prompt=SYSTEM, messages=messages, resume=resume, stream=model
    )
    out = await promise.run(inp, journal.listener("r"))
    assert out.messages == ()
    assert model.calls == []
    assert journal.transcript("r") == before


def _event_count() -> int:
    """How many events the uninterrupted scenario emits (one run, measured once)."""
    import tempfile

    async def count() -> int:
        with (
            tempfile.TemporaryDirectory() as d,
            Journal(Path(d) / "j.db", synchronous="NORMAL") as j,
        ):
            j.begin("r", [USER])
            return len(await scenario(j, "r", Path(d) / "fx"))

    return anyio.run(count)


EVENTS = _event_count()


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(crashes=st.lists(st.integers(0, EVENTS), min_size=1, max_size=3))
def test_a_crash_after_any_event_recovers(
    backend: str, crashes: Sequence[int], tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Stop after any recorded event (buffered ones are lost), recover, repeat, finish: Pi-valid."""
    here = tmp_path_factory.mktemp("crash")
    fx = here / "fx"

    async def go() -> tuple[Message, ...]:
        with Journal(here / "j.db", synchronous="NORMAL") as j:
            j.begin("r", [USER])
            for k in crashes:
                await scenario(j, "r", fx, crash_after=k)
            await scenario(j, "r", fx)
            return j.transcript("r")

    t = anyio.run(go, backend=backend)
    assert transcript_problems(t) == []
    assert text_of(t[-1]) == FINAL_TEXT
    unsafe = {"w1", "w2", "l1"}
    assert all(n <= 1 for c, n in effect_counts(fx).items() if c in unsafe)


# -- runs, concurrency, configuration --------------------------------------------------------


@pytest.mark.anyio
async def test_runs_report_their_status(journal: Journal, tmp_path: Path) -> None:
    """completed, failed, cancelled, running (this process) and interrupted (a dead writer)."""
    for rid in ("ok", "bad", "stop", "live"):
        journal.begin(rid, [USER])
    await scenario(journal, "ok", tmp_path / "fx")
    bad = promise.MuleRunInput(
        model=MODEL,
        system_prompt=SYSTEM,
        messages=(USER,),
        stream=ScriptedModel([error_reply("no")]),
    )
    with pytest.raises(promise.MuleRunFailed):
        await promise.run(bad, journal.listener("bad"))
    controller = AbortController()

    async def stop_on_start(event: MuleEvent, signal: AbortSignal) -> None:
        pending = rec(event, signal)
        if pending is not None:
            await pending
        if event.type == "message_start":
            controller.abort("enough")

    rec = journal.listener("stop")
    slow = promise.MuleRunInput(
        model=MODEL, system_prompt=SYSTEM, messages=(USER,), stream=ScriptedModel([reply("x")])
    )
    with pytest.raises(promise.AbortError):
        await promise.run(slow, stop_on_start, controller.signal)
    journal.listener("live")
    code = f"""
        import os
        from mule.journal import Journal
        j = Journal({str(journal.path)!r})
        j.begin("dead", [])
        j.listener("dead")
        os._exit(0)
    """
    await anyio.run_process([sys.executable, "-c", textwrap.dedent(code)])
    status = {r.run_id: r.status for r in journal.runs()}
    assert status == {
        "ok": "completed",
        "bad": "failed",
        "stop": "cancelled",
        "live": "running",
        "dead": "interrupted",
    }


@pytest.mark.anyio
async def test_concurrent_tasks_share_one_journal(journal: Journal, tmp_path: Path) -> None:
    """Several runs in one event loop record into one journal without mixing."""
    ids = [f"t{i}" for i in range(6)]
    for rid in ids:
        journal.begin(rid, [USER])
    async with anyio.create_task_group() as tg:
        for rid in ids:
            tg.start_soon(scenario, journal, rid, tmp_path / f"fx-{rid}")
    for rid in ids:
        t = journal.transcript(rid)
        assert transcript_problems(t) == []
        assert text_of(t[-1]) == FINAL_TEXT
    assert {r.status for r in journal.runs()} == {"completed"}


@pytest.mark.anyio
async def test_a_waiting_commit_blocks_only_its_own_runs(journal: Journal) -> None:
    """A commit waits off the loop: only the runs whose commit waits are held up.

    While another connection holds the write lock, runs on the journal wait at their run_start
    (nothing after it reaches them), and another run on the same loop streams to its end.
    (Committing on the loop thread would stall everything.)
    """
    waiting: set[str] = set()
    durable: dict[str, list[str]] = {"a": [], "b": []}
    both_waiting = anyio.Event()

    def recording(rid: str) -> Callable[[MuleEvent, AbortSignal], Awaitable[None]]:
        inner = journal.listener(rid)

        async def listen(event: MuleEvent, signal: AbortSignal) -> None:
            pending = inner(event, signal)
            if pending is not None:
                waiting.add(rid)
                if len(waiting) == 2:
                    both_waiting.set()
                await pending
            durable[rid].append(event.type)

        return listen

    def text_run(text: str) -> promise.MuleRunInput:
        return promise.MuleRunInput(
            model=MODEL,
            system_prompt=SYSTEM,
            messages=(USER,),
            stream=ScriptedModel([reply(Text.of(text, 8))]),
        )

    listeners = {}
    for rid in durable:
        journal.begin(rid, [USER])
        listeners[rid] = recording(rid)
    blocker = sqlite3.connect(journal.path, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")
    other: list[str] = []
    try:
        async with anyio.create_task_group() as tg:
            for rid, listen in listeners.items():
                tg.start_soon(promise.run, text_run(f"run {rid} streams"), listen)
            await both_waiting.wait()
            out = await promise.run(
                text_run("the other run streams"), lambda e, s: other.append(e.type)
            )
            assert other[-1] == "run_end"
            assert other.count("message_update") >= 8
            assert durable == {"a": [], "b": []}  # both still wait for their first commit
            blocker.execute("COMMIT")
    finally:
        blocker.close()
    assert text_of(out.messages[-1]) == "the other run streams"
    for rid, seen in durable.items():
        assert seen[-1] == "run_end"
        assert text_of(journal.transcript(rid)[-1]) == f"run {rid} streams"
    assert {r.status for r in journal.runs()} == {"completed"}


_WORKER = """
import sys
from pathlib import Path
import anyio
from mule.journal import Journal
from mule.testing.crash import run_scenario
from mule.pi._messages import UserMessage

async def main(path, prefix, n):
    with Journal(path) as j:
        for i in range(n):
            rid = f"{prefix}-{i}"
            j.begin(rid, [UserMessage("Do the chores.", 1)])
        async with anyio.create_task_group() as tg:
            for i in range(n):
                tg.start_soon(run_scenario, j, f"{prefix}-{i}", Path(path + f".{prefix}-{i}"))

anyio.run(main, sys.argv[1], sys.argv[2], int(sys.argv[3]), backend=sys.argv[4])
"""


@pytest.mark.slow
def test_concurrent_processes_share_one_file(tmp_path: Path) -> None:
    """Processes writing one database at once (busy timeout, short transactions): nothing lost."""
    db = str(tmp_path / "j.db")
    Journal(db).close()
    procs = [
        subprocess.Popen([sys.executable, "-c", _WORKER, db, f"p{k}", "4", backend])
        for k, backend in enumerate(["asyncio", "trio", "asyncio"])
    ]
    assert [p.wait(120) for p in procs] == [0, 0, 0]
    with Journal(db) as j:
        runs = j.runs()
        assert len(runs) == 12
        assert {r.status for r in runs} == {"completed"}
        for r in runs:
            assert text_of(j.transcript(r.run_id)[-1]) == FINAL_TEXT


def test_begin_twice_and_unknown_runs_are_errors(journal: Journal) -> None:
    """A run id is begun once; listening to or recovering an unknown run fails clearly."""
    journal.begin("r", [USER])
    with pytest.raises(JournalError, match="already exists"):
        journal.begin("r", [USER])
    with pytest.raises(JournalError, match="unknown run"):
        journal.listener("nope")
    with pytest.raises(JournalError, match="unknown run"):
        journal.recover("nope")


@pytest.mark.parametrize(("mode", "level"), [("FULL", 2), ("NORMAL", 1)])
def test_pragmas(tmp_path: Path, mode: str, level: int) -> None:
    """WAL mode and the chosen synchronous level are in force."""
    with Journal(tmp_path / "j.db", synchronous=mode) as j:  # type: ignore[arg-type]
        assert j._db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert j._db.execute("PRAGMA synchronous").fetchone()[0] == level
    with pytest.raises(ValueError, match="synchronous"):
        Journal(tmp_path / "k.db", synchronous="OFF")  # type: ignore[arg-type]


def test_base_messages_round_trip(journal: Journal) -> None:
    """The starting messages come back equal, whatever their kind."""
    base: list[Message] = [USER, UserMessage((TextContent("two"),), 2)]
    journal.begin("r", base)
    assert journal.recover("r") == (tuple(base), None)
    assert os.path.exists(journal.path)


def test_run_metadata_is_kept_and_old_journals_gain_it(tmp_path: Path) -> None:
    """set_meta/meta keep host metadata per run; a journal from before gets the column."""
    old = tmp_path / "old.db"
    db = sqlite3.connect(old)
    db.execute(
        "CREATE TABLE runs(run_id TEXT PRIMARY KEY, base TEXT NOT NULL, status TEXT NOT NULL,"
        " segments INTEGER NOT NULL DEFAULT 0, pid INTEGER NOT NULL, host TEXT NOT NULL,"
        " created_ms INTEGER NOT NULL, updated_ms INTEGER NOT NULL)"
    )
    db.execute("INSERT INTO runs VALUES ('r0', '[]', 'failed', 1, 1, 'h', 1, 1)")
    db.commit()
    db.close()
    with Journal(old) as j:
        assert j.meta("r0") == {}
        j.begin("r1", [UserMessage("hi", 1)])
        j.set_meta("r1", "otel.traceparent", "00-abc-def-01")
        j.set_meta("r1", "other", "x")
        assert j.meta("r1") == {"otel.traceparent": "00-abc-def-01", "other": "x"}
        with pytest.raises(JournalError):
            j.set_meta("nope", "k", "v")
        with pytest.raises(JournalError):
            j.meta("nope")
