"""`./dev`: clean help, and `./dev demo` installs only the CLI extra, only when it changed."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def sandbox(tmp_path: Path) -> Path:
    """Return a copy of ./dev whose .venv holds stand-ins that log how they were called."""
    shutil.copy(ROOT / "dev", tmp_path / "dev")
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    bin_dir = tmp_path / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    for name in ("python", "mule"):
        tool = bin_dir / name
        tool.write_text(f'#!/bin/sh\necho "{name} $*" >> "$(dirname "$0")/../../calls.log"\n')
        tool.chmod(0o755)
    return tmp_path


def _dev(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(root / "dev"), *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHON": "false"},  # a new venv would be a failure here
    )


def _calls(root: Path) -> list[str]:
    log = root / "calls.log"
    calls = log.read_text().splitlines() if log.exists() else []
    log.unlink(missing_ok=True)
    return calls


def test_help_is_the_usage_text(sandbox: Path) -> None:
    """No command: the usage on stderr and exit 2; `help`: the same on stdout, exit 0."""
    bare = _dev(sandbox)
    assert bare.returncode == 2
    assert bare.stderr.startswith("usage: ./dev COMMAND [ARGS...]\n")
    assert "set -e" not in bare.stderr
    helped = _dev(sandbox, "help")
    assert helped.returncode == 0
    assert helped.stdout == bare.stderr
    for command in ("demo", "test", "setup"):
        assert f"\n  {command} " in helped.stdout
    unknown = _dev(sandbox, "frobnicate")
    assert unknown.returncode == 2
    assert unknown.stderr.startswith("dev: unknown command 'frobnicate'\n")


def test_demo_installs_the_cli_extra_once_per_pyproject(sandbox: Path) -> None:
    """The first demo installs `.[cli]`; again, nothing; a changed pyproject.toml, again.

    A dev install (a superset of the cli extra) counts too.
    """
    first = _dev(sandbox, "demo", "--delay-ms", "0")
    assert first.returncode == 0, first.stderr
    assert _calls(sandbox) == ["python -m pip install -q -e .[cli]", "mule demo --delay-ms 0"]
    assert _dev(sandbox, "demo").returncode == 0
    assert _calls(sandbox) == ["mule demo"]
    with (sandbox / "pyproject.toml").open("a") as f:
        f.write("# changed\n")
    assert _dev(sandbox, "demo").returncode == 0
    assert _calls(sandbox) == ["python -m pip install -q -e .[cli]", "mule demo"]
    (sandbox / ".venv" / ".mule-cli").unlink()
    hash_line = subprocess.run(
        ["sha256sum", "pyproject.toml"], cwd=sandbox, capture_output=True, text=True, check=True
    ).stdout.split()[0]
    (sandbox / ".venv" / ".mule-dev").write_text(hash_line + "\n")
    assert _dev(sandbox, "demo").returncode == 0
    assert _calls(sandbox) == ["mule demo"]
