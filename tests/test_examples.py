"""The README's examples run as written."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_quickstart_runs_offline() -> None:
    """examples/quickstart.py streams its answer, calls its tool and completes."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples/quickstart.py")],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert "[word_count returned 3]" in done.stdout
    assert "It has 3 words." in done.stdout
    assert "completed - 3 new messages" in done.stdout


def test_coding_tools_example_runs_offline() -> None:
    """examples/coding_tools.py lists and reads a directory through mule.tools and completes."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples/coding_tools.py")],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert "[ls {}]\nnotes.txt\nsrc/" in done.stdout
    assert "mules are sure-footed" in done.stdout
    assert "completed - The notes say mules are sure-footed." in done.stdout
