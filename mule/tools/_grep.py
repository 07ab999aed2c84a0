"""The `grep` tool: a regular expression searched through a tree's text files, bounded output."""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Final

from returns.result import Failure

from mule.pi import AbortSignal, JsonObject, JsonValue
from mule.promise import MuleTool, MuleToolResult
from mule.tools._tool import (
    bool_arg,
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
    SKIPPED_DIRS,
    Workspace,
    WorkspaceLike,
    as_workspace,
    is_binary,
)

GREP_DEFAULT_LIMIT: Final = 100
GREP_MAX_LINE_CHARS: Final = 500
GREP_MAX_FILE_BYTES: Final = 5 * 1024 * 1024
GREP_MAX_CONTEXT: Final = 20

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
        return error_result(resolved.failure())
    top = resolved.unwrap()
    if not top.exists():
        return error_result(f"No such file or directory: {path}")
    if limit < 1:
        return error_result(f"limit must be 1 or more, got {limit}")
    try:
        regex = re.compile(
            re.escape(pattern) if literal else pattern, re.IGNORECASE if ignore_case else 0
        )
    except re.error as exc:
        return error_result(f"Invalid regular expression {pattern!r}: {exc}")
    context = max(0, min(context, GREP_MAX_CONTEXT))
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
                row = f"{ws.show(file)}{sep}{j + 1}{sep} {clip_line(lines[j], GREP_MAX_LINE_CHARS)}"
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
    return text_result(text, details={"matches": matches, "files": files})


def grep_tool(workspace: WorkspaceLike) -> MuleTool:
    """Return the `grep` tool: regex search over the text files in `workspace` (replay-safe)."""
    ws = as_workspace(workspace)

    def work(args: dict[str, JsonValue], signal: AbortSignal) -> MuleToolResult:
        glob = args.get("glob")
        return grep_files(
            ws,
            str_arg(args, "pattern", ""),
            str_arg(args, "path", "."),
            glob=glob if isinstance(glob, str) and glob else None,
            ignore_case=bool_arg(args, "ignoreCase"),
            literal=bool_arg(args, "literal"),
            context=int_arg(args, "context", 0),
            limit=int_arg(args, "limit", GREP_DEFAULT_LIMIT),
            signal=signal,
        )

    return make_tool(
        "grep",
        "Search the text files under a path for a regular expression; prints file:line: text "
        "for each match. Skips binary files and tooling directories (.git, node_modules, ...).",
        GREP_SCHEMA,
        # A long search checks the signal between files; a cancelled run does not wait for it.
        in_thread(work, abandon_on_cancel=True),
        replay="safe",
    )


__all__ = ["GREP_SCHEMA", "grep_files", "grep_tool"]
