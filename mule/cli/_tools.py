"""The CLI's built-in tools: `read`, `ls`, `grep` and `bash`, confined to a workspace root.

Every failure the model should see (a missing file, a path outside the root, a binary file, a
bad regex, a declined or failing command) is an `is_error` result, never a crash of the run.
"""

from __future__ import annotations

import fnmatch
import os
import re
import signal as signals
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Final, final

import anyio
import anyio.abc
import anyio.to_thread
from attrs import frozen
from returns.result import Failure, Result, Success

from mule._abort import AbortSignal
from mule.effects._tools import MuleToolExecutionPart, MuleToolRejection, MuleToolResult, Replay
from mule.pi import ToolArgumentsError, ToolValidator
from mule.pi._content import TextContent, ToolCall
from mule.pi._context import Tool
from mule.pi._json import JsonObject, JsonValue
from mule.promise._types import MuleTool, MuleToolPreparation, MuleToolPrepared

MAX_OUTPUT_BYTES: Final = 50 * 1024
"""The most text any built-in tool returns to the model (the rest is cut, with a note)."""
READ_DEFAULT_LINES: Final = 2000
READ_MAX_LINE_CHARS: Final = 2000
LS_DEFAULT_LIMIT: Final = 500
GREP_DEFAULT_LIMIT: Final = 100
GREP_MAX_LINE_CHARS: Final = 500
GREP_MAX_FILE_BYTES: Final = 5 * 1024 * 1024
BASH_DEFAULT_TIMEOUT_S: Final = 120.0
BASH_MAX_TIMEOUT_S: Final = 600.0
BINARY_SNIFF_BYTES: Final = 8192
# Directories that hold tooling or dependencies rather than the project's own files.
SKIPPED_DIRS: Final = frozenset(
    {
        ".git",
        ".hg",
        ".svn",
        "node_modules",
        "__pycache__",
        ".venv",
        "venv",
        ".mypy_cache",
        ".ruff_cache",
        ".pytest_cache",
        ".tox",
        ".hypothesis",
    }
)
BUILTIN_TOOL_NAMES: Final = ("read", "ls", "grep", "bash")

Confirm = Callable[[str], Awaitable[bool]]
"""Asks the user whether a shell command may run; True means yes."""


@final
@frozen
class Workspace:
    """Where the tools work: paths resolve against `root`, and stay inside it when `confined`."""

    root: Path
    confined: bool = True

    @classmethod
    def at(cls, root: str | os.PathLike[str], *, confined: bool = True) -> Workspace:
        """Return a workspace rooted at `root` (made absolute, symlinks resolved)."""
        return cls(Path(root).resolve(), confined)

    def resolve(self, path: str) -> Result[Path, str]:
        """Return the absolute path for a tool's `path` argument, or why it is refused.

        Symlinks are resolved first, so a link pointing out of the root is refused too.
        """
        if "\x00" in path:
            return Failure("Path contains a NUL character")
        try:
            given = Path(path).expanduser()
        except RuntimeError:  # `~name` for a user this machine does not know
            return Failure(f"Path {path!r} names an unknown user's home directory")
        target = (self.root / given).resolve()
        if self.confined and not target.is_relative_to(self.root):
            return Failure(
                f"Path {path!r} is outside the working directory {str(self.root)!r}; "
                "the tools are confined to it"
            )
        return Success(target)

    def show(self, path: Path) -> str:
        """Return `path` relative to the root when inside it (how results name files)."""
        try:
            rel = path.relative_to(self.root)
        except ValueError:
            return str(path)
        return rel.as_posix() or "."


def _text(text: str, *, error: bool = False, details: JsonValue = None) -> MuleToolResult:
    return MuleToolResult(content=(TextContent(text),), is_error=error, details=details)


def _error(text: str) -> MuleToolResult:
    return _text(text, error=True)


ToolBody = Callable[[dict[str, JsonValue], AbortSignal], Awaitable[MuleToolResult]]
Authorize = Callable[[dict[str, JsonValue]], Awaitable[str | None]]


def make_tool(
    name: str,
    description: str,
    parameters: JsonObject,
    body: ToolBody,
    *,
    replay: Replay,
    authorize: Authorize | None = None,
) -> MuleTool:
    """Wrap an async tool body as a `MuleTool`; raised exceptions become `is_error` results.

    `authorize` runs in `prepare`; a returned string rejects the call with that text.
    """
    descriptor = Tool(name, description, parameters)

    async def prepare(call: ToolCall, _signal: AbortSignal) -> MuleToolPreparation:
        try:
            args = ToolValidator.for_tool(descriptor).validate(call)
        except ToolArgumentsError as exc:
            return MuleToolRejection(str(exc))
        if authorize is not None:
            refusal = await authorize(args)
            if refusal is not None:
                return MuleToolRejection(refusal)

        async def execute(signal: AbortSignal) -> AsyncIterator[MuleToolExecutionPart]:
            try:
                result = await body(args, signal)
            except Exception as exc:  # the model sees what went wrong; the run goes on
                text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
                result = _error(text)
            yield MuleToolExecutionPart("result", result)

        return MuleToolPrepared(execute)

    return MuleTool(descriptor=descriptor, prepare=prepare, replay=replay)


def _int(args: Mapping[str, JsonValue], key: str, default: int) -> int:
    value = args.get(key)
    if isinstance(value, int | float) and not isinstance(value, bool):
        return int(value)
    return default


def _str(args: Mapping[str, JsonValue], key: str, default: str) -> str:
    value = args.get(key)
    return value if isinstance(value, str) else default


def _bool(args: Mapping[str, JsonValue], key: str) -> bool:
    return args.get(key) is True


def _clip(line: str, limit: int) -> str:
    if len(line) <= limit:
        return line
    return f"{line[:limit]}… [line cut at {limit} of {len(line)} characters]"


def is_binary(path: Path) -> bool:
    """Return whether a file looks binary: a NUL byte, or invalid UTF-8, near its start."""
    with path.open("rb") as f:
        head = f.read(BINARY_SNIFF_BYTES)
    if b"\x00" in head:
        return True
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as exc:
        # A multi-byte character cut by the sniff window is not evidence of binary data.
        return exc.start < len(head) - 3
    return False


# -- read -------------------------------------------------------------------------------------

READ_SCHEMA: Final[JsonObject] = {
    "type": "object",
    "properties": {
        "path": {
            "type": "string",
            "description": "File to read, relative to the working directory",
        },
        "offset": {"type": "integer", "description": "First line to return (1-based, default 1)"},
        "limit": {
            "type": "integer",
            "description": f"How many lines to return (default {READ_DEFAULT_LINES})",
        },
    },
    "required": ["path"],
}


def read_file(
    ws: Workspace, path: str, offset: int = 1, limit: int | None = None
) -> MuleToolResult:
    """Return lines `offset`.. of a text file, bounded in lines and bytes, with a note if cut."""
    resolved = ws.resolve(path)
    if isinstance(resolved, Failure):
        return _error(resolved.failure())
    target = resolved.unwrap()
    if not target.exists():
        return _error(f"No such file: {path}")
    if target.is_dir():
        return _error(f"{path} is a directory; use ls to list it")
    if offset < 1:
        return _error(f"offset must be 1 or more, got {offset}")
    if limit is not None and limit < 1:
        return _error(f"limit must be 1 or more, got {limit}")
    if is_binary(target):
        return _error(f"{path} is a binary file; read only returns text")
    want = READ_DEFAULT_LINES if limit is None else limit
    out: list[str] = []
    size = 0
    total = 0
    cut_bytes = False
    with target.open("r", encoding="utf-8", errors="replace", newline=None) as f:
        for total, raw in enumerate(f, start=1):
            if total < offset or len(out) >= want or cut_bytes:
                continue
            line = _clip(raw.rstrip("\n"), READ_MAX_LINE_CHARS)
            if size + len(line) + 1 > MAX_OUTPUT_BYTES and out:
                cut_bytes = True
                continue
            out.append(line)
            size += len(line) + 1
    if total == 0:
        return _text("(empty file)", details={"path": ws.show(target), "lines": 0})
    if offset > total:
        return _error(f"offset {offset} is past the end of {path} ({total} lines)")
    last = offset + len(out) - 1
    text = "\n".join(out)
    if last < total:
        why = f"output limit of {MAX_OUTPUT_BYTES} bytes" if cut_bytes else "line limit"
        text += (
            f"\n\n[Showing lines {offset}-{last} of {total} ({why}); "
            f"continue with offset={last + 1}]"
        )
    return _text(text, details={"path": ws.show(target), "lines": total})


def read_tool(ws: Workspace) -> MuleTool:
    """Return the `read` tool."""

    async def body(args: dict[str, JsonValue], _signal: AbortSignal) -> MuleToolResult:
        limit = args.get("limit")
        return await anyio.to_thread.run_sync(
            lambda: read_file(
                ws,
                _str(args, "path", ""),
                _int(args, "offset", 1),
                int(limit) if isinstance(limit, int | float) else None,
            )
        )

    return make_tool(
        "read",
        "Read a UTF-8 text file in the working directory. Long files come in pages: pass "
        "offset/limit (lines) to continue. Binary files are refused.",
        READ_SCHEMA,
        body,
        replay="safe",
    )


# -- ls ---------------------------------------------------------------------------------------

LS_SCHEMA: Final[JsonObject] = {
    "type": "object",
    "properties": {
        "path": {"type": "string", "description": "Directory to list (default: .)"},
        "limit": {
            "type": "integer",
            "description": f"Most entries to return (default {LS_DEFAULT_LIMIT})",
        },
    },
}


def list_dir(ws: Workspace, path: str = ".", limit: int = LS_DEFAULT_LIMIT) -> MuleToolResult:
    """Return a directory's entries, sorted, directories with a trailing slash."""
    resolved = ws.resolve(path)
    if isinstance(resolved, Failure):
        return _error(resolved.failure())
    target = resolved.unwrap()
    if not target.exists():
        return _error(f"No such directory: {path}")
    if not target.is_dir():
        return _error(f"{path} is not a directory")
    if limit < 1:
        return _error(f"limit must be 1 or more, got {limit}")
    entries = sorted(target.iterdir(), key=lambda p: (p.name.lower(), p.name))
    names = [e.name + ("/" if e.is_dir() else "") for e in entries]
    shown = names[:limit]
    text = "\n".join(shown) if shown else "(empty directory)"
    if len(names) > limit:
        text += f"\n\n[{limit} of {len(names)} entries shown; pass a larger limit for more]"
    return _text(text, details={"path": ws.show(target), "entries": len(names)})


def ls_tool(ws: Workspace) -> MuleTool:
    """Return the `ls` tool."""

    async def body(args: dict[str, JsonValue], _signal: AbortSignal) -> MuleToolResult:
        return await anyio.to_thread.run_sync(
            lambda: list_dir(ws, _str(args, "path", "."), _int(args, "limit", LS_DEFAULT_LIMIT))
        )

    return make_tool(
        "ls",
        "List a directory in the working directory (sorted; directories end with /).",
        LS_SCHEMA,
        body,
        replay="safe",
    )


# -- grep -------------------------------------------------------------------------------------

GREP_SCHEMA: Final[JsonObject] = {
    "type": "object",
    "properties": {
        "pattern": {"type": "string", "description": "Python regular expression to search for"},
        "path": {"type": "string", "description": "File or directory to search (default: .)"},
        "glob": {"type": "string", "description": "Only files matching this glob, e.g. *.py"},
        "ignoreCase": {"type": "boolean", "description": "Match case-insensitively"},
        "literal": {"type": "boolean", "description": "Treat the pattern as plain text"},
        "context": {"type": "integer", "description": "Lines of context around each match"},
        "limit": {
            "type": "integer",
            "description": f"Most matches to return (default {GREP_DEFAULT_LIMIT})",
        },
    },
    "required": ["pattern"],
}


def _walk(ws: Workspace, top: Path) -> Iterator[Path]:
    if top.is_file():
        yield top
        return
    for here, dirs, files in os.walk(top):
        dirs[:] = sorted(d for d in dirs if d not in SKIPPED_DIRS)
        for name in sorted(files):
            path = Path(here) / name
            if ws.confined and not path.resolve().is_relative_to(ws.root):
                continue  # a symlink leading out of the workspace
            yield path


def _glob_match(ws: Workspace, path: Path, glob: str) -> bool:
    rel = ws.show(path)
    return fnmatch.fnmatch(path.name, glob) or fnmatch.fnmatch(rel, glob)


def grep_files(
    ws: Workspace,
    pattern: str,
    path: str = ".",
    *,
    glob: str | None = None,
    ignore_case: bool = False,
    literal: bool = False,
    context: int = 0,
    limit: int = GREP_DEFAULT_LIMIT,
    signal: AbortSignal | None = None,
) -> MuleToolResult:
    """Search text files for a regex; `file:line: text` per match, bounded output."""
    resolved = ws.resolve(path)
    if isinstance(resolved, Failure):
        return _error(resolved.failure())
    top = resolved.unwrap()
    if not top.exists():
        return _error(f"No such file or directory: {path}")
    if limit < 1:
        return _error(f"limit must be 1 or more, got {limit}")
    try:
        regex = re.compile(
            re.escape(pattern) if literal else pattern, re.IGNORECASE if ignore_case else 0
        )
    except re.error as exc:
        return _error(f"Invalid regular expression {pattern!r}: {exc}")
    context = max(0, min(context, 20))
    out: list[str] = []
    size = 0
    matches = 0
    files = 0
    notes: list[str] = []
    for file in _walk(ws, top):
        if signal is not None and signal.aborted:
            notes.append("search interrupted")
            break
        if glob and not _glob_match(ws, file, glob):
            continue
        try:
            if file.stat().st_size > GREP_MAX_FILE_BYTES or is_binary(file):
                continue
            lines = file.read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            continue
        hit_here = False
        shown_upto = 0
        for i, line in enumerate(lines):
            if not regex.search(line):
                continue
            matches += 1
            hit_here = True
            lo, hi = max(0, i - context, shown_upto), min(len(lines), i + context + 1)
            for j in range(lo, hi):
                sep = ":" if j == i else "-"
                row = f"{ws.show(file)}{sep}{j + 1}{sep} {_clip(lines[j], GREP_MAX_LINE_CHARS)}"
                size += len(row) + 1
                out.append(row)
            shown_upto = hi
            if size > MAX_OUTPUT_BYTES or matches >= limit:
                break
        files += hit_here
        if size > MAX_OUTPUT_BYTES:
            notes.append(f"output cut at {MAX_OUTPUT_BYTES} bytes; narrow the search")
            break
        if matches >= limit:
            notes.append(f"stopped at {limit} matches; narrow the pattern or raise limit")
            break
    text = "\n".join(out) if out else "No matches found"
    if notes:
        text += "\n\n[" + "; ".join(notes) + "]"
    return _text(text, details={"matches": matches, "files": files})


def grep_tool(ws: Workspace) -> MuleTool:
    """Return the `grep` tool."""

    async def body(args: dict[str, JsonValue], signal: AbortSignal) -> MuleToolResult:
        glob = args.get("glob")
        return await anyio.to_thread.run_sync(
            lambda: grep_files(
                ws,
                _str(args, "pattern", ""),
                _str(args, "path", "."),
                glob=glob if isinstance(glob, str) and glob else None,
                ignore_case=_bool(args, "ignoreCase"),
                literal=_bool(args, "literal"),
                context=_int(args, "context", 0),
                limit=_int(args, "limit", GREP_DEFAULT_LIMIT),
                signal=signal,
            ),
            abandon_on_cancel=True,
        )

    return make_tool(
        "grep",
        "Search the text files under a path for a regular expression; prints file:line: text "
        "for each match. Skips binary files and tooling directories (.git, node_modules, ...).",
        GREP_SCHEMA,
        body,
        replay="safe",
    )


# -- bash -------------------------------------------------------------------------------------

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
        return _error(f"{text}\n\n[command timed out after {timeout_s:g} s and was killed]")
    if signal is not None and signal.aborted:
        return _error(f"{text}\n\n[command killed: the run was cancelled]")
    if code != 0:
        return _text(
            f"{text}\n\n[command exited with code {code}]",
            error=True,
            details={"exitCode": code},
        )
    return _text(text, details={"exitCode": 0})


def bash_tool(
    ws: Workspace,
    confirm: Confirm | None,
    *,
    default_timeout_s: float = BASH_DEFAULT_TIMEOUT_S,
) -> MuleTool:
    """Return the `bash` tool; each command is confirmed through `confirm` (None = pre-approved)."""

    async def authorize(args: dict[str, JsonValue]) -> str | None:
        if confirm is None:
            return None
        command = _str(args, "command", "")
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
        return await run_command(ws, _str(args, "command", ""), seconds, signal)

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


def builtin_tools(
    ws: Workspace,
    names: Sequence[str],
    confirm: Confirm | None,
    *,
    bash_timeout_s: float = BASH_DEFAULT_TIMEOUT_S,
) -> tuple[MuleTool, ...]:
    """Return the named built-in tools, in the given order; raise ValueError on an unknown name."""
    makers: dict[str, Callable[[], MuleTool]] = {
        "read": lambda: read_tool(ws),
        "ls": lambda: ls_tool(ws),
        "grep": lambda: grep_tool(ws),
        "bash": lambda: bash_tool(ws, confirm, default_timeout_s=bash_timeout_s),
    }
    unknown = [n for n in names if n not in makers]
    if unknown:
        raise ValueError(
            f"unknown tool(s): {', '.join(unknown)} (built-in: {', '.join(BUILTIN_TOOL_NAMES)})"
        )
    return tuple(makers[n]() for n in dict.fromkeys(names))


__all__ = [
    "BUILTIN_TOOL_NAMES",
    "MAX_OUTPUT_BYTES",
    "Confirm",
    "Workspace",
    "bash_tool",
    "builtin_tools",
    "grep_files",
    "grep_tool",
    "is_binary",
    "list_dir",
    "ls_tool",
    "make_tool",
    "read_file",
    "read_tool",
    "run_command",
]
