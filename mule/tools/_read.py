"""The `read` tool: a page of a UTF-8 text file, bounded in lines and bytes."""

from __future__ import annotations

from typing import Final

from returns.result import Failure

from mule.pi import AbortSignal, JsonObject, JsonValue
from mule.promise import MuleTool, MuleToolResult
from mule.tools._tool import (
    clip_line,
    error_result,
    in_thread,
    int_arg,
    make_tool,
    str_arg,
    text_result,
)
from mule.tools._workspace import (
    MAX_OUTPUT_BYTES,
    Workspace,
    WorkspaceLike,
    as_workspace,
    is_binary,
)

READ_DEFAULT_LINES: Final = 2000
READ_MAX_LINE_CHARS: Final = 2000

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
        return error_result(resolved.failure())
    target = resolved.unwrap()
    if not target.exists():
        return error_result(f"No such file: {path}")
    if target.is_dir():
        return error_result(f"{path} is a directory; use ls to list it")
    if offset < 1:
        return error_result(f"offset must be 1 or more, got {offset}")
    if limit is not None and limit < 1:
        return error_result(f"limit must be 1 or more, got {limit}")
    if is_binary(target):
        return error_result(f"{path} is a binary file; read only returns text")
    want = READ_DEFAULT_LINES if limit is None else limit
    out: list[str] = []
    size = 0
    total = 0
    cut_bytes = False
    with target.open("r", encoding="utf-8", errors="replace", newline=None) as f:
        for total, raw in enumerate(f, start=1):
            if total < offset or len(out) >= want or cut_bytes:
                continue
            line = clip_line(raw.rstrip("\n"), READ_MAX_LINE_CHARS)
            if size + len(line) + 1 > MAX_OUTPUT_BYTES and out:
                cut_bytes = True
                continue
            out.append(line)
            size += len(line) + 1
    if total == 0:
        return text_result("(empty file)", details={"path": ws.show(target), "lines": 0})
    if offset > total:
        return error_result(f"offset {offset} is past the end of {path} ({total} lines)")
    last = offset + len(out) - 1
    text = "\n".join(out)
    if last < total:
        why = f"output limit of {MAX_OUTPUT_BYTES} bytes" if cut_bytes else "line limit"
        text += (
            f"\n\n[Showing lines {offset}-{last} of {total} ({why}); "
            f"continue with offset={last + 1}]"
        )
    return text_result(text, details={"path": ws.show(target), "lines": total})


def read_tool(workspace: WorkspaceLike) -> MuleTool:
    """Return the `read` tool: pages of a text file in `workspace` (replay-safe)."""
    ws = as_workspace(workspace)

    def work(args: dict[str, JsonValue], _signal: AbortSignal) -> MuleToolResult:
        limit = args.get("limit")
        return read_file(
            ws,
            str_arg(args, "path", ""),
            int_arg(args, "offset", 1),
            int(limit) if isinstance(limit, int | float) else None,
        )

    return make_tool(
        "read",
        "Read a UTF-8 text file in the working directory. Long files come in pages: pass "
        "offset/limit (lines) to continue. Binary files are refused.",
        READ_SCHEMA,
        in_thread(work),
        replay="safe",
    )


__all__ = ["READ_SCHEMA", "read_file", "read_tool"]
