"""The `ls` tool: a directory's entries, sorted, directories marked."""

from __future__ import annotations

from typing import Final

from returns.result import Failure

from mule.pi import AbortSignal, JsonObject, JsonValue
from mule.promise import MuleTool, MuleToolResult
from mule.tools._tool import error_result, in_thread, int_arg, make_tool, str_arg, text_result
from mule.tools._workspace import Workspace, WorkspaceLike, as_workspace

LS_DEFAULT_LIMIT: Final = 500

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
        return error_result(resolved.failure())
    target = resolved.unwrap()
    if not target.exists():
        return error_result(f"No such directory: {path}")
    if not target.is_dir():
        return error_result(f"{path} is not a directory")
    if limit < 1:
        return error_result(f"limit must be 1 or more, got {limit}")
    entries = sorted(target.iterdir(), key=lambda p: (p.name.lower(), p.name))
    names = [e.name + ("/" if e.is_dir() else "") for e in entries]
    shown = names[:limit]
    text = "\n".join(shown) if shown else "(empty directory)"
    if len(names) > limit:
        text += f"\n\n[{limit} of {len(names)} entries shown; pass a larger limit for more]"
    return text_result(text, details={"path": ws.show(target), "entries": len(names)})


def ls_tool(workspace: WorkspaceLike) -> MuleTool:
    """Return the `ls` tool: directory listings in `workspace` (replay-safe)."""
    ws = as_workspace(workspace)

    def work(args: dict[str, JsonValue], _signal: AbortSignal) -> MuleToolResult:
        return list_dir(ws, str_arg(args, "path", "."), int_arg(args, "limit", LS_DEFAULT_LIMIT))

    return make_tool(
        "ls",
        "List a directory in the working directory (sorted; directories end with /).",
        LS_SCHEMA,
        in_thread(work),
        replay="safe",
    )


__all__ = ["LS_SCHEMA", "list_dir", "ls_tool"]
