"""A transcript owner's writer thread: commits off the event loop, grouped across runs.

A commit at `synchronous=FULL` waits for an fsync (about 1.5 ms on a virtual disk). Done on the
event loop it would stop every run in the process for that time. Instead a run hands its rows
to the writer thread and waits, alone, for the commit; every run that reaches a checkpoint
while a commit is in progress joins the next one (group commit: one transaction, one fsync).
The guarantee is unchanged: a run's checkpoint is durable before its wait ends, and the core
acts on an event only after the listener's wait ended.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Awaitable, Callable
from queue import Empty, SimpleQueue
from typing import Any, TypeAlias, final

import anyio
import anyio.lowlevel

Post: TypeAlias = Callable[..., object]  # an event loop's call-soon-from-another-thread
Write: TypeAlias = Callable[[list[Any], list[tuple[str, str]]], None]
"""Writes rows and (status, run_id) pairs in one transaction (called in the writer thread)."""


@final
class _Ticket:
    """One hand-over: rows (and a run's new status); who waits, and how to wake them."""

    __slots__ = ("done", "error", "errors", "event", "post", "rows", "status", "sync")

    def __init__(self, rows: list[Any], status: tuple[str, str] | None) -> None:
        self.rows = rows
        self.status = status  # (status, run_id)
        self.post: Post | None = None  # set: `event` is set on that loop once written
        self.event: anyio.Event | None = None
        self.sync: threading.Event | None = None  # a caller outside any event loop
        self.errors: list[BaseException] | None = None  # nobody waits: failures go here
        self.error: BaseException | None = None
        self.done = False


def _post() -> Post | None:
    """Return the running event loop's thread-safe call-soon, or None outside a loop."""
    try:
        native = anyio.lowlevel.current_token().native_token
    except anyio.NoEventLoopError:
        return None
    # An asyncio loop, or a trio token: each has a call-soon that may be used from any thread.
    post: Post | None = getattr(native, "call_soon_threadsafe", None)
    return post if post is not None else native.run_sync_soon  # type: ignore[attr-defined]


def _wake(tickets: list[_Ticket]) -> None:
    """Set each waiter's event (run on its event loop)."""
    for ticket in tickets:
        if ticket.event is not None:
            ticket.event.set()


@final
class CommitWriter:
    """The writer thread of one store connection (started on first use, in each process).

    `write(rows, statuses)` writes one transaction; `failure(text)` makes the error a failed or
    overdue commit raises; a synchronous caller's wait is bounded by `wait_s`.

    Attributes:
        wait_s: Seconds a synchronous caller waits for its commit before the failure is raised.
        commits: Transactions written so far (benchmarks report commits per checkpoint).

    """

    def __init__(
        self,
        write: Write,
        failure: Callable[[str], Exception],
        wait_s: float,
        name: str,
    ) -> None:
        self._write_fn = write
        self._failure = failure
        self.wait_s = wait_s
        self._name = name
        self._queue: SimpleQueue[_Ticket | None] = SimpleQueue()
        self._thread: threading.Thread | None = None
        self._pid = 0
        self.commits = 0  # transactions written (the benchmark reports commits per checkpoint)

    def submit(
        self,
        rows: list[Any],
        status: tuple[str, str] | None = None,
        *,
        errors: list[BaseException] | None = None,
    ) -> Awaitable[None] | None:
        """Hand `rows` over; return the wait for their commit (None: nobody waits).

        With `errors` the caller does not wait; a failed write appends its error there. In an
        event loop the wait is an awaitable; outside one, this blocks until the commit.
        """
        ticket = _Ticket(rows, status)
        if errors is not None:
            ticket.errors = errors
            self._put(ticket)
            return None
        post = _post()
        if post is None:
            ticket.sync = threading.Event()
            self._put(ticket)
            if not ticket.sync.wait(self.wait_s):
                raise self._failure(f"the commit did not finish within {self.wait_s:.0f} s")
            self._raise_for(ticket)
            return None
        ticket.post = post
        ticket.event = anyio.Event()
        self._put(ticket)
        return self._wait(ticket)

    async def _wait(self, ticket: _Ticket) -> None:
        assert ticket.event is not None
        # Bounded by the writer: SQLite's busy timeout ends a commit that cannot get the lock.
        await ticket.event.wait()
        self._raise_for(ticket)

    def _raise_for(self, ticket: _Ticket) -> None:
        if ticket.error is not None:
            raise self._failure(f"journal commit failed: {ticket.error}") from ticket.error

    def _put(self, ticket: _Ticket) -> None:
        if self._thread is None or self._pid != os.getpid():  # first use, or a forked child
            self._queue = SimpleQueue()
            self._pid = os.getpid()
            self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
            self._thread.start()
        self._queue.put(ticket)

    def close(self) -> None:
        """Write what was handed over, then stop the thread (bounded by `wait_s`)."""
        thread = self._thread
        if thread is not None and self._pid == os.getpid() and thread.is_alive():
            self._queue.put(None)
            thread.join(self.wait_s)
        self._thread = None

    # -- the thread ---------------------------------------------------------------------------

    def _run(self) -> None:
        queue = self._queue
        while True:
            first = queue.get()
            if first is None:
                return
            batch = [first]
            stop = False
            while True:  # everything handed over meanwhile joins this commit
                try:
                    more = queue.get_nowait()
                except Empty:
                    break
                if more is None:
                    stop = True
                    break
                batch.append(more)
            self._commit(batch)
            self._notify(batch)
            if stop:
                return

    def _commit(self, batch: list[_Ticket]) -> None:
        try:
            self._write(batch)
        except Exception as exc:
            if len(batch) == 1:
                batch[0].error = exc
                return
            for ticket in batch:  # one run's bad rows must not fail the others' commits
                try:
                    self._write([ticket])
                except Exception as alone:
                    ticket.error = alone

    def _write(self, batch: list[_Ticket]) -> None:
        rows: list[Any] = []
        statuses: list[tuple[str, str]] = []
        for ticket in batch:
            rows += ticket.rows
            if ticket.status is not None:
                statuses.append(ticket.status)
        self._write_fn(rows, statuses)
        self.commits += 1

    def _notify(self, batch: list[_Ticket]) -> None:
        posts: dict[Post, list[_Ticket]] = {}
        for ticket in batch:
            ticket.done = True
            if ticket.post is not None:
                posts.setdefault(ticket.post, []).append(ticket)
            elif ticket.sync is not None:
                ticket.sync.set()
            elif ticket.error is not None and ticket.errors is not None:
                ticket.errors.append(ticket.error)
        for post, tickets in posts.items():  # one wake-up per event loop
            with contextlib.suppress(RuntimeError):  # that loop ended: nobody waits there now
                post(_wake, tickets)


__all__ = ["CommitWriter", "Write"]
