"""The SQLite transcript owner: records every run event, commits at checkpoints, recovers runs."""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import threading
import time
import weakref
from collections.abc import Awaitable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, TypeAlias, final

from attrs import frozen

from mule.effects import (
    MuleEvent,
    MuleResume,
    event_from_record,
    event_to_record,
    from_json,
    to_json,
)
from mule.journal._claim import alive, held, new_claim, release
from mule.journal._fold import Fold, fold
from mule.journal._record import COMMIT_POINTS, STREAM_ONLY
from mule.journal._schema import prepare
from mule.journal._writer import CommitWriter
from mule.pi import AbortSignal, Message, loads

_Row: TypeAlias = tuple[str, int, int, str, str]  # (run_id, segment, seq, type, body)
_INSERT = "INSERT INTO events VALUES (?, ?, ?, ?, ?)"
_STATUS = "UPDATE runs SET status = ?, updated_ms = ?, claim = NULL WHERE run_id = ?"

Synchronous: TypeAlias = Literal["FULL", "NORMAL"]
JournalRunStatus: TypeAlias = Literal["running", "completed", "failed", "cancelled", "interrupted"]
_STATUSES = frozenset(("running", "completed", "failed", "cancelled", "interrupted"))


class JournalError(Exception):
    """The journal cannot do what was asked, with a message that says why.

    An unknown run, a run that already exists, a run another writer holds, a file that is not a
    journal (foreign, newer, corrupted or truncated) or a damaged record: every failure to open
    or read a journal is this error, never a raw `sqlite3` or decoding error.
    """


@final
@frozen
class RunInfo:
    """One recorded run: its status (`interrupted` = running, but its writer process is gone).

    Attributes:
        run_id: The run's id in the journal (the key `resume` and `events` take).
        status: `"running"`, `"completed"`, `"failed"`, `"cancelled"`, or `"interrupted"`
            (recorded as running, but its writer process on this host is gone).
        segments: How many times the run was started or resumed (one segment each).
        pid: The process id of the run's last writer.
        created_ms: When the run was first recorded (Unix time, ms).
        updated_ms: When its record last changed (Unix time, ms).

    """

    run_id: str
    status: JournalRunStatus
    segments: int
    pid: int
    created_ms: int
    updated_ms: int


def _now_ms() -> int:
    return int(time.time() * 1000)


def _meta(text: str) -> dict[str, str]:
    """Decode a run's metadata; a damaged value reads as none rather than failing the run."""
    try:
        value = loads(text)
    except (ValueError, TypeError):
        return {}
    if not isinstance(value, dict):
        return {}
    return {str(k): str(v) for k, v in value.items()}


@final
class _Segment:
    """One run's listener: buffers events and commits them at each durability point."""

    __slots__ = (
        "__weakref__",
        "buffer",
        "claim",
        "failed",
        "flush_every",
        "run_id",
        "segment",
        "seq",
        "writer",
    )

    def __init__(self, journal: Journal, run_id: str, segment: int, claim: str) -> None:
        self.writer = journal._writer
        self.claim = claim
        self.run_id = run_id
        self.segment = segment
        self.seq = 0
        self.buffer: list[_Row] = []
        self.flush_every = journal.flush_every
        self.failed: list[BaseException] = []  # a write of buffered events that failed

    def __call__(
        self, event: MuleEvent, signal: AbortSignal | None = None
    ) -> Awaitable[None] | None:
        """Record `event`; at a checkpoint, return an awaitable that ends once it is durable.

        The commit runs in the journal's writer thread, so the event loop (and every other
        run on it) keeps going while this run waits; a wrapper must await what this returns.
        """
        kind = event.type
        buffer = self.buffer
        buffer.append((self.run_id, self.segment, self.seq, kind, event_to_record(event)))
        self.seq += 1
        if kind in COMMIT_POINTS:
            if self.failed:
                raise JournalError(f"journal write failed: {self.failed[0]}") from self.failed[0]
            self.buffer = []
            if kind != "run_end":
                return self.writer.submit(buffer, None)
            release(self.claim)  # the writer clears it in the file with the run's status
            return self.writer.submit(buffer, (event.outcome, self.run_id))  # type: ignore[union-attr]
        if len(buffer) >= self.flush_every:  # written in the background: nobody waits
            self.buffer = []
            self.writer.submit(buffer, errors=self.failed)
        return None


class _Tx:
    """`with journal._write() as db`: BEGIN IMMEDIATE ... COMMIT, or ROLLBACK on error.

    Holds the journal's lock for the transaction (a commit may be in a worker thread).
    """

    def __init__(self, db: sqlite3.Connection, lock: threading.Lock) -> None:
        self.db = db
        self.lock = lock

    def __enter__(self) -> sqlite3.Connection:
        self.lock.acquire()
        try:
            self.db.execute("BEGIN IMMEDIATE")
        except BaseException:
            self.lock.release()
            raise
        return self.db

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        try:
            if kind is None:
                try:
                    self.db.execute("COMMIT")
                except BaseException:
                    if self.db.in_transaction:  # a failed COMMIT leaves it open
                        self.db.execute("ROLLBACK")
                    raise
            elif self.db.in_transaction:  # SQLite may have rolled back already (a full disk)
                self.db.execute("ROLLBACK")
        finally:
            self.lock.release()


@final
class Journal:
    """A transcript owner on one SQLite file, shared safely by tasks and processes.

    WAL mode; `synchronous="FULL"` (the default) makes every checkpoint survive power loss,
    `"NORMAL"` only a killed process (see docs/durability.md). Each run is identified by the
    host's `run_id`; `begin` records its starting messages, each `listener(run_id)` records one
    segment (the first run, then each resumed one), and `recover` rebuilds the input that
    continues it.

    >>> import tempfile, os
    >>> from mule.pi._messages import UserMessage
    >>> with Journal(os.path.join(tempfile.mkdtemp(), "j.db")) as j:
    ...     j.begin("r1", [UserMessage("hi", 1)])
    ...     j.recover("r1")
    ((UserMessage(content='hi', timestamp=1),), None)

    Attributes:
        path: The SQLite file.
        flush_every: Non-checkpoint events (deltas) a segment buffers before writing them;
            a checkpoint event writes the buffer with it at once.

    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        synchronous: Synchronous = "FULL",
        busy_timeout_ms: int = 30_000,
        flush_every: int = 256,
    ) -> None:
        if synchronous not in ("FULL", "NORMAL"):
            raise ValueError(f"synchronous must be FULL or NORMAL, got {synchronous!r}")
        self.path = Path(path)
        self.flush_every = flush_every
        # Per run: (segments, claim) as the last `recover` saw them (see `listener`).
        self._recovered: dict[str, tuple[int, str | None]] = {}
        # Autocommit mode: transactions are explicit and short (BEGIN IMMEDIATE ... COMMIT).
        # Checkpoints commit in the writer thread; `_lock` keeps one thread on the connection.
        self._lock = threading.Lock()
        try:
            self._db = sqlite3.connect(
                self.path,
                isolation_level=None,
                timeout=busy_timeout_ms / 1000,
                check_same_thread=False,
            )
        except (sqlite3.Error, ValueError, OSError) as exc:  # ValueError: a NUL in the path
            raise JournalError(f"cannot open journal {self.path}: {exc}") from exc
        try:
            self._db.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
            self._db.execute("PRAGMA journal_mode = WAL")
            self._db.execute(f"PRAGMA synchronous = {synchronous}")
            with self._write() as db:
                problem = prepare(db, self.path)
        except (sqlite3.Error, ValueError) as exc:  # not a database, damaged, truncated
            self._db.close()  # (ValueError: a damaged name that is not UTF-8)
            raise JournalError(f"cannot open journal {self.path}: {exc}") from exc
        if problem is not None:
            self._db.close()
            raise JournalError(problem)
        self._writer = CommitWriter(
            self._write_rows, JournalError, busy_timeout_ms / 1000 + 60, f"mule-journal {self.path}"
        )

    def _write(self) -> _Tx:
        return _Tx(self._db, self._lock)

    def _write_rows(self, rows: list[_Row], statuses: list[tuple[str, str]]) -> None:
        """Write events and run statuses in one transaction (the writer thread's commit)."""
        with self._write() as db:
            db.executemany(_INSERT, rows)
            if statuses:
                now = _now_ms()
                db.executemany(_STATUS, [(status, now, rid) for status, rid in statuses])

    def close(self) -> None:
        """Write what was handed to the writer thread, stop it, and close the connection."""
        self._writer.close()
        with self._lock:
            self._db.close()

    def __enter__(self) -> Journal:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- writing ----------------------------------------------------------------------------

    def begin(self, run_id: str, messages: Sequence[Message]) -> None:
        """Record a new run and the messages it starts from (`input.messages`)."""
        base = to_json(tuple(messages))
        now = _now_ms()
        try:
            with self._reading(run_id, "write"), self._write() as db:
                db.execute(
                    "INSERT INTO runs (run_id, base, status, segments, pid, host, created_ms,"
                    " updated_ms) VALUES (?, ?, 'running', 0, ?, ?, ?, ?)",
                    (run_id, base, os.getpid(), socket.gethostname(), now, now),
                )
        except sqlite3.IntegrityError as exc:
            raise JournalError(f"run {run_id!r} already exists") from exc

    def listener(self, run_id: str) -> _Segment:
        """Return a listener recording one run of `run_id` (promise form).

        At checkpoint events (run_start, tool_execution_start/end, message_end, turn_end,
        run_end) it returns an awaitable that ends once the event is committed; since the core
        awaits the listener before acting on an event, a tool's start is durable before the
        tool is looked up or run. The commit runs in a worker thread, grouped with the other
        runs' commits, so the event loop is not blocked. Other events are buffered (it returns
        None) and written with the next checkpoint, or once `flush_every` are waiting.

        The listener holds the run exclusively until it records `run_end` (or is collected, or
        its process ends): a second listener for the run meanwhile raises `JournalError`, and
        so does one after a `recover` whose state has since moved on (another writer resumed
        the run in between). So two concurrent resumes never both run: the second fails
        before it starts, and an unsafe tool runs at most once.
        """
        with self._reading(run_id, "write"), self._write() as db:
            row = db.execute(
                "SELECT segments, claim, pid, host FROM runs WHERE run_id = ?", (run_id,)
            ).fetchone()
            if row is None:
                raise JournalError(f"unknown run {run_id!r}: call begin() first")
            segments, claim, pid, host = int(row[0]), row[1], int(row[2]), str(row[3])
            if held(claim, pid, host):
                raise JournalError(
                    f"run {run_id!r} is held by another writer (pid {pid} on {host}):"
                    " a run is resumed by one writer at a time"
                )
            # Kept until the next recover: a second task that recovered the same state on this
            # `Journal` must be refused after the first has taken and even finished the run.
            seen = self._recovered.get(run_id)
            if seen is not None and seen != (segments, claim):
                raise JournalError(
                    f"run {run_id!r} moved on since it was recovered (another writer resumed"
                    " it): recover it again"
                )
            token = new_claim()
            db.execute(
                "UPDATE runs SET segments = ?, status = 'running', pid = ?, host = ?,"
                " updated_ms = ?, claim = ? WHERE run_id = ?",
                (segments + 1, os.getpid(), socket.gethostname(), _now_ms(), token, run_id),
            )
        segment = _Segment(self, run_id, segments + 1, token)
        weakref.finalize(segment, release, token)
        return segment

    def set_meta(self, run_id: str, key: str, value: str) -> None:
        """Keep `key = value` with the run (the host's own metadata: a trace context, say)."""
        with self._reading(run_id, "write"), self._write() as db:
            row = db.execute("SELECT meta FROM runs WHERE run_id = ?", (run_id,)).fetchone()
            if row is None:
                raise JournalError(f"unknown run {run_id!r}")
            meta = {**_meta(row[0]), key: value}
            db.execute(
                "UPDATE runs SET meta = ? WHERE run_id = ?",
                (json.dumps(meta, ensure_ascii=False), run_id),
            )

    # -- reading ----------------------------------------------------------------------------

    @contextmanager
    def _reading(self, run_id: str | None = None, verb: str = "read") -> Iterator[None]:
        """Turn any failure to read (or write) the file or a record into a `JournalError`.

        A read-only file system, a full disk, a file locked past the busy timeout: every
        `sqlite3` error becomes one, saying what could not be done.
        """
        try:
            yield
        except JournalError:
            raise
        except sqlite3.IntegrityError:
            raise  # `begin`'s duplicate run, which it reports itself
        except sqlite3.Error as exc:
            raise JournalError(f"cannot {verb} journal {self.path}: {exc}") from exc
        except Exception as exc:  # a damaged record: not JSON, not a record of this mule
            what = "journal" if run_id is None else f"run {run_id!r} in journal"
            raise JournalError(f"{what} {self.path} is damaged: {exc}") from exc

    def _rows(self, sql: str, params: Sequence[object] = ()) -> list[Any]:
        """Run a query under the lock (a commit may be in a worker thread): all its rows."""
        with self._lock:
            return self._db.execute(sql, params).fetchall()

    def _row(self, sql: str, params: Sequence[object] = ()) -> Any:
        """Return the first row of a query, or None."""
        with self._lock:
            return self._db.execute(sql, params).fetchone()

    def meta(self, run_id: str) -> dict[str, str]:
        """Return the run's metadata (see `set_meta`)."""
        with self._reading(run_id):
            row = self._row("SELECT meta FROM runs WHERE run_id = ?", (run_id,))
        if row is None:
            raise JournalError(f"unknown run {run_id!r}")
        return _meta(row[0])

    def _base(self, run_id: str) -> tuple[Message, ...]:
        row = self._row("SELECT base FROM runs WHERE run_id = ?", (run_id,))
        if row is None:
            raise JournalError(f"unknown run {run_id!r}")
        messages: tuple[Message, ...] = from_json(tuple[Message, ...], row[0])
        return messages

    def _fold(self, run_id: str) -> Fold:
        base = self._base(run_id)
        rows = self._rows(
            "SELECT body FROM events WHERE run_id = ? AND type NOT IN (?, ?) ORDER BY segment, seq",
            (run_id, *STREAM_ONLY),
        )
        return fold(base, (event_from_record(body) for (body,) in rows))

    def recover(self, run_id: str) -> tuple[tuple[Message, ...], MuleResume | None]:
        """Return `(messages, resume)` that continue the run from its last committed state.

        Interrupted mid model stream or during a retry backoff: no resume, the committed
        messages only (the next run asks the model again). Interrupted in a turn: its
        assistant message, with one checkpoint per tool call.
        """
        with self._reading(run_id):
            row = self._row("SELECT segments, claim FROM runs WHERE run_id = ?", (run_id,))
            found = self._fold(run_id).recover()
            if row is not None:
                self._recovered[run_id] = (int(row[0]), row[1])
            return found

    def transcript(self, run_id: str) -> tuple[Message, ...]:
        """Return the committed transcript: starting messages, then every committed message."""
        with self._reading(run_id):
            return tuple(self._fold(run_id).transcript)

    def events(self, run_id: str) -> Iterator[tuple[int, int, dict[str, Any]]]:
        """Yield `(segment, seq, json)` for every recorded event (message_update compact)."""
        with self._reading(run_id):
            rows = self._rows(
                "SELECT segment, seq, body FROM events WHERE run_id = ? ORDER BY segment, seq",
                (run_id,),
            )
            decoded = [(int(segment), int(seq), loads(body)) for segment, seq, body in rows]
        yield from decoded

    def runs(self) -> tuple[RunInfo, ...]:
        """Return every recorded run, oldest first, with its status."""
        host = socket.gethostname()
        out: list[RunInfo] = []
        with self._reading():
            for run_id, status, segments, pid, where, created, updated in self._rows(
                "SELECT run_id, status, segments, pid, host, created_ms, updated_ms FROM runs"
                " ORDER BY created_ms, run_id"
            ):
                if status not in _STATUSES or not isinstance(run_id, str):
                    raise ValueError(f"run {run_id!r} has an unknown status {status!r}")
                state: JournalRunStatus = status
                if status == "running" and where == host and pid != os.getpid() and not alive(pid):
                    state = "interrupted"
                out.append(
                    RunInfo(run_id, state, int(segments), int(pid), int(created), int(updated))
                )
        return tuple(out)


__all__ = ["Journal", "JournalError", "JournalRunStatus", "RunInfo", "Synchronous"]
