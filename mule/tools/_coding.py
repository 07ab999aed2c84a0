"""The coding tool set: the four tools by name, built for one workspace."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Final

from mule.promise import MuleTool
from mule.tools._bash import BASH_DEFAULT_TIMEOUT_S, Confirm, bash_tool
from mule.tools._grep import grep_tool
from mule.tools._ls import ls_tool
from mule.tools._read import read_tool
from mule.tools._workspace import WorkspaceLike, as_workspace

TOOL_NAMES: Final = ("read", "ls", "grep", "bash")
"""Every coding tool's name."""
READ_ONLY_TOOL_NAMES: Final = ("read", "ls", "grep")
"""The tools that only look (replay-safe); `coding_tools`' default."""


def coding_tools(
    workspace: WorkspaceLike,
    names: Sequence[str] = READ_ONLY_TOOL_NAMES,
    *,
    confirm: Confirm | None = None,
    bash_timeout_s: float = BASH_DEFAULT_TIMEOUT_S,
) -> tuple[MuleTool, ...]:
    """Return the named coding tools for `workspace`, in the given order (repeats dropped).

    `bash` comes only when named; its commands go to `confirm` first (None runs them unasked).
    Raises `ValueError` naming any unknown tool.
    """
    ws = as_workspace(workspace)
    makers: dict[str, Callable[[], MuleTool]] = {
        "read": lambda: read_tool(ws),
        "ls": lambda: ls_tool(ws),
        "grep": lambda: grep_tool(ws),
        "bash": lambda: bash_tool(ws, confirm, default_timeout_s=bash_timeout_s),
    }
    unknown = [n for n in names if n not in makers]
    if unknown:
        raise ValueError(
            f"unknown tool(s): {', '.join(unknown)} (built-in: {', '.join(TOOL_NAMES)})"
        )
    return tuple(makers[n]() for n in dict.fromkeys(names))


__all__ = ["READ_ONLY_TOOL_NAMES", "TOOL_NAMES", "coding_tools"]
