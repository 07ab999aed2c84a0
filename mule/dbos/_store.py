"""The PostgreSQL run store: every run event, the runs table, unsafe-tool claims, followers.

It is a `TranscriptOwner` (the crash-matrix kit drives it like the SQLite journal) and the
event log of DBOS-run workflows. Events are appended in commit order (`seq`); checkpoint
events carry a key made of their run-local identities, unique within a segment, so a DBOS
workflow that replays after a crash re-emits them without writing them twice.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from typing import Any, final

import anyio
import psycopg
from attrs import frozen
from psycopg import sql

from mule.effects import (
    MuleEvent,
    MuleResume,
    event_from_record,
    event_to_record,
    from_json,
    to_json,
)
from mule.journal import COMMIT_POINTS, STREAM_ONLY, CommitWriter, Fold, fold
from mule.pi import AbortSignal, Message, now_ms

NOTIFY_CHANNEL = "mule_events"

_SCHEMA = """
CREATE SCHEMA IF NOT EXISTS {s};
CREATE TABLE IF NOT EXISTS {s}.runs(
    run_id TEXT PRIMARY KEY,
    base TEXT NOT NULL,
    status TEXT NOT NULL,
    segments INTEGER NOT NULL DEFAULT 0,
    created_ms BIGINT NOT NULL,
    updated_ms BIGINT NOT NULL
);
CREATE TABLE IF NOT EXISTS {s}.events(
    seq BIGSERIAL PRIMARY KEY,
    run_id TEXT NOT NULL,
    segment INTEGER NOT NULL,
    key TEXT,
    type TEXT NOT NULL,
    body TEXT NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS events_key ON {s}.events(run_id, segment, key)
    WHERE key IS NOT NULL;
CREATE INDEX IF NOT EXISTS events_run ON {s}.events(run_id, seq);
CREATE TABLE IF NOT EXISTS {s}.claims(
    run_id TEXT NOT NULL,
    step TEXT NOT NULL,
    executor TEXT NOT NULL,
    claimed_ms BIGINT NOT NULL,
    PRIMARY KEY(run_id, step)
);
CREATE TABLE IF NOT EXISTS {s}.steps(
    run_id TEXT NOT NULL,
    step INTEGER NOT NULL,
    name TEXT NOT NULL,
    output TEXT NOT NULL,
    PRIMARY KEY(run_id, step)
);
CREATE TABLE IF NOT EXISTS {s}.workers(
    executor_id TEXT PRIMARY KEY,
    seen_ms BIGINT NOT NULL
);
CREATE TABLE IF NOT EXISTS {s}.meta(
    run_id TEXT NOT NULL,
    key TEXT NOT NULL,
    value TEXT NOT NULL,
    PRIMARY KEY(run_id, key)
)
"""


# The writer's one statement: events (in the batch's order: `seq` is commit order), step records
# and claims (the first one wins; the winners are returned), run statuses, notifications. The
# rows go as JSON arrays: one C-encoded text each (psycopg dumps a text[] element by element
# with a regex, which took a third of a busy worker's GIL).
_WRITE = """
WITH ev AS (
    INSERT INTO {s}.events(run_id, segment, key, type, body)
    SELECT e->>0, (e->>1)::int, e->>2, e->>3, e->>4
    FROM json_array_elements(%s::json) WITH ORDINALITY AS x(e, i)
    ORDER BY i
    ON CONFLICT (run_id, segment, key) WHERE key IS NOT NULL DO NOTHING
), st AS (
    INSERT INTO {s}.steps(run_id, step, name, output)
    SELECT e->>0, (e->>1)::int, e->>2, e->>3
    FROM json_array_elements(%s::json) WITH ORDINALITY AS x(e, i)
    ORDER BY i
    ON CONFLICT DO NOTHING
    RETURNING run_id, step, output
), cl AS (
    INSERT INTO {s}.claims(run_id, step, executor, claimed_ms)
    SELECT e->>0, e->>1, e->>2, %s
    FROM json_array_elements(%s::json) WITH ORDINALITY AS x(e, i)
    ORDER BY i
    ON CONFLICT DO NOTHING
    RETURNING run_id, step, executor
), up AS (
    UPDATE {s}.runs AS r SET status = u.e->>0, updated_ms = %s
    FROM json_array_elements(%s::json) AS u(e)
    WHERE r.run_id = u.e->>1
), nt AS (
    SELECT pg_notify(%s, x) FROM json_array_elements_text(%s::json) AS x
)
SELECT 's', run_id, step::text, output FROM st
UNION ALL SELECT 'c', run_id, step, executor FROM cl
UNION ALL SELECT 'n', '', '', count(*)::text FROM nt
"""


class StoreError(Exception):
    """The store cannot do what was asked (an unknown run, a run that already exists)."""


@final
class StepRecord:
    """A workflow step's output, handed to the writer thread; `kept` is what the store holds.

    The first output recorded for `(run_id, step)` wins: an execution that finds one already
    there (a second execution of the same workflow) gets that one in `kept`. A claim is a row
    with `name` None: `kept` is then True if this claim was the first.
    """

    __slots__ = ("kept", "name", "output", "run_id", "step")

    def __init__(self, run_id: str, step: int, name: str | None, output: str) -> None:
        self.run_id = run_id
        self.step = step
        self.name = name
        self.output = output
        self.kept: Any = None


@final
@frozen
class StoredEvent:
    """One recorded event: its position in the log, segment and JSON (message_update compact).

    Attributes:
        seq: Its position in the run's log (commit order, from 1).
        segment: The execution of the run that wrote it (1, then one more per recovery).
        body: The event's wire form (`mule.effects.event_to_wire`; a `message_update` in
            its compact form, without `partial`).

    """

    seq: int
    segment: int
    body: dict[str, Any]


def event_key(event: MuleEvent) -> str | None:
    """Return the identity key of a checkpoint-like event (None for streamed updates).

    Identities are deterministic within a run, so a replayed workflow emits the same keys.
    """
    kind = event.type
    if kind in STREAM_ONLY:
        return None
    if kind == "model_prompt":
        return f"model_prompt:{event.turn.value}:{event.attempt}"  # type: ignore[union-attr]
    if kind in ("run_start", "run_end"):
        return kind
    if kind in ("turn_start", "turn_end"):
        return f"{kind}:{event.turn.value}"  # type: ignore[union-attr]
    if kind in ("message_start", "message_end"):
        return f"{kind}:{event.message.value}"  # type: ignore[union-attr]
    return f"{kind}:{event.tool_call.value}"  # type: ignore[union-attr]


def connect(url: str) -> psycopg.Connection[Any]:
    """Open a connection in autocommit mode (transactions are explicit and short)."""
    return psycopg.connect(url, autocommit=True)


@final
class _Recorder:
    """One run segment's listener: buffers events, commits at checkpoints and on a timer."""

    __slots__ = (
        "buffer",
        "commit_at",
        "failed",
        "first_ms",
        "flush_ms",
        "run_id",
        "segment",
        "skip",
        "writer",
    )

    def __init__(
        self,
        store: PgStore,
        run_id: str,
        segment: int,
        skip: Callable[[MuleEvent], bool] | None,
        commit_at: frozenset[str],
    ) -> None:
        self.writer = store._writer
        self.failed: list[BaseException] = []  # a background write of this run that failed
        self.commit_at = commit_at
        self.run_id = run_id
        self.segment = segment
        self.skip = skip
        self.flush_ms = store.flush_ms
        self.buffer: list[tuple[str, int, str | None, str, str]] = []
        self.first_ms = 0

    def __call__(
        self, event: MuleEvent, signal: AbortSignal | None = None
    ) -> Awaitable[None] | None:
        """Record `event`; at a checkpoint, return an awaitable that ends once it is committed.

        Commits run in the store's writer thread (grouped across runs), never on the loop.
        """
        if self.skip is not None and self.skip(event):
            return None
        kind = event.type
        if not self.buffer:
            self.first_ms = now_ms()
        record = event_to_record(event)
        self.buffer.append((self.run_id, self.segment, event_key(event), kind, record))
        if kind in self.commit_at:
            if self.failed:
                raise StoreError(f"run store write failed: {self.failed[0]}") from self.failed[0]
            status = event.outcome if kind == "run_end" else None  # type: ignore[union-attr]
            rows, self.buffer = self.buffer, []
            return self.writer.submit(rows, None if status is None else (status, self.run_id))
        if len(self.buffer) >= 256 or now_ms() - self.first_ms >= self.flush_ms:
            self.flush()  # followers see a live stream within flush_ms
        return None

    def flush(self) -> None:
        """Hand the buffered events to the writer thread (written soon; nobody waits)."""
        rows, self.buffer = self.buffer, []
        if rows:
            self.writer.submit(rows, errors=self.failed)


@final
class PgStore:
    """A transcript owner and run log on PostgreSQL, shared by any number of processes.

    `begin` records a run and its starting messages; `listener(run_id)` records one segment
    (the first run, then each resumed one, as the SQLite journal); `recover` rebuilds the input
    that continues it. A DBOS workflow records all its executions into one segment
    (`listener(run_id, segment=1)`): replayed checkpoint events are deduplicated by identity.

    Attributes:
        url: The PostgreSQL URL.
        schema: The schema its tables live in.
        flush_ms: Milliseconds a segment buffers non-checkpoint events (deltas) at most, so a
            follower sees a live stream within that delay.
        db: The store's one connection, shared by a worker's tasks and threads.
        lock: Serialises the use of `db`.

    """

    def __init__(self, url: str, *, schema: str = "mule", flush_ms: int = 50) -> None:
        import threading

        self.url = url
        self.schema = schema
        self.flush_ms = flush_ms
        self.lock = threading.RLock()  # one connection, shared by a worker's tasks and threads
        self.db = connect(url)
        s = sql.Identifier(schema)
        self._q_write = sql.SQL(_WRITE).format(s=s)
        self._q_output = sql.SQL(
            "SELECT output FROM {}.steps WHERE run_id = %s AND step = %s"
        ).format(s)
        self._s = s
        self._writer = CommitWriter(self._write_rows, StoreError, 60.0, "mule-pgstore")
        with self.lock, self.db.transaction():
            # Concurrent first-time creation races on the catalog: serialise it.
            self.db.execute("SELECT pg_advisory_xact_lock(7316001)")
            for statement in _SCHEMA.split(";"):
                if statement.strip():
                    self.db.execute(sql.SQL(statement.replace("{s}", "{}")).format(s))

    def _write_rows(
        self,
        rows: list[tuple[str, int, str | None, str, str] | StepRecord],
        statuses: list[tuple[str, str]],
    ) -> None:
        """Write events, step records and run statuses; wake the runs' followers.

        One statement on an autocommit connection: one transaction and one round trip, however
        many runs the batch holds. (A round trip per row, status and notification cost far
        more than the commit: each wait for PostgreSQL hands the GIL to the busy event loop,
        and getting it back waits out the loop's switch interval.)
        """
        ev: list[tuple[Any, ...]] = []
        steps: list[StepRecord] = []
        claims: list[StepRecord] = []
        for row in rows:
            if type(row) is tuple:
                ev.append(row)
            elif type(row) is StepRecord:
                (steps if row.name is not None else claims).append(row)
        now = now_ms()
        dumps = json.dumps
        params = (
            dumps(ev),
            dumps([(r.run_id, r.step, r.name, r.output) for r in steps]),
            now,
            dumps([(r.run_id, f"step:{r.step}", r.output) for r in claims]),
            now,
            dumps(statuses),
            NOTIFY_CHANNEL,
            dumps(list(dict.fromkeys(r[0] for r in ev))),
        )
        with self.lock:
            got = self.db.execute(self._q_write, params).fetchall()
            won = {(kind, run_id, step): value for kind, run_id, step, value in got}
            for r in claims:
                r.kept = won.get(("c", r.run_id, f"step:{r.step}")) == r.output
            for r in steps:
                r.kept = won.get(("s", r.run_id, str(r.step)))
                if r.kept is None:  # another execution recorded this step first: it stands
                    first = self.db.execute(self._q_output, (r.run_id, r.step)).fetchone()
                    r.kept = None if first is None else str(first[0])
                elif r.kept == r.output:
                    r.kept = r.output  # the very object: the caller tells "mine" by identity

    def close(self) -> None:
        """Write what was handed to the writer thread, then close the connection."""
        self._writer.close()
        self.db.close()

    def __enter__(self) -> PgStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _x(self, query: str, params: Sequence[Any] = ()) -> psycopg.Cursor[Any]:
        with self.lock:
            return self.db.execute(sql.SQL(query).format(self._s), params)

    # -- writing ----------------------------------------------------------------------------

    def begin(self, run_id: str, messages: Sequence[Message], *, exist_ok: bool = False) -> None:
        """Record a new run and the messages it starts from (`exist_ok`: keep an existing one)."""
        base = to_json(tuple(messages))
        now = now_ms()
        inserted = self._x(
            "INSERT INTO {}.runs VALUES (%s, %s, 'running', 0, %s, %s)"
            " ON CONFLICT (run_id) DO NOTHING RETURNING run_id",
            (run_id, base, now, now),
        ).fetchone()
        if inserted is None and not exist_ok:
            raise StoreError(f"run {run_id!r} already exists")

    def listener(
        self,
        run_id: str,
        *,
        segment: int | None = None,
        skip: Callable[[MuleEvent], bool] | None = None,
        commit_at: frozenset[str] = COMMIT_POINTS,
    ) -> _Recorder:
        """Return a listener recording `run_id` (promise form); a new segment unless given.

        At checkpoint events it returns an awaitable that ends once they are committed (in the
        store's writer thread); others are buffered and handed to the writer with the next
        checkpoint or within `flush_ms`. `skip` drops events (a DBOS
        replay's re-streamed updates). A DBOS workflow passes `commit_at={"run_end"}`: its steps
        are durable in DBOS, and a replay re-emits any checkpoint event a crash lost.
        """
        if segment is None:
            row = self._x(
                "UPDATE {}.runs SET segments = segments + 1, status = 'running', updated_ms = %s"
                " WHERE run_id = %s RETURNING segments",
                (now_ms(), run_id),
            ).fetchone()
        else:
            row = self._x(
                "UPDATE {}.runs SET segments = GREATEST(segments, %s), updated_ms = %s"
                " WHERE run_id = %s RETURNING %s",
                (segment, now_ms(), run_id, segment),
            ).fetchone()
        if row is None:
            raise StoreError(f"unknown run {run_id!r}: call begin() first")
        return _Recorder(self, run_id, int(row[0]), skip, commit_at)

    def record(self, rec: StepRecord) -> Awaitable[None] | None:
        """Hand a step record (or claim) to the writer; the wait ends once it is committed.

        Grouped with every other run's rows in one transaction (one fsync for them all).
        """
        return self._writer.submit([rec])

    def claim(self, run_id: str, step: str, executor: str) -> bool:
        """Claim an unsafe step before its side effect; False if it was claimed before.

        The claim is committed when this returns, so a crash after it leaves a claimed,
        unfinished step, which is never executed again.
        """
        row = self._x(
            "INSERT INTO {}.claims VALUES (%s, %s, %s, %s) ON CONFLICT DO NOTHING RETURNING step",
            (run_id, step, executor, now_ms()),
        ).fetchone()
        return row is not None

    def set_meta(self, run_id: str, key: str, value: str) -> None:
        """Keep `key = value` with the run (the host's own metadata: a trace context, say)."""
        row = self._x(
            "INSERT INTO {0}.meta SELECT %s, %s, %s WHERE EXISTS"
            " (SELECT 1 FROM {0}.runs WHERE run_id = %s)"
            " ON CONFLICT (run_id, key) DO UPDATE SET value = EXCLUDED.value RETURNING key",
            (run_id, key, value, run_id),
        ).fetchone()
        if row is None:
            raise StoreError(f"unknown run {run_id!r}")

    def set_status(self, run_id: str, status: str) -> None:
        """Set a run's status (used when a run ends without its run_end, e.g. cancelled early)."""
        self._x(
            "UPDATE {}.runs SET status = %s, updated_ms = %s WHERE run_id = %s",
            (status, now_ms(), run_id),
        )

    # -- reading ----------------------------------------------------------------------------

    def base(self, run_id: str) -> tuple[Message, ...]:
        """Return the messages the run started from."""
        row = self._x("SELECT base FROM {}.runs WHERE run_id = %s", (run_id,)).fetchone()
        if row is None:
            raise StoreError(f"unknown run {run_id!r}")
        messages: tuple[Message, ...] = from_json(tuple[Message, ...], row[0])
        return messages

    def steps(self, run_id: str) -> dict[int, tuple[str, str]]:
        """Return the run's recorded step outputs: step id -> (step name, output JSON)."""
        rows = self._x(
            "SELECT step, name, output FROM {}.steps WHERE run_id = %s", (run_id,)
        ).fetchall()
        return {int(step): (str(name), str(out)) for step, name, out in rows}

    def meta(self, run_id: str) -> dict[str, str]:
        """Return the run's metadata (see `set_meta`)."""
        rows = self._x(
            "SELECT r.run_id, m.key, m.value FROM {0}.runs r"
            " LEFT JOIN {0}.meta m ON m.run_id = r.run_id WHERE r.run_id = %s",
            (run_id,),
        ).fetchall()
        if not rows:
            raise StoreError(f"unknown run {run_id!r}")
        return {str(k): str(v) for _, k, v in rows if k is not None}

    def status(self, run_id: str) -> str:
        """Return the run's status: running, completed, failed or cancelled."""
        row = self._x("SELECT status FROM {}.runs WHERE run_id = %s", (run_id,)).fetchone()
        if row is None:
            raise StoreError(f"unknown run {run_id!r}")
        return str(row[0])

    def _fold(self, run_id: str) -> Fold:
        base = self.base(run_id)
        rows = self._x(
            "SELECT body FROM {}.events WHERE run_id = %s AND type NOT IN (%s, %s)"
            " ORDER BY segment, seq",
            (run_id, *STREAM_ONLY),
        ).fetchall()
        return fold(base, (event_from_record(body) for (body,) in rows))

    def recover(self, run_id: str) -> tuple[tuple[Message, ...], MuleResume | None]:
        """Return `(messages, resume)` that continue the run from its last committed state."""
        return self._fold(run_id).recover()

    def transcript(self, run_id: str) -> tuple[Message, ...]:
        """Return the committed transcript: starting messages, then every committed message."""
        return tuple(self._fold(run_id).transcript)

    def events(self, run_id: str, after: int = 0) -> list[StoredEvent]:
        """Return the run's recorded events after log position `after`, oldest first."""
        rows = self._x(
            "SELECT seq, segment, body FROM {}.events WHERE run_id = %s AND seq > %s ORDER BY seq",
            (run_id, after),
        ).fetchall()
        return [StoredEvent(int(seq), int(seg), json.loads(body)) for seq, seg, body in rows]

    def claims(self, run_id: str) -> list[str]:
        """Return the steps claimed for the run."""
        rows = self._x("SELECT step FROM {}.claims WHERE run_id = %s ORDER BY step", (run_id,))
        return [str(r[0]) for r in rows.fetchall()]


def iter_events(url: str, run_id: str, *, schema: str = "mule") -> Iterator[StoredEvent]:
    """Yield every recorded event of a run, oldest first (a one-shot read)."""
    with PgStore(url, schema=schema) as store:
        yield from store.events(run_id)


async def follow(
    url: str,
    run_id: str,
    *,
    after: int = 0,
    schema: str = "mule",
    poll_s: float = 0.5,
) -> AsyncIterator[StoredEvent]:
    """Follow a run live from log position `after` (0: replay from the start) until run_end.

    Works from any process and on any anyio backend: it waits for the writers' NOTIFY (or
    `poll_s` at most) in a worker thread. Updates of a model attempt that was restarted after
    a crash appear again from a new `start` event; a consumer resets its partial there.
    """
    store = await anyio.to_thread.run_sync(lambda: PgStore(url, schema=schema))
    waiter = await anyio.to_thread.run_sync(connect, url)
    try:
        waiter.execute(sql.SQL("LISTEN {}").format(sql.Identifier(NOTIFY_CHANNEL)))
        while True:
            batch = await anyio.to_thread.run_sync(store.events, run_id, after)
            for ev in batch:
                after = ev.seq
                yield ev
                if ev.body.get("type") == "run_end":
                    return
            if not batch:

                def wait() -> None:
                    for n in waiter.notifies(timeout=poll_s, stop_after=1):
                        del n

                await anyio.to_thread.run_sync(wait, abandon_on_cancel=True)
    finally:
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(waiter.close)
            await anyio.to_thread.run_sync(store.close)


__all__ = [
    "NOTIFY_CHANNEL",
    "PgStore",
    "StepRecord",
    "StoreError",
    "StoredEvent",
    "event_key",
    "follow",
    "iter_events",
    "now_ms",
]
