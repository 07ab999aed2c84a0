"""Ctrl-C on `mule.run_sync`, in a real process: the run ends cancelled, once, and nothing hangs.

A child process runs a script whose listener prints every event; the test sends it SIGINT
while the scripted model is still streaming (slowly: 400 deltas, 50 ms apart, 20 s in all), as a
terminal's Ctrl-C would. Both paths of `run_sync` are covered: a plain script, and a call from
inside a running event loop (the notebook case, which runs the loop in a worker thread).
"""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = """
import signal, sys

# As in a terminal: a child started from a background job may inherit SIGINT ignored.
signal.signal(signal.SIGINT, signal.default_int_handler)

import mule
from mule.pi import Model, UserMessage
from mule.pi.scripted import ScriptedModel, Text, reply

where, backend = sys.argv[1], sys.argv[2]


def listener(event, signal):
    print(event.type + (f" {event.outcome}" if event.type == "run_end" else ""), flush=True)


inp = mule.MuleRunInput(
    model=Model(id="m", name="M", api="scripted", provider="p", base_url=""),
    system_prompt="sys",
    messages=(UserMessage("hi"),),
    stream=ScriptedModel([reply(Text(("slow ",) * 400), delay_ms=50)]),
)
if where == "script":
    mule.run_sync(inp, listener, backend=backend)
else:

    async def main():
        mule.run_sync(inp, listener, backend=backend)

    if backend == "asyncio":
        import asyncio

        asyncio.run(main())
    else:
        import trio

        trio.run(main)
print("finished", flush=True)
"""

# A guard against a hang only: a run that ignored the interrupt prints `run_end completed`
# after about 20 s and fails on its events, well within this.
HANG_S = 90


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
@pytest.mark.parametrize("where", ["script", "loop"])
def test_ctrl_c_cancels_the_run_once_and_raises_keyboard_interrupt(
    tmp_path: Path, where: str, backend: str
) -> None:
    script = tmp_path / "agent.py"
    script.write_text(SCRIPT)
    child = subprocess.Popen(
        [sys.executable, str(script), where, backend],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        before = []
        for line in child.stdout:  # wait until the model is streaming
            before.append(line.strip())
            if line.startswith("message_update"):
                break
        assert before[-1] == "message_update", before
        child.send_signal(signal.SIGINT)
        out, err = child.communicate(timeout=HANG_S)
    finally:
        if child.poll() is None:
            child.kill()
            child.communicate()
    events = before + out.split("\n")
    ends = [e for e in events if e.startswith("run_end")]
    assert ends == ["run_end cancelled"], (events, err)
    assert "finished" not in events
    # Python's own ending for an unhandled KeyboardInterrupt: the traceback, then it dies of
    # SIGINT (so a shell sees 130).
    assert err.rstrip().endswith("KeyboardInterrupt"), err
    assert child.returncode in (-signal.SIGINT, 130), (child.returncode, err)
