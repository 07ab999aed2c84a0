"""docs/guides/dbos.md runs: its example, as one script, against a throwaway PostgreSQL."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import psycopg

from tests.test_docs import ROOT, page_script

PAGE = ROOT / "docs" / "guides" / "dbos.md"


def _fresh_database(url: str) -> str:
    """Return the URL of a new, empty database in the test cluster (no other test's runs)."""
    name = f"guide_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    base, _, _ = url.rpartition("/")
    return f"{base}/{name}"


def test_the_dbos_guide_runs(pg_url: str, tmp_path: Path) -> None:
    script = tmp_path / "dbos_guide.py"
    script.write_text(page_script(PAGE))
    env = {**os.environ, "MULE_DBOS_URL": _fresh_database(pg_url)}
    done = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].endswith(" run_start")
    assert lines[-2].endswith(" run_end")
    assert lines[-1] == "completed Clear the cache and run it again."
