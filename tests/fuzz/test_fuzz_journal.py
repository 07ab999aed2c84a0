"""Fuzz journal files (issue 17.2, defect 8): damaged bytes, truncation, hostile records.

A real journal of a finished and an interrupted run is written once; each example damages a
copy (flipped bytes, a cut, a record replaced by hostile JSON), then opens it and reads
everything a host or `mule journal show` reads. Invariant: only `JournalError` comes out, within
the example's deadline; what reads, reads as a value.
"""

from __future__ import annotations

import contextlib
import functools
import sqlite3
import tempfile
from pathlib import Path

import anyio
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mule.journal import Journal, JournalError
from tests.fuzz.budget import fuzz_settings, tally
from tests.fuzz.hostile import damaged_text, dumps, json_values
from tests.journal.test_journal import USER, scenario

pytestmark = pytest.mark.slow  # a few seconds of examples each


@functools.cache
def pristine() -> bytes:
    """Return the bytes of a journal holding a completed run and an interrupted one."""
    folder = Path(tempfile.mkdtemp())
    path = folder / "j.db"

    async def write() -> None:
        with Journal(path, synchronous="NORMAL") as journal:
            journal.begin("done", [USER])
            await scenario(journal, "done", folder / "fx1")
            journal.begin("cut", [USER])
            await scenario(journal, "cut", folder / "fx2", crash_after=12)

    anyio.run(write)
    return path.read_bytes()


def read_everything(path: Path) -> None:
    with Journal(path) as journal:
        for info in journal.runs():
            journal.meta(info.run_id)
            journal.transcript(info.run_id)
            journal.recover(info.run_id)
            list(journal.events(info.run_id))


def attempt(path: Path) -> None:
    with contextlib.suppress(JournalError):  # anything else fails the example
        read_everything(path)


@fuzz_settings(150)
@given(
    st.lists(st.tuples(st.integers(0, 2**31), st.integers(1, 255)), min_size=1, max_size=8),
    st.none() | st.floats(0, 1),
)
def test_damaged_bytes_fail_typed(flips: list[tuple[int, int]], keep: float | None) -> None:
    tally("journal: damaged bytes")
    data = bytearray(pristine())
    for at, mask in flips:
        data[at % len(data)] ^= mask
    if keep is not None:
        data = data[: int(len(data) * keep)]
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "j.db"
        path.write_bytes(bytes(data))
        attempt(path)


@fuzz_settings(150)
@given(st.sampled_from(["base", "status", "segments", "meta", "body", "type", "seq"]), st.data())
def test_hostile_records_fail_typed(column: str, data: st.DataObject) -> None:
    tally("journal: hostile records")
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "j.db"
        path.write_bytes(pristine())
        with sqlite3.connect(path) as db:
            table = "runs" if column in ("base", "status", "segments", "meta") else "events"
            rows = (
                db.execute(f"SELECT rowid, {column} FROM {table}").fetchall()
                if table == "runs"
                else db.execute(f"SELECT run_id, segment, seq, {column} FROM {table}").fetchall()
            )
            row = data.draw(st.sampled_from(rows))
            old = row[-1]
            new = data.draw(
                st.one_of(
                    damaged_text(old) if isinstance(old, str) else st.just(old),
                    json_values.map(dumps),
                    json_values,
                    st.binary(max_size=20),
                )
            )
            if isinstance(new, list | dict):
                new = dumps(new)
            if isinstance(new, str) and not new.isascii():
                try:
                    new.encode("utf-8")
                except UnicodeEncodeError:  # a lone surrogate: stored as the bad UTF-8 it is
                    new = new.encode("utf-8", "surrogatepass")
            try:
                if table == "runs":
                    db.execute(f"UPDATE runs SET {column} = ? WHERE rowid = ?", (new, row[0]))
                else:
                    db.execute(
                        f"UPDATE events SET {column} = ?"
                        " WHERE run_id = ? AND segment = ? AND seq = ?",
                        (new, *row[:3]),
                    )
            except sqlite3.Error:
                return  # a constraint refused the damage (NOT NULL, the primary key)
        db.close()
        attempt(path)
