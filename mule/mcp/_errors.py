"""The one failure of an MCP server, how it becomes a run's `MuleError(tool)`; a skipped tool."""

from __future__ import annotations

from typing import final

from mule.effects import MuleError
from mule.promise import MuleRunFailed


@final
class MCPServerError(Exception):
    """An MCP server died, hung, closed or sent something that is not MCP.

    `server` names it, `problem` says what happened, and `stderr` is the tail of what a stdio
    server wrote to its stderr (empty for HTTP servers).

    Attributes:
        server: The server's name, as configured.
        problem: What happened (died, timed out, closed, not MCP).
        stderr: The tail of a stdio server's stderr; empty for HTTP servers.

    """

    def __init__(self, server: str, problem: str, *, stderr: str = "") -> None:
        text = f"MCP server {server!r} {problem}"
        if stderr:
            text += f"; its stderr ends with:\n{stderr}"
        super().__init__(text)
        self.server = server
        self.problem = problem
        self.stderr = stderr


@final
class MCPToolSkipped(UserWarning):
    """A listed MCP tool was left out: its name is already taken (in its server or before it).

    Two tools of one name would fail every run that declares both, so the first one listed
    keeps the name and the later one is skipped with this warning (a `prefix` per server, or
    `taken`, gives each its own name).
    """


def as_run_failure(error: MCPServerError) -> MuleRunFailed:
    """Return the exception that fails the run with `MuleError(tool)` carrying `error`."""
    return MuleRunFailed(MuleError("tool", str(error), error))


__all__ = ["MCPServerError", "MCPToolSkipped", "as_run_failure"]
