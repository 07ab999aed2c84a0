"""The journal file's layout, its schema version, and what opening a file checks.

The version lives in SQLite's `user_version`. Version 1 is every file written before it was
stored (`user_version` 0, tables `runs` and `events`, `runs.meta` possibly missing); version 2
adds `runs.claim`, the token of the writer that holds the run (`Journal.listener`). Opening
migrates a version-1 file in place; a newer version, a foreign database, or a file that is not
SQLite at all is a `JournalError` that says which.
"""

from __future__ import annotations

import sqlite3
from typing import Final

SCHEMA_VERSION: Final = 2

_TABLES: Final = (
    """CREATE TABLE IF NOT EXISTS runs(
    run_id TEXT PRIMARY KEY,
    base TEXT NOT NULL,
    status TEXT NOT NULL,
    segments INTEGER NOT NULL DEFAULT 0,
    pid INTEGER NOT NULL,
    host TEXT NOT NULL,
    created_ms INTEGER NOT NULL,
    updated_ms INTEGER NOT NULL,
    meta TEXT NOT NULL DEFAULT '{}',
    claim TEXT
)""",
    """CREATE TABLE IF NOT EXISTS events(
    run_id TEXT NOT NULL,
    segment INTEGER NOT NULL,
    seq INTEGER NOT NULL,
    type TEXT NOT NULL,
    body TEXT NOT NULL,
    PRIMARY KEY(run_id, segment, seq)
) WITHOUT ROWID""",
)
# Columns each version-1 file has (any later column is added by the migration).
_V1_RUNS: Final = frozenset(
    ("run_id", "base", "status", "segments", "pid", "host", "created_ms", "updated_ms")
)
_EVENTS: Final = frozenset(("run_id", "segment", "seq", "type", "body"))
# Added since version 1, each with the statement that adds it.
_ADDED: Final = (
    ("meta", "ALTER TABLE runs ADD COLUMN meta TEXT NOT NULL DEFAULT '{}'"),
    ("claim", "ALTER TABLE runs ADD COLUMN claim TEXT"),
)


def _columns(db: sqlite3.Connection, table: str) -> set[str]:
    return {str(row[1]) for row in db.execute(f"PRAGMA table_info({table})")}


def prepare(db: sqlite3.Connection, path: object) -> str | None:
    """Create, check or migrate the journal's tables (inside a write transaction).

    Return why the file cannot be used as a journal, or None.
    """
    version = int(db.execute("PRAGMA user_version").fetchone()[0])
    if version > SCHEMA_VERSION:
        return (
            f"{path} is a journal of schema version {version}; this mule reads versions 1 to "
            f"{SCHEMA_VERSION} (upgrade mule to read it)"
        )
    tables = {str(row[0]) for row in db.execute("SELECT name FROM sqlite_master")}
    ours = {"runs", "events"}
    if tables and not ours & tables:
        shown = ", ".join(sorted(tables)[:5])
        return f"{path} is an SQLite database but not a mule journal (it has {shown})"
    for statement in _TABLES:
        db.execute(statement)
    runs, events = _columns(db, "runs"), _columns(db, "events")
    if not (runs >= _V1_RUNS and events >= _EVENTS):
        missing = sorted((_V1_RUNS - runs) | (_EVENTS - events))
        return f"{path} is not a mule journal of a known schema (missing {', '.join(missing)})"
    for column, statement in _ADDED:
        if column not in runs:
            db.execute(statement)
    if version != SCHEMA_VERSION:
        db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
    return None


__all__ = ["SCHEMA_VERSION", "prepare"]
