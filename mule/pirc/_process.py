"""One `pi --mode rpc` child process: spawned, written to, read line by line, signalled, reaped.

The child runs in its own session (a terminal's Ctrl-C must not reach pi behind the bridge's
back) and is signalled as a process group, so pi's own children go with it. What the bridge does
with the lines and when it decides to stop are the bridge's concern, not this module's.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import subprocess
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Final, final

import anyio
from anyio.abc import Process

from mule.pirc._commands import ProcessExited, WriteTimeout
from mule.pirc._config import BridgeConfig
from mule.pirc._framing import FrameStats, LineFramer

log = logging.getLogger("mule.pirc")

STDERR_LINE_BYTES: Final = 64 * 1024
STDERR_TAIL_LINES: Final = 20
STDOUT_EOF_GRACE_S: Final = 2.0  # a grandchild may hold stdout open after pi exits


@final
class PiProcess:
    """A spawned pi child. `wait()` reaps it; `returncode` is set from then on."""

    def __init__(self, process: Process, prompt_dir: str | None = None) -> None:
        self._process = process
        self._prompt_dir = prompt_dir  # the prompt files pi reads; removed with the streams
        self._write_lock = anyio.Lock()
        self._stdout_eof = anyio.Event()
        self._stderr_eof = anyio.Event()
        self._stderr_tail: deque[str] = deque(maxlen=STDERR_TAIL_LINES)
        self._wedged = False  # a write timed out: the stream may hold part of a line
        self.returncode: int | None = None

    @classmethod
    async def spawn(cls, config: BridgeConfig) -> PiProcess:
        """Start pi as `config` says; raise `ProcessExited` if it cannot be started."""
        try:
            prompt_dir = config.write_prompts()
        except OSError as exc:
            raise ProcessExited(f"could not write pi's prompt files: {exc}") from exc
        try:
            process = await anyio.open_process(
                config.argv(prompt_dir),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=config.cwd,
                env=config.child_env(),
                start_new_session=True,
            )
        except BaseException as exc:
            _remove(prompt_dir)
            if isinstance(exc, OSError):
                raise ProcessExited(f"could not start pi ({config.executable}): {exc}") from exc
            raise
        return cls(process, prompt_dir)

    @property
    def pid(self) -> int:
        """The child's process id."""
        return self._process.pid

    async def send(self, data: bytes, limit: float) -> None:
        """Write bytes to pi's stdin within `limit` s (lock wait included).

        Raises `ProcessExited` if pi no longer reads or is gone, `WriteTimeout` if it stopped
        reading; after a timeout every later write fails at once (the stream may hold part of a
        line).
        """
        stdin = self._process.stdin
        if stdin is None:
            raise ProcessExited("pi is not running")
        if self._wedged:
            raise WriteTimeout(limit)
        with anyio.move_on_after(limit) as scope:
            async with self._write_lock:
                if self._wedged:
                    raise WriteTimeout(limit)
                try:
                    await stdin.send(data)
                except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as exc:
                    raise ProcessExited(f"cannot write to pi: {exc!r}", self.returncode) from exc
                return
        if scope.cancelled_caught:
            self._wedged = True
            log.error("pi did not read its stdin within %g s; writing no more", limit)
        raise WriteTimeout(limit)

    async def close_stdin(self, limit: float) -> None:
        """Close pi's stdin (its cue to exit), after any write under way, within `limit` s.

        A write stuck on a full pipe holds the lock: the stream is closed without it then.
        """
        stdin = self._process.stdin
        if stdin is None:
            return
        with anyio.move_on_after(limit):
            async with self._write_lock:
                with contextlib.suppress(
                    anyio.BrokenResourceError, anyio.ClosedResourceError, OSError
                ):
                    await stdin.aclose()
                return
        self._wedged = True
        with (
            anyio.move_on_after(limit),
            contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError, OSError),
        ):
            await stdin.aclose()

    def signal(self, sig: signal.Signals) -> None:
        """Send `sig` to pi's process group, unless pi is already reaped.

        Once reaped, its pid (and group id) may belong to another process: never signal it.
        """
        if self.returncode is not None or self._process.returncode is not None:
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
        except Exception:
            # Nothing more can be read: kill pi so the exit path ends its jobs (typed) and
            # nobody waits on output that will never be handled.
            log.exception("pi stdout reader failed; killing pi")
            self.signal(signal.SIGKILL)
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
        except Exception:  # a logging failure must not take the exit waiter down with it
            log.exception("pi stderr reader failed")
        finally:
            self._stderr_eof.set()

    async def close_streams(self) -> None:
        """Close all three pipes (after the readers stopped): no descriptor outlives the bridge.

        A reaped child's `Process.aclose()` closes the pipes' transports too (a grandchild may
        still hold stdout open) and returns at once; it is not used before, as it would wait for
        the child without a bound. The prompt files go too.
        """
        _remove(self._prompt_dir)
        self._prompt_dir = None
        if self.returncode is not None or self._process.returncode is not None:
            with anyio.move_on_after(1.0):
                await self._process.aclose()
            return
        streams = (self._process.stdin, self._process.stdout, self._process.stderr)
        for stream in streams:
            if stream is None:
                continue
            with (
                anyio.move_on_after(1.0),
                contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError, OSError),
            ):
                await stream.aclose()

    async def reap(self, limit: float) -> int | None:
        """Wait up to `limit` s for the child to be reaped; return its exit code or None."""
        with anyio.move_on_after(limit):
            self.returncode = await self._process.wait()
        return self.returncode

    async def wait(self) -> int:
        """Reap pi, then give its stdout and stderr a moment to reach EOF; return the exit code.

        The stderr tail is the exit's reason: read to its end, or the reason could miss it.
        """
        rc = self.returncode = await self._process.wait()
        with anyio.move_on_after(STDOUT_EOF_GRACE_S):
            await self._stdout_eof.wait()
            await self._stderr_eof.wait()
        return rc

    def exit_reason(self) -> str:
        """Say how pi exited, with the tail of its stderr when it failed."""
        rc = self.returncode
        tail = " | ".join(self._stderr_tail)
        return f"pi exited with code {rc}" + (f": {tail}" if tail and rc else "")


def _remove(prompt_dir: str | None) -> None:
    if prompt_dir is not None:
        shutil.rmtree(prompt_dir, ignore_errors=True)


__all__ = ["PiProcess"]
