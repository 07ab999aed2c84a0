"""The `bash` tool: a shell command run in the workspace, confirmed first, bounded in time and size.

It is not a sandbox: a confirmed command can do what the user can. Confinement applies only to the
working directory it starts in.
"""

from __future__ import annotations

import os
import signal as signals
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Final, final

import anyio
import anyio.abc

from mule.pi import AbortSignal, JsonObject, JsonValue
from mule.promise import MuleTool, MuleToolResult
from mule.tools._tool import error_result, make_tool, str_arg, text_result
from mule.tools._workspace import MAX_OUTPUT_BYTES, Workspace, WorkspaceLike, as_workspace

BASH_DEFAULT_TIMEOUT_S: Final = 120.0
"""How long a command may run when the model names no timeout."""
BASH_MAX_TIMEOUT_S: Final = 600.0
"""The longest timeout a model may ask for."""

Confirm = Callable[[str], Awaitable[bool]]
"""Asks the user whether a shell command may run; True means yes."""

BASH_SCHEMA: Final[JsonObject] = {
    "type": "object",
    "properties": {
        "command": {"type": "string", "description": "Shell command to run"},
        "timeout": {"type": "number", "description": "Timeout in seconds"},
    },
    "required": ["command"],
}


def _shell(command: str) -> list[str]:
    for candidate in ("/bin/bash", "/usr/bin/bash", "/bin/sh"):
        if Path(candidate).exists():
            return [candidate, "-c", command]
    return ["sh", "-c", command]


def _kill(process: anyio.abc.Process) -> None:
    """Kill the command's whole process group (pipelines and background children too)."""
    try:
        if sys.platform != "win32":
            os.killpg(process.pid, signals.SIGKILL)
        else:
            process.kill()
    except (ProcessLookupError, PermissionError):
        pass


@final
class _Tail:
    """The last `limit` bytes of an output stream, and how many bytes came in all."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.buf = bytearray()
        self.total = 0

    def add(self, data: bytes) -> None:
        self.total += len(data)
        self.buf += data
        if len(self.buf) > self.limit:
            del self.buf[: len(self.buf) - self.limit]

    def text(self) -> str:
        text = self.buf.decode("utf-8", errors="replace")
        if self.total > len(self.buf):
            text = (
                f"[output truncated: the first {self.total - len(self.buf)} of {self.total} "
                f"bytes are omitted; the last {len(self.buf)} follow]\n" + text
            )
        return text


async def run_command(
    ws: Workspace,
    command: str,
    timeout_s: float,
    signal: AbortSignal | None = None,
    *,
    max_bytes: int = MAX_OUTPUT_BYTES,
) -> MuleToolResult:
    """Run a shell command in the root; stdout and stderr merged, the tail kept, exit code noted."""
    tail = _Tail(max_bytes)
    timed_out = False
    process = await anyio.open_process(
        _shell(command),
        cwd=ws.root,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        async with anyio.create_task_group() as tg:

            async def on_abort() -> None:
                if signal is not None:
                    await signal.wait()
                    _kill(process)

            tg.start_soon(on_abort)
            with anyio.move_on_after(timeout_s) as scope:
                assert process.stdout is not None
                async for chunk in process.stdout:
                    tail.add(chunk)
                await process.wait()
            if scope.cancelled_caught:
                timed_out = True
                _kill(process)
            tg.cancel_scope.cancel()
    finally:
        if process.returncode is None:
            _kill(process)
        with anyio.CancelScope(shield=True):
            await process.wait()
            await process.aclose()
    text = tail.text() or "(no output)"
    code = process.returncode
    if timed_out:
        return error_result(f"{text}\n\n[command timed out after {timeout_s:g} s and was killed]")
    if signal is not None and signal.aborted:
        return error_result(f"{text}\n\n[command killed: the run was cancelled]")
    if code != 0:
        return text_result(
            f"{text}\n\n[command exited with code {code}]",
            error=True,
            details={"exitCode": code},
        )
    return text_result(text, details={"exitCode": 0})


def bash_tool(
    workspace: WorkspaceLike,
    confirm: Confirm | None,
    *,
    default_timeout_s: float = BASH_DEFAULT_TIMEOUT_S,
) -> MuleTool:
    """Return the `bash` tool (replay-unsafe): commands run in `workspace`'s root.

    Each command is first put to `confirm`; a declined one never runs and the model is told so.
    `confirm=None` approves every command unasked.
    """
    ws = as_workspace(workspace)

    async def authorize(args: dict[str, JsonValue]) -> str | None:
        if confirm is None:
            return None
        command = str_arg(args, "command", "")
        if await confirm(command):
            return None
        return "The user declined to run this command; it was not executed."

    async def body(args: dict[str, JsonValue], signal: AbortSignal) -> MuleToolResult:
        timeout = args.get("timeout")
        seconds = (
            min(float(timeout), BASH_MAX_TIMEOUT_S)
            if isinstance(timeout, int | float) and not isinstance(timeout, bool) and timeout > 0
            else default_timeout_s
        )
        return await run_command(ws, str_arg(args, "command", ""), seconds, signal)

    return make_tool(
        "bash",
        "Run a shell command (bash -c) in the working directory; stdout and stderr are merged "
        f"and the last {MAX_OUTPUT_BYTES // 1024} KB kept. The user may be asked to approve it. "
        "It is not sandboxed.",
        BASH_SCHEMA,
        body,
        replay="unsafe",
        authorize=authorize,
    )


__all__ = [
    "BASH_DEFAULT_TIMEOUT_S",
    "BASH_MAX_TIMEOUT_S",
    "BASH_SCHEMA",
    "Confirm",
    "bash_tool",
    "run_command",
]
