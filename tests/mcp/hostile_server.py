"""A hostile MCP server written with the SDK's low-level `Server` (stdio), for the bounds tests.

    python tests/mcp/hostile_server.py dupes      # lists `twin` twice (and `other`)
    python tests/mcp/hostile_server.py many N     # lists N tools (`t0`, `t1`, ...)
    python tests/mcp/hostile_server.py big N      # `big` answers N characters of text

The SDK's high-level server refuses what these send; a hostile server is not so polite.
"""

from __future__ import annotations

import sys

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

MODE = sys.argv[1]
SIZE = int(sys.argv[2]) if len(sys.argv) > 2 else 0
SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}}


def tool(name: str, description: str) -> types.Tool:
    return types.Tool(name=name, description=description, input_schema=SCHEMA)


async def list_tools(
    ctx: object, params: types.PaginatedRequestParams | None
) -> types.ListToolsResult:
    if MODE == "dupes":
        tools = [tool("twin", "first"), tool("twin", "second"), tool("other", "other")]
    elif MODE == "many":
        tools = [tool(f"t{i}", f"tool {i}") for i in range(SIZE)]
    else:
        tools = [tool("big", "a large result"), tool("twin", "big's twin")]
    return types.ListToolsResult(tools=tools)


async def call_tool(ctx: object, params: types.CallToolRequestParams) -> types.CallToolResult:
    if params.name == "big":
        text = types.TextContent(type="text", text="x" * SIZE)
        return types.CallToolResult(content=[text], structured_content={"blob": "y" * SIZE})
    text = types.TextContent(type="text", text=f"{params.name} of {MODE}")
    return types.CallToolResult(content=[text])


server = Server("hostile", on_list_tools=list_tools, on_call_tool=call_tool)


async def main() -> None:
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
