"""Shared parts of the `mule` command's tests: a clean environment, a project, the fake server.

Test modules bind the fixtures by assignment (`env = cli_support.env`), so pytest finds them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from mule.testing.fake_openai import FakeOpenAI


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """Return a clean environment: no provider keys, an empty Pi agent dir, a wide console."""
    keep = {k: v for k, v in os.environ.items() if not k.endswith(("_API_KEY", "_TOKEN"))}
    agent = tmp_path / "agent"
    agent.mkdir()
    return {**keep, "PI_CODING_AGENT_DIR": str(agent), "COLUMNS": "200", "NO_COLOR": "1"}


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """Return a small project directory: a README, one Python file, an empty data/."""
    root = tmp_path / "project"
    root.mkdir()
    (root / "README.md").write_text("# Widget Factory\n\nBuilds widgets out of sprockets.\n")
    (root / "factory.py").write_text("def make_widget():\n    return 1\n")
    (root / "data").mkdir()
    return root


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    """Return a running fake OpenAI server on 127.0.0.1."""
    with FakeOpenAI() as server:
        yield server


def mule(
    args: Sequence[str], env: dict[str, str], cwd: Path, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    """Run `mule ARGS` as a real process (stdout and stderr are pipes) and wait for it."""
    return subprocess.run(
        [sys.executable, "-m", "mule.cli", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        input=stdin if stdin is not None else "",
        timeout=60,
    )


def events(stdout: str) -> list[dict[str, Any]]:
    """Parse `--json` output: one event per line."""
    return [json.loads(line) for line in stdout.splitlines()]


def run_args(fake: FakeOpenAI, prompt: str, *extra: str) -> list[str]:
    """Return `run PROMPT` against the fake server as a custom OpenAI-compatible provider."""
    return ["run", prompt, "--model", "local/gpt-fake", "--base-url", fake.base_url, *extra]
