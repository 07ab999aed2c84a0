"""The README's examples run as written."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run_example(name: str) -> str:
    """Run `examples/<name>` in a fresh interpreter; return what it printed."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / name)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return done.stdout


def test_quickstart_runs_offline() -> None:
    """examples/quickstart.py streams its answer, calls its tool and completes."""
    out = run_example("quickstart.py")
    assert "[word_count returned 3]" in out
    assert "It has 3 words." in out
    assert "completed - 3 new messages" in out


def test_coding_tools_example_runs_offline() -> None:
    """examples/coding_tools.py lists and reads a directory through mule.tools and completes."""
    out = run_example("coding_tools.py")
    assert "[ls {}]\nnotes.txt\nsrc/" in out
    assert "mules are sure-footed" in out
    assert "completed - The notes say mules are sure-footed." in out
