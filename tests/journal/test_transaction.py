"""A failed journal transaction raises the error that failed it, and leaves nothing open.

The private rule `mule.journal._sqlite._Tx` (BEGIN IMMEDIATE ... COMMIT, or ROLLBACK) rolls back
only a transaction that is still open: SQLite rolls some failures back itself (a full disk,
which `tests/journal/test_fs.py` meets only by chance), and a second ROLLBACK would replace
their error with "cannot rollback - no transaction is active". Here SQLite's own conflict and
foreign-key rules fail a transaction in the body and at COMMIT, the same way every time.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from mule.journal._sqlite import _Tx


@pytest.fixture
def db(tmp_path: Path) -> Iterator[sqlite3.Connection]:
    """Yield a file database in autocommit mode, as the journal opens its own."""
    conn = sqlite3.connect(tmp_path / "t.db", isolation_level=None)
    conn.executescript(
        """
        PRAGMA foreign_keys = ON;
        CREATE TABLE runs (id TEXT PRIMARY KEY);
        CREATE TABLE events (
            run TEXT REFERENCES runs (id) DEFERRABLE INITIALLY DEFERRED, n INTEGER
        );
        INSERT INTO runs VALUES ('r1');
        """
    )
    try:
        yield conn
    finally:
        conn.close()


def _events(db: sqlite3.Connection) -> list[tuple[str, int]]:
    return db.execute("SELECT run, n FROM events ORDER BY n").fetchall()


@pytest.mark.parametrize(
    ("statement", "error"),
    [
        # OR ROLLBACK: SQLite ends the transaction itself before the error reaches the body.
        pytest.param("INSERT OR ROLLBACK INTO runs VALUES ('r1')", "UNIQUE", id="rolled-back"),
        # A deferred foreign key is checked at COMMIT, which fails and leaves it open.
        pytest.param("INSERT INTO events VALUES ('nobody', 2)", "FOREIGN KEY", id="at-commit"),
    ],
)
def test_a_transaction_sqlite_failed_raises_sqlites_error_and_leaves_nothing_open(
    db: sqlite3.Connection, statement: str, error: str
) -> None:
    lock = threading.Lock()

    def write() -> None:
        with _Tx(db, lock) as tx:
            tx.execute("INSERT INTO events VALUES ('r1', 1)")
            tx.execute(statement)

    with pytest.raises(sqlite3.IntegrityError, match=error):
        write()
    assert not db.in_transaction
    assert _events(db) == []
    assert lock.acquire(blocking=False)  # released


def test_a_failing_body_is_rolled_back_and_its_error_raised(db: sqlite3.Connection) -> None:
    lock = threading.Lock()

    def write() -> None:
        with _Tx(db, lock) as tx:
            tx.execute("INSERT INTO events VALUES ('r1', 1)")
            raise KeyError("the caller's own failure")

    with pytest.raises(KeyError):
        write()
    assert not db.in_transaction
    assert _events(db) == []
    assert lock.acquire(blocking=False)


def test_a_transaction_commits_and_the_next_one_can_begin(db: sqlite3.Connection) -> None:
    lock = threading.Lock()
    with _Tx(db, lock) as tx:
        tx.execute("INSERT INTO events VALUES ('r1', 1)")
    with _Tx(db, lock) as tx:
        tx.execute("INSERT INTO events VALUES ('r1', 2)")
    assert _events(db) == [("r1", 1), ("r1", 2)]
    assert not db.in_transaction
