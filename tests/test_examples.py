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
        timeout=120,  # an MCP example starts a server: seconds on a loaded machine
        check=True,
    )
    return done.stdout


def test_quickstart_runs_offline() -> None:
    """examples/quickstart.py streams its answer, calls its tool and completes."""
    out = run_example("quickstart.py")
    assert "[word_count returned 3]" in out
    assert "It has 3 words." in out
    assert "completed - 3 new messages" in out


def test_the_readme_quick_start_is_the_example_word_for_word() -> None:
    """The README's quick start block is examples/quickstart.py after its module docstring."""
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Quick start (promise style)\n", 1)[1]
    block = section.split("```python\n", 1)[1].split("```\n", 1)[0]
    source = (ROOT / "examples" / "quickstart.py").read_text()
    code = source.split('"""\n', 1)[1].lstrip("\n")  # after the module docstring
    assert block == code
    assert "mule.stream(" in block  # the quick start shows the async-iterator API


def test_coding_tools_example_runs_offline() -> None:
    """examples/coding_tools.py lists and reads a directory through mule.tools and completes."""
    out = run_example("coding_tools.py")
    assert "[ls {}]\nnotes.txt\nsrc/" in out
    assert "mules are sure-footed" in out
    assert "completed - The notes say mules are sure-footed." in out


def test_mcp_example_runs_a_real_mcp_server() -> None:
    """examples/mcp_tools.py: the SDK server's tools, progress, trusted replay, the answer."""
    out = run_example("mcp_tools.py")
    assert "notes_read_note (safe), notes_index_notes (unsafe)" in out
    assert "[notes_index_notes] indexed groceries" in out
    assert "[notes_read_note -> eggs, flour, sugar]" in out
    assert out.rstrip().endswith("completed")


def test_otel_example_prints_the_span_tree() -> None:
    """examples/otel_traces.py: a retry is a sibling attempt, the tool sits under its attempt."""
    out = run_example("otel_traces.py")
    assert "invoke_agent counter  OK" in out
    assert "  chat demo-model  ERROR  mule.attempt=1 error.type=503" in out
    assert "    execute_tool word_count" in out
    assert "gen_ai.client.token.usage output: count=2 sum=15" in out
