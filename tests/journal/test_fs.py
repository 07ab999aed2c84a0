"""Every journal failure is a `JournalError`, on a real read-only and a real full file system.

The tests run as root, which file modes do not stop, so the file systems are real mounts: a
small tmpfs per test, remounted read-only, or filled. Where mounting is not allowed (not root,
no CAP_SYS_ADMIN) the tests skip and say why.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

import mule.promise as promise
from mule.journal import Journal, JournalError
from mule.pi import Model, UserMessage
from mule.pi.scripted import ScriptedModel, Text, reply

MODEL = Model(id="m", name="M", api="scripted", provider="p", base_url="")
USER = UserMessage("go", 1)


def _mount(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["mount", *args], capture_output=True, text=True, check=False)


@pytest.fixture
def tmpfs(tmp_path: Path) -> Iterator[Path]:
    """Yield a fresh 2 MB tmpfs (remount it read-only with `read_only`)."""
    where = tmp_path / "fs"
    where.mkdir()
    made = _mount("-t", "tmpfs", "-o", "size=2m", "tmpfs", str(where))
    if made.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root and CAP_SYS_ADMIN): {made.stderr}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def read_only(where: Path) -> None:
    done = _mount("-o", "remount,ro", str(where))
    assert done.returncode == 0, done.stderr


def dead_writer(path: Path) -> None:
    """Begin run r1 in a child process and take its listener, then kill the child."""
    code = textwrap.dedent(f"""
        import time
        from mule.journal import Journal
        from mule.pi._messages import UserMessage
        j = Journal({str(path)!r})
        j.begin("r1", [UserMessage("hi", 1)])
        j.listener("r1")
        print("ready", flush=True)
        time.sleep(60)
    """)
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "ready"
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
        if child.stdout is not None:
            child.stdout.close()


def test_a_dead_writers_journal_on_a_read_only_file_system(tmpfs: Path) -> None:
    path = tmpfs / "j.db"
    dead_writer(path)
    read_only(tmpfs)
    with Journal(path) as journal:
        (info,) = journal.runs()
        assert (info.run_id, info.status) == ("r1", "interrupted")
        assert journal.transcript("r1") == (UserMessage("hi", 1),)
        for write in (
            lambda: journal.begin("r2", [USER]),
            lambda: journal.listener("r1"),
            lambda: journal.set_meta("r1", "k", "v"),
        ):
            with pytest.raises(JournalError, match=r"cannot write journal .*readonly"):
                write()


def test_a_new_journal_on_a_read_only_file_system(tmpfs: Path) -> None:
    read_only(tmpfs)
    with pytest.raises(JournalError, match="cannot open journal"):
        Journal(tmpfs / "j.db")


def test_begin_on_a_full_disk(tmpfs: Path) -> None:
    def fill(journal: Journal) -> None:
        for i in range(100):  # 2 MB fills within a few dozen 100 kB runs
            journal.begin(f"r{i}", [UserMessage("x" * 100_000, 1)])

    with Journal(tmpfs / "j.db") as journal, pytest.raises(JournalError, match="disk is full"):
        fill(journal)


@pytest.mark.anyio
async def test_a_run_whose_checkpoint_meets_a_full_disk_fails_typed(tmpfs: Path) -> None:
    with Journal(tmpfs / "j.db", synchronous="NORMAL") as journal:
        journal.begin("r", [USER])
        # One message of 4 MB: its message_end checkpoint cannot fit in 2 MB.
        big = ScriptedModel([reply(Text(tuple("y" * 1000 for _ in range(4000))))])
        inp = promise.MuleRunInput(model=MODEL, system_prompt="s", messages=(USER,), stream=big)
        with pytest.raises(promise.MuleRunFailed) as caught:
            await promise.run(inp, journal.listener("r"))
    error = caught.value.error
    assert error.phase == "listener"
    assert isinstance(error.cause, JournalError)
    assert "disk is full" in str(error.cause)
