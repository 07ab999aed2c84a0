"""The writer thread behind the journal and the DBOS store: group commit, isolation, any caller."""

from __future__ import annotations

import threading

import anyio
import pytest

from mule.journal import CommitWriter


class Failed(Exception):
    """The failure type the writer raises (the journal passes JournalError)."""


class Store:
    """A write function over a list: refuses rows named "bad"; the first write waits for `go`."""

    def __init__(self) -> None:
        self.attempts: list[list[str]] = []
        self.written: list[str] = []
        self.go = threading.Event()
        self.entered = threading.Event()  # the first write has begun
        self.lock = threading.Lock()

    def write(self, rows: list[str], statuses: list[tuple[str, str]]) -> None:
        with self.lock:
            self.attempts.append(list(rows))
        if len(self.attempts) == 1:
            self.entered.set()
            assert self.go.wait(30)
        if "bad" in rows:
            raise ValueError("refused")
        self.written += rows + [f"{s}:{r}" for s, r in statuses]


@pytest.mark.anyio
async def test_waiters_share_a_commit_and_one_bad_part_fails_alone() -> None:
    """Hand-overs during a commit join one transaction; a failed one is retried part by part.

    So only the bad part's waiter sees the error.
    """
    store = Store()
    writer = CommitWriter(store.write, Failed, 30, "test-writer")
    outcome: dict[str, str] = {}
    handed: list[str] = []
    both_handed = anyio.Event()

    async def commit(rows: list[str], status: tuple[str, str] | None = None) -> None:
        pending = writer.submit(rows, status)
        assert pending is not None
        handed.append(rows[0])
        if len(handed) == 3:
            both_handed.set()
        try:
            await pending
            outcome[rows[0]] = "ok"
        except Failed as exc:
            outcome[rows[0]] = f"failed: {exc.__cause__}"

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(commit, ["first"])
            # The writer thread is inside the first commit (held until `go`).
            assert await anyio.to_thread.run_sync(store.entered.wait, 30)
            tg.start_soon(commit, ["bad"])
            tg.start_soon(commit, ["good"], ("completed", "r1"))
            await both_handed.wait()
            assert outcome == {}  # nobody's commit has returned yet
            store.go.set()
    finally:
        writer.close()
    assert outcome == {"first": "ok", "bad": "failed: refused", "good": "ok"}
    assert store.attempts[0] == ["first"]
    assert sorted(store.attempts[1]) == ["bad", "good"]  # one grouped attempt, then alone
    assert store.written == ["first", "good", "completed:r1"]
    assert writer.commits == 2


def test_a_caller_outside_any_event_loop_waits_for_its_commit() -> None:
    """From a plain thread the hand-over blocks until written (and raises a failed write)."""
    store = Store()
    store.go.set()
    writer = CommitWriter(store.write, Failed, 30, "test-writer")
    try:
        assert writer.submit(["a"]) is None
        assert store.written == ["a"]
        with pytest.raises(Failed):
            writer.submit(["bad"])
        errors: list[BaseException] = []
        assert writer.submit(["bad"], errors=errors) is None  # nobody waits: noted instead
    finally:
        writer.close()
    assert [str(e) for e in errors] == ["refused"]
