"""`mule run` as a person sees it: real terminals (tmux panes) at 80x24 and 200x50.

Each test starts the command in a detached tmux session of that size, against the fake OpenAI
server, reads the rendered screen with `capture-pane`, and types as a user would (`y`, Ctrl-C).
The piped and `--json` forms are checked byte for byte in test_pipes.py.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from mule.testing.fake_openai import FakeOpenAI, chat_stream, chat_text, openai_error, tool_call
from tests.cli import support as cli_support

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux (apt-get install tmux)"),
]

env = cli_support.env
project = cli_support.project
fake = cli_support.fake

SIZES = [(80, 24), (200, 50)]


class Pane:
    """One detached tmux session running a command in a terminal of a fixed size."""

    def __init__(self, width: int, height: int, script: Path) -> None:
        self.socket = f"mule-test-{uuid.uuid4().hex[:8]}"
        self.width = width
        self.height = height
        self._tmux(
            "new-session", "-d", "-x", str(width), "-y", str(height), "-s", "t", f"sh {script}"
        )

    def _tmux(self, *args: str) -> str:
        done = subprocess.run(
            ["tmux", "-L", self.socket, "-f", "/dev/null", *args],
            capture_output=True,
            text=True,
            timeout=20,
        )
        assert done.returncode == 0, f"tmux {args[0]}: {done.stderr}"
        return done.stdout

    def screen(self) -> str:
        """Return the visible screen, one line per row, trailing blanks removed."""
        return self._tmux("capture-pane", "-p", "-t", "t")

    def wait_for(self, ready: Callable[[str], bool], seconds: float = 30) -> str:
        """Return the first screen for which `ready` holds (fail with the last one seen)."""
        deadline = time.monotonic() + seconds
        shown = ""
        while time.monotonic() < deadline:
            shown = self.screen()
            if ready(shown):
                return shown
            time.sleep(0.05)
        raise AssertionError(f"screen never got there:\n{shown}")

    def wait_text(self, text: str, seconds: float = 30) -> str:
        return self.wait_for(lambda s: text in s, seconds)

    def keys(self, *keys: str) -> None:
        self._tmux("send-keys", "-t", "t", *keys)

    def close(self) -> None:
        subprocess.run(["tmux", "-L", self.socket, "kill-server"], capture_output=True, timeout=20)


@pytest.fixture(params=SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def size(request: pytest.FixtureRequest) -> tuple[int, int]:
    return request.param  # type: ignore[no-any-return]


@pytest.fixture
def terminal(
    size: tuple[int, int], env: dict[str, str], project: Path, tmp_path: Path
) -> Iterator[Callable[..., Pane]]:
    """Start `mule ARGS` in a pane; the exit code is shown as `[exit N]` when it ends."""
    panes: list[Pane] = []

    def start(*args: str) -> Pane:
        shown = {**env, "TERM": "xterm-256color"}
        shown.pop("COLUMNS", None)  # the pane's own size, as in a real terminal
        shown.pop("NO_COLOR", None)
        exports = "".join(
            f"export {k}={shlex.quote(v)}\n" for k, v in shown.items() if k.isidentifier()
        )
        command = shlex.join([sys.executable, "-m", "mule.cli", *args])
        script = tmp_path / f"run{len(panes)}.sh"
        # The shell traps Ctrl-C (its child gets the default action) to show the exit code.
        lines = [exports + "trap : INT", f"cd {shlex.quote(str(project))}", command]
        script.write_text("\n".join([*lines, 'echo "[exit $?]"', "sleep 120", ""]))
        pane = Pane(size[0], size[1], script)
        panes.append(pane)
        return pane

    yield start
    for pane in panes:
        pane.close()


def _args(fake: FakeOpenAI, prompt: str, *extra: str) -> list[str]:
    return ["run", prompt, "-m", "local/gpt-fake", "--base-url", fake.base_url, *extra]


def _rows(screen: str) -> list[str]:
    return screen.splitlines()


def test_streaming_text_then_ctrl_c(
    fake: FakeOpenAI, terminal: Callable[..., Pane], size: tuple[int, int]
) -> None:
    """Text shows while it streams; Ctrl-C prints the notice on its own line and exits 130."""
    fake.push(chat_stream(text="The answer streams in, word by word", pieces=6, then="stall"))
    pane = terminal(*_args(fake, "hi", "--tools", ""))
    pane.wait_text("The answer streams in, word by word")
    pane.keys("C-c")
    shown = pane.wait_text("[exit 130]")
    rows = _rows(shown)
    assert "cancelling… (Ctrl-C again to force)" in rows
    assert "run cancelled" in rows
    assert all(len(r) <= size[0] for r in rows)
    assert "^C" not in shown


def test_the_waiting_spinner_moves(fake: FakeOpenAI, terminal: Callable[..., Pane]) -> None:
    """While the model says nothing, the spinner's frame changes on screen."""
    fake.push({**chat_text("late"), "head_delay_ms": 60_000})
    pane = terminal(*_args(fake, "hi", "--tools", ""))
    first = pane.wait_text("waiting for the model")
    line = next(r for r in _rows(first) if "waiting for the model" in r)
    pane.wait_for(lambda s: "waiting for the model" in s and line not in _rows(s), 10)
    pane.keys("C-c")
    pane.wait_text("[exit 130]")


def test_approval_prompt_and_tool_box(
    fake: FakeOpenAI, terminal: Callable[..., Pane], project: Path, size: tuple[int, int]
) -> None:
    """The bash call asks in a box; `y` runs it; its result shows; the answer follows."""
    fake.push(chat_stream(calls=[tool_call("c1", "bash", {"command": "echo made > f.txt"})]))
    fake.push(chat_text("Made the file."))
    pane = terminal(*_args(fake, "make a file"))
    shown = pane.wait_text("Run it? [y/N]")
    assert "bash wants to run" in shown
    assert "│ echo made > f.txt " in shown
    time.sleep(0.5)  # the time spent deciding is not the tool's time
    pane.keys("y", "Enter")
    shown = pane.wait_text("[exit 0]")
    assert "Made the file." in shown
    took = re.search(r"✓ bash  ([0-9.]+) s", shown)
    assert took is not None, shown
    assert float(took.group(1)) < 0.5  # the user took longer than that to say yes
    assert "2 turns" in shown
    assert (project / "f.txt").read_text() == "made\n"
    if size == (80, 24):  # the README shows this screen: it must stay true
        assert _from_first_tool(shown.split("[exit 0]")[0]) == _from_first_tool(_readme_screen())


def _from_first_tool(screen: str) -> list[str]:
    rows = [re.sub(r"\d+\.\d s$", "N s", r) for r in screen.rstrip().splitlines()]
    return rows[next(i for i, r in enumerate(rows) if r.startswith("→ ")) :]


def _readme_screen() -> str:
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    block = readme.split("<!-- cli-80x24 -->\n```text\n")[1].split("```\n<!-- /cli-80x24 -->")[0]
    assert max(len(r) for r in block.splitlines()) <= 80
    return block


def test_a_retry_notice(fake: FakeOpenAI, terminal: Callable[..., Pane]) -> None:
    """A 500 shows the error and the retry; the retried attempt answers."""
    fake.push(openai_error(500, "Internal server error", type="server_error"))
    fake.push(chat_text("Recovered."))
    pane = terminal(
        *_args(fake, "hi", "--tools", "", "--provider-retries", "0", "--retry-base-ms", "20")
    )
    shown = pane.wait_text("[exit 0]")
    rows = _rows(shown)
    assert any(r.startswith("✗ model error (attempt 1): 500") for r in rows)
    assert "↻ retrying in 20 ms (retry 1 of 3)" in rows
    assert "Recovered." in rows
