"""`mule run` in pipes and scripts: text streams to stdout as it arrives, byte for byte.

The exit codes are the documented ones (0 completed, 1 failed, 2 usage, 130 cancelled).
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mule.effects import event_from_wire, to_json
from mule.testing.fake_openai import (
    FakeOpenAI,
    chat_stream,
    chat_text,
    openai_error,
    tool_call,
)
from tests.cli import support as cli_support

pytestmark = pytest.mark.slow

env = cli_support.env
project = cli_support.project
fake = cli_support.fake
mule = cli_support.mule
events = cli_support.events
run_args = cli_support.run_args

LONG = (
    "A line much longer than eighty columns, so a console that wraps would break it here, "
    "and **markdown** stays as sent:\n\n- one\n- two   \n"
)


def _read_until(fd: int, wanted: bytes, seconds: float = 20) -> bytes:
    """Read from `fd` until `wanted` has arrived (bounded: fails after `seconds`)."""
    got = b""
    deadline = time.monotonic() + seconds
    while wanted not in got:
        left = deadline - time.monotonic()
        assert left > 0, f"only got {got!r}"
        ready, _, _ = select.select([fd], [], [], left)
        if ready:
            chunk = os.read(fd, 4096)
            assert chunk, f"EOF after {got!r}"
            got += chunk
    return got


def test_piped_text_streams_before_the_answer_is_complete(
    fake: FakeOpenAI, project: Path, env: dict[str, str]
) -> None:
    """The model sends half an answer and stalls: the half is already on stdout; Ctrl-C, 130."""
    fake.push(chat_stream(text="Streaming half an answer, ", pieces=3, then="stall"))
    proc = subprocess.Popen(
        [sys.executable, "-m", "mule.cli", *run_args(fake, "hi")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        env=env,
        cwd=project,
    )
    try:
        assert proc.stdout is not None
        got = _read_until(proc.stdout.fileno(), b"Streaming half an answer, ")
        assert proc.poll() is None  # the run is still waiting for the rest
        proc.send_signal(signal.SIGINT)
        rest, err = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, err
    assert got + rest == b"Streaming half an answer, \n"
    assert b"run cancelled" in err


def test_piped_stdout_is_the_text_byte_for_byte(
    fake: FakeOpenAI, project: Path, env: dict[str, str]
) -> None:
    """Each message's text as sent, unwrapped and unpadded; the rest is on stderr, unwrapped."""
    fake.push(
        chat_stream(text="Looking.", calls=[tool_call("call_1", "ls", {"path": "."})], pieces=2)
    )
    fake.push(chat_text(LONG, pieces=7))
    done = mule(run_args(fake, "what is here?"), {**env, "COLUMNS": "80"}, project)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "Looking.\n" + LONG
    err = done.stderr.splitlines()
    assert err[0] == f"local/gpt-fake  {fake.base_url}  cwd {project}"
    assert err[1:4] == ["→ ls .", "✓ ls  0.0 s", "  data/"]
    assert err[-1] == "2 turns, 0 tokens in, 0 out"
    assert not [line for line in err if line != line.rstrip()]


def test_json_stdout_is_one_event_per_line_and_nothing_else(
    fake: FakeOpenAI, project: Path, env: dict[str, str]
) -> None:
    """--json: every stdout line is an event, ending in run_end; the text is in the deltas."""
    fake.push(chat_text(LONG, pieces=5))
    done = mule(run_args(fake, "hi", "--json"), env, project)
    assert done.returncode == 0, done.stderr
    lines = events(done.stdout)
    assert done.stdout.endswith("}\n")
    deltas = [
        e["event"]["delta"]
        for e in lines
        if e["type"] == "message_update" and e["event"]["type"] == "text_delta"
    ]
    assert "".join(deltas) == LONG
    assert lines[-1] == {**lines[-1], "type": "run_end", "outcome": "completed"}
    # Byte for byte: each line is the codec's own encoding of the event it carries.
    for line in done.stdout.splitlines():
        assert to_json(event_from_wire(json.loads(line))) == line


# -- exit codes ---------------------------------------------------------------------------------


def test_exit_codes_are_documented_in_help(project: Path, env: dict[str, str]) -> None:
    """`mule --help` and `mule run --help` both state the four codes."""
    line = "exit codes: 0 completed, 1 failed, 2 usage or setup error, 130 cancelled (Ctrl-C)"
    for args in (["--help"], ["run", "--help"]):
        done = mule(args, env, project)
        assert done.returncode == 0
        assert line in done.stdout


@pytest.mark.parametrize(
    ("args", "code"),
    [
        (["run"], 2),  # no --model: argparse's usage error
        (["run", "hi", "-m", "a/b", "--retries", "many"], 2),
        (["frobnicate"], 2),
        (["run", "-m", "local/m", "--base-url", "http://127.0.0.1:9/v1"], 2),  # no prompt
    ],
)
def test_usage_errors_exit_2(
    args: list[str], code: int, project: Path, env: dict[str, str]
) -> None:
    """Every kind of usage error is exit 2."""
    assert mule(args, env, project).returncode == code


def test_completed_is_0_and_failed_is_1(
    fake: FakeOpenAI, project: Path, env: dict[str, str]
) -> None:
    """A completed run exits 0; a model failure exits 1 with the phase on stderr."""
    fake.push(chat_text("fine"))
    assert mule(run_args(fake, "hi"), env, project).returncode == 0
    fake.push(openai_error(401, "Incorrect API key provided"))
    failed = mule(run_args(fake, "hi", "--provider-retries", "0"), env, project)
    assert failed.returncode == 1
    assert "run failed (model)" in failed.stderr
