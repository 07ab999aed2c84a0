"""Fixtures for the DBOS suite: a throwaway PostgreSQL (scripts/pg-start) and worker processes."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("dbos", reason="the DBOS suite needs the mule[dbos] extra")

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def pg_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Start a PostgreSQL cluster on 127.0.0.1 for the session; stop it at the end."""
    where = tmp_path_factory.mktemp("pg")
    url = subprocess.run(
        [str(ROOT / "scripts" / "pg-start"), str(where)],
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    ).stdout.strip()
    try:
        yield url
    finally:
        subprocess.run([str(ROOT / "scripts" / "pg-stop"), str(where)], check=False, timeout=60)


class WorkerProc:
    """One worker process (tests/dbos/worker.py), ready once it printed its executor id.

    `traced`: the worker traces each run execution with mule.otel (tests/dbos/worker.py).
    """

    def __init__(
        self,
        url: str,
        pause_dir: Path,
        executor_id: str | None = None,
        *,
        traced: bool = False,
    ) -> None:
        self.executor_id = executor_id or f"w-{uuid.uuid4().hex[:8]}"
        argv = [sys.executable, "-m", "tests.dbos.worker", url, self.executor_id, str(pause_dir)]
        self.proc = subprocess.Popen(
            [*argv, "traced"] if traced else argv,
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().strip()
        if line != f"ready {self.executor_id}":
            self.proc.kill()
            raise RuntimeError(f"worker {self.executor_id} did not start: {line!r}")

    @property
    def pid(self) -> int:
        """The worker's process id."""
        return self.proc.pid

    def kill(self) -> None:
        """SIGKILL the worker and reap it."""
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(30)
        self._close()

    def _close(self) -> None:
        for pipe in (self.proc.stdin, self.proc.stdout):
            if pipe is not None and not pipe.closed:
                pipe.close()

    def stop(self) -> None:
        """Ask the worker to stop (stdin EOF), then kill it if it lingers."""
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(15)
        self.kill()


@pytest.fixture(scope="module")
def pause_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where tests ask workers to pause at a point, and workers say they did."""
    return tmp_path_factory.mktemp("pause")


@pytest.fixture(scope="module")
def workers(pg_url: str, pause_dir: Path) -> Iterator[list[WorkerProc]]:
    """Two worker processes on the same PostgreSQL; the list may be changed by a test."""
    procs = [WorkerProc(pg_url, pause_dir), WorkerProc(pg_url, pause_dir)]
    try:
        yield procs
    finally:
        for p in procs:
            p.stop()
