"""One `pi --mode rpc` child process: spawned, written to, read line by line, signalled, reaped.

The child runs in its own session (a terminal's Ctrl-C must not reach pi behind the bridge's
back) and is signalled as a process group, so pi's own children go with it. What the bridge does
with the lines and when it decides to stop are the bridge's concern, not this module's.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Final, final

import anyio
from anyio.abc import Process

from mule.pirc._commands import ProcessExited
from mule.pirc._config import BridgeConfig
from mule.pirc._framing import FrameStats, LineFramer

log = logging.getLogger("mule.pirc")

STDERR_LINE_BYTES: Final = 64 * 1024
STDERR_TAIL_LINES: Final = 20
STDOUT_EOF_GRACE_S: Final = 2.0  # a grandchild may hold stdout open after pi exits


@final
class PiProcess:
    """A spawned pi child. `wait()` reaps it; `returncode` is set from then on."""

    def __init__(self, process: Process) -> None:
        self._process = process
        self._write_lock = anyio.Lock()
        self._stdout_eof = anyio.Event()
        self._stderr_tail: deque[str] = deque(maxlen=STDERR_TAIL_LINES)
        self.returncode: int | None = None

    @classmethod
    async def spawn(cls, config: BridgeConfig) -> PiProcess:
        """Start pi as `config` says; raise `ProcessExited` if it cannot be started."""
        try:
            process = await anyio.open_process(
                config.argv(),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=config.cwd,
                env=config.child_env(),
                start_new_session=True,
            )
        except OSError as exc:
            raise ProcessExited(f"could not start pi ({config.executable}): {exc}") from exc
        return cls(process)

    @property
    def pid(self) -> int:
        """The child's process id."""
        return self._process.pid

    async def send(self, data: bytes) -> None:
        """Write bytes to pi's stdin; raise `ProcessExited` if it no longer reads."""
        stdin = self._process.stdin
        if stdin is None:
            raise ProcessExited("pi is not running")
        async with self._write_lock:
            try:
                await stdin.send(data)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as exc:
                raise ProcessExited(f"cannot write to pi: {exc!r}", self.returncode) from exc

    async def close_stdin(self) -> None:
        """Close pi's stdin (its cue to exit), after any write under way."""
        stdin = self._process.stdin
        if stdin is None:
            return
        async with self._write_lock:
            with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
                await stdin.aclose()

    def signal(self, sig: signal.Signals) -> None:
        """Send `sig` to pi's process group, unless pi is already reaped."""
        if self.returncode is not None:
            return
        try:
            os.killpg(self._process.pid, sig)
        except ProcessLookupError:
            pass
        except PermissionError:
            self._process.send_signal(sig)

    async def read_stdout(
        self, framer: LineFramer, on_line: Callable[[bytes], Awaitable[None]]
    ) -> None:
        """Pass each complete stdout line (and a last unterminated one) to `on_line`, until EOF."""
        stdout = self._process.stdout
        assert stdout is not None
        try:
            async for chunk in stdout:
                for line in framer.feed(chunk):
                    await on_line(line)
            tail = framer.close()
            if tail is not None:
                await on_line(tail)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            pass
        finally:
            self._stdout_eof.set()

    async def read_stderr(self, on_line: Callable[[str], None]) -> None:
        """Log pi's stderr line by line, keep its tail for the exit reason, tell `on_line`."""
        stderr = self._process.stderr
        assert stderr is not None
        framer = LineFramer(STDERR_LINE_BYTES, FrameStats())
        try:
            async for chunk in stderr:
                for raw in framer.feed(chunk):
                    text = raw.decode("utf-8", "replace")
                    on_line(text)
                    self._stderr_tail.append(text[:500])
                    log.info("pi stderr: %s", text)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            pass

    async def wait(self) -> int:
        """Reap pi, then give its stdout a moment to reach EOF; return the exit code."""
        rc = self.returncode = await self._process.wait()
        with anyio.move_on_after(STDOUT_EOF_GRACE_S):
            await self._stdout_eof.wait()
        return rc

    def exit_reason(self) -> str:
        """Say how pi exited, with the tail of its stderr when it failed."""
        rc = self.returncode
        tail = " | ".join(self._stderr_tail)
        return f"pi exited with code {rc}" + (f": {tail}" if tail and rc else "")


__all__ = ["PiProcess"]
