"""A real MCP server (the SDK's MCPServer, formerly FastMCP) that the mcp tests talk to.

    python tests/mcp/server.py stdio
    python tests/mcp/server.py http PORT

`MULE_TEST_MARKER` names a file the server appends lines to (`cancelled slow`, ...), so a
test can see what the server itself observed.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Annotated

# The broken modes start fast: they must not wait for the SDK's imports.
if sys.argv[1:2] == ["hang"]:  # never answers anything
    print("hanging", file=sys.stderr, flush=True)
    time.sleep(3600)
if sys.argv[1:2] == ["crash"]:  # dies before the handshake
    print("boom: cannot start", file=sys.stderr, flush=True)
    sys.exit(7)

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.utilities.types import Image
from mcp.types import ToolAnnotations
from pydantic import BaseModel, Field

server = MCPServer("mule-test")
PIXEL = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360f80f00000101000518d84e0000000049454e44ae426082"
)


def mark(line: str) -> None:
    path = os.environ.get("MULE_TEST_MARKER")
    if path:
        with open(path, "a") as f:
            f.write(line + "\n")


class Sum(BaseModel):
    total: int
    terms: list[int]


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def add(a: int, b: Annotated[int, Field(description="the second term")]) -> Sum:
    """Add two integers."""
    return Sum(total=a + b, terms=[a, b])


@server.tool(annotations=ToolAnnotations(idempotent_hint=True, destructive_hint=False))
def echo(text: str) -> str:
    """Echo the text back."""
    return text


@server.tool()
async def count(steps: int, ctx: Context) -> str:
    """Count to `steps`, reporting progress at each step."""
    for i in range(1, steps + 1):
        await ctx.report_progress(i, steps, f"step {i}")
        await anyio.sleep(0.01)
    return f"counted to {steps}"


@server.tool()
def fail(why: str) -> str:
    """Fail with `why`, always."""
    raise ToolError(why)


@server.tool(structured_output=False)
def picture() -> list[object]:
    """Return a caption and a 1x1 PNG."""
    return ["a red pixel", Image(data=PIXEL, format="png")]


@server.tool()
async def slow(seconds: float) -> str:
    """Sleep, then answer; notes a cancellation in the marker file."""
    mark("slow started")
    try:
        await anyio.sleep(seconds)
    except anyio.get_cancelled_exc_class():
        mark("slow cancelled")
        raise
    mark("slow finished")
    return "slept"


@server.tool()
async def die(code: int) -> str:
    """Write to stderr, then exit the process mid-call."""
    mark("die started")
    print("fatal: the test asked me to die", file=sys.stderr, flush=True)
    os._exit(code)


@server.tool()
async def garbage() -> str:
    """Write a line that is not JSON-RPC to stdout (stdio only), then hang."""
    os.write(1, b"this is not json-rpc\n")
    await anyio.sleep(3600)
    return "unreachable"


def main() -> None:
    mode = sys.argv[1] if len(sys.argv) > 1 else "stdio"
    if mode == "stdio":
        print("mule-test server starting on stdio", file=sys.stderr, flush=True)
        server.run("stdio")
    elif mode == "http":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        raise SystemExit(f"unknown mode {mode}")


if __name__ == "__main__":
    main()
